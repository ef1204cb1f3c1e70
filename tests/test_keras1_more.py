"""Keras 1 TimeDistributedDense, Deconvolution2D, BatchNormalization modes, Merge of models and every Merge mode,
and Keras 1 JSON + weights pairs (issue 11; rules K2T481-K2T487 in rules/keras1.toml).

Fixtures: tests/fixtures/make_keras1_fixtures.py `part2` (h5py in the Keras 1.2.2 layouts, values from tf_keras
models) and longtail/keras1_pairs/chemts/model.json (a Keras 1.1.1 to_json of the public ChemTS SMILES RNN,
written by the same script).
References: tf_keras on the Keras 2 translation (the golden of `convert`) for all of them; besides that
keras1_deconv_bn against Keras 1's own computation in raw TensorFlow ops, keras1_merge_modes against numpy
(Keras 1's Merge formulas), as no Keras 2 has Merge."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import FIXTURES, H5, ROOT, record
from test_convert import check_parity

from k2to3.core.options import ConvertOptions as Options
from k2to3.formats.pairs import read_config, resolve
from k2to3.pipeline.convert import convert
from k2to3.stores.audit import run_audit
from k2to3.upgrade import upgrade
from k2to3.upgrade.keras1.translate import _deconv_padding, is_keras1, to_keras2

sys.path.insert(0, str(FIXTURES))
PAIRS = FIXTURES / "longtail" / "keras1_pairs"
FILES = ["keras1_timedistributed", "keras1_deconv_bn", "keras1_merge_models", "keras1_merge_modes",
         "keras1_bidirectional"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}


def _chemts_pair(tmp: Path) -> Path:
    """The real ChemTS model.json beside a weights file in its RNN-model/model.h5 layout (seeded values)."""
    from make_keras1_fixtures import chemts_weights

    d = tmp / "chemts"
    d.mkdir()
    shutil.copy(PAIRS / "chemts" / "model.json", d / "model.json")
    chemts_weights(d / "model.h5")
    return d / "model.h5"


def _layers(name: str) -> dict:
    from k2to3.formats.artifact import read_artifact

    cfg = to_keras2(read_artifact(H5 / f"{name}.h5").model_config)["config"]
    return {x["config"]["name"]: x for x in (cfg if isinstance(cfg, list) else cfg["layers"])}


def test_timedistributeddense_and_batchnorm_translation():
    lay = _layers("keras1_timedistributed")
    tdd = lay["timedistributeddense_1"]
    assert tdd["class_name"] == "TimeDistributed" and tdd["config"]["batch_input_shape"] == [None, 7, 5]
    dense = tdd["config"]["layer"]
    assert dense["class_name"] == "Dense" and dense["config"]["units"] == 6 and dense["config"]["activation"] == "tanh"
    assert "output_dim" not in dense["config"] and "input_dim" not in dense["config"]
    inner = lay["timedistributed_1"]["config"]["layer"]["config"]  # a Keras 1 TimeDistributed's inner layer
    assert inner["units"] == 4 and inner["kernel_initializer"] == "glorot_uniform"
    bn = lay["batchnormalization_1"]["config"]
    assert "mode" not in bn and bn["beta_initializer"] == "zeros" and bn["gamma_initializer"] == "ones"
    assert bn["epsilon"] == 1e-3 and bn["momentum"] == 0.99 and bn["axis"] == -1


def test_bidirectional_inner_layers_translated():
    lay = _layers("keras1_bidirectional")
    lstm = lay["bidirectional_1"]["config"]["layer"]
    assert lstm["class_name"] == "LSTM" and lstm["config"]["units"] == 4 and "consume_less" not in lstm["config"]
    gru = lay["bidirectional_2"]["config"]
    assert gru["merge_mode"] == "sum" and gru["layer"]["config"]["reset_after"] is False


def test_deconvolution2d_translation():
    lay = _layers("keras1_deconv_bn")
    d1, d2 = lay["deconvolution2d_1"], lay["deconvolution2d_2"]
    assert d1["class_name"] == d2["class_name"] == "Conv2DTranspose"
    assert d1["config"]["filters"] == 4 and d1["config"]["kernel_size"] == [3, 3] and d1["config"]["strides"] == [2, 2]
    assert d1["config"]["padding"] == "valid" and d1["config"]["output_padding"] == [1, 1]  # 14, default 13
    assert d2["config"]["padding"] == "same" and d2["config"]["output_padding"] == [0, 0]  # 27, default 28
    assert "output_shape" not in d1["config"] and d1["config"]["data_format"] == "channels_last"


@pytest.mark.parametrize(("k", "s", "padding", "o", "want"), [
    (3, 1, "valid", 8, (True, 0)), (3, 2, "valid", 13, (True, 0)), (3, 2, "valid", 14, (False, 1)),
    (3, 2, "same", 28, (True, 1)), (3, 2, "same", 27, (False, 0)), (4, 2, "same", 8, (True, 2)),
    (4, 2, "same", 7, (False, 1)), (2, 3, "valid", 7, (False, 2)), (2, 3, "valid", 6, (True, 1)),
])
def test_deconv_output_padding(k, s, padding, o, want):
    """The output_padding that gives Keras 1's output length (TF conv2d_transpose semantics): Keras 3's length is
    (n-1)s + k - 2 pad + output_padding, its default n*s + max(k-s, 0) (valid) or n*s (same)."""
    assert _deconv_padding(k, s, padding, o) == want


def test_deconv_unreachable_output_shape_stops():
    cfg = {"name": "up", "nb_filter": 2, "nb_row": 3, "nb_col": 3, "subsample": [2, 2], "border_mode": "valid",
           "dim_ordering": "tf", "output_shape": [None, 16, None, 2], "batch_input_shape": [None, 6, 6, 3]}
    plan = upgrade({"class_name": "Sequential", "config": [{"class_name": "Deconvolution2D", "config": cfg}]})
    assert plan.errors[0].code == "K2T487" and plan.errors[0].layer == "up" and "output_shape" in plan.errors[0].message


@pytest.mark.parametrize("mode", [1, 2])
def test_batchnorm_modes_1_and_2_stop_and_say_why(mode):
    plan = upgrade({"class_name": "Sequential", "config": [{"class_name": "BatchNormalization", "config": {
        "name": "bn_1", "mode": mode, "axis": -1, "epsilon": 1e-3, "batch_input_shape": [None, 4]}}]})
    err = plan.errors[0]
    assert err.code == "K2T484" and err.layer == "bn_1" and f"mode={mode}" in err.message and err.fix
    assert ("each sample over its last axis" if mode == 1 else "batch it is given, also at inference") in err.message


def test_merge_with_a_function_stops_without_running_it():
    import base64
    import marshal

    code = base64.b64encode(marshal.dumps((lambda xs: xs[0] - xs[1]).__code__)).decode()
    model = {"class_name": "Model", "config": {"name": "m", "layers": [
        {"name": "a", "class_name": "InputLayer", "inbound_nodes": [], "config": {"name": "a",
                                                                                  "batch_input_shape": [None, 3]}},
        {"name": "mg", "class_name": "Merge", "inbound_nodes": [[["a", 0, 0], ["a", 0, 0]]], "config": {
            "name": "mg", "mode": [code, None, None], "mode_type": "lambda", "output_shape": [3],
            "output_shape_type": "raw"}}], "input_layers": [["a", 0, 0]], "output_layers": [["mg", 0, 0]]}}
    err = upgrade(model).errors[0]
    assert err.code == "K2T486" and err.layer == "mg" and "bytecode" in err.message and "custom layer" in err.fix


def test_sequential_merge_of_models_becomes_functional():
    lay = _layers("keras1_merge_models")
    assert [n for n, x in lay.items() if x["class_name"] == "InputLayer"] == ["dense_1_input", "dense_3_input"]
    assert lay["merge_1"]["class_name"] == "Multiply"
    assert [r[0] for r in lay["merge_1"]["inbound_nodes"][0]] == ["dense_2", "dense_3"]
    assert lay["dense_4"]["inbound_nodes"][0][0][0] == "merge_1"


def test_merge_modes_translation():
    lay = _layers("keras1_merge_modes")
    assert {n: x["class_name"] for n, x in lay.items() if n.startswith("merge")} == {
        "merge_mul": "Multiply", "merge_ave": "Average", "merge_max": "Maximum", "merge_dot": "Dot",
        "merge_cat": "Concatenate", "merge_cos": "Dot"}
    assert lay["merge_dot"]["config"] == {"name": "merge_dot", "trainable": True, "axes": [1, 1], "normalize": False}
    assert lay["merge_cos"]["config"]["normalize"] is True and lay["merge_cat"]["config"]["axis"] == -1


def test_keras1_pairs_are_found_and_matched(tmp_path):
    p = resolve(PAIRS / "merge_weights.h5", None)
    assert p is not None and p.config_path == PAIRS / "merge.json" and p.matched_by == "name"
    with h5py.File(PAIRS / "merge_weights.h5") as f:  # Keras 1 save_weights: groups at the root, Theano names
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in f["dense_1"].attrs["weight_names"]]
        assert "model_weights" not in f and names == ["dense_1_W", "dense_1_b"]
    cfg, version, _ = read_config(PAIRS / "chemts" / "model.json")
    assert version == "1.1.1" and is_keras1(cfg)
    p = resolve(_chemts_pair(tmp_path), None)
    assert p is not None and p.config_path.name == "model.json" and p.matched_by == "name"
    assert not upgrade(cfg).errors


def test_audit_pairs_keras1_configs_with_their_weights(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(PAIRS, tree)
    shutil.move(_chemts_pair(tmp_path), tree / "chemts" / "model.h5")
    for n in (*FILES, "keras1_deconv_th"):
        shutil.copy(H5 / f"{n}.h5", tree)
    rows = {Path(a["path"]).relative_to(tree).as_posix(): a for a in run_audit([tree], tmp_path / "out")["artifacts"]}
    assert rows["merge_weights.h5"]["config"] == str(tree / "merge.json")
    assert rows["chemts/model.h5"]["config"] == str(tree / "chemts" / "model.json")
    assert {k: v["verdict"] for k, v in rows.items()} == {k: "portable" for k in rows} and len(rows) == len(FILES) + 3


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_keras1_file_converts_with_parity(name, pool, tmp_path):
    report = convert(Options(src=H5 / f"{name}.h5", output=tmp_path / "m.keras"), pool=pool)
    record(name, report)
    check_parity(report)
    assert report["reference"]["kind"] == "keras2-tf_keras"
    if name == "keras1_bidirectional":  # 12 per-gate tensors per direction -> 3
        assert any(r.startswith("bidirectional_1: 24 Keras 1 tensors") for r in report["ledger"]["reshaped"])


@pytest.mark.slow
def test_keras1_th_deconvolution_parity_on_torch_and_jax(pool, tmp_path):
    """dim_ordering "th" Deconvolution2D: the golden (tf_keras on CPU) runs it, Keras 3 on tensorflow CPU has no
    NCHW Conv2DTranspose kernel (docs/channels-first.md), so parity is shown on torch and jax."""
    report = convert(Options(src=H5 / "keras1_deconv_th.h5", output=tmp_path / "m.keras", backends=("torch", "jax")),
                     pool=pool)
    record("keras1_deconv_th", report)
    assert report["verdict"] == "parity" and set(report["backends"]) == {"torch", "jax"}, report["backends"]
    assert report["reference"]["kind"] == "keras2-tf_keras" and report["ledger"]["complete"]
    assert any(r.startswith("deconvolution2d_1: 2 Keras 1 tensors") for r in report["ledger"]["reshaped"])
    lay = _layers("keras1_deconv_th")
    assert lay["deconvolution2d_1"]["config"]["output_padding"] == [1, 1]  # 14 x 13; Keras 3's default 13 x 12


@pytest.mark.slow
@pytest.mark.parametrize("which", ["merge", "chemts"])
def test_keras1_pair_converts_with_parity(which, pool, tmp_path):
    weights = PAIRS / "merge_weights.h5" if which == "merge" else _chemts_pair(tmp_path)
    report = convert(Options(src=weights, output=tmp_path / "m.keras"), pool=pool)
    record(f"keras1_pair_{which}", report)
    check_parity(report)
    assert report["input"]["pair"]["found"] == "beside the weights"
    assert report["input"]["pair"]["config_keras_version"] == ("1.2.2" if which == "merge" else "1.1.1")


def _run(code: str, backend: str, *args: str) -> list[np.ndarray]:
    env = {**ENV, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return [np.array(t) for t in got] if isinstance(got[0][0], list) else [np.array(got)]


_KERAS3 = ("import sys, json, numpy as np, keras, k2to3.portable; m = keras.saving.load_model(sys.argv[1]); "
           "x = np.load(sys.argv[2]); y = m([x[k] for k in sorted(x)] if len(x) > 1 else x['in0']); "
           "y = y if isinstance(y, (list, tuple)) else [y]; "
           "print(json.dumps([keras.ops.convert_to_numpy(t).reshape(len(x['in0']), -1).tolist() for t in y]))")


def _numpy_merge_modes(a, b, w):
    """Keras 1.2.2's Merge (keras/engine/topology.py) in numpy: mul, ave, max, dot = batch_dot over axis 1 (a
    (batch, 1) result), concat, cos = dot / max(sqrt(dot(a, a) * dot(b, b)), 1e-7)."""
    d1 = a @ w["dense_1/W"] + w["dense_1/b"]
    d2 = np.tanh(b @ w["dense_2/W"] + w["dense_2/b"])
    dot = (d1 * d2).sum(axis=1, keepdims=True)
    cat = np.concatenate([d1 * d2, (d1 + d2) / 2, np.maximum(d1, d2), dot], axis=-1)
    cos = dot / np.maximum(np.sqrt((d1 * d1).sum(1, keepdims=True) * (d2 * d2).sum(1, keepdims=True)), 1e-7)
    return [cat @ w["dense_3/W"] + w["dense_3/b"], cos]


@pytest.mark.slow
def test_merge_modes_against_numpy_and_deconv_against_keras1_tensorflow(pool, tmp_path):
    """The converted models on jax against references that do not go through k2to3's translation."""
    from make_keras1_fixtures import merge_modes

    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((5, 4)).astype("float32") for _ in range(2))
    np.savez(tmp_path / "ab.npz", in0=a, in1=b)
    convert(Options(src=H5 / "keras1_merge_modes.h5", output=tmp_path / "mm.keras"), pool=pool)
    got = _run(_KERAS3, "jax", str(tmp_path / "mm.keras"), str(tmp_path / "ab.npz"))
    w = {k: v.astype("float64") for k, v in merge_modes(tmp_path / "again.h5").items()}  # same seeded weights
    want = _numpy_merge_modes(a.astype("float64"), b.astype("float64"), w)
    err_mm = max(float(np.abs(g - r).max()) for g, r in zip(got, want))
    assert err_mm < 1e-5, err_mm

    x = rng.standard_normal((3, 6, 6, 3)).astype("float32")
    np.savez(tmp_path / "x.npz", in0=x)
    convert(Options(src=H5 / "keras1_deconv_bn.h5", output=tmp_path / "dc.keras"), pool=pool)
    got = _run(_KERAS3, "jax", str(tmp_path / "dc.keras"), str(tmp_path / "x.npz"))[0]
    ref = ("import sys, json, numpy as np; sys.path.insert(0, sys.argv[3]); import make_keras1_fixtures as m; "
           "from pathlib import Path; x = np.load(sys.argv[2])['in0']; "
           "print(json.dumps(m.keras1_deconv_reference(Path(sys.argv[1]), x).tolist()))")
    want = _run(ref, "tensorflow", str(H5 / "keras1_deconv_bn.h5"), str(tmp_path / "x.npz"), str(FIXTURES))[0]
    err_dc = float(np.abs(got - want).max())
    assert err_dc < 1e-5, err_dc
    print(f"merge modes vs numpy {err_mm:.2e}; deconv vs Keras 1 raw TF {err_dc:.2e}")


@pytest.mark.slow
def test_plain_keras3_fails_on_each(tmp_path):
    chem = _chemts_pair(tmp_path)
    specs = [str(H5 / f"{n}.h5") + "=" for n in (*FILES, "keras1_deconv_th")]
    specs += [f"{PAIRS / 'merge.json'}::{PAIRS / 'merge_weights.h5'}=", f"{chem.with_suffix('.json')}::{chem}="]
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "longtail_plain_probe.py"), *specs],
                         capture_output=True, text=True, env={**ENV, "KERAS_BACKEND": "tensorflow"}, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(got) == len(specs) and all(v["result"] == "fails" for v in got.values()), got
