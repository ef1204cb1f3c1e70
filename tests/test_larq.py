"""larq (K2T455-K2T457, K2T946, K2T942): the config upgrade (pure data) and the fixtures written by larq itself
(tests/fixtures/make_larq_fixtures.py) converted end to end with larq under tf_keras as the reference: every
built-in quantizer, `pad_values`, the weight_clip constraint, and a trained model's gradients and training step."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT

from k2to3.core.options import ConvertOptions as Options
from k2to3.formats.artifact import read_artifact
from k2to3.upgrade import upgrade

LQ = FIXTURES / "larq"


def _layers(name: str) -> tuple[dict[str, dict], list]:
    plan = upgrade(read_artifact(LQ / f"{name}.h5").model_config)
    return {spec["name"]: spec for spec in plan.model["layers"]}, plan.errors


def test_larq_layers_become_portable_with_their_quantizers():
    layers, errors = _layers("larq_zoo_blocks")
    assert not errors
    bireal = layers["bireal"]
    assert bireal["registered_name"] == "k2to3>QuantConv2D"
    assert bireal["config"]["input_quantizer"] == {"quantizer": "approx_sign", "config": {}}
    assert bireal["config"]["kernel_quantizer"] == {"quantizer": "magnitude_aware_sign", "config": {"clip_value": 1.0}}
    assert bireal["config"]["kernel_constraint"]["registered_name"] == "k2to3>QClip"
    assert bireal["config"]["kernel_constraint"]["config"] == {"min_value": -1.3, "max_value": 1.3}
    assert bireal["config"]["pad_values"] == 1.0
    dw = layers["depthwise"]["config"]
    assert layers["depthwise"]["registered_name"] == "k2to3>QuantDepthwiseConv2D"
    assert dw["input_quantizer"] == {"quantizer": "swish_sign", "config": {"beta": 3.0}}
    assert dw["depthwise_quantizer"]["quantizer"] == "ste_tern" and dw["pad_values"] == -1.0
    assert layers["dorefa"]["config"]["kernel_quantizer"] == {"quantizer": "dorefa_quantizer",
                                                              "config": {"k_bit": 3, "mode": "weights"}}
    assert layers["noop"]["config"]["kernel_quantizer"] == {"quantizer": "no_op", "config": {}}
    mnist, errors = _layers("larq_mnist_bnn")
    assert not errors
    first = next(s for s in mnist.values() if s.get("registered_name") == "k2to3>QuantConv2D")
    assert first["config"]["input_quantizer"] is None  # the guide's first layer quantizes only its kernel


def _model(layer: dict) -> dict:
    return {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "InputLayer", "config": {"name": "x", "batch_input_shape": [None, 8, 8, 1]}}, layer]}}


def test_unknown_larq_quantizer_is_an_error_naming_it():
    layer = {"class_name": "QuantConv2D", "module": "larq.layers", "config": {
        "name": "qc", "filters": 4, "kernel_size": [3, 3], "kernel_quantizer": "ste_sign",
        "input_quantizer": {"class_name": "MyTeamSign", "config": {}}}}
    errors = upgrade(_model(layer)).errors
    assert [(e.code, e.layer) for e in errors] == [("K2T946", "qc")]
    assert "input_quantizer" in errors[0].message and "MyTeamSign" in errors[0].message


def test_unported_larq_layer_stops_naming_the_class():
    layer = {"class_name": "QuantSeparableConv2D", "config": {
        "name": "qs", "filters": 4, "kernel_size": [3, 3], "input_quantizer": "ste_sign",
        "depthwise_quantizer": "ste_sign", "pointwise_quantizer": "ste_sign"}}
    errors = upgrade(_model(layer)).errors
    assert [(e.code, e.layer) for e in errors] == [("K2T942", "qs")]


def test_a_teams_own_quantdense_is_not_taken_for_larqs():
    """Without larq's input_quantizer key the class is someone else's: left to --src (K2T902)."""
    layer = {"class_name": "QuantDense", "config": {"name": "q", "units": 4}}
    errors = upgrade(_model(layer)).errors
    assert [e.code for e in errors] == ["K2T902"]


def test_audit_predicts_portable():
    from k2to3.stores.static import static_verdict

    for name in ("larq_mnist_bnn", "larq_zoo_blocks", "larq_conv1d"):
        assert static_verdict(LQ / f"{name}.h5", {})["verdict"] == "portable", name


@pytest.fixture(scope="module")
def converted(pool, tmp_path_factory):
    """Each fixture converted once. The guide's model is compiled and trained: one Adam step through the
    straight-through gradients, from the file's slots. Not --grads: 23% of its second max-pool's windows hold
    ties (a binary convolution's outputs are integers), and the backends route a tied max's gradient to
    different elements (docs/convert.md#larq)."""
    from k2to3.pipeline.convert import convert

    out = tmp_path_factory.mktemp("larq")
    done = {}
    for name in ("larq_mnist_bnn", "larq_zoo_blocks", "larq_conv1d"):
        fit = name == "larq_mnist_bnn"
        done[name] = (convert(Options(src=LQ / f"{name}.h5", output=out / f"{name}.keras", fit_steps=int(fit)),
                              pool=pool), out / f"{name}.keras")
    return done


@pytest.mark.slow
@pytest.mark.parametrize("name", ["larq_mnist_bnn", "larq_zoo_blocks", "larq_conv1d"])
def test_larq_fixture_converts_with_parity_against_larq(name, converted):
    report = converted[name][0]
    assert report["reference"]["kind"] == "keras2-tf_keras", report["reference"]  # larq loaded the file
    if name == "larq_mnist_bnn":
        assert report["optimizer"]["status"] == "restored"
        assert {v["status"] for v in report["training"]["backends"].values()} == {"parity"}, report["training"]
    assert report["verdict"] == "parity" and report["exit_code"] == 0, report["verdict"]
    assert set(report["backends"]) == {"tensorflow", "torch", "jax"}
    for v in report["backends"].values():
        for o in v["outputs"]:
            assert o["allclose"] and o["max_abs"] <= 1e-5 and o["argmax_agreement"] == 100.0


@pytest.mark.slow
def test_converted_bnn_really_binarizes(converted):
    """Parity against larq means something only if the quantizers act: the first QuantDense sees only +-1 inputs
    and its kernel is used as +-1, so the same weights without quantizers give other outputs."""
    out = converted["larq_mnist_bnn"][1]
    code = ("import sys, json, numpy as np, keras, k2to3.portable\n"
            "from k2to3.portable.larq import quantize\n"
            "m = keras.saving.load_model(sys.argv[1])\n"
            "x = np.random.default_rng(0).normal(size=(4, 28, 28, 1)).astype('float32')\n"
            "dense = next(l for l in m.layers if type(l).__name__ == 'QuantDense')\n"
            "into = keras.Model(m.inputs, dense.input)(x)\n"
            "seen = keras.ops.convert_to_numpy(quantize(into, dense.input_quantizer))\n"
            "q = keras.ops.convert_to_numpy(m(x))\n"
            "for layer in m.layers:\n"
            "    for k in ('input_quantizer', 'kernel_quantizer'):\n"
            "        if getattr(layer, k, None): setattr(layer, k, None)\n"
            "f = keras.ops.convert_to_numpy(m(x))\n"
            "print(json.dumps({'values': sorted(set(seen.ravel().tolist())), 'diff': float(np.abs(q - f).max())}))\n")
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["values"] == [-1.0, 1.0] and got["diff"] > 1e-2
