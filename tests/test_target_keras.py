"""`k2to3 convert --target-keras 3.N`: the dialect rules of rules/keras_versions.toml (checked against what the
installed Keras writes), their stops, the option errors, and end to end: real fixtures converted for Keras 3.3, 3.8
and 3.13, loaded by that Keras in its own environment (created once per version, jax) and compared with the Keras 2
golden; every committed k2to3.portable file rewritten for each target computes its golden there too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT

from k2to3.core.keras_versions import check_weight_paths, downgrade_config, version_rules
from k2to3.errors import NotPortable
from k2to3.interfaces.docgen import keras_versions as docgen
from k2to3.pipeline import target, targetenv

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _glorot() -> dict:
    return {"module": "keras.initializers", "class_name": "GlorotUniform",
            "config": {"seed": None, "input_axes": None, "output_axes": None}, "registered_name": None}


def _layer(cls: str, name: str, **config) -> dict:
    return {"module": "keras.layers", "class_name": cls, "config": {"name": name, **config}, "name": name}


def _model(*layers: dict) -> dict:
    return {"module": "keras.src.models.functional", "class_name": "Functional",
            "config": {"name": "model", "layers": list(layers), "input_layers": ["input_1", 0, 0],
                       "output_layers": ["dense", 0, 0]}}


def test_rule_defaults_are_what_the_installed_keras_writes():
    """Each drop-if-default rule's key and default, and each renamed class, as the current Keras writes them: a
    release that changes one fails here before a file is written wrong."""
    code = """
import json, keras
from keras.src.ops.numpy import Flip
print(json.dumps({
  "GlorotUniform": keras.initializers.GlorotUniform().get_config(),
  "HeNormal": keras.initializers.HeNormal().get_config(),
  "Dense": keras.layers.Dense(2).get_config(), "Embedding": keras.layers.Embedding(3, 2).get_config(),
  "BatchNormalization": keras.layers.BatchNormalization().get_config(),
  "MultiHeadAttention": keras.layers.MultiHeadAttention(2, 2).get_config(),
  "Orthogonal": type(keras.initializers.get("orthogonal")).__name__, "Flip": Flip(axis=1).get_config()}))"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**ENV, "KERAS_BACKEND": "jax"})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    seen = 0
    for r in version_rules():
        if r.action == "drop-if-default":
            for cls in set(r.classes) & set(got):
                for key in r.keys:
                    assert got[cls][key] == r.defaults[key], (r.code, cls, key)
                    seen += 1
        if r.action == "rename-class":
            assert got["Orthogonal"] in r.classes
        if r.scope == "op":
            assert set(r.keys) <= set(got["Flip"])
    assert seen >= 9


def test_a_config_for_3_3_drops_defaults_translates_and_renames():
    model = _model(_layer("InputLayer", "input_1", batch_shape=[None, 4]),
                   _layer("Dense", "dense", units=2, kernel_initializer=_glorot(), quantization_config=None),
                   _layer("LSTM", "lstm", units=2, recurrent_initializer={
                       "module": "keras.initializers", "class_name": "Orthogonal", "config": {"gain": 1.0}}),
                   {"module": "keras.src.ops.numpy", "class_name": "Flip", "config": {"name": "rev", "axis": [1]},
                    "name": "rev"})
    new, changes = downgrade_config(model, (3, 3))
    dense = new["config"]["layers"][1]["config"]
    assert "quantization_config" not in dense and dense["kernel_initializer"]["config"] == {"seed": None}
    assert new["config"]["input_layers"] == [["input_1", 0, 0]]
    assert new["config"]["layers"][2]["config"]["recurrent_initializer"]["class_name"] == "OrthogonalInitializer"
    assert new["config"]["layers"][3]["config"] == {"axis": [1]} and new["config"]["layers"][3]["name"] == "rev"
    assert {(c.code, c.layer) for c in changes} >= {("K2T701", "dense"), ("K2T702", "dense"), ("K2T706", "model"),
                                                    ("K2T707", "lstm"), ("K2T708", "rev")}
    same, none = downgrade_config(model, (3, 15))
    assert same == model and none == []
    mid, _ = downgrade_config(model, (3, 13))  # 3.13 reads quantization_config and the rest, not input_axes
    assert "quantization_config" in mid["config"]["layers"][1]["config"]
    assert "input_axes" not in mid["config"]["layers"][1]["config"]["kernel_initializer"]["config"]


