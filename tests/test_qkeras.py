"""QKeras (K2T440-K2T445, K2T940, K2T944) and the quantized layers k2to3 stops on (K2T941): the config upgrade
(pure data), k2to3.portable.qkeras's quantizers against qkeras itself element by element on every backend, and
the fixtures written by qkeras / tensorflow-model-optimization (tests/fixtures/make_qkeras_fixtures.py)
converted end to end with qkeras under tf_keras as the reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES, ROOT

from k2to3.core.options import ConvertOptions as Options
from k2to3.formats.artifact import read_artifact
from k2to3.upgrade import upgrade
from k2to3.upgrade.qkeras import parse

QK = FIXTURES / "qkeras"


def _plan(name: str):
    return upgrade(read_artifact(QK / f"{name}.h5").model_config)


def _layers(plan) -> dict[str, dict]:
    return {spec["name"]: spec for spec in plan.model["layers"]}


def test_jet_tagger_layers_become_portable_with_their_quantizers():
    plan = _plan("qkeras_jet_tagger")
    assert not plan.errors and plan.needs_portable
    layers = _layers(plan)
    fc1, relu1 = layers["fc1"], layers["relu1"]
    assert fc1["registered_name"] == "k2to3>QDense" and relu1["registered_name"] == "k2to3>QActivation"
    assert fc1["config"]["kernel_quantizer"] == {"quantizer": "quantized_bits", "config": {
        "bits": 6, "integer": 0, "symmetric": 0, "alpha": 1, "keep_negative": True, "use_stochastic_rounding": False,
        "qnoise_factor": 1.0}}
    assert fc1["config"]["kernel_initializer"]["class_name"] == "LecunUniform"  # QInitializer unwrapped
    assert fc1["config"]["kernel_constraint"]["registered_name"] == "k2to3>QClip"
    assert relu1["config"]["quantizer"]["quantizer"] == "quantized_relu" and relu1["config"]["activation"] is None
    assert {f.code for f in plan.findings} >= {"K2T440", "K2T442"}


def test_cnn_string_quantizer_and_quantizer_activation():
    layers = _layers(_plan("qkeras_cnn"))
    assert layers["relu_str"]["config"]["quantizer"] == {"quantizer": "quantized_relu",
                                                         "config": {"bits": 4, "integer": 2}}
    dense = layers["dense_binary"]["config"]
    assert dense["activation"] == "linear" and dense["activation_quantizer"]["quantizer"] == "quantized_relu"
    assert dense["kernel_quantizer"]["quantizer"] == "binary"
    bn = layers["qbatchnorm"]
    assert bn["registered_name"] == "k2to3>QBatchNormalization" and "beta_range" not in bn["config"]
    assert layers["qconv_po2"]["config"]["kernel_quantizer"]["config"]["alpha"] == "auto_po2"


@pytest.mark.parametrize(("text", "want"), [
    ("quantized_bits(6,0,alpha=1)", ("quantized_bits", {"bits": 6, "integer": 0, "alpha": 1})),
    ("quantized_relu(6)", ("quantized_relu", {"bits": 6})),
    ("binary", ("binary", {})),
    ("ternary(alpha='auto')", ("ternary", {"alpha": "auto"})),
    ("quantized_relu_po2(6, 2048)", ("quantized_relu_po2", {"bits": 6, "max_value": 2048})),
    ("quantized_relu_po2(6, quadratic_approximation=True)",
     ("quantized_relu_po2", {"bits": 6, "quadratic_approximation": True})),
    ("quantized_po2(5)", ("quantized_po2", {"bits": 5})),
    ("__import__('os').system('x')", None),  # never evaluated: not a literal call
])
def test_string_quantizers_are_parsed_as_literals(text, want):
    assert parse(text) == want


@pytest.mark.parametrize(("value", "words"), [
    ("quantized_bits(4,0,1,1,'auto',1)", "use_stochastic_rounding=1"),
    ("quantized_relu(4,0,1)", "use_sigmoid=1"),
    ("quantized_tanh(4)", "quantized_tanh has no portable equivalent"),
    ({"class_name": "quantized_bits", "config": {"bits": 4, "qnoise_factor": 0.5}}, "qnoise_factor=0.5"),
    ("quantized_po2(4, 1, log2_rounding='ceil')", "log2_rounding='ceil'"),
    ("quantized_relu_po2(4, 1, 0, 1)", "use_stochastic_rounding=1"),
])
def test_unsupported_quantizer_is_an_error_naming_it(value, words):
    config = {"class_name": "Model", "config": {"name": "m", "layers": [
        {"class_name": "InputLayer", "name": "in", "config": {"name": "in", "batch_input_shape": [None, 3]},
         "inbound_nodes": []},
        {"class_name": "QActivation", "name": "act", "config": {"name": "act", "activation": value},
         "inbound_nodes": [[["in", 0, 0, {}]]]}], "input_layers": [["in", 0, 0]], "output_layers": [["act", 0, 0]]}}
    errors = upgrade(config).errors
    assert [e.code for e in errors] == ["K2T940"] and words in errors[0].message and errors[0].layer == "act"


def test_po2_batchnorm_defaults_become_portable_quantizers():
    """qkeras's default QBatchNormalization quantizers become portable quantizers, no K2T940."""
    plan = _plan("qkeras_po2_batchnorm")
    assert not plan.errors
    layers = _layers(plan)
    bn = layers["bn_po2"]["config"]

    def short(spec: dict) -> tuple:
        cfg = spec["config"]
        return spec["quantizer"], cfg["bits"], cfg["max_value"], cfg["quadratic_approximation"]

    assert short(bn["gamma_quantizer"]) == ("quantized_relu_po2", 6, 2048, False)
    assert short(bn["variance_quantizer"]) == ("quantized_relu_po2", 6, None, True)
    assert short(bn["beta_quantizer"]) == short(bn["mean_quantizer"]) == ("quantized_po2", 5, None, False)
    assert layers["relu_po2"]["config"]["quantizer"]["quantizer"] == "quantized_relu_po2"
    assert layers["fc_po2"]["config"]["kernel_quantizer"]["quantizer"] == "quantized_po2"


