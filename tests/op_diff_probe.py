"""Differential check of rules/ops.toml, run in a subprocess per backend (KERAS_BACKEND set by the caller):
each entry's TensorFlow function (eager) and its keras.ops translation on the same seeded inputs.
Prints one JSON list of results. Not a test module: test_ops.py runs it."""

from __future__ import annotations

import json
import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
warnings.filterwarnings("ignore")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from k2to3 import ops as table  # noqa: E402

TOL = {"float32": (1e-5, 1e-6), "float16": (1e-3, 1e-3)}


def _arr(rng, shape, dtype="float32", positive=False):
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    a = rng.standard_normal(shape).astype("float32") * 2.0
    return (np.abs(a) + 0.5) if positive else a


def _resolve(mod, dotted):
    for part in dotted.split("."):
        mod = getattr(mod, part)
    return mod


def run_case(entry, case, seed):
    rng = np.random.default_rng(seed)
    positive = case.get("positive", False)
    dtype = case.get("dtype", "float32")
    if "xs" in case:
        first = [_arr(rng, s, dtype, positive) for s in case["xs"]]
    else:
        first = _arr(rng, case["x"], dtype, positive)
    tensors = {k: _arr(rng, s, "float32", positive) for k, s in case.get("tensors", {}).items()}
    kwargs = {**case.get("kwargs", {}), **tensors}
    tf_first = [tf.constant(a) for a in first] if isinstance(first, list) else tf.constant(first)
    tf_kwargs = {k: tf.constant(v) if k in tensors else v for k, v in kwargs.items()}
    ref = _resolve(tf, entry.name)(tf_first, **tf_kwargs)
    k_first = [keras.ops.convert_to_tensor(a) for a in first] if isinstance(first, list) else \
        keras.ops.convert_to_tensor(first)
    k_kwargs = {k: keras.ops.convert_to_tensor(v) if k in tensors else v for k, v in kwargs.items()}
    got = _resolve(keras.ops, entry.keras)(**table.translate(entry, k_first, k_kwargs))
    refs = [np.asarray(r) for r in (ref if isinstance(ref, (list, tuple)) else [ref])]
    gots = [np.asarray(keras.ops.convert_to_numpy(g)) for g in (got if isinstance(got, (list, tuple)) else [got])]
    if len(refs) != len(gots):
        return False, float("inf"), f"{len(gots)} outputs, TF has {len(refs)}"
    worst = 0.0
    for r, g in zip(refs, gots):
        if r.shape != g.shape:
            return False, float("inf"), f"shape {g.shape} != TF {r.shape}"
        rtol, atol = TOL.get(str(r.dtype), (0.0, 0.0))
        if r.dtype.kind in "fc":
            diff = np.abs(g.astype("float64") - r.astype("float64"))
            worst = max(worst, float(diff.max()) if diff.size else 0.0)
            if not np.allclose(g, r, rtol=rtol, atol=atol):
                return False, worst, f"max abs error {worst:.3g}"
        elif not np.array_equal(g.astype(r.dtype), r):
            return False, float("inf"), "values differ"
    return True, worst, ""


def main():
    results = []
    for entry in table.table():
        for i, case in enumerate(entry.cases):
            try:
                ok, err, note = run_case(entry, case, seed=i)
            except Exception as exc:  # a crash is a failing result, reported with its message
                ok, err, note = False, float("inf"), f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            results.append({"op": entry.name, "case": i, "ok": ok, "max_abs": err, "note": note})
    print(json.dumps({"backend": keras.backend.backend(), "results": results}))


if __name__ == "__main__":
    main()
