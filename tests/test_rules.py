"""Every rule is documented, has a test, and fires on its fixture; the config upgrade is pure data."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import H5, manifest

from k2to3.core.rules import keras3_layers, layer_rules
from k2to3.formats.artifact import read_artifact
from k2to3.upgrade import upgrade

RULES = layer_rules()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    for field in ("code", "title", "what", "why", "before", "after", "fix", "safety"):
        assert getattr(rule, field), f"{rule.code} has no {field}"


FIXTURE_RULES = [r for r in RULES if r.fixture]


@pytest.mark.parametrize("rule", FIXTURE_RULES, ids=lambda r: r.code)
def test_rule_fires_on_its_fixture(rule):
    names = {m["name"] for m in manifest()}
    assert rule.fixture in names, f"{rule.code}: fixture {rule.fixture} missing from manifest"
    a = read_artifact(H5 / f"{rule.fixture}.h5")
    plan = upgrade(a.model_config, a.training_config)
    assert rule.code in {f.code for f in plan.findings}
    assert not plan.errors, [f.line() for f in plan.errors]


def _seq(layer: dict) -> dict:
    return {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 4], "dtype": "float32",
                                                "name": "in"}}, layer]}}


def _layer(plan):
    return plan.model["layers"][1]


def test_batchnorm_v1_is_renamed():
    plan = upgrade(_seq({"class_name": "BatchNormalizationV1", "config": {"name": "bn", "axis": [1]}}))
    assert _layer(plan)["class_name"] == "BatchNormalization" and _layer(plan)["config"]["axis"] == 1
    assert "K2T408" in {f.code for f in plan.findings}


def test_sync_batchnorm_becomes_synchronized():
    plan = upgrade(_seq({"class_name": "SyncBatchNormalization", "config": {"name": "bn"}}))
    assert _layer(plan)["class_name"] == "BatchNormalization" and _layer(plan)["config"]["synchronized"] is True


def test_softmax_v2_identifier():
    plan = upgrade(_seq({"class_name": "Dense", "config": {"name": "d", "units": 2, "activation": "softmax_v2"}}))
    assert _layer(plan)["config"]["activation"] == "softmax" and "K2T413" in {f.code for f in plan.findings}


def test_lambda_activation_is_an_error_with_a_fix():
    plan = upgrade(_seq({"class_name": "Dense", "config": {"name": "d", "units": 2, "activation": "<lambda>"}}))
    (err,) = plan.errors
    assert err.code == "K2T903" and err.layer == "d" and "--src" in (err.fix or "")


def test_shape_keys_removed_from_non_input_layers():
    plan = upgrade(_seq({"class_name": "Dense", "config": {"name": "d", "units": 2,
                                                          "batch_input_shape": [None, 4]}}))
    assert "batch_input_shape" not in _layer(plan)["config"]


def test_lambda_bytecode_is_never_loaded():
    layer = {"class_name": "Lambda", "config": {"name": "lam", "function": ["4wEAAAAA", None, None],
                                                "function_type": "lambda"}}
    plan = upgrade(_seq(layer))
    assert [f.code for f in plan.errors] == ["K2T901"]


def test_initializer_stored_as_lambda_gets_the_default():
    """K2T491: Keras 1's init=lambda shape, name: normal(...) is saved as "<lambda>" (yanpanlau/DDPG-Keras-Torcs)."""
    plan = upgrade(_seq({"class_name": "Dense", "config": {"name": "d", "units": 2, "kernel_initializer": "<lambda>",
                                                          "bias_initializer": "my_init"}}))
    cfg = _layer(plan)["config"]
    assert cfg["kernel_initializer"] == "glorot_uniform" and cfg["bias_initializer"] == "zeros"
    assert [f.code for f in plan.findings if f.severity == "warning"] == ["K2T491", "K2T491"]
    assert not plan.errors


def test_gru_without_reset_after_keeps_the_old_formula():
    """K2T492: standalone Keras 2.0-2.1.2 wrote no reset_after (Baiguo0016/ArtificialNeuralNets2018's GRU)."""
    old = upgrade(_seq({"class_name": "GRU", "config": {"name": "g", "units": 3}}))
    new = upgrade(_seq({"class_name": "GRU", "config": {"name": "g", "units": 3, "reset_after": True}}))
    assert _layer(old)["config"]["reset_after"] is False and "K2T492" in {f.code for f in old.findings}
    assert _layer(new)["config"]["reset_after"] is True and "K2T492" not in {f.code for f in new.findings}


def test_keras1_l1l2_regularizer_object():
    """Keras 1.2's l1l2() wrote {"name": "L1L2Regularizer", ...} (ncondo/CarND-Behavioral-Cloning's model.json)."""
    from k2to3.upgrade.keras1.translate import _regularizer

    assert _regularizer({"name": "L1L2Regularizer", "l1": 0.0, "l2": 0.001}) == {
        "class_name": "L1L2", "config": {"l1": 0.0, "l2": 0.001}}


def test_unknown_class_is_an_error():
    plan = upgrade(_seq({"class_name": "MyLayer", "config": {"name": "m"}}))
    assert [f.code for f in plan.errors] == ["K2T902"]


def test_time_major_true_is_refused():
    plan = upgrade(_seq({"class_name": "LSTM", "config": {"name": "l", "units": 2, "time_major": True}}))
    assert [f.code for f in plan.errors] == ["K2T401"]


def test_groups_above_one_is_refused():
    plan = upgrade(_seq({"class_name": "Conv2DTranspose", "config": {"name": "c", "filters": 4, "groups": 2}}))
    assert [f.code for f in plan.errors] == ["K2T402"]


def test_tf_op_layers_are_marked():
    layer = {"class_name": "TFOpLambda", "config": {"name": "tf.math.reduce_mean", "function": "math.reduce_mean"}}
    plan = upgrade(_seq(layer))
    assert _layer(plan)["op"] == "math.reduce_mean"


def test_training_config_translation():
    tc = {"loss": "mse", "metrics": ["mae"], "optimizer_config": {"class_name": "Adam", "config": {
        "lr": 0.01, "decay": 0.1, "jit_compile": True, "is_legacy_optimizer": False}}}
    plan = upgrade(_seq({"class_name": "Dense", "config": {"name": "d", "units": 1}}), tc)
    c = plan.compile
    assert c["loss"] == "mean_squared_error" and c["metrics"] == ["mean_absolute_error"]
    # Keras 2 decay is kept as the exact Keras 3 schedule (rules/optimizers.toml K2T603), no longer dropped
    assert c["optimizer"]["config"]["learning_rate"]["class_name"] == "InverseTimeDecay"
    assert c["optimizer"]["config"]["learning_rate"]["config"]["decay_rate"] == 0.1
    assert any("decay" in f.message for f in plan.findings)


def test_keras3_layer_list_matches_installed_keras():
    code = ("import keras, inspect, json; print(json.dumps(sorted(n for n in dir(keras.layers) if "
            "inspect.isclass(getattr(keras.layers, n)) and issubclass(getattr(keras.layers, n), keras.layers.Layer))))")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert set(json.loads(out.stdout.strip().splitlines()[-1])) == set(keras3_layers())


def test_rules_doc_is_current():
    from conftest import ROOT

    from k2to3.interfaces.docgen.rules import render

    assert (ROOT / "docs" / "rules.md").read_text() == render(), \
        "run: python -m k2to3.interfaces.docgen.rules > docs/rules.md"