def test_folded_conv_becomes_portable_with_its_bn_config():
    plan = _plan("qkeras_folded")
    assert not plan.errors and "K2T445" in {f.code for f in plan.findings}
    layers = _layers(plan)
    first, second = layers["fused_convbn_0"], layers["fused_convbn_1"]
    assert first["registered_name"] == second["registered_name"] == "k2to3>QConv2DBatchnorm"
    cfg = second["config"]
    assert cfg["folding_mode"] == "batch_stats_folding" and cfg["ema_freeze_delay"] == 2
    assert cfg["momentum"] == 0.8 and cfg["axis"] == 3 and cfg["use_bias"] is False
    assert cfg["kernel_quantizer"]["config"]["alpha"] == "auto_po2"
    assert not {"renorm", "renorm_momentum", "fused", "virtual_batch_size", "adjustment"} & set(cfg)


def _folded_model(cls: str, **extra) -> dict:
    """A one-layer model config with the keys qkeras's get_config writes for a folded layer."""
    q = {"class_name": "quantized_bits", "config": {"bits": 8, "integer": 1, "alpha": 1}}
    shape, base = ([None, 6], {"units": 4}) if cls == "QDenseBatchnorm" else (
        [None, 6, 6, 2], {"filters": 4, "kernel_size": [3, 3], "data_format": "channels_last"})
    cfg = {"name": "f", **base, "activation": "linear", "use_bias": True, "kernel_quantizer": q,
           "bias_quantizer": q, "kernel_range": None, "bias_range": None,
           "axis": [1] if cls == "QDenseBatchnorm" else [3], "momentum": 0.99, "epsilon": 0.001, "center": True,
           "scale": True, "renorm": False, "renorm_clipping": None, "renorm_momentum": 0.99, "fused": None,
           "virtual_batch_size": None, "adjustment": None, "ema_freeze_delay": None,
           "folding_mode": "ema_stats_folding", **extra}
    return {"class_name": "Functional", "config": {"name": "m", "layers": [
        {"class_name": "InputLayer", "config": {"name": "x", "batch_input_shape": shape}, "inbound_nodes": []},
        {"class_name": cls, "config": cfg, "inbound_nodes": [[["x", 0, 0, {}]]]}],
        "input_layers": [["x", 0, 0]], "output_layers": [["f", 0, 0]]}}


def test_folded_dense_becomes_portable():
    """qkeras 0.9 (PyPI) has no QDenseBatchnorm: the config is the one later qkeras writes (QDense's keys, the
    inner BatchNormalization's, ema_freeze_delay, folding_mode)."""
    plan = upgrade(_folded_model("QDenseBatchnorm"))
    assert not plan.errors and "K2T444" in {f.code for f in plan.findings}
    spec = _layers(plan)["f"]
    assert spec["registered_name"] == "k2to3>QDenseBatchnorm"
    assert spec["config"]["kernel_quantizer"] == {"quantizer": "quantized_bits",
                                                  "config": {"bits": 8, "integer": 1, "alpha": 1}}
    assert "kernel_range" not in spec["config"] and "fused" not in spec["config"]


