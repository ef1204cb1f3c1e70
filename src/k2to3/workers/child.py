"""Child side of the worker protocol: `python -m k2to3.workers.child BACKEND`.

The parent sets KERAS_BACKEND, KERAS_HOME and thread limits in the environment before this process starts, so the
backend is fixed before keras is imported. Requests arrive as JSON lines on stdin, each read into its op's typed
request (workers/protocol.py) and served in order by the op function OPS names for that type; tensorflow, torch,
jax and tf_keras are imported only in this process.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from k2to3.errors import K2to3Error, NotRunnableHere
from k2to3.workers import (
    archive_bridge,
    build,
    build_probe,
    checkpoints,
    deferred_imports,
    fixed_random,
    grads,
    keras3_export,
    keras3_outputs,
    memory,
    protocol,
    reruns,
    tf_keras_outputs,
)
from k2to3.workers.runtime import keras3
from k2to3.workers.training import fit_ops, held_models, noise_fit, reference_model


def _pin_threads(backend: str) -> None:
    n = int(os.environ.get("OMP_NUM_THREADS", "1"))
    if backend == "tensorflow":
        import tensorflow as tf

        try:
            tf.config.threading.set_intra_op_parallelism_threads(n)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:
            pass  # already initialised
    elif backend == "torch":
        import torch

        torch.set_num_threads(n)


def _job_switches(backend: str, req: protocol.Request[Any]) -> contextlib.AbstractContextManager[Any]:
    """The per-job backend switches every request carries (protocol.Request): `onednn=False` runs a torch job with
    oneDNN (mkldnn) off, the retry after oneDNN's CPU convolution backward crashed the worker (checks/pool_round.py);
    `fixed_random=True` draws a fixed pattern in place of every random draw (a model whose graph draws them)."""
    stack = contextlib.ExitStack()
    if backend == "torch" and req.onednn is False:
        import torch

        stack.enter_context(torch.backends.mkldnn.flags(enabled=False))
    if req.fixed_random:  # the model draws random numbers: a fixed pattern on every side (fixed_random.py)
        stack.enter_context(fixed_random.fixed(backend))
    return stack


def _jax_compilation_cache() -> str | None:
    """Turn on jax's persistent compilation cache in K2TO3_CACHE_DIR (~/.cache/k2to3)/jax, capped at 2 GB
    (jax evicts the least recently used): a model store holds many checkpoints of one architecture, and each
    one's jitted predict and training step would otherwise be compiled again (a large model's training step is
    many seconds of XLA). jax keys an entry by the program, the compile options and its own version, and only
    caches programs that took 1 s or more to compile (JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS changes it).
    K2TO3_JAX_CACHE=off turns it off."""
    if os.environ.get("K2TO3_JAX_CACHE", "on").lower() in ("0", "off", "no", "false"):
        return None
    base = os.path.join(os.environ.get("K2TO3_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                          "k2to3"), "jax", _cpu_fingerprint())
    try:
        os.makedirs(base, exist_ok=True)
    except OSError:
        return None  # a read-only home: compile as before
    import jax

    jax.config.update("jax_compilation_cache_dir", base)
    jax.config.update("jax_compilation_cache_max_size", 2 << 30)
    return base


def _cpu_fingerprint() -> str:
    """The machine and its CPU's instruction-set flags: a cache shared by several machines (an NFS home on a
    cluster) must not hand one CPU's compiled code to another that lacks its instructions."""
    import hashlib
    import platform

    flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((ln for ln in fh if ln.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    return f"{platform.machine()}-{hashlib.blake2b(flags.encode(), digest_size=6).hexdigest()}"


def _cleanup() -> None:
    """Free graphs between jobs so a warm worker does not grow with every model."""
    import keras

    with deferred_imports.dynamo_scope(keras):
        keras.backend.clear_session()
    if "tf_keras" in sys.modules:
        sys.modules["tf_keras"].backend.clear_session()


# The one table of the ops this process serves: each op's request type (workers/protocol.py, where the op is
# registered with its name and reply type) -> the function that serves it, called with the parsed request.
OPS: dict[type[protocol.Request[Any]], Callable[[Any], dict[str, Any]]] = {
    protocol.BuildRequest: build.op_build,
    protocol.ProbeBuildsRequest: build_probe.op_probe_builds,
    protocol.CkptGroupsRequest: checkpoints.op_ckpt_groups,
    protocol.CkptBridgeRequest: checkpoints.op_ckpt_bridge,
    protocol.VerifyRequest: keras3_outputs.op_verify,
    protocol.GoldenRequest: tf_keras_outputs.op_golden,
    protocol.GoldenReferenceRequest: reference_model.op_golden_reference,
    protocol.BridgeRequest: archive_bridge.op_bridge,
    protocol.Float64Request: reruns.op_float64,
    protocol.GradsRequest: grads.op_grads,
    protocol.GoldenGradsRequest: grads.op_golden_grads,
    protocol.FitRequest: fit_ops.op_fit,
    protocol.FitGoldenRequest: fit_ops.op_fit_golden,
    protocol.FitNoiseRequest: noise_fit.op_fit_noise,
    protocol.DropHeldRequest: held_models.op_drop_held,
    protocol.ExportRequest: keras3_export.op_export,
    protocol.LoadedRequest: deferred_imports.op_loaded,
}


def main() -> None:
    backend = sys.argv[1]
    if backend != "jax":
        # keras, TF and torch._dynamo import jax whenever it is installed; a worker for another backend never
        # uses it, and the import is a large share of every start's CPU time.
        sys.modules.setdefault("jax", None)  # type: ignore[arg-type]
    deferred_imports.block_ipython()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed by libraries goes to the log, not the protocol
    _pin_threads(backend)
    if backend == "jax":
        _jax_compilation_cache()
    with deferred_imports.dynamo_stand_in() if backend == "torch" else contextlib.nullcontext():
        if backend != "tensorflow":
            # keras.utils.set_random_seed also seeds TensorFlow whenever it is importable: a torch or jax worker
            # then imports all of TensorFlow (hundreds of MB resident, seconds of CPU) for an RNG it never uses.
            from keras.src.utils import module_utils

            module_utils.tensorflow._available = False
        keras3()  # pay the imports now, while the parent is still preparing the job
    if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
        import tf_keras  # noqa: F401
    memory.release_freed()
    # Everything imported so far lives as long as the worker. Without this, every gc.collect() (clear_session
    # after each job, release_freed) walks those millions of objects each time, and that is more than once per job.
    gc.freeze()
    proto.write(json.dumps({"ok": True, "ready": backend, "memory": memory.figures()}) + "\n")
    for line in sys.stdin:
        memory.reset_peak()  # the reply's peak is this job's
        try:
            req = protocol.decode_request(line)  # the op's request type, or a ProtocolError
            if req is None:  # the shutdown line
                break
            with _job_switches(backend, req):
                reply = {"ok": True, **OPS[type(req)](req)}
        except K2to3Error as exc:
            reply = {"ok": False, "error": exc.line(), "code": int(exc.code), "traceback": traceback.format_exc(),
                     "not_runnable": isinstance(exc, NotRunnableHere)}
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            reply = {"ok": False, "error": f"{type(exc).__name__}: {first}", "traceback": traceback.format_exc()}
        _cleanup()
        peak = memory.peak_rss_bytes()
        memory.release_freed()  # the model is gone: give its pages back before the next job or the idle wait
        reply["memory"] = {"peak_rss_mb": round(peak / memory.MB, 1), "idle_rss_mb": memory.figures()["rss_mb"]}
        if not reply["ok"]:
            print(reply.get("traceback", ""), file=sys.stderr, flush=True)
        proto.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
