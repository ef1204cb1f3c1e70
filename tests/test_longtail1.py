"""The long tail of real legacy files, part 1 (issue 11): JSON/YAML config + weights pairs, HDF5 behind other
names. Fixtures: tests/fixtures/make_longtail_fixtures.py (tf_keras)."""

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
from conftest import FIXTURES, ROOT, record
from test_cli import k2to3, one_error_line
from test_convert import check_parity

from k2to3.core.optable import lookup
from k2to3.core.options import ConvertOptions as Options
from k2to3.errors import Exit, InputError
from k2to3.formats.artifact import read_artifact
from k2to3.formats.multigpu import detect
from k2to3.formats.pairs import config_candidates, find_config, read_config, resolve
from k2to3.pipeline.convert import convert
from k2to3.stores.audit import run_audit
from k2to3.stores.discover import walk
from k2to3.stores.static import static_verdict
from k2to3.upgrade import upgrade
from k2to3.upgrade.cudnn import convert_weights
from k2to3.upgrade.tfoplayer import raw_ops

LT = FIXTURES / "longtail"
PAIRS = LT / "pairs"
NAMES = LT / "hdf5names"
CUDNN = LT / "cudnn" / "cudnn_rnns.h5"
TFOPL = LT / "tfoplayer" / "tf_op_layers.h5"
# (weights file, config it pairs with, how the weights are matched)
PAIR_CASES = [
    ("cnn_weights.h5", "cnn.json", "name"),
    ("mlp.h5", "mlp.json", "order"),
    ("yaml/net_weights.h5", "yaml/net.yaml", "name"),
    ("store/weights.h5", "store/model.json", "name"),
]


@pytest.mark.parametrize(("weights", "config", "matched"), PAIR_CASES)
def test_pair_found_beside_weights(weights, config, matched):
    p = resolve(PAIRS / weights, None)
    assert p is not None and p.config_path == PAIRS / config and p.matched_by == matched
    assert (p.renamed != {}) == (matched == "order")


def test_config_candidates_cover_the_usual_stems(tmp_path):
    names = {c.name for c in config_candidates(tmp_path / "model_weights.h5")}
    assert {"model_weights.json", "model.json", "model.yaml", "model.yml"} <= names
    assert "model.json" in {c.name for c in config_candidates(tmp_path / "weights.h5")}
    assert "x.json" in {c.name for c in config_candidates(tmp_path / "x_weights.h5")}


def test_pair_found_under_any_name_when_its_layers_take_the_weights(tmp_path):
    """A weights file whose architecture sits beside it under a name that says nothing (martzdev/openai-balance's
    model/structure.json beside model/weights.h5): the one JSON of the directory whose layers take the weights by
    name; another JSON there (a vocabulary, another model's config) is not taken. The same finder serves the audit."""
    d = tmp_path / "model"
    d.mkdir()
    shutil.copy(PAIRS / "cnn_weights.h5", d / "weights.h5")
    shutil.copy(PAIRS / "cnn.json", d / "structure.json")
    shutil.copy(PAIRS / "mlp.json", d / "other_model.json")  # a model config whose layers do not take them
    (d / "vocab.json").write_text('{"a": 1}')
    p = resolve(d / "weights.h5", None)
    assert p is not None and p.config_path == d / "structure.json" and p.matched_by == "name"


def test_json_written_twice_is_decoded(tmp_path):
    """json.dump(model.to_json(), f) (yanpanlau/DDPG-Keras-Torcs, spadin/behavioral-cloning): a JSON string
    holding the JSON."""
    twice = tmp_path / "model.json"
    twice.write_text(json.dumps((PAIRS / "cnn.json").read_text()))
    cfg, _, _ = read_config(twice)
    assert cfg == read_config(PAIRS / "cnn.json")[0]


def test_json_that_is_not_a_model_config_is_one_line():
    assert find_config(PAIRS / "bad" / "not_a_model.h5") is None  # not paired alone
    with pytest.raises(InputError) as exc:
        read_config(PAIRS / "bad" / "not_a_model.json")
    assert exc.value.code == Exit.USAGE and "not a Keras model config" in exc.value.line()


def test_yaml_is_read_safely(tmp_path):
    cfg, version, _ = read_config(PAIRS / "yaml" / "net.yaml")
    assert version == "2.2.4" and cfg["class_name"] == "Sequential"
    evil = tmp_path / "evil.yaml"
    evil.write_text("class_name: !!python/object/apply:os.system ['echo pwned']\nconfig: {}\n")
    with pytest.raises(InputError, match="not valid YAML"):
        read_config(evil)


