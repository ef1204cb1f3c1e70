"""Keras 1 wrappers with Keras 1 keys of their own, and Keras 1 channels_first merges (the issue "The next real
artifacts", classes 1 and 2; rule K2T488; workers/nhwc.py).

Fixtures: tests/fixtures/make_keras1_real_fixtures.py, which names the real public files they reproduce:
h5/keras1_bidirectional_input.h5 (deeplearning4j's Keras 1.2.2 bidirectional_lstm_tensorflow_1.h5, plus a
consume_less="gpu" Bidirectional) and longtail/keras1_pairs/unet_th/model.json (the Keras 1.0 th U-Net of
jocicmarko/ultrasound-nerve-segmentation @51dc5a1, filters / 8; weights seeded here).
References: tf_keras on the Keras 2 translation (the golden of `convert`, its th layers run transposed on a CPU),
and for the U-Net also a channels_last tf_keras twin loaded from the weights file by the fixture script's own
code, outside k2to3."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES, H5, ROOT, record
from test_convert import check_parity

from k2to3.core.options import ConvertOptions as Options
from k2to3.formats.artifact import read_artifact
from k2to3.formats.pairs import read_config
from k2to3.pipeline.convert import convert
from k2to3.upgrade import upgrade
from k2to3.upgrade.keras1.translate import to_keras2

sys.path.insert(0, str(FIXTURES))
UNET = FIXTURES / "longtail" / "keras1_pairs" / "unet_th" / "model.json"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(FIXTURES)]), "CUDA_VISIBLE_DEVICES": "",
       "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}


def _by_name(cfg: dict) -> dict:
    inner = cfg["config"]
    return {x["config"]["name"]: x for x in (inner if isinstance(inner, list) else inner["layers"])}


def test_wrapper_keeps_its_shape_and_drops_keras1_input_dtype():
    a = read_artifact(H5 / "keras1_bidirectional_input.h5")
    assert a.keras_version == "1.2.2"
    lay = _by_name(to_keras2(a.model_config))
    bi = lay["bidirectional_1"]["config"]
    assert "input_dtype" not in bi and bi["batch_input_shape"] == [None, 4, 10] and bi["merge_mode"] == "concat"
    lstm = bi["layer"]["config"]
    assert lstm["units"] == 10 and lstm["recurrent_activation"] == "hard_sigmoid" and "consume_less" not in lstm
    assert lay["bidirectional_2"]["config"]["layer"]["config"]["units"] == 3
    assert not upgrade(a.model_config).errors


def test_timedistributed_first_layer_drops_keras1_input_dtype():
    """Keras 1's TimeDistributed(Dense(8), input_shape=(10, 16)) (the Keras 1.2.2 wrappers.py docstring example)."""
    dense = {"class_name": "Dense", "config": {"name": "dense_1", "trainable": True, "output_dim": 8,
                                               "init": "glorot_uniform", "activation": "linear", "bias": True,
                                               "input_dim": None}}
    model = {"class_name": "Sequential", "config": [{"class_name": "TimeDistributed", "config": {
        "name": "timedistributed_1", "trainable": True, "batch_input_shape": [None, 10, 16],
        "input_dtype": "float32", "layer": dense}}]}
    td = _by_name(to_keras2(model))["timedistributed_1"]["config"]
    assert "input_dtype" not in td and td["batch_input_shape"] == [None, 10, 16]
    assert td["layer"]["config"]["units"] == 8 and not upgrade(model).errors


def _ordering_plan(layers: list[dict]):
    return upgrade({"class_name": "Sequential", "config": layers})


def test_unet_upsampling_takes_the_files_th_ordering():
    cfg, version, _ = read_config(UNET)
    assert version is None  # a Keras 1.0 to_json wrote no keras_version
    plan = upgrade(cfg)
    assert not plan.errors
    k488 = [f for f in plan.findings if f.code == "K2T488"]
    assert sorted(f.layer for f in k488) == [f"upsampling2d_{i}" for i in range(1, 5)]
    assert {f.severity for f in k488} == {"info"}
    lay = _by_name(to_keras2(cfg))
    assert lay["upsampling2d_1"]["config"]["data_format"] == "channels_first"
    assert lay["merge_1"]["class_name"] == "Concatenate" and lay["merge_1"]["config"]["axis"] == 1
    assert lay["maxpooling2d_1"]["config"]["data_format"] == "channels_first"


@pytest.mark.parametrize("stated,why", [((), "state none"), (("th", "tf"), "state both")])
def test_unsaid_ordering_without_one_answer_warns(stated, why):
    layers = [{"class_name": "ZeroPadding2D", "config": {"name": "zp", "padding": [1, 1],
                                                         "batch_input_shape": [None, 3, 8, 8]}}]
    layers += [{"class_name": "MaxPooling2D", "config": {"name": f"p{i}", "pool_size": [2, 2], "dim_ordering": o,
                                                         "border_mode": "valid"}} for i, o in enumerate(stated)]
    layers += [{"class_name": "Flatten", "config": {"name": "f"}},
               {"class_name": "Dense", "config": {"name": "d", "output_dim": 2}}]  # Keras 1 keys: a Keras 1 file
    f = next(f for f in _ordering_plan(layers).findings if f.code == "K2T488")
    assert f.severity == "warning" and f.layer == "zp" and why in f.message and f.fix


@pytest.mark.slow
def test_keras1_bidirectional_input_converts_with_parity(pool, tmp_path):
    report = convert(Options(src=H5 / "keras1_bidirectional_input.h5", output=tmp_path / "m.keras"), pool=pool)
    record("keras1_bidirectional_input", report)
    check_parity(report)
    assert report["reference"]["kind"] == "keras2-tf_keras"
    reshaped = report["ledger"]["reshaped"]  # per gate (consume_less cpu) -> 3 per direction; gpu: as saved
    assert any(r.startswith("bidirectional_1: 24 Keras 1 tensors") for r in reshaped), reshaped
    assert not any(r.startswith("bidirectional_2") for r in reshaped), reshaped


