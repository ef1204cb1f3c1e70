"""Child side of the worker protocol: `python -m k2to3.workers.child BACKEND`.

The parent sets KERAS_BACKEND, KERAS_HOME and thread limits in the environment before this
process starts, so the backend is fixed before keras is imported. This is the only k2to3 module
that imports tensorflow, torch, jax or tf_keras.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time
import traceback
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np

from k2to3.errors import K2to3Error
from k2to3.weights import weight_hash
from k2to3.workers import lean, memory

SEED = 1234


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


def _job_switches(backend: str, req: dict[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """Per-job backend switches the parent may set on any request: `onednn: false` runs a torch job with oneDNN
    (mkldnn) off, the retry after oneDNN's CPU convolution backward crashed the worker (trainchecks.py)."""
    if backend == "torch" and req.get("onednn") is False:
        import torch

        return torch.backends.mkldnn.flags(enabled=False)
    return contextlib.nullcontext()


def _jax_compilation_cache() -> str | None:
    """Turn on jax's persistent compilation cache in K2TO3_CACHE_DIR (~/.cache/k2to3)/jax, capped at 2 GB
    (jax evicts the least recently used): a model store holds many checkpoints of one architecture, and each
    one's jitted predict and training step would otherwise be compiled again (a ResNet50 training step: 16 s
    of XLA on 2 cores). jax keys an entry by the program, the compile options and its own version, and only
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


def _load_inputs(path: str) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[f"in{i}"] for i in range(len(z.files))]


def _save_arrays(path: str, arrays: list[np.ndarray], prefix: str = "out") -> None:
    np.savez(path, **{f"{prefix}{i}": a for i, a in enumerate(arrays)})


def _model_input(xs: list[np.ndarray]) -> Any:
    return xs[0] if len(xs) == 1 else list(xs)


# -- Keras 3 side -----------------------------------------------------------------------------------
def _k3():
    import keras

    from k2to3 import portable  # noqa: F401  registers k2to3>* objects

    keras.utils.set_random_seed(SEED)
    return keras


def _forward(keras: Any, model: Any, xs: list[np.ndarray]) -> Any:
    """Inference-mode forward pass. On jax, one jit-compiled program (what model.predict runs): eager jax
    compiles every primitive separately, 4.3 s against 1.4 s for a ResNet50."""
    if keras.backend.backend() == "jax":
        import jax

        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]
        fn = jax.jit(lambda tv, ntv, x: model.stateless_call(tv, ntv, x, training=False)[0])
        return fn(tv, ntv, _model_input(xs))
    from k2to3.workers.graphrun import freeing_intermediates

    if keras.backend.backend() == "torch":
        import torch

        # As model.predict does: without it autograd keeps every layer's saved tensors for a backward pass
        # that never comes (+540 MB on a ResNet50 at batch 2); the computed values are the same.
        with torch.no_grad(), freeing_intermediates():
            return model(_model_input(xs), training=False)
    with freeing_intermediates():
        return model(_model_input(xs), training=False)


def _flat_numpy(keras: Any, out: Any) -> list[np.ndarray]:
    return [np.asarray(keras.ops.convert_to_numpy(t)) for t in keras.tree.flatten(out)]


def _probe(model: Any, input_cls: type, flatten: Any) -> tuple[list[str], list[Any]]:
    """Symbolic outputs of every layer called exactly once, in the model's topological order (Keras 3 and
    tf_keras alike: `flatten` is keras.tree.flatten or tf.nest.flatten)."""
    names, tensors = [], []
    for layer in model.layers:
        if isinstance(layer, input_cls):
            continue
        try:
            if hasattr(layer, "layers") and hasattr(layer, "_inbound_nodes"):
                # a nested model: `.output` is its own inner graph's (not connected to this model's inputs);
                # take the node of its call here, the one whose outputs are not its inner outputs
                inner = {id(t) for t in flatten(layer.outputs)}
                calls = [n for n in layer._inbound_nodes if not {id(t) for t in flatten(n.outputs)} <= inner]
                if len(calls) != 1:
                    continue  # called several times (shared): ambiguous
                out = calls[0].outputs
            else:
                out = layer.output
        except (AttributeError, ValueError, RuntimeError):
            continue  # shared layer (several nodes): its output is ambiguous
        for i, t in enumerate(flatten(out)):
            names.append(layer.name if i == 0 else f"{layer.name}#{i}")
            tensors.append(t)
    return names, tensors


def _tf_flatten(x: Any) -> list[Any]:
    import tensorflow as tf

    return tf.nest.flatten(x)


def _import_module(path: str) -> Any:
    """Import a generated module by path under its file name (what a user does with `import model_k3`), so
    the objects it registers are there before a model is built or loaded. Re-executed on every job: a warm
    worker may see a new version of the same module."""
    import importlib.util

    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise K2to3Error(f"{path}: cannot import the generated module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _import_modules(req: dict[str, Any]) -> None:
    for path in req.get("modules") or []:
        _import_module(path)


def op_build(req: dict[str, Any]) -> dict[str, Any]:
    keras = _k3()
    from k2to3.formats.artifact import read_artifact
    from k2to3.rebuild import build_model
    from k2to3.weights import restore

    t0 = time.perf_counter()
    _import_modules(req)
    with open(req["plan"]) as fh:
        plan = json.load(fh)
    artifact = read_artifact(req["h5"], weights_only_ok=bool(req.get("build_fn")))
    with _constant_initializers(keras):  # every variable is then restored, and the ledger proves it
        if req.get("build_fn"):
            model = _call_build_fn(keras, req)
            plan["renames"] = _renames_by_order(model, artifact)
        else:
            model = build_model(plan)
            _check_lambda_shapes(model, plan["model"])
    pairs: dict[str, Any] = {}  # file dataset -> Keras 3 variable, for the optimizer slots
    ledger = restore(model, artifact, plan["renames"], plan.get("weight_transforms"), pairs)
    if not ledger.complete:
        raise K2to3Error(
            f"weights not fully restored: {ledger.tensors_restored}/{ledger.tensors_expected} tensors; "
            f"unassigned in file: {ledger.unassigned_file_tensors[:3]}, unrestored in model: "
            f"{ledger.unrestored_variables[:3]}", hint="report it to k2to3 with the file",
        )
    warnings = []
    if plan.get("compile"):
        warnings.extend(_compile(keras, model, plan["compile"]))
    optimizer = None
    if req.get("optimizer_state", True) and artifact.model_config is not None:
        from k2to3.workers.optstate import migrate

        optimizer = migrate(keras, model, artifact, pairs)
    with _weights_on_disk(req["out"]), lean.keras3_saving():
        model.save(req["out"])
    return {
        "inputs": [{"name": t.name, "shape": [None if d is None else int(d) for d in t.shape],
                    "dtype": str(t.dtype)} for t in model.inputs],
        "ledger": ledger.to_dict(),
        # a generator: one variable's numpy copy at a time, not a second copy of the whole model
        "weight_hash": weight_hash(lean.hashable(keras, w) for w in model.weights),
        "n_layers": len(model.layers),
        "seconds": time.perf_counter() - t0,
        "warnings": warnings,
        "optimizer": optimizer,
    }


def _check_lambda_shapes(model: Any, spec: dict[str, Any]) -> None:
    """A Lambda rebuilt from --src must give the output shape its Keras 2 config recorded (a raw
    output_shape): a different shape means the matched source function is not the one that built it."""
    for s in spec.get("layers", []):
        want = s.get("expect_output_shape")
        if not want:
            continue
        got = list(model.get_layer(s["name"]).output.shape[1:])
        if len(got) != len(want) or any(w is not None and g is not None and w != g for w, g in zip(want, got)):
            raise K2to3Error(f"Lambda '{s['orig_name']}': the source function gives output shape {got}, the file "
                             f"recorded {want}", hint="the matched source call is not the one that built this "
                             "layer; give it name= in the source or pass --src FILE:FUNCTION")


def _call_build_fn(keras: Any, req: dict[str, Any]) -> Any:
    module = sys.modules[os.path.splitext(os.path.basename(req["modules"][0]))[0]]
    model = getattr(module, req["build_fn"])()
    if not isinstance(model, keras.Model):
        raise K2to3Error(f"{req['build_fn']}() returned {type(model).__name__}, not a keras Model",
                         hint="pass a function that builds and returns the model")
    return model


def _renames_by_order(model: Any, artifact: Any) -> dict[str, str]:
    """A weights-only file names its layers as Keras 2 numbered them in the process that saved it; Keras 2's
    load_weights matched layers with weights by order, and so does this (file layer -> model layer)."""
    file_layers = [n for n in artifact.layer_names if artifact.weights.get(n)]
    model_layers = [layer.name for layer in model.layers if layer.weights]
    if len(file_layers) != len(model_layers):
        raise K2to3Error(f"the weights file has {len(file_layers)} layers with weights, the model built by the "
                         f"source has {len(model_layers)}", hint="pass the build function that made these weights")
    return {f: m for f, m in zip(file_layers, model_layers) if f != m}


def _compile(keras: Any, model: Any, cfg: dict[str, Any]) -> list[str]:
    try:
        opt = keras.optimizers.deserialize(cfg["optimizer"]) if cfg.get("optimizer") else "rmsprop"
        loss = cfg.get("loss")
        if isinstance(loss, dict) and "class_name" in loss:
            loss = keras.losses.deserialize(loss)
        elif isinstance(loss, dict):
            loss = {k: keras.losses.deserialize(v) if isinstance(v, dict) else v for k, v in loss.items()}
        model.compile(optimizer=opt, loss=loss, metrics=cfg.get("metrics"), loss_weights=cfg.get("loss_weights"))
        # Keras saves compile's *resolved* jit_compile: "auto" is False under TensorFlow on a CPU, and a .keras
        # built here would then train eagerly on jax (ResNet50 first step 30 s, not 12; each later step 2.6 s,
        # not 1.1). Saved as "auto", every backend resolves its own default when it loads the file.
        saved = getattr(getattr(model, "_compile_config", None), "config", None)
        if isinstance(saved, dict) and "jit_compile" in saved:
            saved["jit_compile"] = "auto"
        return []
    except Exception as exc:  # compile info is optional: the model converts without it
        return [f"compile config not kept: {str(exc).splitlines()[0][:200]}"]


@contextmanager
def _constant_initializers(keras: Any):
    """Loading creates every variable with its initializer, then overwrites it with the saved value.
    On jax each random initializer compiles an XLA program per shape (7 s of a 9 s ResNet50 load) for
    values that are thrown away. Draw zeros instead while loading; the weight hash taken after loading
    is compared with the build's, so a variable the file did not overwrite cannot go unnoticed."""
    rnd = keras.src.backend.random
    names = ("uniform", "normal", "truncated_normal")
    saved = {n: getattr(rnd, n) for n in names}

    def zeros(shape, *args, dtype=None, **kwargs):  # not jnp.zeros: it would compile per shape too
        # no page resident until the restore writes it (torch, jax): keras's own numpy -> tensor path copies
        return lean.lazy_zeros(tuple(shape), keras.backend.standardize_dtype(dtype or "float32"))

    for n in names:
        setattr(rnd, n, zeros)
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(rnd, n, f)