@pytest.mark.parametrize("code,layer,target,needed", [
    ("K2T703", _layer("BatchNormalization", "bn", renorm=True, renorm_clipping=None, renorm_momentum=0.99), (3, 13),
     "3.14"),
    ("K2T704", _layer("MultiHeadAttention", "mha", num_heads=2, use_gate=True), (3, 8), "3.14"),
    ("K2T702", _layer("Dense", "q", units=2, quantization_config={"mode": "int8"}), (3, 12), "3.13"),
])
def test_a_key_the_target_cannot_express_stops_with_key_layer_and_release(code, layer, target, needed):
    with pytest.raises(NotPortable) as exc:
        downgrade_config(_model(layer), target)
    name = layer["name"]
    assert exc.value.message.startswith(code) and f"layer '{name}'" in exc.value.message
    assert needed in exc.value.line()
    bn = _layer("BatchNormalization", "bn", axis=-1, renorm=False, renorm_clipping=None, renorm_momentum=0.99)
    assert downgrade_config(_model(bn), target)[0]["config"]["layers"][0]["config"] == {"name": "bn", "axis": -1}
    assert next(k for k in layer["config"] if k in exc.value.message)


def test_nested_inputs_and_container_weights_stop_before_their_release():
    model = _model()
    model["config"]["input_layers"] = [[["a", 0, 0], ["b", 0, 0]]]
    with pytest.raises(NotPortable) as exc:
        downgrade_config(model, (3, 3))
    assert "nested input_layers" in exc.value.line() and "3.4 or later" in exc.value.line()
    assert downgrade_config(model, (3, 4))[1] == []
    paths = ["layers/block/container/dense/vars/0", "layers/dense/vars/0"]
    with pytest.raises(NotPortable) as exc:
        check_weight_paths(paths, (3, 14))
    assert exc.value.line().startswith("K2T705") and "3.15 or later" in exc.value.line()
    check_weight_paths(paths, (3, 15))
    check_weight_paths(["layers/container_like/vars/0"], (3, 3))


@pytest.mark.parametrize("args,says", [
    (["--target-keras", "2.9"], "not a Keras 3 release"),
    (["--target-keras", "3.99"], "newer than the Keras k2to3 writes with"),
    (["--target-python", sys.executable], "--target-python applies to --target-keras only"),
    (["--target-keras", "3.8", "--target-python", "/nonexistent/python"], "no such interpreter"),
])
def test_bad_target_options_are_one_line_exit_2_and_write_nothing(tmp_path, args, says):
    out = tmp_path / "m.keras"
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(FIXTURES / "h5" / "fm07_conv1d.h5"), "-o",
                        str(out), *args], capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_real_file_whose_meaning_the_target_lacks_stops_exit_3_and_writes_nothing(tmp_path):
    """tf_keras BatchNormalization(renorm=True) (tests/fixtures/make_target_fixtures.py) converts for Keras 3.15 but
    not for 3.13; the stop comes before any environment is needed."""
    out = tmp_path / "m.keras"
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(FIXTURES / "target" / "bn_renorm.h5"), "-o",
                        str(out), "--backends", "jax", "--target-keras", "3.13"], capture_output=True, text=True,
                       env={**ENV, "K2TO3_CACHE_DIR": str(tmp_path / "no-cache")}, timeout=600)
    assert r.returncode == 3, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last == ("error: K2T703: layer 'bn' (BatchNormalization) sets renorm=true, which Keras 3.13 cannot "
                    "express (target Keras 3.14 or later)")
    assert "Traceback" not in r.stderr and not out.exists() and not list(tmp_path.glob("m.keras*"))


