"""tensorflow-model-optimization QAT models (K2T458-K2T459, K2T945, K2T943): the config upgrade (pure data) and
the fixtures written by tfmot's `quantize_model` (tests/fixtures/make_tfmot_fixtures.py) converted end to end with
tfmot under tf_keras as the reference, inference and training."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES, ROOT

from k2to3.core.options import ConvertOptions as Options
from k2to3.formats.artifact import read_artifact
from k2to3.upgrade import upgrade

TM = FIXTURES / "tfmot"


def _layers(path) -> tuple[dict[str, dict], list]:
    plan = upgrade(read_artifact(path).model_config)
    return {spec["name"]: spec for spec in plan.model["layers"]}, plan.errors


def test_default_8bit_configs_become_quantizer_specs():
    layers, errors = _layers(TM / "tfmot_mobilenet_qat.h5")
    assert not errors
    conv = layers["quant_conv1"]["config"]
    assert layers["quant_conv1"]["registered_name"] == "k2to3>QuantizeWrapperV2"
    assert conv["weight_quantizer"] == {"kind": "last_value", "per_axis": True, "symmetric": True,
                                        "narrow_range": True, "num_bits": 8}
    # the layout transform moved the ReLU out: NoOpActivation, neither applied nor quantized
    assert conv["activation_quantizer"] is None and conv["layer"]["config"]["activation"] == "linear"
    assert "quantize_config" not in conv
    assert layers["quant_pw_bn"]["config"]["output_quantizer"]["kind"] == "moving_average"
    assert layers["quant_conv1_bn"]["config"]["output_quantizer"] is None  # NoOpQuantizeConfig
    assert layers["quant_act"]["config"]["output_quantizer"]["kind"] == "moving_average"  # Activation('relu')
    head = layers["quant_head"]["config"]
    assert head["weight_quantizer"]["per_axis"] is False and head["activation_quantizer"]["kind"] == "moving_average"
    assert head["layer"]["config"]["activation"] == "softmax"
    assert layers["quantize_layer_1"]["config"]["quantizer"]["kind"] == "all_values"
    _, errors = _layers(FIXTURES / "qkeras" / "tfmot_qat.h5")  # the Dense QAT model of the qkeras fixtures
    assert not errors


def _model(layer: dict) -> dict:
    return {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "InputLayer", "config": {"name": "x", "batch_input_shape": [None, 4]}}, layer]}}


def _dense() -> dict:
    return {"class_name": "Dense", "config": {"name": "d", "units": 2, "activation": "linear"}}


@pytest.mark.parametrize(("quantize_config", "words"), [
    ({"class_name": "MyQuantizeConfig", "config": {}}, "MyQuantizeConfig"),
    ({"class_name": "Default8BitQuantizeConfig", "config": {"weight_attrs": ["bias"], "activation_attrs": [],
                                                            "quantize_output": False}}, "['bias']"),
])
def test_unsupported_quantize_config_is_an_error_naming_it(quantize_config, words):
    layer = {"class_name": "QuantizeWrapperV2", "config": {"name": "q", "layer": _dense(),
                                                           "quantize_config": quantize_config}}
    errors = upgrade(_model(layer)).errors
    assert [(e.code, e.layer) for e in errors] == [("K2T945", "q")] and words in errors[0].message


def test_pruning_wrapper_stops_naming_the_class():
    layer = {"class_name": "PruneLowMagnitude", "config": {"name": "p", "layer": _dense()}}
    errors = upgrade(_model(layer)).errors
    assert [(e.code, e.layer) for e in errors] == [("K2T943", "p")]


def test_audit_predicts_portable():
    from k2to3.stores.static import static_verdict

    for name in ("tfmot_mnist_qat", "tfmot_mobilenet_qat"):
        assert static_verdict(TM / f"{name}.h5", {})["verdict"] == "portable", name


def _outputs_at_parity(report: dict) -> None:
    assert report["reference"]["kind"] == "keras2-tf_keras", report["reference"]  # tfmot loaded the file
    assert set(report["backends"]) == {"tensorflow", "torch", "jax"}
    for v in report["backends"].values():
        assert v["status"] == "parity"
        for o in v["outputs"]:
            assert o["allclose"] and o["max_abs"] <= 1e-6 and o["argmax_agreement"] == 100.0


@pytest.mark.slow
def test_tfmot_guide_model_converts_and_trains_as_tfmot(pool, tmp_path):
    """tfmot's QAT guide model: outputs, gradients and two Adam steps (the ranges updated as tfmot updates them:
    last value for the kernels, a moving average for the activations) at parity on every backend."""
    from k2to3.pipeline.convert import convert

    report = convert(Options(src=TM / "tfmot_mnist_qat.h5", output=tmp_path / "m.keras", grads=True, fit_steps=2),
                     pool=pool)
    _outputs_at_parity(report)
    assert report["optimizer"]["status"] == "restored"
    assert {v["status"] for v in report["gradients"]["backends"].values()} == {"parity"}, report["gradients"]
    assert {v["status"] for v in report["training"]["backends"].values()} == {"parity"}, report["training"]
    assert report["verdict"] == "parity" and report["exit_code"] == 0


@pytest.mark.slow
def test_tfmot_mobilenet_block_converts_with_parity(pool, tmp_path):
    """Every default 8-bit QuantizeConfig of a MobileNet block (per-channel kernels, output quantizers on BN and
    Add, Activation layers, NoOp): inference at parity against tfmot on every backend."""
    from k2to3.pipeline.convert import convert

    report = convert(Options(src=TM / "tfmot_mobilenet_qat.h5", output=tmp_path / "m.keras"), pool=pool)
    _outputs_at_parity(report)
    assert report["verdict"] == "parity" and report["exit_code"] == 0


@pytest.mark.slow
def test_fake_quant_is_tensorflows_kernel_bit_for_bit_on_every_backend(tmp_path):
    """k2to3's keras.ops fake quantization against TensorFlow's kernels (FakeQuantWithMinMaxVars and its
    per-channel form) on 1.6M values per case: equal to the bit on tensorflow, torch and jax (compiled). Computed as
    floor(shifted / scale + 0.5) * scale + nudged_min before, it was an ulp off in 71% of values and a whole step off
    in 10 of 2M; per channel on jax, XLA fused the product and the subtraction (5 steps off)."""
    ref = tmp_path / "tf_kernels.npz"
    got = {}
    for backend in ("tensorflow", "torch", "jax"):
        out = tmp_path / f"{backend}.npz"
        env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu"}
        subprocess.run([sys.executable, str(ROOT / "tests" / "fake_quant_probe.py"), str(out), str(ref)], env=env,
                       check=True, timeout=600, capture_output=True)
        got[backend] = np.load(out)
    want = np.load(ref)
    for backend, arrays in got.items():
        for case in want.files:
            differ = int(np.count_nonzero(arrays[case] != want[case]))
            assert differ == 0, (backend, case, differ)
