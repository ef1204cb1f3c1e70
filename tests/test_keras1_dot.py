"""Keras 1 `Merge(mode='dot' | 'cos')` (issue 23): K2T477 (Dot where it is what Keras 1 computed), K2T489
(k2to3>Keras1Merge), K2T909 (ranks Keras 1's two backends computed differently).

The reference is Keras 1's own arithmetic written out in numpy from its source (keras-team/keras 1.2.2,
keras/engine/topology.py `Merge.call`, keras/backend/tensorflow_backend.py and theano_backend.py `batch_dot`), not
tf_keras: tf_keras, the Keras 2 reference of a Keras 1 file, only ever runs k2to3's translation of the config, so
a wrong translation would verify with parity."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import H5, ROOT, record

from k2to3.formats.artifact import read_artifact
from k2to3.upgrade import upgrade
from k2to3.upgrade.keras1.translate import to_keras2

FILE = H5 / "keras1_merge_dot3.h5"
EPSILON = 1e-7  # Keras 1's K.epsilon() (keras/backend/common.py: _EPSILON = 10e-8)


# ---- Keras 1.2.2 in numpy -------------------------------------------------------------------------------------
def tf_batch_dot(x, y, axes):
    """keras/backend/tensorflow_backend.py 1.2.2 `batch_dot`, line for line: rank 2 pairs reduce_sum(x * y);
    otherwise tf.matmul(x, y, adjoint_a=axes[0] != ndim(x) - 1, adjoint_b=axes[1] == ndim(y) - 1), which multiplies
    the last two axes as a batch of matrices; a rank-1 result gets a unit axis."""
    if isinstance(axes, int):
        axes = (axes, axes)
    if x.ndim == 2 and y.ndim == 2:
        out = (x * y).sum(axes[0]) if axes[0] == axes[1] else (x.T * y).sum(axes[1])
    else:
        a = np.swapaxes(x, -1, -2) if axes[0] != x.ndim - 1 else x
        b = np.swapaxes(y, -1, -2) if axes[1] == y.ndim - 1 else y
        out = np.matmul(a, b)
    return out[:, None] if out.ndim == 1 else out


def theano_batch_dot(x, y, axes):
    """keras/backend/theano_backend.py 1.2.2 `batch_dot`: T.batched_tensordot(x, y, axes), per sample a tensordot
    over axes[0] - 1 of x and axes[1] - 1 of y; a rank-1 result gets a unit axis."""
    if isinstance(axes, int):
        axes = (axes, axes)
    out = np.stack([np.tensordot(x[i], y[i], axes=(axes[0] - 1, axes[1] - 1)) for i in range(len(x))])
    return out[:, None] if out.ndim == 1 else out


def keras1_merge(mode, a, b, axes, batch_dot=tf_batch_dot):
    """Keras 1.2.2 Merge.call in mode dot / cos (the values; Keras 1's cos then adds a unit axis at position 1 that
    its get_output_shape_for does not declare, and that the converted model leaves out). An int dot_axes is
    first made a pair as Merge._arguments_validation did: [d % ndim(a), d % ndim(b)] when negative, else [d, d]."""
    if isinstance(axes, int):
        axes = [axes % a.ndim, axes % b.ndim] if axes < 0 else [axes, axes]
    if mode == "dot":
        return batch_dot(a, b, axes)
    den = np.sqrt(batch_dot(a, a, axes) * batch_dot(b, b, axes))
    return batch_dot(a, b, axes) / np.maximum(den, EPSILON)


def _weights():
    import h5py

    with h5py.File(FILE, "r") as f:
        g = f["model_weights"]
        return {f"{lay}/{n.split(':')[0][len(lay) + 1:]}": g[lay][n][()].astype("float64")
                for lay in g for n in g[lay]}


def keras1_model(q, k, v):
    """keras1_merge_dot3.h5's six outputs as Keras 1 computed them (make_keras1_dot_fixtures.py)."""
    w = _weights()

    def dense(name, x, act):
        y = x @ w[f"{name}/W"] + w[f"{name}/b"]
        return {"linear": y, "tanh": np.tanh(y), "sigmoid": 1.0 / (1.0 + np.exp(-y))}[act]

    dq, dk = dense("dense_q", q, "linear"), dense("dense_k", k, "tanh")
    sq, sv = dense("sig_q", q, "sigmoid"), dense("sig_v", v, "sigmoid")
    pq, pk = dq.mean(axis=1), dk.mean(axis=1)
    return {"merge_att": keras1_merge("dot", dq, dk, [2, 2]), "merge_tdot": keras1_merge("dot", q, v, [1, 1]),
            "merge_cos3": keras1_merge("cos", sq, sv, [2, 2]), "merge_cos3t": keras1_merge("cos", sq, sv, [1, 1]),
            "merge_dot2": keras1_merge("dot", pq, pk, [1, 1]), "merge_cos2": keras1_merge("cos", pq, pk, [1, 1])}