def test_docs_are_current_and_every_rule_is_tested_here():
    assert (ROOT / "docs" / "keras-versions.md").read_text() == docgen.render()
    mine = Path(__file__).read_text()
    # a rule is tested when this module exercises it by code or by a class or key only it names
    untested = [r.code for r in version_rules() if r.code not in mine and not any(f'"{k}"' in mine for k in r.keys)]
    assert untested == []


# -- end to end, one environment per target release (jax) -------------------------------------------------------
F = FIXTURES
CASES = [  # (target, name, legacy file and arguments): two of the representative set per release; the first of a
    # release creates its environment, "src_lambda" names it with --target-python (as a machine without an index)
    ("3.3", "cnn", [F / "h5" / "fm07_conv1d.h5"]),
    ("3.3", "src_lambda", [F / "src_models" / "lambda_args.h5", "--src", F / "src" / "k2_zoo.py"]),
    ("3.8", "rnn", [F / "h5" / "embedding_lstm.h5"]),
    ("3.8", "tfoplambda", [F / "h5" / "tfop_everyday.h5"]),
    ("3.13", "mixed_precision", [F / "h5" / "fm11_mixed_precision.h5"]),
    ("3.13", "optimizer_state", [F / "optimizers" / "conv_bn_adam.h5"]),
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """K2TO3_CACHE_DIR when the run sets one (CI keeps it for the run), else one for this module."""
    return Path(os.environ.get("K2TO3_CACHE_DIR") or tmp_path_factory.mktemp("k2to3-cache"))


@pytest.mark.slow
@pytest.mark.parametrize("version,name,args", CASES, ids=[f"{v}-{n}" for v, n, _ in CASES])
def test_converted_for_an_older_keras_loads_there_and_matches_the_golden(tmp_path, cache, monkeypatch, version,
                                                                         name, args):
    out = tmp_path / f"{name}.keras"
    named = []
    if name == "src_lambda":
        monkeypatch.setenv("K2TO3_CACHE_DIR", str(cache))
        named = ["--target-python", str(targetenv.ensure(env_version(version)).python)]
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", *map(str, args), "-o", str(out), "--backends",
                        "jax", "--target-keras", version, *named], capture_output=True, text=True,
                       env={**ENV, "K2TO3_CACHE_DIR": str(cache)}, timeout=1200)
    report = json.loads((tmp_path / f"{name}.keras.report" / "report.json").read_text())
    t = report["target"]
    assert r.returncode == 0 and t["status"] == "parity", (t, r.stderr[-2000:])
    assert t["keras_version"].startswith(version + ".") and t["backend"] == "jax"
    assert report["reference"]["kind"] == "keras2-tf_keras" and t["outputs"] and t["warnings"] == []
    if named:
        assert t["environment"]["python"] == named[1] and not t["environment"]["created"]
    else:
        assert t["environment"]["size_mb"] > 50 and t["environment"]["seconds"] > 0
    if name == "optimizer_state":  # the Keras 2 Adam state reached the older release: its step is the file's
        assert t["optimizer"] == "Adam" and t["optimizer_iterations"] == report["optimizer"]["iteration"] == 3
    config = json.loads(zipfile.ZipFile(out).read("config.json"))
    assert "input_axes" not in json.dumps(config)  # every target here is older than 3.15


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.3", "3.8", "3.13"])
def test_portable_objects_import_and_compute_the_same_under_the_target(tmp_path, cache, monkeypatch, version):
    """Every committed k2to3.portable file (tests/fixtures/portable), rewritten for the target, loads there with
    keras, the backend and the copy of k2to3/portable alone, and computes its Keras 2 golden."""
    monkeypatch.setenv("K2TO3_CACHE_DIR", str(cache))
    env = targetenv.ensure(env_version(version))
    src = FIXTURES / "portable"
    manifest = json.loads((src / "manifest.json").read_text())
    requests, expected = [], {}
    for name, entry in manifest["files"].items():
        if "jax" not in entry["backends"]:
            continue
        keras_file = tmp_path / f"{name}.keras"
        shutil.copy(src / f"{name}.keras", keras_file)
        target.rewrite(keras_file, env_version(version))
        with np.load(src / f"{name}.golden.npz") as z:
            meta = json.loads(str(z["meta"]))
            np.savez(tmp_path / f"{name}-in.npz", **{k: z[k] for k in z.files if k.startswith("in")})
            expected[name] = ([z[k] for k in sorted((k for k in z.files if k.startswith("out")),
                                                    key=lambda k: int(k[3:]))], meta)
        requests.append({"keras": str(keras_file), "inputs": str(tmp_path / f"{name}-in.npz"),
                         "out": str(tmp_path / f"{name}-out.npz"),
                         "modules": [str(src / entry["module"])] if entry["module"] else []})
    control = {**requests[0], "keras": str(src / Path(requests[0]["keras"]).name), "out": str(tmp_path / "c.npz")}
    replies = target.run_script(env.python, env.backend, tmp_path, {"batch": [*requests, control]},
                                f"Keras {version}")
    assert isinstance(replies, list), replies
    # the control: the same file as Keras 3.15 wrote it does not load there (the target is that older release)
    assert "error" in replies[-1], replies[-1]
    for req, reply in zip(requests, replies):
        name = Path(req["keras"]).stem
        assert "error" not in reply, (name, reply)
        ys, meta = expected[name]
        with np.load(req["out"]) as z:
            got = [z[f"out{i}"] for i in range(len(z.files))]
        assert all(np.allclose(g, y, rtol=meta["rtol"], atol=meta["atol"]) for g, y in zip(got, ys)), name
    assert len(requests) >= 5


