"""Keras 1.x configs and weights (rules/keras1.toml, K2T470-K2T479) and Theano-trained kernels (K2T480).

End-to-end parity of the fixtures keras1_sequential, keras1_functional_rnn and theano_kernels on tensorflow,
torch and jax runs in test_convert.py (they are in the fixture manifest); here: the rules are documented and fire,
the translation is what Keras 2.0's legacy interfaces produced, the weight conversions equal tf_keras's own
`preprocess_weights_for_loading`, and plain Keras 3 fails or drifts on each file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import H5, ROOT

from k2to3.core.rules import keras1_rules
from k2to3.formats.artifact import read_artifact
from k2to3.upgrade import upgrade
from k2to3.upgrade.keras1.translate import is_keras1, to_keras2

RULES = keras1_rules()
FILES = ["keras1_sequential", "keras1_functional_rnn", "theano_kernels"]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_keras1_rule_is_documented(rule):
    for field in ("code", "title", "what", "why", "before", "after", "fix", "safety"):
        assert getattr(rule, field), f"{rule.code} has no {field}"


@pytest.mark.parametrize("rule", [r for r in RULES if r.fixture and r.code not in ("K2T479", "K2T480")],
                         ids=lambda r: r.code)
def test_keras1_rule_fires_on_its_fixture(rule):
    a = read_artifact(H5 / f"{rule.fixture}.h5")
    assert a.keras_version == "1.2.2" and is_keras1(a.model_config)
    plan = upgrade(a.model_config)
    assert rule.code in {f.code for f in plan.findings} and not plan.errors


def test_keras1_sequential_translation():
    cfg = to_keras2(read_artifact(H5 / "keras1_sequential.h5").model_config)
    conv, pool, _, dense, drop, _ = cfg["config"]
    assert conv["class_name"] == "Conv2D" and conv["config"]["filters"] == 4
    assert conv["config"]["kernel_size"] == [3, 3] and conv["config"]["padding"] == "same"
    assert conv["config"]["data_format"] == "channels_last" and "input_dtype" not in conv["config"]
    assert pool["config"]["padding"] == "valid" and drop["config"] == {"name": "dropout_1", "trainable": True,
                                                                        "rate": 0.5}
    assert dense["config"]["units"] == 16 and dense["config"]["use_bias"] is True
    assert dense["config"]["kernel_regularizer"] == {"class_name": "L1L2", "config": {"l1": 0.0, "l2": 0.01}}


def test_keras1_functional_translation():
    layers = {x["name"]: x for x in to_keras2(read_artifact(H5 / "keras1_functional_rnn.h5").model_config)
              ["config"]["layers"]}
    assert layers["merge_1"]["class_name"] == "Concatenate" and layers["merge_1"]["config"]["axis"] == -1
    assert layers["merge_2"]["class_name"] == "Add"
    lstm, gru = layers["lstm_1"]["config"], layers["gru_1"]["config"]
    assert lstm["units"] == 6 and lstm["recurrent_activation"] == "hard_sigmoid" and lstm["unit_forget_bias"] is True
    assert "consume_less" not in lstm and lstm["dropout"] == 0.0 and gru["reset_after"] is False
    assert layers["convolution1d_1"]["class_name"] == "Conv1D" and layers["convolution1d_1"]["config"]["strides"] == [1]
    assert layers["embedding_1"]["config"]["embeddings_initializer"] == "uniform"


@pytest.mark.parametrize("cls,cfg,code", [
    ("LocallyConnected2D", {"name": "h", "nb_filter": 4, "nb_row": 3, "nb_col": 3}, "K2T478"),
    ("Deconvolution2D", {"name": "m", "nb_filter": 4, "nb_row": 3, "nb_col": 3, "border_mode": "full",
                         "output_shape": [None, 8, 8, 4]}, "K2T487"),
    ("Merge", {"name": "mg", "mode": "gASV", "mode_type": "lambda"}, "K2T486"),
    ("BatchNormalization", {"name": "bn", "mode": 2, "axis": -1}, "K2T484"),
])
def test_keras1_layers_without_equivalent_stop_precisely(cls, cfg, code):
    model = {"class_name": "Sequential", "config": [
        {"class_name": "Dense", "config": {"name": "d", "output_dim": 4, "batch_input_shape": [None, 3]}},
        {"class_name": cls, "config": cfg}]}
    plan = upgrade(model)
    [err] = plan.errors  # the precise stop alone: no K2T902 "unknown class" behind it
    assert err.code == code and err.layer == cfg["name"] and err.fix


def test_keras2_configs_are_not_read_as_keras1():
    for name in ("fm10_sequential_no_inputlayer", "library_layers", "embedding_lstm", "removed_locally_connected"):
        assert not is_keras1(read_artifact(H5 / f"{name}.h5").model_config), name


def test_real_keras2_files_are_not_read_as_keras1(corpus):
    files = [p for p in sorted(corpus.rglob("*")) if p.is_file() and p.suffix in (".h5", ".hdf5")]
    assert len(files) >= 15
    for p in files:
        cfg = read_artifact(p, weights_only_ok=True).model_config
        assert cfg is None or not is_keras1(cfg), p


def test_theano_file_is_flagged():
    a = read_artifact(H5 / "theano_kernels.h5")
    assert a.backend == "theano" and not is_keras1(a.model_config)


@pytest.mark.slow
def test_weight_layouts_match_tf_keras_and_plain_keras3_fails_or_drifts():
    """One subprocess: weights_legacy against tf_keras's preprocess_weights_for_loading on 9 Keras 1 layouts, and
    plain Keras 3 on the three files."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "legacy_layout_probe.py"),
                          *(str(H5 / f"{n}.h5") for n in FILES)], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(got["layouts"]) == 9 and all(v == 0.0 for v in got["layouts"].values()), got["layouts"]
    assert got["plain"]["keras1_sequential.h5"].startswith("fails"), got["plain"]
    assert got["plain"]["keras1_functional_rnn.h5"].startswith("fails"), got["plain"]
    # Keras 3 rejects this file's Conv2DTranspose config; a file it loads uses the unflipped kernels (drifts)
    assert got["plain"]["theano_kernels.h5"].startswith(("fails", "drifts")), got["plain"]


