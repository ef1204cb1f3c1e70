"""Differential check of rules/ops.toml, run in a subprocess per backend (KERAS_BACKEND set by the caller):
each entry's TensorFlow function (eager; tf_keras.backend.<k[0]> for a K entry) and its keras.ops translation
on the same seeded inputs, within a tolerance derived from the case (op_tolerance.py: the reference rerun in
float64, and for a `sums` entry on the inputs' absolute values). Prints one JSON list of results. Not a test
module: test_ops.py runs it."""

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
import op_tolerance  # noqa: E402 - tests/op_tolerance.py, beside this script
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from k2to3.core import optable as table  # noqa: E402


def _arr(rng, shape, dtype="float32", positive=False, high=2, scale=1.0, unit=False):
    if dtype == "complex64":  # real and imaginary parts as a float32 input's
        return (_arr(rng, shape, "float32", positive, high, scale) + 1j * _arr(rng, shape, "float32", positive, high,
                                                                              scale)).astype("complex64")
    if unit and not dtype.startswith("int") and dtype != "bool":  # probabilities in (0.05, 0.95)
        return (0.05 + 0.9 / (1.0 + np.exp(-rng.standard_normal(shape) * 2.0))).astype("float32")
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("int"):
        return rng.integers(0, high, size=shape).astype(dtype)
    a = rng.standard_normal(shape).astype("float32") * 2.0
    return ((np.abs(a) + 0.5) if positive else a) * np.float32(scale)


# Functions a case passes as arguments (tf.cond's branches, tf.while_loop's cond and body, tf.vectorized_map's fn):
# name -> (the TensorFlow form the reference gets, the keras.ops form the translation gets). Case fields: fn = a
# function as the first argument, fns = {kw: function}.
FUNCTIONS = {
    "twos": (lambda: tf.fill([2, 3], 2.0), lambda: keras.ops.full((2, 3), 2.0)),
    "minus_ones": (lambda: -tf.ones([2, 3]), lambda: -keras.ops.ones((2, 3))),
    "below_100": (lambda v: tf.reduce_sum(tf.abs(v)) < 100.0, lambda v: keras.ops.sum(keras.ops.abs(v)) < 100.0),
    "doubled_list": (lambda v: [v * 2.0], lambda v: [v * 2.0]),
    "pair_below_10": (lambda i, v: i < 10, lambda i, v: i < 10),
    "pair_step": (lambda i, v: (i + 1, v * 1.5 + 1.0), lambda i, v: (i + 1, v * 1.5 + 1.0)),
    "scaled_by_sum": (lambda r: r * tf.reduce_sum(r), lambda r: r * keras.ops.sum(r)),
    # K.rnn's step function: (input at t, states) -> (output, new states)
    "rnn_step": (lambda x, s: (tf.tanh(x + s[0]), [tf.tanh(x + s[0])]),
                 lambda x, s: (keras.ops.tanh(x + s[0]), [keras.ops.tanh(x + s[0])])),
    "rnn_step_constant": (lambda x, s: (tf.tanh(x + s[0]) * s[1], [tf.tanh(x + s[0])]),
                          lambda x, s: (keras.ops.tanh(x + s[0]) * s[1], [keras.ops.tanh(x + s[0])])),
}


def _resolve(mod, dotted):
    for part in dotted.split("."):
        mod = getattr(mod, part)
    return mod


def reference(entry):
    """The function the entry translates: tf.<tf[0]>, or tf_keras.backend.<k[0]> (Keras 2's K)."""
    return getattr(tf_keras.backend, entry.k[0]) if entry.k else _resolve(tf, entry.tf[0])


