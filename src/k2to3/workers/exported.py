"""Runs an exported file in its own runtime, in a process of its own: `python -m k2to3.workers.exported FORMAT PATH
INPUTS.npz OUT.npz`. onnxruntime, the LiteRT interpreter (ai_edge_litert), TensorFlow's serving signature or
torch.export.load: never keras, so what is measured is what a server that loads the file computes.

Writes the outputs at the seeded batch (out0, out1, ...) and, when every input's batch dimension is dynamic, the
outputs of the first sample alone (b1_out0, ...); prints one JSON line: the runtime, its version, the batch."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

Result = tuple[list[np.ndarray], list[np.ndarray] | None, dict[str, Any]]


def _order(names: list[str]) -> list[str]:
    """Output names as the exporters spell them (output_0, output_1, ..., output_10) in their numeric order."""
    def key(n: str) -> tuple[int, str]:
        tail = n.rsplit("_", 1)[-1]
        return (int(tail), n) if tail.isdigit() else (1 << 30, n)
    return sorted(names, key=key)


def _onnx(path: str, xs: list[np.ndarray]) -> Result:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ins = sess.get_inputs()
    dynamic = all(not isinstance(i.shape[0], int) for i in ins) if ins else False

    def run(batch: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(o) for o in sess.run(None, {i.name: x for i, x in zip(ins, batch, strict=True)})]
    return run(xs), run([x[:1] for x in xs]) if dynamic else None, {
        "runtime": "onnxruntime", "version": ort.__version__, "dynamic_batch": dynamic}


def _litert(path: str, xs: list[np.ndarray]) -> Result:
    import ai_edge_litert
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=path, num_threads=1)
    details = interp.get_input_details()
    dynamic = all(int(d["shape_signature"][0]) == -1 for d in details) if details else False
    # The converter lists inputs by their signature names; the Keras export names them after the model's inputs
    # in order, so the signature runner takes them by those names.
    runner = interp.get_signature_runner()
    names = list(runner.get_input_details())
    order = _order(list(runner.get_output_details()))

    def run(batch: list[np.ndarray]) -> list[np.ndarray]:
        out = runner(**{n: np.ascontiguousarray(x) for n, x in zip(_in_order(names), batch, strict=True)})
        return [np.asarray(out[k]) for k in order]
    full = run(xs)
    return full, run([x[:1] for x in xs]) if dynamic else None, {
        "runtime": "ai_edge_litert", "version": getattr(ai_edge_litert, "__version__", "unknown"),
        "dynamic_batch": dynamic}


def _in_order(names: list[str]) -> list[str]:
    return _order(names) if all(n.rsplit("_", 1)[-1].isdigit() for n in names) else names


def _savedmodel(path: str, xs: list[np.ndarray]) -> Result:
    import tensorflow as tf

    fn = tf.saved_model.load(path).signatures["serving_default"]
    specs = fn.structured_input_signature[1]
    names = list(specs)
    dynamic = all(specs[n].shape.rank and specs[n].shape[0] is None for n in names)
    order = _order(list(fn.structured_outputs))

    def run(batch: list[np.ndarray]) -> list[np.ndarray]:
        out = fn(**{n: tf.constant(x) for n, x in zip(_in_order(names), batch, strict=True)})
        return [out[k].numpy() for k in order]
    return run(xs), run([x[:1] for x in xs]) if dynamic else None, {
        "runtime": "tensorflow serving signature", "version": tf.__version__, "dynamic_batch": dynamic}


def _torch(path: str, xs: list[np.ndarray]) -> Result:
    import torch

    torch.set_num_threads(1)
    program = torch.export.load(path)
    module = program.module()
    dynamic = bool(program.range_constraints)

    def run(batch: list[np.ndarray]) -> list[np.ndarray]:
        with torch.no_grad():
            ts = [torch.from_numpy(np.ascontiguousarray(x)) for x in batch]
            out = module(*ts) if len(ts) == 1 else module(ts)  # Keras traces a multi-input model on one list
        flat = out if isinstance(out, (list, tuple)) else [out]
        return [t.detach().numpy() for t in flat]
    return run(xs), run([x[:1] for x in xs]) if dynamic else None, {
        "runtime": "torch.export.load", "version": torch.__version__, "dynamic_batch": dynamic}


RUNTIMES = {"onnx": _onnx, "litert": _litert, "savedmodel": _savedmodel, "torch": _torch}


def main() -> None:
    fmt, path, inputs, out = sys.argv[1:5]
    # TensorFlow and torch import jax whenever it is installed (seconds of CPU); no runtime here uses it.
    sys.modules.setdefault("jax", None)  # type: ignore[arg-type]
    with np.load(inputs) as z:
        xs = [z[f"in{i}"] for i in range(len(z.files))]
    full, one, meta = RUNTIMES[fmt](path, xs)
    arrays = {f"out{i}": a for i, a in enumerate(full)}
    if one is not None and xs and xs[0].shape[0] > 1:
        arrays.update({f"b1_out{i}": a for i, a in enumerate(one)})
    np.savez(out, **arrays)
    print(json.dumps({**meta, "batch": int(xs[0].shape[0]) if xs else 0, "n_outputs": len(full)}))


if __name__ == "__main__":
    main()