# ---- what Keras 1 computed -------------------------------------------------------------------------------------
def test_keras1_backends_agree_at_rank_2_and_3_and_differ_at_rank_4():
    rng = np.random.default_rng(0)
    x2, y2 = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    assert np.allclose(tf_batch_dot(x2, y2, [1, 1]), theano_batch_dot(x2, y2, [1, 1]))
    shapes = {(2, 2): ((3, 4, 5), (3, 6, 5)), (1, 1): ((3, 4, 5), (3, 4, 6)), (1, 2): ((3, 4, 5), (3, 6, 4)),
              (2, 1): ((3, 4, 5), (3, 5, 6))}
    for axes, (s1, s2) in shapes.items():
        x, y = rng.standard_normal(s1), rng.standard_normal(s2)
        assert np.allclose(tf_batch_dot(x, y, axes), theano_batch_dot(x, y, axes)), axes
    # rank 3, dot_axes [-1, -1] as a list (Keras 1 kept a pair as given): TensorFlow contracted axis 1
    x, y = rng.standard_normal((3, 4, 4)), rng.standard_normal((3, 4, 4))
    assert not np.allclose(tf_batch_dot(x, y, [-1, -1]), theano_batch_dot(x, y, [2, 2]))
    # rank 4: TensorFlow's batch matmul of the last two axes, Theano's tensordot declared shape
    x, y = rng.standard_normal((3, 2, 4, 5)), rng.standard_normal((3, 2, 6, 5))
    assert tf_batch_dot(x, y, [3, 3]).shape == (3, 2, 4, 6) and theano_batch_dot(x, y, [3, 3]).shape == (3, 2, 4, 2, 6)
    # cos at rank 3 is no cosine off the diagonal: the denominator is sqrt(Gram(a) * Gram(b)), elementwise
    a, b = np.abs(rng.standard_normal((1, 3, 4))), np.abs(rng.standard_normal((1, 3, 4)))
    c = keras1_merge("cos", a, b, [2, 2])
    true = np.einsum("bik,bjk->bij", a / np.linalg.norm(a, axis=2, keepdims=True),
                     b / np.linalg.norm(b, axis=2, keepdims=True))
    assert np.allclose(np.diagonal(c, axis1=1, axis2=2), np.diagonal(true, axis1=1, axis2=2))
    assert not np.allclose(c, true)


# ---- the translation --------------------------------------------------------------------------------------------
def test_translation_of_the_fixture():
    cfg = to_keras2(read_artifact(FILE).model_config)["config"]["layers"]
    lay = {x["name"]: (x["class_name"], x["config"]) for x in cfg if x["name"].startswith("merge")}
    assert lay["merge_att"] == ("Dot", {"name": "merge_att", "trainable": True, "axes": [2, 2], "normalize": False})
    assert lay["merge_tdot"][0] == "Dot" and lay["merge_tdot"][1]["axes"] == [1, 1]
    assert lay["merge_dot2"][0] == "Dot" and lay["merge_dot2"][1]["axes"] == [1, 1]
    assert lay["merge_cos2"][0] == "Dot" and lay["merge_cos2"][1]["normalize"] is True
    for n, axes in (("merge_cos3", [2, 2]), ("merge_cos3t", [1, 1])):
        assert lay[n] == ("Keras1Merge", {"name": n, "trainable": True, "mode": "cos", "dot_axes": axes})
    plan = upgrade(read_artifact(FILE).model_config)
    assert not plan.errors and plan.needs_portable
    warn = [f for f in plan.findings if f.code == "K2T489"]
    assert {f.layer for f in warn} == {"merge_cos3", "merge_cos3t"} and {f.severity for f in warn} == {"warning"}
    assert {f.layer for f in plan.findings if f.code == "K2T465"} == {"merge_cos3", "merge_cos3t"}