def _inputs(case, seed):
    """The case's arguments as numpy arrays and literals, seeded. Case fields: x (shape) or xs (list of shapes),
    dtype (of x: float32, bool, int32, ...), positive, scale (multiplies float inputs), tensors = {kw: shape}
    float tensors, ints = {kw: shape} int32 tensors in [0, high), consts = {kw: literal} int32 tensors, value = a
    Python literal first argument, unit = float inputs in (0.05, 0.95), operands = [shapes] float tensors passed
    positionally after `args` (tf.einsum's *inputs), tuples = list arguments passed as tuples, kwargs = static
    keyword arguments, args = static positional arguments after the first (named through `params` by
    positional_to_keywords, as the source rewriter does), sorted = x sorted along its last axis, triangular = x upper
    triangular, dtype "complex64" = random real and imaginary parts, fn = a named function (FUNCTIONS) as the first
    argument, fns = {kw: function name}, tensor_lists = {kw: [shapes]} lists of float tensors."""
    rng = np.random.default_rng(seed)
    positive = case.get("positive", False)
    dtype = case.get("dtype", "float32")
    high, scale, unit = case.get("high", 2), case.get("scale", 1.0), case.get("unit", False)
    static = "value" in case or "fn" in case  # a static first argument (a shape, a range start, K.constant's literal)
    if "fn" in case:  # a function (tf.while_loop's cond): its TF or keras.ops form, FUNCTIONS[name]
        first = case["fn"]
    elif static:
        first = case["value"]
    elif "xs" in case:
        first = [_arr(rng, s, dtype, positive, high, scale, unit) for s in case["xs"]]
    else:
        first = _arr(rng, case["x"], dtype, positive, high, scale, unit)
        if "plus_eye" in case:  # well-conditioned square matrices (inv, solve)
            first = first + np.float32(case["plus_eye"]) * np.eye(first.shape[-1], dtype="float32")
        if case.get("spd"):  # symmetric positive definite (cholesky)
            first = first @ np.swapaxes(first, -1, -2) + np.eye(first.shape[-1], dtype="float32")
        if case.get("sorted"):  # sorted along the last axis (tf.searchsorted's sorted_sequence)
            first = np.sort(first, axis=-1)
        if case.get("triangular"):  # upper triangular (tf.linalg.eig: its eigenvalues in diagonal order)
            first = np.triu(first)
    tensors = {k: _arr(rng, s, "float32", positive, high, scale, unit) for k, s in case.get("tensors", {}).items()}
    tensors.update({k: _arr(rng, s, "int32", high=high) for k, s in case.get("ints", {}).items()})
    tensors.update({k: _arr(rng, s, "bool") for k, s in case.get("bools", {}).items()})
    tensors.update({k: np.sort(_arr(rng, s, "int32", high=high)) for k, s in case.get("sorted_ids", {}).items()})
    tensors.update({k: np.asarray(v, dtype="int32") for k, v in case.get("consts", {}).items()})
    lists = {k: [_arr(rng, s, "float32", positive, high, scale, unit) for s in shapes]
             for k, shapes in case.get("tensor_lists", {}).items()}
    args = list(case.get("args", []))
    operands = [_arr(rng, s, "float32", positive, high, scale, unit) for s in case.get("operands", [])]
    kwargs = dict(case.get("kwargs", {}))
    if case.get("tuples"):  # TOML has no tuples; K.pool2d needs them (`(1,) + strides + (1,)`)
        args = [tuple(a) if isinstance(a, list) else a for a in args]
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    return {"first": first, "static": static, "as_list": isinstance(first, list) and not static, "args": args,
            "kwargs": kwargs, "tensors": tensors, "operands": operands, "lists": lists, "fn": "fn" in case,
            "fns": dict(case.get("fns", {}))}


def _side(inp, side, cast, convert):
    """The case's first argument and keyword arguments for one side (0: TensorFlow, 1: keras.ops): arrays through
    `cast` and `convert`, named functions as that side's form."""
    first = inp["first"]
    if inp["fn"]:
        first = FUNCTIONS[first][side]
    elif not inp["static"]:
        first = [convert(cast(a)) for a in first] if inp["as_list"] else convert(cast(first))
    kwargs = {**inp["kwargs"], **{k: convert(cast(v)) for k, v in inp["tensors"].items()},
              **{k: [convert(cast(a)) for a in v] for k, v in inp["lists"].items()},
              **{k: FUNCTIONS[f][side] for k, f in inp["fns"].items()}}
    return first, kwargs