@contextmanager
def _weights_on_disk(path: str):
    """Save or load `path` (.keras) with its weights file on disk beside it, never whole in memory. Keras
    picks the in-memory path whenever the weights fit half the available memory (1 GB assumed without
    psutil): a save then holds the h5 in a BytesIO and a copy of it for the zip, a load the whole member
    read into memory, one to two extra copies of the weights at the peak. Its other path (a temporary h5
    beside the .keras) writes and reads the same bytes; used only where that directory is writable, since
    keras's fallback then reads from the zip on the fly."""
    from keras.src.saving import saving_lib

    saved = getattr(saving_lib, "is_memory_sufficient", None)  # a private hook: absent in another Keras, no-op
    if saved is not None and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
        saving_lib.is_memory_sufficient = lambda model: False
    try:
        yield
    finally:
        if saved is not None:
            saving_lib.is_memory_sufficient = saved


def load_keras(req: dict[str, Any]) -> tuple[Any, Any, float]:
    """(keras, the .keras loaded with safe_mode=True, load seconds), the generated modules imported first."""
    keras = _k3()
    _import_modules(req)
    t0 = time.perf_counter()
    with _constant_initializers(keras), _weights_on_disk(req["keras"]), lean.keras3_loading():
        model = keras.saving.load_model(req["keras"], safe_mode=True)
    return keras, model, time.perf_counter() - t0


