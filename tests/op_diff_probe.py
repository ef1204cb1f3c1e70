"""Differential check of rules/ops.toml, run in a subprocess per backend (KERAS_BACKEND set by the caller):
each entry's TensorFlow function (eager; tf_keras.backend.<k[0]> for a K entry) and its keras.ops translation
on the same seeded inputs. Prints one JSON list of results. Not a test module: test_ops.py runs it."""

from __future__ import annotations

import inspect
import json
import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.keras is tf_keras (Keras 2), the reference for K entries
warnings.filterwarnings("ignore")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from k2to3.core import optable as table  # noqa: E402

TOL = {"float32": (1e-5, 1e-6), "float16": (1e-3, 1e-3)}


def _arr(rng, shape, dtype="float32", positive=False, high=2, scale=1.0, unit=False):
    if unit and not dtype.startswith("int") and dtype != "bool":  # probabilities in (0.05, 0.95)
        return (0.05 + 0.9 / (1.0 + np.exp(-rng.standard_normal(shape) * 2.0))).astype("float32")
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("int"):
        return rng.integers(0, high, size=shape).astype(dtype)
    a = rng.standard_normal(shape).astype("float32") * 2.0
    return ((np.abs(a) + 0.5) if positive else a) * np.float32(scale)


def _resolve(mod, dotted):
    for part in dotted.split("."):
        mod = getattr(mod, part)
    return mod


def reference(entry):
    """The function the entry translates: tf.<tf[0]>, or tf_keras.backend.<k[0]> (Keras 2's K)."""
    return getattr(tf_keras.backend, entry.k[0]) if entry.k else _resolve(tf, entry.tf[0])


def run_case(entry, case, seed, graph=False):
    """Case fields: x (shape) or xs (list of shapes), dtype (of x: float32, bool, int32, ...), positive,
    scale (multiplies float inputs), tensors = {kw: shape} float tensors, ints = {kw: shape} int32 tensors in
    [0, high), consts = {kw: literal} int32 tensors, value = a Python literal first argument, unit = float
    inputs in (0.05, 0.95), operands = [shapes] float tensors passed positionally after `args` (tf.einsum's
    *inputs), tuples = list arguments passed as tuples, kwargs = static keyword arguments,
    args = static positional arguments after the first (named through `params` by positional_to_keywords, as
    the source rewriter does)."""
    rng = np.random.default_rng(seed)
    positive = case.get("positive", False)
    dtype = case.get("dtype", "float32")
    high, scale, unit = case.get("high", 2), case.get("scale", 1.0), case.get("unit", False)
    static = "value" in case  # a static first argument (a shape, a range start, K.constant's literal)
    if static:
        first = case["value"]
    elif "xs" in case:
        first = [_arr(rng, s, dtype, positive, high, scale, unit) for s in case["xs"]]
    else:
        first = _arr(rng, case["x"], dtype, positive, high, scale, unit)
        if "plus_eye" in case:  # well-conditioned square matrices (inv, solve)
            first = first + np.float32(case["plus_eye"]) * np.eye(first.shape[-1], dtype="float32")
        if case.get("spd"):  # symmetric positive definite (cholesky)
            first = first @ np.swapaxes(first, -1, -2) + np.eye(first.shape[-1], dtype="float32")
    tensors = {k: _arr(rng, s, "float32", positive, high, scale, unit) for k, s in case.get("tensors", {}).items()}
    tensors.update({k: _arr(rng, s, "int32", high=high) for k, s in case.get("ints", {}).items()})
    tensors.update({k: _arr(rng, s, "bool") for k, s in case.get("bools", {}).items()})
    tensors.update({k: np.sort(_arr(rng, s, "int32", high=high)) for k, s in case.get("sorted_ids", {}).items()})
    tensors.update({k: np.asarray(v, dtype="int32") for k, v in case.get("consts", {}).items()})
    kwargs = {**case.get("kwargs", {}), **tensors}
    as_list = isinstance(first, list) and not static
    tf_first = first if static else [tf.constant(a) for a in first] if as_list else tf.constant(first)
    args = list(case.get("args", []))
    operands = [_arr(rng, s, "float32", positive, high, scale, unit) for s in case.get("operands", [])]
    if case.get("tuples"):  # TOML has no tuples; K.pool2d needs them (`(1,) + strides + (1,)`)
        args = [tuple(a) if isinstance(a, list) else a for a in args]
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    tf_kwargs = {k: tf.constant(v) if k in tensors else v for k, v in kwargs.items()}
    ref = reference(entry)(tf_first, *args, *map(tf.constant, operands), **tf_kwargs)
    k_first = first if static else [keras.ops.convert_to_tensor(a) for a in first] if as_list else \
        keras.ops.convert_to_tensor(first)
    k_kwargs = {k: keras.ops.convert_to_tensor(v) if k in tensors else v for k, v in kwargs.items()}
    k_first, k_kwargs = table.positional_to_keywords(
        entry, [k_first, *args, *map(keras.ops.convert_to_tensor, operands)], k_kwargs)
    name, call_kwargs = table.call_target(entry, table.translate(entry, k_first, k_kwargs))
    if graph and name == entry.keras:  # the composition a rebuilt model graph uses (rebuild.py)
        name = entry.graph
    if name.startswith("k2to3."):
        import k2to3.portable

        target = _resolve(k2to3.portable, name.split(".", 2)[2])
    else:
        target = _resolve(keras.ops, name)
    positional, call_kwargs = table.call_arguments(entry, call_kwargs)
    got = target(*positional, **call_kwargs)
    refs = [np.asarray(r) for r in (ref if isinstance(ref, (list, tuple)) else [ref])]
    if not isinstance(ref, (list, tuple)) and isinstance(got, tuple):  # keras.ops.shape: a tuple of sizes
        got = np.asarray([keras.ops.convert_to_numpy(g) for g in got])
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


def params_mismatch(entry):
    """`params` must be the reference function's signature (operators have none to read)."""
    if entry.name.startswith("__operators__."):
        return None
    sig = inspect.signature(reference(entry)).parameters.values()
    actual = [("*" if p.kind == p.VAR_POSITIONAL else "") + p.name for p in sig if p.kind != p.VAR_KEYWORD]
    return None if actual == list(entry.params) else {"op": entry.name, "params": list(entry.params),
                                                        "signature": actual}


def main():
    results = []
    mismatches = [m for m in map(params_mismatch, table.table()) if m]
    only = os.environ.get("K2TO3_PROBE_ONLY")  # comma-separated entry names (a quicker run while editing)
    for entry in table.table():
        if only and entry.name not in only.split(","):
            continue
        for i, case in enumerate(entry.cases):
            for graph in (False, True) if entry.graph else (False,):
                try:
                    ok, err, note = run_case(entry, case, seed=i, graph=graph)
                except Exception as exc:  # a crash is a failing result, reported with its message
                    ok, err, note = False, float("inf"), f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                results.append({"op": entry.name, "case": f"{i}:graph" if graph else i, "ok": ok, "max_abs": err,
                                "note": note})
    print(json.dumps({"backend": keras.backend.backend(), "results": results, "params_mismatch": mismatches}))


if __name__ == "__main__":
    main()