def _model(shapes: dict[str, list], mode: str, dot_axes, between: dict | None = None) -> dict:
    """A Keras 1 functional config: Inputs of `shapes`, optionally one layer `between` after the first, and a
    Merge(mode, dot_axes) of the two."""
    layers = [{"name": n, "class_name": "InputLayer", "inbound_nodes": [], "config": {
        "name": n, "batch_input_shape": [None, *s], "input_dtype": "float32"}} for n, s in shapes.items()]
    first, second = list(shapes)
    if between is not None:
        layers.append({"name": "mid", "inbound_nodes": [[[first, 0, 0]]], **between})
        first = "mid"
    layers.append({"name": "merge_1", "class_name": "Merge", "inbound_nodes": [[[first, 0, 0], [second, 0, 0]]],
                   "config": {"name": "merge_1", "mode": mode, "mode_type": "raw", "dot_axes": dot_axes}})
    return {"class_name": "Model", "config": {"name": "m", "layers": layers, "input_layers": [[n, 0, 0] for n in
                                              shapes], "output_layers": [["merge_1", 0, 0]]}}


@pytest.mark.parametrize(("shapes", "mode", "axes", "why"), [
    ({"a": [2, 5, 4], "b": [2, 6, 4]}, "dot", [3, 3], "on inputs of ranks 4 and 4: Keras 1 on TensorFlow multiplied"),
    ({"a": [2, 5, 4], "b": [2, 5, 4]}, "cos", -1, "on inputs of ranks 4 and 4: Keras 1 on TensorFlow multiplied"),
    ({"a": [4], "b": [6, 4]}, "dot", [1, 2], "on inputs of ranks 2 and 3: inputs of different ranks"),
    ({"a": [5, 4], "b": [5, 4]}, "dot", [-1, -1], "read a negative axis as 'not the last'"),
    ({"a": [5], "b": [5]}, "dot", [0, 0], "contracts the batch axis"),
])
def test_ranks_keras1_backends_disagree_on_stop_with_k2t909(shapes, mode, axes, why):
    plan = upgrade(_model(shapes, mode, axes))
    [err] = plan.errors  # the precise stop alone: no K2T902 "unknown class Merge" behind it
    assert err.code == "K2T909" and err.layer == "merge_1" and why in err.line(), err.line()
    assert f"Merge(mode={mode!r}" in err.line() and "Dot(axes=dot_axes)" in (err.fix or "")


def test_ranks_through_the_graph_and_unknown_ranks():
    lstm = {"class_name": "LSTM", "config": {"name": "mid", "output_dim": 4, "return_sequences": True}}
    plan = upgrade(_model({"a": [5, 3], "b": [5, 4]}, "cos", [2, 2], lstm))  # (b, 5, 4) after the LSTM: rank 3
    assert plan.errors == [] and "K2T489" in {f.code for f in plan.findings}
    flat = {"class_name": "Flatten", "config": {"name": "mid"}}
    cfg = to_keras2(_model({"a": [5, 4], "b": [20]}, "cos", [1, 1], flat))["config"]["layers"][-1]
    assert cfg["class_name"] == "Dot" and cfg["config"]["normalize"] is True
    odd = {"class_name": "Reshape", "config": {"name": "mid"}}  # no target_shape: its rank does not follow
    cfg = to_keras2(_model({"a": [5, 4], "b": [5, 4]}, "dot", [2, 2], odd))["config"]["layers"][-1]
    assert cfg["class_name"] == "Keras1Merge" and cfg["config"]["dot_axes"] == [2, 2]


# ---- the converted model on tensorflow, torch and jax ----------------------------------------------------------
_ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3",
        "JAX_PLATFORMS": "cpu"}
_LOAD = ("import sys, json, numpy as np, keras, k2to3.portable; m = keras.saving.load_model(sys.argv[1]); "
         "x = np.load(sys.argv[2]); y = m([x['in0'], x['in1'], x['in2']]); "
         "print(json.dumps([keras.ops.convert_to_numpy(t).tolist() for t in y]))")