@pytest.mark.parametrize(("cls", "extra", "words"), [
    ("QConv2DBatchnorm", {"renorm": True}, "renorm=True"),
    ("QDenseBatchnorm", {"renorm": True}, "renorm=True"),
    ("QConv2DBatchnorm", {"axis": [1]}, "axis=[1]"),
    ("QConv2DBatchnorm", {"data_format": "channels_first"}, "data_format='channels_first'"),
    ("QDenseBatchnorm", {"folding_mode": "no_folding"}, "folding_mode='no_folding'"),
])
def test_folded_mode_not_computed_is_a_stop_naming_it(cls, extra, words):
    errors = upgrade(_folded_model(cls, **extra)).errors
    assert [(e.code, e.layer) for e in errors] == [("K2T944", "f")] and words in errors[0].message, errors
    assert errors[0].message.startswith(cls)


@pytest.mark.parametrize(("name", "code", "classes"), [
    ("qkeras_depthwise", "K2T941", {"QDepthwiseConv2D"}),
])
def test_unported_quantized_layers_stop_naming_the_class(name, code, classes):
    errors = _plan(name).errors
    assert errors and {e.code for e in errors} == {code}
    assert {e.message.split(":")[0].split(" ")[0] for e in errors} == classes


def test_cli_stop_is_one_line_with_exit_code_3(tmp_path):
    out = tmp_path / "m.keras"
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(QK / "qkeras_depthwise.h5"), "-o", str(out)],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert r.returncode == 3 and "Traceback" not in r.stderr + r.stdout
    lines = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "K2T941" in lines[0] and "QDepthwiseConv2D" in lines[0]
    assert not out.exists() and not list(tmp_path.glob(".*partial*"))  # only the report says why


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_portable_quantizers_match_qkeras(backend):
    """77 cases (22 quantizer configurations on a grid of every multiple of 1/256 in [-10, 10] and on a conv
    kernel, 11 power-of-two ones also on powers of two, their float32 neighbours, 2^(k+1/2), zero, -0.0, values
    below epsilon and far above max_value): every quantization level agrees with qkeras's; element values are
    bit-identical except the float least-squares scales of alpha='auto', whose mean reduction order differs on
    torch and jax (a few ulp), and, on torch and jax, po2 exponents of inputs next to a log2 rounding boundary
    (float32 log differs by an ulp between backends)."""
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "qkeras_probe.py")], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["backend"] == backend and len(got["rows"]) == 77
    assert sum("po2" in case.split("(")[0] for case in got["rows"]) == 33
    for case, (n_diff, max_abs, off_boundary) in got["rows"].items():
        if "'auto'" in case:
            assert max_abs <= 1e-6, case
        elif "po2" in case.split("(")[0] and backend != "tensorflow":
            assert off_boundary == 0, case
        else:
            assert n_diff == 0, case
    # QDenseBatchnorm against qkeras's QConv2DBatchnorm 1x1 (the same folding): equal up to the matmul's float
    # summation order, while the unfolded computation is far off (folding changes the quantization levels)
    assert len(got["folded"]) == 3
    for case, (max_abs, unfolded, train_diff, iteration) in got["folded"].items():
        assert max_abs <= 1e-6 and unfolded > 0.1, case
        assert train_diff == 0.0 and iteration == 0, case  # frozen-BN training: same pass, one step counted
        if backend == "tensorflow":
            assert max_abs == 0.0, case


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qkeras_jet_tagger", "qkeras_cnn", "qkeras_folded", "qkeras_po2_batchnorm"])
def test_qkeras_fixture_converts_with_parity_against_qkeras(name, pool, tmp_path):
    from k2to3.pipeline.convert import convert

    grads = name == "qkeras_jet_tagger"  # compiled and trained: one training step and the gradients too
    report = convert(Options(src=QK / f"{name}.h5", output=tmp_path / "m.keras", grads=grads), pool=pool)
    assert report["reference"]["kind"] == "keras2-tf_keras", report["reference"]  # qkeras loaded the file
    if grads:  # straight-through gradients, l1 regularizers, Adam's restored slots and the QClip constraint
        assert report["optimizer"]["status"] == "restored"
        assert {v["status"] for v in report["training"]["backends"].values()} == {"parity"}
        assert {v["status"] for v in report["gradients"]["backends"].values()} == {"parity"}
    assert report["verdict"] == "parity" and report["exit_code"] == 0
    assert set(report["backends"]) == {"tensorflow", "torch", "jax"}
    for v in report["backends"].values():
        for o in v["outputs"]:
            assert o["allclose"] and o["max_abs"] <= 1e-6 and o["argmax_agreement"] == 100.0