def _float64(a):
    return a.astype("float64") if a.dtype.kind == "f" else a


def _abs64(a):
    return np.abs(a.astype("float64")) if a.dtype.kind == "f" else a


def _abs32(a):  # for an op without float64 kernels: the magnitude summed needs no float64 precision
    return np.abs(a) if a.dtype.kind == "f" else a


def call_reference(entry, inp, cast=None):
    """The reference on the case's inputs, each float array passed through `cast` first (float64: the float64
    reference; absolute values: the magnitude a summing op sums)."""
    cast = cast or (lambda a: a)
    tf_first, tf_kwargs = _side(inp, 0, cast, tf.constant)
    return reference(entry)(tf_first, *inp["args"], *(tf.constant(cast(o)) for o in inp["operands"]), **tf_kwargs)


def _outputs(value):
    return [np.asarray(r) for r in (value if isinstance(value, (list, tuple)) else [value])]


def _derived(entry, inp, cast, n):
    """The reference's outputs on cast inputs, or None where it does not run (a float64 kernel TF lacks, a K
    function that builds floatx() constants) or gives another structure: the tolerance then does without."""
    try:
        outs = _outputs(call_reference(entry, inp, cast))
    except Exception:  # e.g. no float64 kernel: the tolerance estimates without it
        return [None] * n
    return outs if len(outs) == n else [None] * n


def run_case(entry, case, seed, graph=False):
    """One case: the reference and the translation on the same inputs, judged per output by the tolerance derived
    from the case (op_tolerance.py). Returns a result dict: ok, max_abs, tol and ratio (of the worst output: max
    |error| / derived tolerance), floor (the reference's float32 rounding, max |ref - ref64|), note."""
    inp = _inputs(case, seed)
    first = inp["first"]
    ref = call_reference(entry, inp)
    k_first, k_kwargs = _side(inp, 1, lambda a: a, keras.ops.convert_to_tensor)
    k_first, k_kwargs = table.positional_to_keywords(
        entry, [k_first, *inp["args"], *map(keras.ops.convert_to_tensor, inp["operands"])], k_kwargs)
    name, call_kwargs = table.call_target(entry, table.translate(entry, k_first, k_kwargs))
    if graph and name == entry.keras:  # the composition a rebuilt model graph uses (rebuild.py)
        name = entry.graph
    if name.startswith("k2to3."):
        import k2to3.portable

        target = _resolve(k2to3.portable, name.split(".", 2)[2])
    else:
        target = _resolve(getattr(keras, entry.namespace), name)
    positional, call_kwargs = table.call_arguments(entry, call_kwargs)
    got = target(*positional, **call_kwargs)
    if entry.random:
        return _same_distribution(entry.random, np.asarray(ref), np.asarray(keras.ops.convert_to_numpy(got)),
                                  np.asarray(first) if not inp["static"] else None)
    refs = _outputs(ref)
    if not isinstance(ref, (list, tuple)) and isinstance(got, tuple):  # keras.ops.shape: a tuple of sizes
        got = np.asarray([keras.ops.convert_to_numpy(g) for g in got])
    gots = [np.asarray(keras.ops.convert_to_numpy(g)) for g in (got if isinstance(got, (list, tuple)) else [got])]
    if len(refs) != len(gots):
        return _result(False, float("inf"), f"{len(gots)} outputs, TF has {len(refs)}")
    floats = any(r.dtype.kind in "fc" for r in refs)
    refs64 = _derived(entry, inp, _float64, len(refs)) if floats else [None] * len(refs)
    summed = [None] * len(refs)
    if floats and entry.sums:
        summed = _derived(entry, inp, _abs64, len(refs))
        if summed[0] is None:
            summed = _derived(entry, inp, _abs32, len(refs))
    if case.get("phase_free") or case.get("parts"):
        refs, gots, refs64, summed = ([_comparable(case, i, o) for i, o in enumerate(outs)]
                                      for outs in (refs, gots, refs64, summed))
    worst = _result(True, 0.0)
    for r, g, r64, s in zip(refs, gots, refs64, summed):
        if r.shape != g.shape:
            return _result(False, float("inf"), f"shape {g.shape} != TF {r.shape}")
        if r.dtype.kind in "fc":
            v = op_tolerance.judge(g, r, r64, s)
            if not v.ok:
                return _result(False, v.max_abs, v.note, v.tol, v.ratio, v.floor)
            if v.ratio >= worst["ratio"]:
                worst = _result(True, max(worst["max_abs"], v.max_abs), "", v.tol, v.ratio, v.floor)
            else:
                worst["max_abs"] = max(worst["max_abs"], v.max_abs)
        elif not np.array_equal(g.astype(r.dtype), r):
            return _result(False, float("inf"), "values differ")
    return worst