def op_verify(req: dict[str, Any]) -> dict[str, Any]:
    keras, model, t_load = load_keras(req)
    # Generators: one variable's numpy copy at a time, not a second copy of the whole model.
    total = weight_hash(lean.hashable(keras, w) for w in model.weights)
    per_layer = {}
    for layer in model.layers:
        if layer.weights:
            per_layer[layer.name] = weight_hash(lean.hashable(keras, w) for w in layer.weights)
    xs = _load_inputs(req["inputs"])
    t1 = time.perf_counter()
    outs = _flat_numpy(keras, _forward(keras, model, xs))
    t_pred = time.perf_counter() - t1
    _save_arrays(req["out"], outs)
    reply: dict[str, Any] = {
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
        "params_trainable": int(sum(int(np.prod(w.shape)) for w in model.trainable_weights)),
        "params_non_trainable": int(sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)),
        "weight_hash": total,
        "layer_hashes": per_layer,
        "n_outputs": len(outs),
        "load_seconds": t_load,
        "predict_seconds": t_pred,
        "compiled": bool(getattr(model, "compiled", False)),
        "library_version": _library_version(keras.backend.backend()),
    }
    if req.get("layers"):
        reply["layer_names"] = _layer_outputs(keras, model, xs, req["layers_out"], keras.layers.InputLayer)
    return reply