_KERAS3 = ("import sys, json, numpy as np, keras; m = keras.saving.load_model(sys.argv[1]); "
           "print(json.dumps(keras.ops.convert_to_numpy(m(np.load(sys.argv[2])['in0'])).tolist()))")
_TWIN = ("import sys, json, numpy as np; from pathlib import Path; import make_keras1_real_fixtures as m; "
         "print(json.dumps(m.unet_reference(Path(sys.argv[1]), np.load(sys.argv[2])['in0']).tolist()))")


def _run(code: str, backend: str, *args: str) -> np.ndarray:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                         env={**ENV, "KERAS_BACKEND": backend})
    assert out.returncode == 0, out.stderr[-2000:]
    return np.array(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_keras1_th_unet_pair(pool, tmp_path):
    """The U-Net pair: parity on torch and jax against the tf_keras golden; tensorflow (no GPU here) is
    `not_runnable` with one line, and the verdict is torch's and jax's (exit 0); the converted model on jax equals
    the channels_last twin's output."""
    from make_keras1_real_fixtures import UNET_SHAPE, write_unet_weights

    weights = tmp_path / "unet.hdf5"
    write_unet_weights(weights)
    x = np.random.default_rng(6).normal(size=(2, *UNET_SHAPE)).astype("float32")
    np.savez(tmp_path / "x.npz", in0=x)
    out = tmp_path / "unet.keras"
    report = convert(Options(src=weights, config=UNET, output=out, inputs=tmp_path / "x.npz"), pool=pool)
    record("keras1_th_unet", report)
    assert report["reference"]["kind"] == "keras2-tf_keras" and report["ledger"]["complete"]
    backends = report["backends"]
    assert {b: backends[b]["status"] for b in ("torch", "jax")} == {"torch": "parity", "jax": "parity"}
    assert backends["tensorflow"]["status"] == "not_runnable"  # docs/exit-codes.md: not a k2to3 bug (exit 4)
    assert backends["tensorflow"]["reason"].startswith("layer 'convolution2d_1': Keras 3 on TensorFlow has no CPU "
                                                       "kernel for a channels_first Conv2D"), backends["tensorflow"]
    assert report["verdict"] == "parity" and report["exit_code"] == 0
    got = _run(_KERAS3, "jax", str(out), str(tmp_path / "x.npz"))
    want = _run(_TWIN, "tensorflow", str(weights), str(tmp_path / "x.npz"))
    err = float(np.abs(got - want).max())
    assert got.shape == (2, 1, 64, 80) and err < 1e-5, err
    print(f"th U-Net on jax vs the channels_last tf_keras twin: {err:.2e}")


def test_th_merge_axes_are_kept_as_written():
    """Keras 1 concat_axis / dot_axes are absolute indices (batch = 0), the convention of Keras 2/3's
    Concatenate(axis) and Dot(axes): a "th" model keeps them, -1 included; the elementwise modes have no axis. A dot
    of these rank-4 inputs stops (K2T909): Keras 1 on TensorFlow multiplied their last two axes as matrices, on
    Theano it took a batched tensordot over axis 1 (test_keras1_dot.py)."""
    def _merge1(name: str, mode: str, *inputs: str, **extra) -> dict:  # Keras 1.2.2 Merge.get_config
        return {"name": name, "class_name": "Merge", "inbound_nodes": [[[n, 0, 0] for n in inputs]], "config": {
            "name": name, "mode": mode, "mode_type": "raw", "concat_axis": -1, "dot_axes": -1, "output_shape": None,
            "output_shape_type": "raw", **extra}}

    conv = {"name": "c", "class_name": "Convolution2D", "inbound_nodes": [[["x", 0, 0]]], "config": {
        "name": "c", "nb_filter": 2, "nb_row": 3, "nb_col": 3, "border_mode": "same", "dim_ordering": "th"}}
    merges = [_merge1("m_sum", "sum", "x", "c"), _merge1("m_mul", "mul", "x", "c"), _merge1("m_ave", "ave", "x", "c"),
              _merge1("m_max", "max", "x", "c"), _merge1("m_cat1", "concat", "x", "c", concat_axis=1),
              _merge1("m_catl", "concat", "x", "c"), _merge1("m_dot", "dot", "x", "c", dot_axes=[1, 1])]
    model = {"class_name": "Model", "config": {"name": "m", "layers": [
        {"name": "x", "class_name": "InputLayer", "inbound_nodes": [], "config": {
            "name": "x", "batch_input_shape": [None, 2, 8, 8], "input_dtype": "float32"}}, conv, *merges],
        "input_layers": [["x", 0, 0]], "output_layers": [[m["name"], 0, 0] for m in merges]}}
    lay = _by_name(to_keras2(model))
    assert {n: lay[n]["class_name"] for n in lay if n.startswith("m_")} == {
        "m_sum": "Add", "m_mul": "Multiply", "m_ave": "Average", "m_max": "Maximum", "m_cat1": "Concatenate",
        "m_catl": "Concatenate", "m_dot": "Merge"}
    assert lay["m_cat1"]["config"]["axis"] == 1 and lay["m_catl"]["config"]["axis"] == -1
    assert lay["c"]["config"]["data_format"] == "channels_first"
    errors = upgrade(model).errors
    assert errors[0].code == "K2T909" and errors[0].layer == "m_dot" and {e.layer for e in errors} == {"m_dot"}
