"""Two real layouts that stopped k2to3 (tests/fixtures/make_graph_fixtures.py names the public files they
reproduce): a layer called at several depths (DeepFM: its third call reads a tensor computed from its first
output), refused as a cycle when validation walked layers instead of calls, and Bidirectional(ConvLSTM2D) whose
forward half reads backwards, which Keras 3 refuses (K2T435). Each converts with parity on tensorflow, torch and
jax against tf_keras; a true cycle of calls is still refused (exit 2, docs/exit-codes.md)."""

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
from conftest import FIXTURES
from test_cli import k2to3, one_error_line

import k2to3.pipeline.prepare as prepare_mod
from k2to3.core.options import ConvertOptions as Options
from k2to3.core.validate import problems
from k2to3.formats.artifact import read_artifact
from k2to3.pipeline.convert import convert
from k2to3.upgrade import upgrade

GRAPH = FIXTURES / "graph"
DEEPFM_SRC = FIXTURES / "src" / "deepfm_model.py"


def _config(name: str) -> dict:
    with h5py.File(GRAPH / name, "r") as f:
        return json.loads(f.attrs["model_config"])


def _layer(config: dict, name: str) -> dict:
    return next(x for x in config["config"]["layers"] if x["name"] == name)


def _inputs(name: str, tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    with np.load(GRAPH / f"{name}.expected.npz") as z:
        ins = {k: z[k] for k in z.files if k.startswith("in")}
        outs = [z[f"out{i}"] for i in range(sum(k.startswith("out") for k in z.files))]
    path = tmp_path / "inputs.npz"
    np.savez(path, **ins)
    return path, outs


def _parity(report: dict) -> None:
    assert report["verdict"] == "parity", json.dumps(report["backends"], indent=1)[:3000]
    assert report["reference"]["kind"] == "keras2-tf_keras"
    assert report["weight_hashes_agree"] and report["ledger"]["complete"]
    assert report["ledger"]["tensors_restored"] == report["ledger"]["tensors_expected"]
    assert {b: v["status"] for b, v in report["backends"].items()} == dict.fromkeys(
        ("tensorflow", "torch", "jax"), "parity")


def _cycle_file(tmp_path: Path) -> Path:
    """shared_depths.h5 with fm_proj's first call reading pairwise, which is computed from that call: a true
    cycle of calls (fm_proj[0] -> pairwise[0] -> square_of_proj[0] -> fm_proj[0])."""
    out = tmp_path / "call_cycle.h5"
    shutil.copy(GRAPH / "shared_depths.h5", out)
    with h5py.File(out, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        _layer(config, "fm_proj")["inbound_nodes"][0] = [["pairwise", 0, 0, {}]]
        f.attrs["model_config"] = json.dumps(config)
    return out


def test_validation_walks_calls_not_layers(tmp_path):
    config = _config("shared_depths.h5")
    nodes = [[ref[:2] for ref in node] for node in _layer(config, "fm_proj")["inbound_nodes"]]
    assert nodes == [[["embed", 0]], [["square", 0]], [["pairwise", 0]]]  # the layout: 3rd call after the 1st
    assert problems(config) == []
    assert problems(_config("shared_depths_lambda.h5")) == []
    with h5py.File(_cycle_file(tmp_path), "r") as f:
        (line,) = problems(json.loads(f.attrs["model_config"]))
    assert "cycle" in line and "fm_proj[0]" in line and "pairwise[0]" in line


def test_a_true_cycle_of_calls_is_refused_with_exit_2(tmp_path):
    src = _cycle_file(tmp_path)
    out = tmp_path / "out" / "m.keras"
    out.parent.mkdir()
    r = k2to3("convert", str(src), "-o", str(out))
    line = one_error_line(r)
    assert r.returncode == 2, r.stderr
    assert str(src) in line and "graph of layer calls has a cycle" in line
    assert not list(out.parent.iterdir())  # nothing written


def test_lambda_without_source_stops_with_k2t901(tmp_path):
    r = k2to3("convert", str(GRAPH / "shared_depths_lambda.h5"), "-o", str(tmp_path / "m.keras"))
    assert r.returncode == 3, r.stderr
    assert "K2T901" in one_error_line(r) and "sum_fields" in r.stderr
    assert not (tmp_path / "m.keras").exists()


def test_backward_layer_rule_on_the_tf22_layout():
    """K2T435 writes the backward half of a go_backwards=True forward layer; the explicit backward_layer of
    tf.keras 2.2 ({class_name, config}, no module) is upgraded like the forward one (K2T421)."""
    a = read_artifact(GRAPH / "bidirectional.h5")
    assert a.keras_version == "2.3.0-tf"
    plan = upgrade(a.model_config, a.training_config)
    assert not plan.errors, [f.line() for f in plan.errors]
    layers = {s["name"]: s["config"] for s in plan.model["layers"]}
    back = layers["bi_convlstm"]["backward_layer"]
    assert back["class_name"] == "ConvLSTM2D" and back["module"] == "keras.layers"
    assert back["config"]["go_backwards"] is False and back["config"]["name"] == "backward_convlstm"
    assert layers["bi_convlstm"]["layer"]["config"]["go_backwards"] is True
    assert "backward_layer" not in layers["bi_convlstm_2"]  # Keras 3 builds that one as Keras 2 did
    explicit = layers["bi_lstm_gru"]["backward_layer"]
    assert explicit["class_name"] == "GRU" and explicit["module"] == "keras.layers"
    assert {(f.code, f.layer) for f in plan.findings} >= {("K2T435", "bi_convlstm"), ("K2T421", "bi_lstm_gru")}


@pytest.mark.parametrize("edit,expect", [
    ("missing", "backward_layer without go_backwards: set to True"),
    ("same", "both have go_backwards=False"),
])
def test_backward_layer_direction_is_checked(edit, expect):
    a = read_artifact(GRAPH / "bidirectional.h5")
    cfg = _layer(a.model_config, "bi_lstm_gru")["config"]
    if edit == "missing":
        cfg["backward_layer"]["config"].pop("go_backwards")
    else:
        cfg["backward_layer"]["config"]["go_backwards"] = False
    plan = upgrade(a.model_config, a.training_config)
    found = [f for f in plan.findings if f.code == "K2T435" and f.layer == "bi_lstm_gru"]
    assert len(found) == 1 and expect in found[0].message
    assert (found[0].severity == "error") == (edit == "same")


CASES = [("shared_depths", ()), ("shared_depths_lambda", (str(DEEPFM_SRC),)), ("bidirectional", ())]


@pytest.mark.slow
@pytest.mark.parametrize("name,src", CASES, ids=[c[0] for c in CASES])
def test_converts_with_parity_on_every_backend(name, src, pool, tmp_path):
    """Parity against tf_keras on tensorflow, torch and jax, and against the Keras 2 model as it was built
    (its live outputs, saved before the h5)."""
    inputs, live = _inputs(name, tmp_path)
    out = tmp_path / "m.keras"
    report = convert(Options(src=GRAPH / f"{name}.h5", output=out, inputs=inputs, sources=src), pool=pool)
    _parity(report)
    assert report["exit_code"] == 0 and out.exists()
    if name == "bidirectional":
        assert "K2T435" in {f["code"] for f in report["findings"]}
    code = ("import sys, numpy as np, keras\nsys.path.insert(0, sys.argv[1])\n"
            "try:\n    import m_k3\nexcept ImportError:\n    import k2to3.portable\n"
            "m = keras.saving.load_model(sys.argv[2], safe_mode=True)\n"
            "z = np.load(sys.argv[3]); xs = [z[f'in{i}'] for i in range(len(z.files))]\n"
            "y = m.predict(xs[0] if len(xs) == 1 else xs, verbose=0)\n"
            "np.savez(sys.argv[4], *[np.asarray(v) for v in (y if isinstance(y, list) else [y])])\n")
    res = tmp_path / "saved.npz"
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(out), str(inputs), str(res)],
                       capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"})
    assert r.returncode == 0, r.stderr[-2000:]
    with np.load(res) as z:
        for i, expected in enumerate(live):
            np.testing.assert_allclose(z[f"arr_{i}"], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_first_divergent_layer_walks_the_calls_of_a_shared_layer(pool, tmp_path, monkeypatch):
    """A conversion bug after fm_proj's first call (square_of_proj computed as an Add): the probe has one
    entry per call (fm_proj, fm_proj@1, fm_proj@2) in a topological order of calls, so the first divergent
    layer is square_of_proj, fm_proj@1 (on the squares, before the bug) agrees and fm_proj@2 (after) does not."""
    real = prepare_mod.upgrade

    def wrong_op(*args, **kwargs):
        plan = real(*args, **kwargs)
        for s in plan.model["layers"]:
            if s["name"] == "square_of_proj":
                s["class_name"] = "Add"
        return plan

    monkeypatch.setattr(prepare_mod, "upgrade", wrong_op)
    inputs, _ = _inputs("shared_depths", tmp_path)
    report = convert(Options(src=GRAPH / "shared_depths.h5", output=tmp_path / "m.keras", inputs=inputs),
                     pool=pool)
    assert report["verdict"] == "mismatch"
    for b in ("tensorflow", "torch", "jax"):
        v = report["backends"][b]
        assert v["first_divergent_layer"]["layer"] == "square_of_proj", v["first_divergent_layer"]
        rows = {row["layer"]: row for row in v["layer_errors"]}
        order = [row["layer"] for row in v["layer_errors"]]
        assert rows["fm_proj"]["allclose"] and rows["fm_proj@1"]["allclose"] and not rows["fm_proj@2"]["allclose"]
        assert order.index("fm_proj") < order.index("square_of_proj") < order.index("pairwise") < order.index(
            "fm_proj@2")


def test_probe_names_of_calls_map_to_the_reference_names():
    """`name@k#i` of a renamed layer (K2T432: 'Conv4.1' -> 'Conv4_1') reads the reference's `Conv4.1@k#i`."""
    from k2to3.core.compare import first_divergent_layer

    a, b = np.zeros(3, "float32"), np.ones(3, "float32")
    got = {"Conv4_1": a, "Conv4_1@1": a, "Conv4_1@1#1": b, "x@y": a}
    ref = {"Conv4.1": a, "Conv4.1@1": a, "Conv4.1@1#1": a, "x@y": a}
    first, rows = first_divergent_layer(list(got), got, ref, {"Conv4_1": "Conv4.1"}, 1e-5, 1e-6)
    assert [r["reference_layer"] for r in rows] == ["Conv4.1", "Conv4.1@1", "Conv4.1@1#1", "x@y"]
    assert first["layer"] == "Conv4_1@1#1"