def test_cli_not_a_model_config_exit_2_no_output(tmp_path):
    out = tmp_path / "o.keras"
    r = k2to3("convert", str(PAIRS / "bad" / "not_a_model.h5"), "--config", str(PAIRS / "bad" / "not_a_model.json"),
              "-o", str(out))
    assert r.returncode == 2 and "not a Keras model config" in one_error_line(r)
    assert not out.exists()


def test_audit_gives_each_pair_one_verdict(tmp_path):
    tree = walk([LT])
    assert not any(p.suffix in (".json", ".yaml") for p in tree.artifacts)
    report = run_audit([PAIRS], tmp_path)
    rows = {Path(a["path"]).relative_to(PAIRS).as_posix(): a for a in report["artifacts"]}
    for weights, config, _ in PAIR_CASES:
        assert rows[weights]["config"] == str(PAIRS / config)
        assert rows[weights]["verdict"] == "portable", rows[weights]
    assert rows["bad/not_a_model.h5"]["verdict"] == "blocked"  # weights alone: needs --src SCRIPT.py:BUILD_FN


def test_hdf5_found_by_content_under_other_names():
    found = {p.name for p in walk([NAMES]).artifacts}
    assert found == {"old.keras", "model", "m.hdf5", "m.model", "w.weights"}


@pytest.fixture(scope="module")
def plain_keras3() -> dict:
    specs = [f"{PAIRS / c}::{PAIRS / w}=" for w, c, _ in PAIR_CASES]
    specs += [f"{NAMES / n}={NAMES / n}" for n in ("old.keras", "model")]
    specs += [f"{CUDNN}=", f"{TFOPL}=", f"{LT / 'multigpu' / 'parallel.h5'}="]
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_USE_LEGACY_KERAS": "1", "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "longtail_plain_probe.py"), *specs],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_plain_keras3_fails_on_each(plain_keras3):
    assert len(plain_keras3) == len(PAIR_CASES) + 5
    for spec, got in plain_keras3.items():
        assert got["result"] in ("fails", "drifts"), (spec, got)


@pytest.mark.slow
@pytest.mark.parametrize(("weights", "config", "matched"), PAIR_CASES)
def test_pair_converts_with_parity(weights, config, matched, pool, tmp_path):
    name = Path(weights).parent.name or Path(weights).stem
    report = convert(Options(src=PAIRS / weights, output=tmp_path / f"{name}.keras"), pool=pool)
    record(f"pair_{name}", report)
    check_parity(report)
    assert report["reference"]["kind"] == "keras2-tf_keras" and "pair" in report["reference"]["from"]
    assert report["input"]["pair"]["config"] == str(PAIRS / config)
    assert report["ledger"]["weights_matched_by"].startswith("layer name" if matched == "name" else "topological")


@pytest.mark.slow
def test_explicit_config_option(pool, tmp_path):
    w = tmp_path / "trained.h5"  # no config beside it: --config names it
    shutil.copy(PAIRS / "mlp.h5", w)
    report = convert(Options(src=w, output=tmp_path / "m.keras", config=PAIRS / "mlp.json"), pool=pool)
    check_parity(report)
    assert report["input"]["pair"]["found"] == "--config"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["old.keras", "model"])
def test_hdf5_behind_other_names_converts(name, pool, tmp_path):
    report = convert(Options(src=NAMES / name, output=tmp_path / "out.keras"), pool=pool)
    record(f"hdf5name_{name}", report)
    check_parity(report)
    assert report["input"]["format"] == "HDF5"


def test_cudnn_rule_plans_lstm_gru_and_weight_conversion():
    art = read_artifact(CUDNN)
    plan = upgrade(art.model_config, art.training_config)
    assert not plan.errors
    assert plan.weight_transforms == {"lstm_cudnn": "LSTM", "bigru": "GRU", "bilstm": "LSTM",
                                      "gru_cudnn_back": "GRU"}
    layers = {s["orig_name"]: s for s in plan.model["layers"]}
    gru = layers["gru_cudnn_back"]
    assert gru["class_name"] == "GRU" and gru["config"]["reset_after"] and gru["config"]["go_backwards"]
    assert gru["config"]["recurrent_activation"] == "sigmoid" and "time_major" not in gru["config"]
    inner = layers["bigru"]["config"]["layer"]
    assert inner["class_name"] == "GRU" and inner["config"]["reset_after"]
    assert sum(f.code == "K2T450" for f in plan.findings) == 4