def _numpy_maxout_highway(x, w):
    """Keras 1.2.2's MaxoutDense and Highway (keras/layers/core.py) written out in numpy: the reference, since no
    Keras 2 has these layers."""
    import numpy as np

    h = np.maximum(x @ w["dense_1/W"] + w["dense_1/b"], 0.0)
    h = (np.einsum("bi,fio->bfo", h, w["maxoutdense_1/W"]) + w["maxoutdense_1/b"]).max(axis=1)
    t = 1.0 / (1.0 + np.exp(-(h @ w["highway_1/W_carry"] + w["highway_1/b_carry"])))
    h = np.tanh(h @ w["highway_1/W"] + w["highway_1/b"]) * t + h * (1.0 - t)
    return h @ w["dense_2/W"] + w["dense_2/b"]


@pytest.mark.slow
def test_keras1_maxout_highway_against_numpy(pool, tmp_path):
    """keras1_maxout_highway.h5: converts with parity on the three backends (reference: Keras 3 tensorflow, as no
    Keras 2 can run it), and the converted model, loaded with safe_mode on jax, equals the numpy reference."""
    import h5py
    import numpy as np

    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    h5 = H5 / "keras1_maxout_highway.h5"
    x = np.random.default_rng(3).standard_normal((4, 5)).astype("float32")
    np.savez(tmp_path / "x.npz", in0=x)
    out = tmp_path / "m.keras"
    report = convert(Options(src=h5, output=out, inputs=tmp_path / "x.npz"), pool=pool)
    assert report["verdict"] == "parity" and report["reference"]["kind"] == "keras3-tensorflow", report["reference"]
    assert set(report["backends"]) == {"tensorflow", "torch", "jax"} and report["ledger"]["complete"]
    assert "K2T464" in {f["code"] for f in report["findings"]}
    with h5py.File(h5, "r") as f:
        g = f["model_weights"]
        w = {f"{lay}/{n.split(':')[0][len(lay) + 1:]}": g[lay][n][()] for lay in g for n in g[lay]}
    ref = _numpy_maxout_highway(x.astype("float64"), {k: v.astype("float64") for k, v in w.items()})
    code = ("import sys, json, numpy as np, keras, k2to3.portable; m = keras.saving.load_model(sys.argv[1]); "
            "print(json.dumps(keras.ops.convert_to_numpy(m(np.load(sys.argv[2])['in0'])).tolist()))")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT / "src")}
    run = subprocess.run([sys.executable, "-c", code, str(out), str(tmp_path / "x.npz")], capture_output=True,
                         text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    got = np.array(json.loads(run.stdout.strip().splitlines()[-1]))
    assert np.abs(got - ref).max() < 1e-5, np.abs(got - ref).max()


@pytest.mark.slow
def test_training_check_names_the_reference_it_lacks(pool, tmp_path):
    """A Keras 1 file's reference is tf_keras on its translated config: --fit-steps says so, not "with --src"."""
    from k2to3.core.options import ConvertOptions
    from k2to3.pipeline.convert import convert

    rep = convert(ConvertOptions(src=H5 / "keras1_deconv_th.h5", output=tmp_path / "m.keras", backends=("torch",),
                                 fit_steps=1), pool=pool)
    t = rep["training"]
    assert rep["verdict"] == "parity" and t["status"] == "unavailable", t
    assert t["reason"].startswith("the Keras 2 reference is the file, its Keras 1 config translated"), t["reason"]
    assert "--src" not in t["reason"] and "optimizer state is not restored" in t["reason"]