def _library_version(backend: str) -> str:
    """The backend library's version (golden files record it: `verify --golden` after an upgrade)."""
    return str(getattr(sys.modules.get(backend), "__version__", "unknown"))


def _layer_outputs(keras: Any, model: Any, xs: list[np.ndarray], out_path: str, input_cls: Any) -> list[str]:
    names, tensors = _probe(model, input_cls, keras.tree.flatten)
    if not tensors:
        _save_arrays(out_path, [])
        return []
    probe = keras.Model(model.inputs, tensors)  # a plain functional probe over the same graph
    _save_arrays(out_path, _flat_numpy(keras, _forward(keras, probe, xs)))
    return names


# -- Keras 2 golden (tf_keras) ------------------------------------------------------------------------
def _tf_keras_objects() -> dict[str, Any]:
    """tf_keras's own layers that live outside its registry (ConvNeXt's LayerScale, StochasticDepth), and the
    reference implementations of popular libraries' layers."""
    from tf_keras.src.applications import convnext

    from k2to3.workers.k2_library import (
        OBJECTS,  # popular libraries' layers (tensorflow-addons, keras-contrib, efficientnet)
    )

    return {"LayerScale": convnext.LayerScale, "StochasticDepth": convnext.StochasticDepth, **OBJECTS}

def _golden_model(tf_keras: Any, req: dict[str, Any]) -> Any:
    with lean.tf_keras_loading():  # large arrays by slices: tf_keras reads all of them before assigning any
        return _load_golden(tf_keras, req)


def _load_golden(tf_keras: Any, req: dict[str, Any]) -> Any:
    """The Keras 2 model: tf_keras loads the file; with --src, the objects come from the Keras 2 module (the
    user's code as written) and Lambda layers point at its functions by name (golden_config), so the file's
    bytecode is never unmarshalled. Only `trust_bytecode` lets tf_keras load the Lambdas from the file."""
    from k2to3.core.h5safe import check_file

    check_file(req["h5"])  # tf_keras follows links and external storage: it only opens what k2to3 accepted
    objects = _tf_keras_objects()
    if req.get("k2_module"):
        objects.update(_import_module(req["k2_module"]).K2TO3_OBJECTS)

    class K2to3GoldenLambda(tf_keras.layers.Lambda):
        """A Lambda whose config names its function (a Keras 2 module object), never bytecode."""

        @classmethod
        def from_config(cls, config, custom_objects=None):
            config = dict(config)
            fn = config.pop("function")
            return cls(fn if callable(fn) else objects[fn], **config)

    objects["K2to3GoldenLambda"] = K2to3GoldenLambda
    if req.get("build_fn"):
        model = objects[req["build_fn"]]()
        model.load_weights(req["h5"])
        return model
    if req.get("trust_bytecode"):
        # tf_keras runs a Lambda's bytecode with the globals of the module its config names (the training
        # script, "k2_zoo"): give it the Keras 2 module made from that source, as the user's process had.
        from k2to3.formats.artifact import read_artifact
        from k2to3.source.hoist import walk_layers

        art = read_artifact(req["h5"])
        names = {lay.get("config", {}).get("module") for lay in walk_layers(art.model_config or {})} - {None}
        k2 = sys.modules.get(os.path.splitext(os.path.basename(req["k2_module"]))[0]) if req.get("k2_module") else None
        saved = {n: sys.modules.get(n) for n in names}
        try:
            if k2 is not None:
                sys.modules.update({n: k2 for n in names})
            return tf_keras.models.load_model(req["h5"], compile=False, custom_objects=objects, safe_mode=False)
        finally:
            for n, m in saved.items():
                if m is None:
                    sys.modules.pop(n, None)
                else:
                    sys.modules[n] = m
    if req.get("golden_config"):
        import h5py
        from tf_keras.src.saving.legacy import hdf5_format

        with open(req["golden_config"]) as fh:
            config = json.load(fh)
        model = tf_keras.models.model_from_config(config, custom_objects=objects)
        with h5py.File(req["h5"], "r") as f:
            group = f["model_weights"] if "model_weights" in f else f
            # A Keras 1 Sequential-with-Merge became a Functional model whose layer order is not the file's
            # flattened order: Keras 2 loaded it through its legacy Sequential; tf_keras can only go by name.
            (hdf5_format.load_weights_from_hdf5_group_by_name if req.get("golden_by_name")
             else hdf5_format.load_weights_from_hdf5_group)(group, model)
        return model
    _refuse_bytecode(req["h5"])
    return tf_keras.models.load_model(req["h5"], compile=False, custom_objects=objects)