def _comparable(case, i, out):
    """Output i as the case compares it: phase_free = [output indices] whose columns (eigenvectors, v[..., :, j])
    are defined up to a sign or a complex phase, each divided by the phase of its largest element; parts = true
    compares a complex output as its real and imaginary parts (float32 tolerance instead of exact equality)."""
    if out is None:
        return None
    out = np.asarray(out)
    if i in case.get("phase_free", []):
        peak = np.take_along_axis(out, np.abs(out).argmax(axis=-2)[..., None, :], axis=-2)
        out = out * (np.conj(peak) / np.abs(peak))
    if case.get("parts") and out.dtype.kind == "c":
        out = np.stack([out.real, out.imag], axis=-1)
    return out


def _same_distribution(kind, ref, got, x):
    """A random op: the same shape and dtype as TF's draw, and the same distribution by its first two moments (each
    within 6 standard errors of TF's sample: a false alarm about once in 10^8 cases); a permutation holds the same
    rows, a dropout keeps the same fraction and scales the kept values the same way."""
    if ref.shape != got.shape or ref.dtype != got.dtype:
        return _result(False, float("inf"), f"shape/dtype {got.shape} {got.dtype} != TF {ref.shape} {ref.dtype}")
    if kind == "permutation":
        same = np.array_equal(np.sort(ref, axis=0), np.sort(got, axis=0))
        return _result(same, 0.0 if same else float("inf"), "" if same else "not a permutation of the input rows")
    if kind == "dropout":
        ref, got = (ref != 0).astype("float64"), (got != 0).astype("float64")  # the kept fraction
    n = ref.size
    se_mean = ref.std() / np.sqrt(n) + 1e-12
    se_std = ref.std() / np.sqrt(2 * n) + 1e-12
    ratio = max(abs(got.mean() - ref.mean()) / (6 * se_mean), abs(got.std() - ref.std()) / (6 * se_std))
    return _result(bool(ratio <= 1), float(abs(got.mean() - ref.mean())), "" if ratio <= 1 else
                   f"moments differ: mean {got.mean():.4g} vs {ref.mean():.4g}, std {got.std():.4g} vs {ref.std():.4g}",
                   6 * se_mean, float(ratio))


def _result(ok, max_abs, note="", tol=0.0, ratio=0.0, floor=0.0):
    return {"ok": ok, "max_abs": max_abs, "tol": tol, "ratio": float("inf") if not ok and not ratio else ratio,
            "floor": floor, "note": note}


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
                    res = run_case(entry, case, seed=i, graph=graph)
                except Exception as exc:  # a crash is a failing result, reported with its message
                    res = _result(False, float("inf"), f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
                results.append({"op": entry.name, "case": f"{i}:graph" if graph else i, **res})
    print(json.dumps({"backend": keras.backend.backend(), "results": results, "params_mismatch": mismatches}))


if __name__ == "__main__":
    main()
