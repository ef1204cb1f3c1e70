"""The export op: the .keras loaded with safe_mode=True on this backend, exported with Keras 3's own exporter
(`model.export`: tf2onnx for ONNX on tensorflow, the TFLite converter for LiteRT, ExportArchive for a SavedModel,
torch.export for .pt2), then run by its own runtime in a fresh process (workers/exported.py) on the seeded inputs.

A format that cannot take the model is one line (NotPortable, exit 3) naming the op or layer and the format."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from typing import Any

from k2to3.errors import K2to3Error, NotPortable
from k2to3.workers.protocol import ExportRequest
from k2to3.workers.runtime import forward, load_inputs, load_keras

KERAS_FORMAT = {"onnx": "onnx", "litert": "litert", "savedmodel": "tf_saved_model", "torch": "torch"}
RUNTIME_TIMEOUT = 900  # seconds: a runtime that hangs must not hang the run

# What the exporters say when a format lacks an op, most precise first: (pattern, the op's group).
_OP_PATTERNS = (
    r"Unsupported ops: Counter\(\{([^}]*)\}\)",  # tf2onnx
    r"No Op registered for (\w+)",  # onnxruntime: an op tf2onnx passed through untranslated
    r"\((Flex\w+)\) failed to prepare",  # the LiteRT interpreter: a TensorFlow Select op, no Flex delegate
    r"ops are not supported by the native TFLite runtime[^:]*:\s*(.*)",  # TFLite converter
    r"(?:Flex|Select TF) ops?[^:]*:\s*(.*)",
    r"(aten\.[A-Za-z0-9_.]+)",  # torch.export
    r"((?:tf|TF)\.[A-Za-z0-9_.]+) (?:is|are) (?:not supported|neither)",
)


# Ops a recurrent layer's loop lowers to on tensorflow (the layers to name when a format lacks one of them).
_LOOP_OPS = ("tensorlist", "while", "loopcond", "enter", "exit", "nextiteration")
_RNN = ("lstm", "gru", "simplernn", "rnn", "bidirectional", "convlstm1d", "convlstm2d", "convlstm3d")


class RuntimeStop(Exception):
    """The exported file was written but its own runtime refuses it (an op it does not implement)."""


def _stop_line(exc: BaseException, fmt: str, model: Any, doing: str) -> str:
    """The exporter's (or the runtime's) failure as one line: the op it names and the layers that hold it."""
    text = " ".join(str(exc).split())
    for pat in _OP_PATTERNS:
        m = re.search(pat, text)
        if m:
            what = m.group(1).strip()[:200]
            return f"{fmt} cannot take op {what}{_layers_with(what, model)}"
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:240]
    return f"{fmt} {doing} failed: {first}"


def _layers_with(what: str, model: Any) -> str:
    """The layers that hold the op: a TFOpLambda translation whose name holds it (`tf.math.log1p` for Log1p), a
    recurrent layer for a loop op (TensorListReserve, While)."""
    ops = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", what)} - {"flex", "counter"}
    loop = any(o.startswith(_LOOP_OPS) for o in ops)
    hits = []
    for layer in _all_layers(model):
        cls, name = type(layer).__name__.lower(), layer.name.lower()
        if any(o in name.replace("_", "") or o == cls for o in ops) or (loop and cls in _RNN):
            hits.append(f"{layer.name} ({type(layer).__name__})")
    if not hits and any(o.startswith("flex") for o in ops):
        # LiteRT's builtin kernels compute in float32 (float16 only as stored weights): a layer computing in
        # float16 falls back to a Select TF op.
        hits = [f"{layer.name} ({type(layer).__name__}, {_policy(layer)})" for layer in _all_layers(model)
                if _policy(layer) in ("mixed_float16", "mixed_bfloat16", "float16", "bfloat16") and layer.weights]
    return f" in layer {', '.join(hits[:3])}{' ...' if len(hits) > 3 else ''}" if hits else ""


def _policy(layer: Any) -> str:
    return str(getattr(getattr(layer, "dtype_policy", None), "name", ""))


def _all_layers(model: Any) -> list[Any]:
    out = []
    for layer in getattr(model, "layers", []):
        out.append(layer)
        out.extend(_all_layers(layer))
    return out


def unroll_for_litert(model: Any) -> list[str]:
    """Recurrent layers of a fixed sequence length, unrolled: on tensorflow their loop is a While over TensorLists,
    which LiteRT's builtin ops lack (the converter falls back to Select TF ops, FlexTensorListReserve, that the
    LiteRT interpreter cannot run). Unrolled, every step is builtin ops and the same arithmetic."""
    done = []
    for layer in _all_layers(model):
        shape = getattr(layer, "_build_shapes_dict", None) or {}
        steps = next(iter(shape.values()), None) if shape else None
        if hasattr(layer, "unroll") and type(layer).__name__.lower() in _RNN and steps and len(steps) > 1 and \
                steps[1] is not None and not layer.unroll:
            layer.unroll = True
            done.append(layer.name)
    return done


def _export(model: Any, fmt: str, path: str) -> bool:
    """Export; True when the batch dimension was kept dynamic. torch.export specialises every dimension unless
    told otherwise: a single-input model is exported with a batch Dim first, statically if torch refuses it."""
    if fmt == "torch" and len(model.inputs) == 1:
        import torch

        try:
            model.export(path, format="torch", verbose=False,
                         dynamic_shapes={0: torch.export.Dim("batch", min=1, max=4096)})
            return True
        except Exception: # a shape guard on the batch: export it static below
            pass
    model.export(path, format=KERAS_FORMAT[fmt], verbose=False)
    return fmt != "torch"


def op_export(req: ExportRequest) -> dict[str, Any]:
    fmt, path = req.format, req.path
    keras, model, t_load = load_keras(req)
    forward(keras, model, load_inputs(req.inputs))  # tf2onnx refuses a loaded Sequential never called
    hint = f"export to another --format, or see docs/export.md#stops for what {fmt} takes"
    t0 = time.perf_counter()
    try:
        unrolled = unroll_for_litert(model) if fmt == "litert" else []
        dynamic = _export(model, fmt, path)
    except K2to3Error:
        raise
    except Exception as exc: # every exporter error is the format's stop, said in one line
        raise NotPortable(_stop_line(exc, fmt, model, "export"), hint=hint) from None
    t_export = time.perf_counter() - t0
    t1 = time.perf_counter()
    try:
        ran = run_exported(fmt, path, req.inputs, req.out)
    except RuntimeStop as exc:
        raise NotPortable(_stop_line(exc, fmt, model, "runtime"), hint=hint) from None
    ran["dynamic_batch"] = ran["dynamic_batch"] and dynamic
    ran["unrolled"] = unrolled
    return {"format": fmt, "keras_format": KERAS_FORMAT[fmt], "exporter_backend": keras.backend.backend(),
            "keras_version": keras.__version__, "load_seconds": round(t_load, 3),
            "export_seconds": round(t_export, 3), "run_seconds": round(time.perf_counter() - t1, 3), **ran}


def run_exported(fmt: str, path: str, inputs: str, out: str) -> dict[str, Any]:
    """workers/exported.py in a fresh interpreter: only the format's runtime is imported there."""
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "TF_USE_LEGACY_KERAS")}
    proc = subprocess.run([sys.executable, "-m", "k2to3.workers.exported", fmt, path, inputs, out], env=env,
                          capture_output=True, text=True, timeout=RUNTIME_TIMEOUT, check=False)
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or [f"exit {proc.returncode}"]
        sys.stderr.write(proc.stderr)  # the worker log keeps the runtime's traceback
        raise RuntimeStop(tail[0])
    meta: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    # The largest child this worker has waited for: only these runtime processes.
    meta["runtime_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return meta