def _flip_theano_kernels(model: Any) -> None:
    """Keras 2.2's `_need_convert_kernel`: a Theano-trained file's convolution kernels, flipped along their
    spatial axes for a cross-correlating backend (tf_keras no longer does it)."""
    for layer in model.submodules:
        if type(layer).__name__ in ("Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "ConvLSTM2D"):
            values = layer.get_weights()
            n = 2 if type(layer).__name__ == "ConvLSTM2D" else 1
            values[:n] = [np.flip(v, axis=tuple(range(v.ndim - 2))) for v in values[:n]]
            layer.set_weights(values)


def _refuse_bytecode(h5: str) -> None:
    """Last line of defence: tf_keras would unmarshal and run a Lambda's bytecode while loading."""
    from k2to3.formats.artifact import read_artifact
    from k2to3.source.hoist import collect_needs

    art = read_artifact(h5, weights_only_ok=True)
    lambdas = [n.layer for n in collect_needs(art.model_config, None) if n.kind in ("lambda", "activation_lambda")]
    if lambdas:
        raise K2to3Error(f"refusing to let tf_keras load Lambda bytecode ({', '.join(map(str, lambdas[:3]))}) "
                         "without --trust-bytecode")


def op_golden(req: dict[str, Any]) -> dict[str, Any]:
    import tf_keras

    tf_keras.utils.set_random_seed(SEED)
    t0 = time.perf_counter()
    model = _golden_model(tf_keras, req)
    if req.get("theano_kernels"):
        _flip_theano_kernels(model)
    t_load = time.perf_counter() - t0
    xs = _load_inputs(req["inputs"])
    outs = [np.asarray(t) for t in _tf_flatten(model(_model_input(xs), training=False))]
    _save_arrays(req["out"], outs)
    reply: dict[str, Any] = {"keras_version": tf_keras.__version__, "load_seconds": t_load, "n_outputs": len(outs)}
    if req.get("layers"):
        names, tensors = _probe(model, tf_keras.layers.InputLayer, _tf_flatten)
        arrays: list[np.ndarray] = []
        if tensors:
            probe = tf_keras.Model(model.inputs, tensors)
            arrays = [np.asarray(t) for t in _tf_flatten(probe(_model_input(xs), training=False))]
        _save_arrays(req["layers_out"], arrays)
        reply["layer_names"] = names
    return reply


def op_bridge(req: dict[str, Any]) -> dict[str, Any]:
    """Load a tf.keras `.keras` archive or SavedModel with tf_keras (safe_mode=True: no Lambda bytecode) and
    re-save it as HDF5. The parent checked the config first: no Lambda, custom objects only from --src."""
    import tf_keras

    objects = _tf_keras_objects()
    if req.get("k2_module"):
        objects.update(_import_module(req["k2_module"]).K2TO3_OBJECTS)
    compiled = True
    try:
        model = tf_keras.models.load_model(req["src"], custom_objects=objects, safe_mode=True)
    except Exception:  # the compile state is optional (custom losses may be missing): load without it
        compiled = False
        model = tf_keras.models.load_model(req["src"], compile=False, custom_objects=objects, safe_mode=True)
    model.save(req["out"], save_format="h5")
    return {"keras_version": tf_keras.__version__, "compiled": compiled}


def _cleanup() -> None:
    """Free graphs between jobs so a warm worker does not grow with every model."""
    import keras

    keras.backend.clear_session()
    if "tf_keras" in sys.modules:
        sys.modules["tf_keras"].backend.clear_session()


# -- reruns in another dtype: float64 (the float32 noise floor, only on a mismatch) and float32 (the shadow of a
# mixed-precision model, docs/convert.md#mixed-precision) ----------------------------------------------------
REDUCED = ("float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


class Float64Unavailable(Exception):
    """The model cannot be rerun in the requested dtype here; the message says why."""


def _renamed(v: Any, name: str) -> Any:
    return name if isinstance(v, str) else {**v, "config": {**v["config"], "name": name}}


def _as_float64(v: Any, target: str = "float64") -> Any:
    name = v if isinstance(v, str) else (v.get("config") or {}).get("name") if isinstance(v, dict) else None
    if name in REDUCED:
        if target == "float64":
            raise Float64Unavailable(f"dtype policy {name}: the error is not float32 noise")
        return _renamed(v, "float32")  # the float32 shadow: the same layer at full precision
    if name != "float32" or target == "float32":
        return v  # integer inputs, None; float32 stays float32 in the shadow
    return _renamed(v, "float64")


def _float64_config(obj: Any, target: str = "float64") -> Any:
    if isinstance(obj, dict):
        return {k: _as_float64(v, target) if k == "dtype" else _float64_config(v, target) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_float64_config(v, target) for v in obj]
    return obj


def _clone_float64(model: Any, clone_model: Any, lambda_cls: type, target: str = "float64") -> Any:
    """The same graph with `target` (float64, or float32 for a mixed-precision shadow) layers and the same weights
    cast (exactly: float32 widens, a mixed model's variables are float32 already). Lambdas are rebuilt around
    their function object: their config would carry bytecode."""

    def clone(layer: Any) -> Any:
        if isinstance(layer, lambda_cls):
            return type(layer)(layer.function, output_shape=layer._output_shape, mask=layer.mask,
                               arguments=layer.arguments, name=layer.name, dtype=target)
        return layer.__class__.from_config(_float64_config(layer.get_config(), target))

    m64 = clone_model(model, clone_function=clone)
    m64.set_weights([np.asarray(w, dtype=target) for w in model.get_weights()])
    layers = m64._flatten_layers(include_self=False)  # nested models' layers too (tf_keras and Keras 3)
    low = sorted({getattr(getattr(la, "dtype_policy", None), "name", None) or "" for la in layers} & set(REDUCED))
    if low:  # a layer the clone did not reach: the shadow would not be one
        raise Float64Unavailable(f"the {target} clone still has {', '.join(low)} layers")
    return m64


def _float64_inputs(xs: list[np.ndarray]) -> list[np.ndarray]:
    return [x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x for x in xs]


def _checked_float64(outs: list[np.ndarray], target: str = "float64") -> list[np.ndarray]:
    low = sorted({str(o.dtype) for o in outs if o.dtype != np.dtype(target)})
    if low:
        raise Float64Unavailable(f"the {target} rerun returned {', '.join(low)} outputs")
    return outs


@contextmanager
def _float64_mode(keras: Any):
    """floatx float64 for this call only (a warm worker is shared): with floatx float32, Keras 3 on torch
    promotes float64 with float32 to float32 (BatchNormalization then rounds), and jax silently computes
    float64 as float32 unless x64 is on."""
    saved = keras.config.floatx()
    keras.config.set_floatx("float64")
    # keras.backend.result_type demotes float64 to float32 on torch and jax (JAX's default), so
    # BatchNormalization's result_type(x, "float32") would compute in float32: keep float64 for this call.
    demote = keras.src.backend.common.dtypes.BIT64_TO_BIT32_DTYPE
    saved_demote = demote.get("float64")
    demote["float64"] = "float64"
    try:
        if keras.backend.backend() == "jax":
            import jax

            with jax.enable_x64(True):
                yield
        else:
            yield
    finally:
        keras.config.set_floatx(saved)
        demote["float64"] = saved_demote


def op_float64(req: dict[str, Any]) -> dict[str, Any]:
    """Rerun the model in `dtype` (float64 by default; float32: the shadow of a mixed-precision model) on the same
    weights and inputs: the converted .keras on this backend, or (`golden`) the Keras 2 model with tf_keras.
    Writes the outputs to `out`; a model that cannot be rerun gives {"available": False, "reason": ...}, never
    an error."""
    t0 = time.perf_counter()
    target = req.get("dtype", "float64")
    xs = _load_inputs(req["inputs"])
    if target == "float64":
        xs = _float64_inputs(xs)
    try:
        if req.get("golden"):
            import tf_keras

            tf_keras.utils.set_random_seed(SEED)
            model = _golden_model(tf_keras, req)
            if req.get("theano_kernels"):
                _flip_theano_kernels(model)
            saved = tf_keras.backend.floatx()
            tf_keras.backend.set_floatx(target)
            try:
                with tf_keras.utils.custom_object_scope(_tf_keras_objects()):
                    m64 = _clone_float64(model, tf_keras.models.clone_model, tf_keras.layers.Lambda, target)
                outs = [np.asarray(t) for t in _tf_flatten(m64(_model_input(xs), training=False))]
            finally:
                tf_keras.backend.set_floatx(saved)
        else:
            keras = _k3()
            _import_modules(req)
            with _float64_mode(keras) if target == "float64" else nullcontext():
                with _constant_initializers(keras):
                    model = keras.saving.load_model(req["keras"], safe_mode=True)
                    m64 = _clone_float64(model, keras.models.clone_model, keras.layers.Lambda, target)
                outs = _flat_numpy(keras, _forward(keras, m64, xs))
        _save_arrays(req["out"], _checked_float64(outs, target))
    except Float64Unavailable as exc:
        return {"available": False, "reason": str(exc), "seconds": time.perf_counter() - t0}
    except Exception as exc:  # an op without a float64 kernel, a layer whose config cannot be rebuilt
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return {"available": False, "reason": f"{target} rerun failed: {type(exc).__name__}: {first}",
                "seconds": time.perf_counter() - t0}
    return {"available": True, "seconds": time.perf_counter() - t0}


OPS = {"build": op_build, "verify": op_verify, "golden": op_golden, "bridge": op_bridge, "float64": op_float64}


def op_grads(req: dict[str, Any]) -> dict[str, Any]:
    from k2to3.workers.grads import op_grads as run  # --grads (workers/grads.py)

    return run(req)


def op_golden_grads(req: dict[str, Any]) -> dict[str, Any]:
    from k2to3.workers.grads import op_golden_grads as run

    return run(req)


OPS.update(grads=op_grads, golden_grads=op_golden_grads)


def _fit_ops() -> dict[str, Any]:
    from k2to3.workers.fit import OPS as FIT_OPS  # --fit-steps (training parity)

    return FIT_OPS


OPS.update(_fit_ops())


def main() -> None:
    backend = sys.argv[1]
    if backend != "jax":
        # keras, TF and torch._dynamo import jax whenever it is installed; a worker for another backend never
        # uses it, and the import costs 0.6-1.7 s of CPU on every start.
        sys.modules.setdefault("jax", None)  # type: ignore[arg-type]
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed by libraries goes to the log, not the protocol
    _pin_threads(backend)
    if backend == "jax":
        _jax_compilation_cache()
    if backend != "tensorflow":
        # keras.utils.set_random_seed also seeds TensorFlow whenever it is importable: a torch or jax worker then
        # imports all of TensorFlow (+460 MB resident, seconds of CPU) for an RNG it never uses.
        from keras.src.utils import module_utils

        module_utils.tensorflow._available = False
    _k3()  # pay the imports now, while the parent is still preparing the job
    if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
        import tf_keras  # noqa: F401
    memory.release_freed()
    # Everything imported so far lives as long as the worker. Without this, every gc.collect() (clear_session
    # after each job, release_freed) walks those millions of objects: 0.3-0.5 s each, ~0.8 s per job per worker.
    gc.freeze()
    proto.write(json.dumps({"ok": True, "ready": backend, "memory": memory.figures()}) + "\n")
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "shutdown":
            break
        memory.reset_peak()  # the reply's peak is this job's
        try:
            with _job_switches(backend, req):
                reply = {"ok": True, **OPS[req["op"]](req)}
        except K2to3Error as exc:
            reply = {"ok": False, "error": exc.line(), "code": int(exc.code), "traceback": traceback.format_exc()}
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