def env_version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def test_layer_keys_a_release_does_not_take_are_dropped_at_default_or_stop():
    """K2T709 (rules/keras_layer_params.json, read from the released wheels): MultiHeadAttention's sliding_window
    (Keras 3.15) and seed (3.4) are dropped for older releases at their defaults; a value they cannot compute stops
    with the release that added the key. InputLayer takes any keyword in 3.3 (it ignores its **kwargs)."""
    mha = _layer("MultiHeadAttention", "mha", num_heads=2, key_dim=4, sliding_window=None, seed=None)
    model = _model(_layer("InputLayer", "input_1", batch_shape=[None, 4, 4], ragged=False), mha)
    _, changes = downgrade_config(model, (3, 3))
    assert {(c.code, c.key) for c in changes if c.code == "K2T709"} == {("K2T709", "sliding_window"),
                                                                        ("K2T709", "seed")}
    _, changes = downgrade_config(model, (3, 8))
    assert {c.key for c in changes if c.code == "K2T709"} == {"sliding_window"}
    mha["config"]["sliding_window"] = 4
    with pytest.raises(NotPortable, match="K2T709: layer 'mha' .* sets sliding_window=4, which Keras 3.8 does not "
                                          r"take \(added in Keras 3.15\)"):
        downgrade_config(model, (3, 8))


@pytest.mark.slow
def test_attention_family_loads_at_parity_in_keras_3_3_and_3_8(tmp_path):
    """tests/fixtures/target/attention_family.h5 (MultiHeadAttention, SeparableConv2D, Conv2DTranspose,
    BatchNormalization with nested regularizers and initializers) in Keras 3.3 and 3.8 themselves."""
    for v in ("3.3", "3.8"):
        out = tmp_path / f"m{v}.keras"
        r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(FIXTURES / "target" / "attention_family.h5"),
                            "-o", str(out), "--target-keras", v], capture_output=True, text=True, timeout=1800, env=ENV)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        report = json.loads((tmp_path / f"m{v}.keras.report" / "report.json").read_text())
        assert report["target"]["status"] == "parity", report["target"]
        assert any(d["code"] == "K2T709" and d["key"] == "sliding_window" for d in report["target"]["dropped"])