_LAYER = """
import json, sys, numpy as np, keras
from k2to3.portable import Keras1Merge
rng = np.random.default_rng(1)
cases = [("dot", [1, 1], (3, 5), (3, 5)), ("cos", [1, 1], (3, 5), (3, 5)),
         ("dot", [2, 2], (3, 4, 5), (3, 6, 5)), ("dot", [1, 1], (3, 4, 5), (3, 4, 6)),
         ("dot", [1, 2], (3, 4, 5), (3, 6, 4)), ("dot", [2, 1], (3, 4, 5), (3, 5, 6)),
         ("dot", -1, (3, 4, 5), (3, 6, 5)), ("cos", [2, 2], (3, 4, 5), (3, 4, 5)),
         ("cos", [1, 1], (3, 4, 5), (3, 4, 5)), ("cos", [1, 2], (3, 4, 4), (3, 4, 4))]
out = []
for mode, axes, s1, s2 in cases:
    a, b = rng.standard_normal(s1).astype("float32"), rng.standard_normal(s2).astype("float32")
    if mode == "cos":
        a, b = np.abs(a), np.abs(b)
    layer = Keras1Merge(mode=mode, dot_axes=axes)
    sym = layer([keras.Input(s1[1:]), keras.Input(s2[1:])])
    got = keras.ops.convert_to_numpy(layer([a, b]))
    out.append([mode, axes, a.tolist(), b.tolist(), got.tolist(), list(sym.shape[1:])])
try:
    Keras1Merge(mode="dot", dot_axes=[3, 3])([keras.Input((2, 5, 4)), keras.Input((2, 6, 4))])
    err = ""
except ValueError as exc:
    err = str(exc)
print(json.dumps({"cases": out, "rank4": err}))
"""


def _subprocess(code: str, backend: str, *args: str):
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                         env={**_ENV, "KERAS_BACKEND": backend})
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_portable_keras1merge_is_keras1_arithmetic(backend):
    """k2to3>Keras1Merge on mixed-sign dot inputs and positive cos inputs, every rank-2/3 axes form, against the
    numpy Keras 1; its symbolic shape is Keras 1's declared shape; rank 4 is refused with K2T909."""
    got = _subprocess(_LAYER, backend)
    worst = 0.0
    for mode, axes, a, b, y, shape in got["cases"]:
        a, b, y = np.array(a, "float64"), np.array(b, "float64"), np.array(y)
        want = keras1_merge(mode, a, b, axes)
        assert want.shape == y.shape and list(want.shape[1:]) == shape, (mode, axes, want.shape, y.shape, shape)
        worst = max(worst, float(np.abs(y - want).max()))
    assert worst < 1e-5, worst
    assert got["rank4"].startswith("K2T909 Keras 1 Merge(mode='dot', dot_axes=[3, 3]) on inputs of ranks 4 and 4")
    print(f"{backend}: Keras1Merge vs numpy Keras 1, max abs {worst:.2e}")


@pytest.mark.slow
def test_converted_file_computes_keras1_on_every_backend(pool, tmp_path):
    """keras1_merge_dot3.h5 converts with parity (reference: Keras 3 on tensorflow, as no Keras 2 has Merge nor
    k2to3>Keras1Merge), and the .keras, loaded with safe_mode on tensorflow, torch and jax, computes every merge
    output as Keras 1 did (numpy). Before k2to3>Keras1Merge the rank-3 cos merges were Dot(normalize=True): parity
    with the tf_keras golden of that translation, and max abs 0.95 (merge_cos3) and 1.18 (merge_cos3t) from
    Keras 1 on every backend."""
    from k2to3.core.options import ConvertOptions
    from k2to3.pipeline.convert import convert

    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((3, *s)).astype("float32") for s in ((6, 4), (7, 4), (6, 4)))
    np.savez(tmp_path / "x.npz", in0=q, in1=k, in2=v)
    out = tmp_path / "m.keras"
    report = convert(ConvertOptions(src=FILE, output=out, inputs=tmp_path / "x.npz"), pool=pool)
    record("keras1_merge_dot3", report)
    assert report["verdict"] == "parity", report["backends"]
    assert set(report["backends"]) == {"tensorflow", "torch", "jax"} and report["ledger"]["complete"]
    want = keras1_model(*(t.astype("float64") for t in (q, k, v)))
    errors = {}
    for backend in ("tensorflow", "torch", "jax"):
        got = _subprocess(_LOAD, backend, str(out), str(tmp_path / "x.npz"))
        per = {}
        for name, y in zip(want, got):
            y = np.array(y)
            assert y.shape == want[name].shape, (backend, name, y.shape, want[name].shape)
            per[name] = float(np.abs(y - want[name]).max())
        errors[backend] = per
    print(json.dumps(errors))
    assert all(e < 1e-5 for per in errors.values() for e in per.values()), errors