def test_cudnn_weight_layout_is_what_cudnn_computed():
    """tf_keras's CuDNNLSTM.call hands each gate's raw (input_dim, units) kernel to cuDNN flattened
    (gru_lstm_utils.canonical_to_params, no transpose) and cuDNN reads it as a row-major (units, input_dim)
    matrix W applied as W @ x; the Keras kernel computing x @ K is therefore K = W.T. Biases: input + recurrent."""
    rng = np.random.default_rng(0)
    n_in, units = 3, 2
    kernel = rng.normal(size=(n_in, 4 * units)).astype("float32")
    recurrent = rng.normal(size=(units, 4 * units)).astype("float32")
    bias = rng.normal(size=(8 * units,)).astype("float32")
    (k, r, b), notes = convert_weights("LSTM", [kernel, recurrent, bias])
    for g in range(4):
        cols = slice(g * units, (g + 1) * units)
        np.testing.assert_array_equal(k[:, cols], kernel[:, cols].reshape(-1).reshape(units, n_in).T)
        np.testing.assert_array_equal(r[:, cols], recurrent[:, cols].reshape(-1).reshape(units, units).T)
    np.testing.assert_array_equal(b, bias[: 4 * units] + bias[4 * units :])
    (_, _, gb), _ = convert_weights("GRU", [kernel[:, : 3 * units], recurrent[:, : 3 * units], bias[: 6 * units]])
    np.testing.assert_array_equal(gb, bias[: 6 * units].reshape(2, 3 * units))  # (input, recurrent) rows
    assert notes
    plain = [kernel, recurrent, bias[: 4 * units]]  # already the LSTM layout: untouched
    assert all(a is b for a, b in zip(convert_weights("LSTM", plain)[0], plain))


@pytest.mark.slow
def test_cudnn_converts_with_parity(pool, tmp_path):
    report = convert(Options(src=CUDNN, output=tmp_path / "cudnn.keras"), pool=pool)
    record("cudnn_rnns", report)
    assert report["verdict"] == "parity" and report["exit_code"] == 0, report["backends"]
    assert "CuDNN layers as LSTM/GRU" in report["reference"]["from"]
    ledger = report["ledger"]
    assert ledger["complete"] and ledger["tensors_restored"] == report["input"]["n_weight_tensors"] == 18
    assert len(ledger["converted"]) == 6  # 2 plain + 2 Bidirectional x (forward, backward)
    assert ledger["params_restored"] == ledger["params_expected"] < report["input"]["n_params"]
    assert report["weight_hashes_agree"] and set(report["backends"]) == {"tensorflow", "torch", "jax"}


def test_every_raw_op_maps_to_an_op_table_entry():
    for op, entry in raw_ops().items():
        found = lookup(entry["tf"])
        assert found is not None, f"{op}: tf.{entry['tf']} is not in rules/ops.toml"
        params = [p.lstrip("*") for p in entry["inputs"]] + list((entry.get("attrs") or {}).values())
        assert set(params) <= set(found.params), (op, params, found.params)


def _tfopl_model(node_def: dict, constants: dict, inbound: list) -> dict:
    layers = [{"class_name": "InputLayer", "name": "x", "inbound_nodes": [],
               "config": {"name": "x", "batch_input_shape": [None, 4, 3], "dtype": "float32"}},
              {"class_name": "InputLayer", "name": "s", "inbound_nodes": [],
               "config": {"name": "s", "batch_input_shape": [2], "dtype": "int32"}},
              {"class_name": "TensorFlowOpLayer", "name": "tf_op_layer_op", "inbound_nodes": [inbound],
               "config": {"name": "op", "trainable": True, "dtype": "float32", "node_def": node_def,
                          "constants": constants}}]
    return {"class_name": "Functional", "config": {"name": "m", "layers": layers,
                                                   "input_layers": [["x", 0, 0], ["s", 0, 0]],
                                                   "output_layers": [["tf_op_layer_op", 0, 0]]}}


def test_tf_op_layer_fixture_translates_every_op():
    art = read_artifact(TFOPL)
    plan = upgrade(art.model_config, art.training_config)
    assert not plan.errors and not plan.tf_only
    raw = [f for f in plan.findings if f.code == "K2T904" and "raw op" in f.message]
    ops = {f.message.split("raw op ")[1].split(" ")[0] for f in raw}
    assert {"AddV2", "Mul", "RealDiv", "Sub", "Relu6", "Pow", "Rsqrt", "Mean", "Sum", "ConcatV2", "Reshape", "Pad",
            "Cast", "Transpose", "Squeeze"} <= ops
    assert all(s["class_name"] != "TensorFlowOpLayer" for s in plan.model["layers"])