@pytest.mark.slow
def test_converted_model_really_quantizes(tmp_path, pool):
    """Parity against qkeras is only meaningful if quantization changes the outputs: the Keras 3 model's first
    activation sits on the quantized_relu(6) grid, and the same weights without quantizers give other outputs."""
    from k2to3.pipeline.convert import convert

    out = tmp_path / "m.keras"
    convert(Options(src=QK / "qkeras_jet_tagger.h5", output=out), pool=pool)
    code = ("import sys, json, numpy as np, keras, k2to3.portable\n"
            "m = keras.saving.load_model(sys.argv[1])\n"
            "x = np.random.default_rng(0).normal(size=(64, 16)).astype('float32')\n"
            "relu1 = keras.ops.convert_to_numpy(keras.Model(m.inputs, m.get_layer('relu1').output)(x))\n"
            "q = keras.ops.convert_to_numpy(m(x))\n"
            "for layer in m.layers:\n"
            "    for k in ('kernel_quantizer', 'bias_quantizer', 'quantizer'):\n"
            "        if getattr(layer, k, None): setattr(layer, k, None)\n"
            "    if type(layer).__name__ == 'QActivation': layer._fn = keras.activations.relu\n"
            "f = keras.ops.convert_to_numpy(m(x))\n"
            "print(json.dumps({'relu1': relu1.ravel().tolist(), 'diff': float(np.abs(q - f).max())}))\n")
    env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    relu1 = np.asarray(got["relu1"])
    assert np.array_equal(relu1 * 64, np.round(relu1 * 64)) and relu1.min() >= 0 and relu1.max() <= 63 / 64
    assert got["diff"] > 1e-3


@pytest.mark.parametrize(("name", "code"), [("qkeras_depthwise", "K2T941"), ("tfmot_qat", None),
                                            ("qkeras_jet_tagger", None), ("qkeras_folded", None),
                                            ("qkeras_po2_batchnorm", None)])
def test_audit_predicts_the_stop(name, code):
    """The static audit says blocked (not "portable with source") for a quantized layer k2to3 stops on."""
    from k2to3.stores.static import static_verdict

    row = static_verdict(QK / f"{name}.h5", {})
    if code is None:
        assert row["verdict"] == "portable", row
    else:
        assert row["verdict"] == "blocked" and code in row["reason"], row


def test_a_teams_own_qdense_is_not_taken_for_qkeras():
    """A class named QDense whose config has none of qkeras's keys (a team's own layer, as in the audit store of
    tests/fixtures/make_audit_store.py) is an unknown class (K2T902), not silently qkeras's QDense."""
    from k2to3.upgrade.needed_code import collect_needs

    own = {"class_name": "Functional", "config": {"name": "m", "layers": [
        {"class_name": "InputLayer", "config": {"name": "x", "batch_input_shape": [None, 4]}, "inbound_nodes": []},
        {"class_name": "QDense", "config": {"name": "q", "units": 4, "activation": "relu", "use_bias": True},
         "inbound_nodes": [[["x", 0, 0, {}]]]}],
        "input_layers": [["x", 0, 0]], "output_layers": [["q", 0, 0]]}}
    (need,) = [n for n in collect_needs(own, None) if n.kind == "class"]
    assert need.class_name == "QDense" and not need.optional
    spec = _layers(upgrade(own))["q"]
    assert spec.get("registered_name") != "k2to3>QDense"
    qk = _layers(_plan("qkeras_jet_tagger"))["fc1"]  # qkeras's own, with its kernel_quantizer key
    assert qk["registered_name"] == "k2to3>QDense"


@pytest.mark.slow
def test_real_qdense_batchnorm_file_converts_with_parity_against_qkeras(pool, tmp_path):
    """A trained file with qkeras's own QDenseBatchnorm (google/qkeras pull request 74, in no release; both folding
    modes): K2T444 makes both layers portable, every tensor is restored, and each backend's output equals what
    qkeras computed (qkeras_dense_folded.qkeras.npz), not only the Keras 3 fallback reference of the run."""
    from k2to3.pipeline.convert import convert

    out = tmp_path / "m.keras"
    report = convert(Options(src=QK / "qkeras_dense_folded.h5", output=out), pool=pool)
    assert report["reference"]["kind"] == "keras3-tensorflow"  # tf_keras + qkeras 0.9 cannot load the class
    assert report["verdict"] == "parity"
    assert {(f["code"], f["layer"]) for f in report["findings"]} >= {("K2T444", "fused_densebn_0"),
                                                                      ("K2T444", "fused_densebn_1")}
    assert report["ledger"]["tensors_restored"] == report["ledger"]["tensors_expected"]
    code = ("import sys, json, numpy as np, keras, k2to3.portable\n"
            "z = np.load(sys.argv[2]); m = keras.saving.load_model(sys.argv[1])\n"
            "y = keras.ops.convert_to_numpy(m(z['x']))\n"
            "print(json.dumps(float(np.abs(y - z['y']).max())))\n")
    for backend in ("tensorflow", "torch", "jax"):
        env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": "",
               "TF_CPP_MIN_LOG_LEVEL": "3"}
        r = subprocess.run([sys.executable, "-c", code, str(out), str(QK / "qkeras_dense_folded.qkeras.npz")],
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout.strip().splitlines()[-1]) <= 1e-6, backend