def test_tf_op_layer_untranslatable_paths():
    # a raw op with no entry in rules/raw_ops.toml: one precise error
    unknown = _tfopl_model({"name": "op", "op": "Erfinv", "input": ["x"], "attr": {}}, {}, [["x", 0, 0, {}]])
    plan = upgrade(unknown, None)
    assert [f.code for f in plan.errors] == ["K2T904"] and "no entry in rules/raw_ops.toml" in plan.errors[0].message
    # a mapped op whose arguments keras.ops cannot express (cumsum reverse=True): kept as the TF call (tf_only)
    reverse = _tfopl_model({"name": "op", "op": "Cumsum", "input": ["x", "op/axis"],
                            "attr": {"reverse": {"b": True}, "exclusive": {"b": False}, "T": {"type": "DT_FLOAT"}}},
                           {"1": 1}, [["x", 0, 0, {}]])
    plan = upgrade(reverse, None)
    assert not plan.errors and plan.tf_only and plan.tf_only[0]["op"] == "tf.math.cumsum", plan.findings


@pytest.mark.slow
def test_tf_op_layer_converts_with_parity(pool, tmp_path):
    report = convert(Options(src=TFOPL, output=tmp_path / "tfopl.keras"), pool=pool)
    record("tf_op_layers", report)
    check_parity(report)
    assert report["reference"]["kind"] == "keras2-tf_keras" and not report["output"]["needs_k2to3_portable"]


GPU = LT / "multigpu"


def test_multi_gpu_wrapper_detected_from_config_alone():
    art = read_artifact(GPU / "parallel.h5")
    found = detect(art.model_config)
    assert found and found["template"] == "model_1" and found["replicas"] == 2
    assert found["removed_layers"] == ["lambda", "lambda_1", "probs"]
    plain = read_artifact(NAMES / "m.hdf5")
    assert detect(plain.model_config) is None
    row = static_verdict(GPU / "parallel.h5", {})
    assert row["verdict"] == "portable" and row["multi_gpu"] == {"template": "model_1", "replicas": 2}


def test_template_alone_computes_what_the_parallel_model_did():
    """Numpy reference from the file's template weights against the parallel model's output that tf_keras
    computed when the fixture was written (get_slice + replicas + concat): removing the wrapper keeps outputs."""
    with np.load(GPU / "expected.npz") as z:
        x, want = z["in0"], z["out0"]
    with h5py.File(GPU / "parallel.h5", "r") as f:
        g = f["model_weights/model_1"]
        w = {k: g[k][()] for k in ("hidden/kernel:0", "hidden/bias:0", "bn/gamma:0", "bn/beta:0",
                                   "bn/moving_mean:0", "bn/moving_variance:0", "probs/kernel:0", "probs/bias:0")}
    h = np.maximum(x @ w["hidden/kernel:0"] + w["hidden/bias:0"], 0)
    h = w["bn/gamma:0"] * (h - w["bn/moving_mean:0"]) / np.sqrt(w["bn/moving_variance:0"] + 1e-3) + w["bn/beta:0"]
    z = h @ w["probs/kernel:0"] + w["probs/bias:0"]
    got = np.exp(z - z.max(-1, keepdims=True))
    got /= got.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_multi_gpu_save_converts_template_with_parity(pool, tmp_path):
    with np.load(GPU / "expected.npz") as z:  # the batch the parallel model was run on by the fixture script
        np.savez(tmp_path / "in.npz", in0=z["in0"])
    report = convert(Options(src=GPU / "parallel.h5", output=tmp_path / "template.keras", inputs=tmp_path / "in.npz"),
                     pool=pool)
    record("multi_gpu_parallel", report)
    assert report["verdict"] == "parity" and report["exit_code"] == 0, report["backends"]
    assert report["input"]["multi_gpu"]["replicas"] == 2 and report["findings"][0]["code"] == "K2T451"
    assert "multi_gpu_model" in report["reference"]["from"] and report["ledger"]["complete"]
    assert report["ledger"]["tensors_restored"] == report["input"]["n_weight_tensors"] == 8


def test_yaml_alias_bomb_is_refused(tmp_path):
    lines = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = tmp_path / "model.yaml"
    bomb.write_text("\n".join(lines) + "\nclass_name: Sequential\nconfig: *a8\n")
    assert bomb.stat().st_size < 2000
    with pytest.raises(InputError, match="expands to over"):
        read_config(bomb)
