"""Weights-only files whose build function needs arguments (crepe's `build_and_load_model(model_capacity)`):
the builder and its arguments found in the --src files, confirmed by tf_keras builds against the file's weight
groups, and verified on tensorflow, torch and jax. Fixtures: tests/fixtures/make_weights_fixtures.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import CACHE, FIXTURES

from k2to3.core.options import ConvertOptions as Options
from k2to3.errors import InputError, K2to3Error
from k2to3.formats.artifact import read_artifact
from k2to3.formats.checkpoint import prefix_of
from k2to3.pipeline.build_search import weight_groups
from k2to3.pipeline.convert import convert
from k2to3.pipeline.report import to_markdown
from k2to3.source.build_candidates import find_builders
from k2to3.source.buildargs import call_text, cli_text, parse_build_args
from k2to3.source.extract import index_sources
from k2to3.upgrade import upgrade

CREPE_SRC = FIXTURES / "src" / "crepe" / "core.py"
ANAGO_SRC = FIXTURES / "src" / "anago" / "models.py"  # Hironsan/anago 7b4802c, MIT
ANAGO = FIXTURES / "weights" / "anago" / "weights.h5"
ANAGO_CHAR = FIXTURES / "weights" / "anago_char" / "weights.h5"  # use_char=True
ANAGO_CHAR_MODEL = FIXTURES / "weights" / "anago_char_model.h5"  # the same model saved whole
CREPE_DIR = CACHE / "weights" / "crepe"


def crepe_h5() -> Path:
    """crepe's real tiny architecture with seeded weights (2 MB: generated into tests/.cache, not committed)."""
    path = CREPE_DIR / "model-tiny.h5"
    if not path.exists():
        subprocess.run([sys.executable, str(FIXTURES / "make_weights_fixtures.py"), "--crepe", str(CREPE_DIR)],
                       check=True, capture_output=True, timeout=600)
    return path


def test_crepe_builder_and_its_capacities_are_found_statically():
    groups = weight_groups(read_artifact(crepe_h5(), weights_only_ok=True))
    found = find_builders(index_sources([CREPE_SRC]), [g["name"] for g in groups], crepe_h5())
    assert [b.fn for b in found] == ["build_and_load_model"]  # get_activation and predict call it, build nothing
    b = found[0]
    assert b.required == ["model_capacity"]
    # the keys of the capacity dict it indexes, in source order; 'full' (get_activation's default) among them
    assert b.values["model_capacity"] == ["tiny", "small", "medium", "large", "full"]
    assert b.score == len(groups) == 13  # conv%d, conv%d-BN and classifier name every group


@pytest.mark.parametrize("text,want", [
    ("model_capacity='tiny'", {"args": [], "kwargs": {"model_capacity": "tiny"}}),
    ("'tiny', 3, cfg={'a': [1, 2]}", {"args": ["tiny", 3], "kwargs": {"cfg": {"a": [1, 2]}}}),
])
def test_build_args_are_literals(text, want):
    assert parse_build_args(text) == want
    assert call_text("f", want).startswith("f(")


@pytest.mark.parametrize("text,why", [
    ("model_capacity=__import__('os').system('x')", "only Python literals"),
    ("*xs", r"\* and \*\* are not accepted"),
    ("model_capacity='tiny'", None),
    ("x=(", "not a call's argument list"),
])
def test_build_args_refused_without_running(text, why):
    if why is None:
        return
    with pytest.raises(InputError, match=why) as exc:
        parse_build_args(text)
    assert "\n" not in exc.value.line()


def _parity(report: dict) -> None:
    assert report["verdict"] == "parity", report["backends"]
    for b in ("tensorflow", "torch", "jax"):
        assert report["backends"][b]["status"] == "parity"
    assert report["ledger"]["tensors_restored"] == report["ledger"]["tensors_expected"] == 38
    assert report["reference"]["from"] == "the --src build function"


@pytest.mark.slow
def test_crepe_weights_found_and_converted_with_parity(pool, tmp_path):
    """No function named: the builder is found, its capacity matched to the file ('tiny' of five), and the
    conversion is verified on every backend against tf_keras running crepe's own code."""
    report = convert(Options(src=crepe_h5(), output=tmp_path / "crepe.keras", sources=(str(CREPE_SRC),)), pool=pool)
    _parity(report)
    match = report["source"]["match"]
    assert match["summary"].startswith("build_and_load_model(model_capacity='tiny') matched 13/13 weight groups")
    assert match["builds_tried"] == 1  # cheapest first: tiny is the first capacity and it matches
    assert report["source"]["build_args"] == {"args": [], "kwargs": {"model_capacity": "tiny"}}
    assert any("load_weights" in w for w in report["build"]["warnings"])  # crepe's own load was skipped
    md = to_markdown(report)
    assert "build_and_load_model(model_capacity='tiny') matched 13/13" in md


@pytest.mark.slow
def test_crepe_with_explicit_function_and_arguments(pool, tmp_path):
    report = convert(Options(src=crepe_h5(), output=tmp_path / "crepe.keras", backends=("tensorflow",),
                             sources=(f"{CREPE_SRC}:build_and_load_model",), build_args="'tiny'"), pool=pool)
    assert report["verdict"] == "parity"
    assert report["source"]["match"]["summary"].startswith("build_and_load_model('tiny') matched 13/13")
    wrong = (r"no candidate build matches its 13 weight groups; tried build_and_load_model\(model_capacity='small'\): "
             r"0/13 groups match, 13 built \(first: conv1 \[\[512, 1, 1, 128\], \[128\]\] in the file, conv1 "
             r"\[\[512, 1, 1, 256\], \[256\]\] built\)")
    with pytest.raises(InputError, match=wrong):
        convert(Options(src=crepe_h5(), output=tmp_path / "small.keras", backends=("tensorflow",),
                        sources=(f"{CREPE_SRC}:build_and_load_model",), build_args="model_capacity='small'"),
                pool=pool)
    assert not (tmp_path / "small.keras").exists()


@pytest.mark.slow
def test_two_matching_builders_exit_2_with_the_choices(tmp_path):
    """Two functions build the same weights: k2to3 does not guess; one line lists each with the options that
    pick it, exit 2, nothing written."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(CREPE_SRC, src / "core.py")
    text = CREPE_SRC.read_text()
    (src / "copy.py").write_text(text.replace("def build_and_load_model(", "def build_model_again("))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "COLUMNS": "400"}
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(crepe_h5()), "-o", str(tmp_path / "m.keras"),
                        "--src", str(src)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    err = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(err) == 1, r.stderr
    assert "2 build functions match its 13 weight groups" in err[0]
    assert f"--src {src / 'core.py'}:build_and_load_model --build-args \"model_capacity='tiny'\"" in err[0]
    assert f"--src {src / 'copy.py'}:build_model_again --build-args \"model_capacity='tiny'\"" in err[0]
    assert not (tmp_path / "m.keras").exists() and not (tmp_path / "m_k3.py").exists()


# -- TF-format checkpoints -------------------------------------------------------------------------------------
CKPT = FIXTURES / "weights" / "ckpt"
CKPT_SRC = FIXTURES / "src" / "ckpt_model.py"
HOSTILE = FIXTURES / "weights" / "hostile_ckpt"


@pytest.mark.parametrize("named", ["classifier", "classifier.index", "classifier.data-00000-of-00001", "",
                                   "checkpoint"])
def test_checkpoint_prefix_from_any_of_its_names(named):
    assert prefix_of(CKPT / named if named else CKPT) == CKPT / "classifier"


def test_checkpoint_paths_outside_are_refused(tmp_path):
    with pytest.raises(InputError, match=r"model_checkpoint_path '\.\./\.\./ckpt/classifier' points outside"):
        prefix_of(HOSTILE / "outside")
    (tmp_path / "m.index").write_bytes((CKPT / "classifier.index").read_bytes())
    (tmp_path / "m.data-00000-of-00001").symlink_to(CKPT / "classifier.data-00000-of-00001")
    with pytest.raises(InputError, match="links outside the checkpoint's directory"):
        prefix_of(tmp_path / "m")
    (tmp_path / "m.data-00000-of-00001").unlink()
    (tmp_path / "m.data-00000-of-00002").write_bytes(b"")
    with pytest.raises(InputError, match="data shards are missing or incomplete"):
        prefix_of(tmp_path / "m.index")


@pytest.mark.slow
def test_checkpoint_with_adam_slots_converts_and_trains_with_parity(pool, tmp_path):
    """ModelCheckpoint's files after one Adam step: build_classifier's units found (8, from train()'s call, not
    the default 16), every Adam slot restored from the checkpoint, outputs and one more training step at parity
    on tensorflow, torch and jax against tf_keras."""
    report = convert(Options(src=CKPT, output=tmp_path / "ck.keras", sources=(str(CKPT_SRC),), fit_steps=1),
                     pool=pool)
    assert report["verdict"] == "parity", report["backends"]
    ck = report["input"]["checkpoint"]
    assert report["input"]["format"] == "TF checkpoint"
    assert ck["built_by"] == "build_classifier(units=8)" and ck["match"]["builds_tried"] == 2
    assert ck["optimizer"] == "Adam" and ck["optimizer_variables_restored"] == 12 and ck["iterations"] == 1
    opt = report["optimizer"]
    assert opt["status"] == "restored" and opt["iteration"] == 1 and opt["ledger"]["slots_restored"] == 12
    for b in ("tensorflow", "torch", "jax"):
        assert report["backends"][b]["status"] == "parity"
        assert report["training"]["backends"][b]["status"] == "parity"
    assert "**Checkpoint:**" in to_markdown(report)


CKPT_LEGACY = FIXTURES / "weights" / "ckpt_legacy"
CKPT_LEGACY_SRC = FIXTURES / "src" / "ckpt_legacy_model.py"


@pytest.mark.slow
def test_old_layout_checkpoint_restores_slots_and_trains_with_parity(pool, tmp_path):
    """tf.keras.optimizers.legacy.Adam (optimizer_v2, TF <= 2.10): slots under each variable and optimizer/iter.
    Every m and v slot and the step counter restored value by value, then one more step at parity everywhere."""
    report = convert(Options(src=CKPT_LEGACY, output=tmp_path / "ck.keras", sources=(str(CKPT_LEGACY_SRC),),
                             fit_steps=1), pool=pool)
    assert report["verdict"] == "parity", report["backends"]
    ck = report["input"]["checkpoint"]
    assert ck["built_by"] == "build_classifier(units=8)" and ck["optimizer_layout"] == "optimizer_v2"
    assert ck["optimizer_variables_restored"] == 13 and ck["iterations"] == 1  # 6 variables x (m, v) + iter
    opt = report["optimizer"]
    assert opt["status"] == "restored" and opt["layout"] == "optimizer_v2" and opt["iteration"] == 1
    assert opt["ledger"]["slots_restored"] == opt["ledger"]["slots_expected"] == 12
    for b in ("tensorflow", "torch", "jax"):
        assert report["backends"][b]["status"] == "parity"
        assert report["training"]["backends"][b]["status"] == "parity"
    assert "from the optimizer_v2 layout" in to_markdown(report)


@pytest.mark.slow
def test_old_layout_slot_that_cannot_be_mapped_is_one_line(pool, tmp_path):
    """The same checkpoint with a build function that compiles RMSprop: Adam's m has nowhere to go."""
    src = tmp_path / "rms.py"
    src.write_text(CKPT_LEGACY_SRC.read_text().replace("legacy.Adam(", "legacy.RMSprop("))
    with pytest.raises(K2to3Error) as exc:
        convert(Options(src=CKPT_LEGACY, output=tmp_path / "r.keras", sources=(f"{src}:build_classifier",),
                        build_args="units=8"), pool=pool)
    assert exc.value.code == 2 and "\n" not in exc.value.line()
    assert ("optimizer slot layer_with_weights-0/bias/.OPTIMIZER_SLOT/optimizer/m cannot be mapped (RMSprop keeps "
            "no slot 'm' (its slots: rms) for hidden/bias:0)") in exc.value.line()
    assert not (tmp_path / "r.keras").exists()


@pytest.mark.slow
def test_garbage_checkpoint_index_refused(pool, tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "g.index").write_bytes(rng.bytes(300))
    (tmp_path / "g.data-00000-of-00001").write_bytes(rng.bytes(100))
    with pytest.raises(K2to3Error, match=r"not a readable TF checkpoint index \(OpError: not an sstable") as exc:
        convert(Options(src=tmp_path / "g", output=tmp_path / "g.keras", sources=(str(CKPT_SRC),)), pool=pool)
    assert exc.value.code == 2 and not (tmp_path / "g.keras").exists()


@pytest.mark.slow
def test_hostile_checkpoint_refused_with_one_line(tmp_path):
    """An index declaring a 16 MB tensor over 64 bytes of data: refused before any value is read, exit 2."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "COLUMNS": "400"}
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(HOSTILE / "huge.index"), "-o",
                        str(tmp_path / "h.keras"), "--src", str(CKPT_SRC)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 2, r.stderr[-2000:]
    err = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "declares v/.ATTRIBUTES/VARIABLE_VALUE [2048, 2048] (16777216 bytes" in err[0]
    assert "data files hold 64 bytes" in err[0]
    assert list(tmp_path.iterdir()) == []


def test_config_beside_the_weights_gives_argument_values(tmp_path):
    """A JSON object beside the weights: keys naming parameters give their values; a required parameter nothing
    else gives takes the whole object (textgenrnn's textgenrnn_model(num_classes, cfg, ...) reads its cfg so)."""
    src = tmp_path / "model.py"
    src.write_text("from tensorflow.keras import layers, models\n\n\n"
                   "def build(cfg, units, depth=2):\n"
                   "    x = inp = layers.Input((cfg['n'],))\n"
                   "    for i in range(depth):\n"
                   "        x = layers.Dense(units, name=f'dense_{i}')(x)\n"
                   "    return models.Model(inp, x)\n")
    weights = tmp_path / "weights.h5"
    weights.write_bytes(b"")  # only its directory is looked at here
    (tmp_path / "hparams.json").write_text('{"units": 8, "depth": 3}')
    (tmp_path / "config.json").write_text('{"n": 4}')
    (tmp_path / "model.json").write_text('{"class_name": "Sequential", "config": {}}')  # a pair's config: skipped
    (b,) = find_builders(index_sources([src]), ["dense_0", "dense_1", "dense_2"], weights)
    assert b.values["units"] == [8] and b.values["depth"] == [3]
    assert b.values["cfg"] == [{"n": 4}]
    assert b.score == 3  # f'dense_{i}' names every group
    assert b.combos()[:2] == [{"cfg": {"n": 4}, "units": 8}, {"cfg": {"n": 4}, "units": 8, "depth": 3}]


def test_long_argument_values_are_abbreviated_in_messages_only():
    """A vocabulary JSON as an argument (textgenrnn ships 464 characters): one readable line; --build-args keeps
    the whole value."""
    vocab = {chr(0x41 + i): i for i in range(464)}
    args = {"args": [], "kwargs": {"cfg": vocab, "units": 8}}
    assert call_text("f", args) == "f(cfg={...464 keys: 'A', 'B', 'C', ...}, units=8)"
    assert parse_build_args(cli_text(args)) == args


# -- model classes configured by a JSON file beside the weights ------------------------------------------------
ANAGO_PARAMS = {"char_embedding_dim": 4, "char_lstm_size": 3, "char_vocab_size": 30, "dropout": 0.5, "fc_dim": 8,
                "num_labels": 5, "use_char": False, "use_crf": False, "word_embedding_dim": 8, "word_lstm_size": 6,
                "word_vocab_size": 40}


def test_builder_class_configured_by_its_json_is_found_statically():
    """anago's BiLSTMCRF: __init__ takes the model's arguments, build() sets self.model, and params.json beside
    weights.h5 holds the arguments (BaseModel.load: cls(**params).build()). Tried first, as that object."""
    found = find_builders(index_sources([ANAGO_SRC]), [], ANAGO)
    (b,) = [b for b in found if b.fn == "BiLSTMCRF.build"]
    assert b.required == ["num_labels", "word_vocab_size"]
    assert b.config == ("params.json", ANAGO_PARAMS)
    assert b.combos()[0] == ANAGO_PARAMS and b.label(ANAGO_PARAMS) == "BiLSTMCRF(params.json).build()"
    assert b.label({**ANAGO_PARAMS, "fc_dim": 9}) is None


def test_model_subclass_configured_by_json_is_a_candidate(tmp_path):
    src = tmp_path / "net.py"
    src.write_text("from tensorflow import keras\n\n\n"
                   "class Net(keras.Model):\n"
                   "    def __init__(self, units, depth=2):\n"
                   "        inputs = keras.Input((4,))\n"
                   "        x = inputs\n"
                   "        for i in range(depth):\n"
                   "            x = keras.layers.Dense(units, name=f'hidden{i}')(x)\n"
                   "        super().__init__(inputs, x)\n\n\n"
                   "class Helper:\n"
                   "    def summary(self, model):\n"
                   "        return keras.Model(model.inputs, model.outputs)\n")
    (tmp_path / "w.h5").write_bytes(b"")
    (tmp_path / "config.json").write_text('{"units": 3, "depth": 3}')
    (b,) = find_builders(index_sources([src]), ["hidden0", "hidden1", "hidden2"], tmp_path / "w.h5")
    assert b.fn == "Net" and b.params == ["units", "depth"] and b.score == 3  # Helper.summary needs an argument
    assert b.label(b.combos()[0]) == "Net(config.json)"


@pytest.mark.slow
def test_anago_class_from_params_json_converts_with_parity(pool, tmp_path):
    """The real anago BiLSTMCRF, never named: the class found, configured by params.json, confirmed by one tf_keras
    build, converted and verified on every backend; the CRF it imports (anago.layers, not installed, not used
    with use_crf=False) is a stand-in the build never calls."""
    report = convert(Options(src=ANAGO, output=tmp_path / "ner.keras", sources=(str(ANAGO_SRC),)), pool=pool)
    assert report["verdict"] == "parity", report["backends"]
    for b in ("tensorflow", "torch", "jax"):
        assert report["backends"][b]["status"] == "parity"
    match = report["source"]["match"]
    assert match["summary"].startswith("BiLSTMCRF(params.json).build() matched 4/4 weight groups")
    assert match["builds_tried"] == 1
    assert report["source"]["build_args"] == {"args": [], "kwargs": ANAGO_PARAMS}
    assert report["ledger"]["tensors_restored"] == report["ledger"]["tensors_expected"] == 11
    assert "BiLSTMCRF(params.json).build() matched 4/4" in to_markdown(report)


@pytest.mark.slow
def test_two_matching_classes_ask_with_the_options(pool, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ANAGO_SRC, src / "models.py")
    (src / "again.py").write_text(ANAGO_SRC.read_text().replace("class BiLSTMCRF(", "class Tagger("))
    for f in ("weights.h5", "params.json"):
        shutil.copy(ANAGO.parent / f, tmp_path / f)
    with pytest.raises(InputError) as exc:
        convert(Options(src=tmp_path / "weights.h5", output=tmp_path / "m.keras", sources=(str(src),),
                        backends=("tensorflow",)), pool=pool)
    line = exc.value.line()
    assert exc.value.code == 2 and "\n" not in line
    assert "2 build functions match its 4 weight groups" in line
    args = ", ".join(f"{k}={v!r}" for k, v in ANAGO_PARAMS.items())
    assert f"--src {src / 'models.py'}:BiLSTMCRF.build --build-args \"{args}\"" in line
    assert f"--src {src / 'again.py'}:Tagger.build --build-args \"{args}\"" in line
    assert not (tmp_path / "m.keras").exists()


# -- Keras 2's masks (K2T436-K2T437): anago's character branch --------------------------------------------------
MASK_PROBE = """
import json, numpy as np, keras
from k2to3.portable import Keras2Concatenate, Keras2TimeDistributed
L, np_ = keras.layers, keras.ops.convert_to_numpy
w = np.array([[1, 0, 2, 3]]); c = np.array([[[1, 2, 0], [3, 0, 0], [0, 0, 0], [0, 0, 0]]])
f = np.ones((1, 4, 3), "float32")  # unmasked features
ew, ec = L.Embedding(10, 2, mask_zero=True), L.Embedding(10, 2, mask_zero=True)
we, wm, ce, cm = ew(w), ew.compute_mask(w), ec(c), ec.compute_mask(c)
out = {}
for name, td_cls, cat_cls in (("k2", Keras2TimeDistributed, Keras2Concatenate),
                              ("k3", L.TimeDistributed, L.Concatenate)):
    td, cat = td_cls(L.Bidirectional(L.LSTM(2))), cat_cls()
    t = td(ce, mask=cm)
    tm = td.compute_mask(ce, cm)
    out[name] = [np_(m).astype(int).tolist() for m in (tm, cat.compute_mask([we, t], [wm, tm]),
                                                       cat.compute_mask([we, f], [wm, None]))]
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", ["jax"])
def test_portable_layers_compute_keras2_masks(backend):
    """tf_keras on the same input: TimeDistributed(Bidirectional(LSTM)) over a char mask gives [[1, 1, 0, 0]] (a
    word with a character); Concatenate gives the AND of its inputs' masks, an unmasked input counting as ones.
    Keras 3's own layers give the 3-D char mask and [[1, 1, 1, 1]] (OR)."""
    out = subprocess.run([sys.executable, "-c", MASK_PROBE], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["k2"] == [[[1, 1, 0, 0]], [[1, 0, 0, 0]], [[1, 0, 1, 1]]]  # tf_keras's masks on this input
    assert got["k3"][0] == [[[1, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]]]
    assert got["k3"][2] == [[1, 1, 1, 1]]


def test_masked_concatenate_and_time_distributed_are_planned_as_keras2_layers():
    """The plan of the whole anago use_char=True model: the Concatenate and TimeDistributed a mask reaches name the
    portable classes; the layers no mask reaches stay Keras 3's."""
    a = read_artifact(ANAGO_CHAR_MODEL)
    plan = upgrade(a.model_config, a.training_config)
    assert not plan.errors
    registered = {s["class_name"]: s["registered_name"] for s in plan.model["layers"]}
    assert registered["Concatenate"] == "k2to3>Keras2Concatenate"
    assert registered["TimeDistributed"] == "k2to3>Keras2TimeDistributed"
    assert registered["Dense"] is None and registered["Bidirectional"] is None
    assert {f.code for f in plan.findings} >= {"K2T436", "K2T437"} and plan.needs_portable
    unmasked = json.loads(json.dumps(a.model_config).replace('"mask_zero": true', '"mask_zero": false'))
    plan = upgrade(unmasked, None)
    assert {s["registered_name"] for s in plan.model["layers"]} == {None} and not plan.needs_portable


@pytest.mark.slow
@pytest.mark.parametrize("which", ["weights+src", "whole model"])
def test_anago_with_char_features_converts_with_parity(pool, tmp_path, which):
    """anago use_char=True: word embeddings concatenated with a TimeDistributed(Bidirectional(LSTM)) over masked
    character embeddings. With Keras 3's masks the word BiLSTM read padded words (max abs 4.3e-2, 77% argmax); with
    Keras 2's (K2T436-K2T437) every backend is at parity, built from the source or rebuilt from the config."""
    if which == "weights+src":
        opts = Options(src=ANAGO_CHAR, output=tmp_path / "ner.keras", sources=(str(ANAGO_SRC),))
    else:
        opts = Options(src=ANAGO_CHAR_MODEL, output=tmp_path / "ner.keras")
    report = convert(opts, pool=pool)
    assert report["verdict"] == "parity", report["backends"]
    for b in ("tensorflow", "torch", "jax"):
        assert report["backends"][b]["status"] == "parity"
        assert report["backends"][b]["outputs"][0]["max_abs"] < 1e-6
    codes = {f["code"]: f["layer"] for f in report["findings"]}
    assert codes["K2T436"].startswith("concatenate") and codes["K2T437"].startswith("time_distributed")
    assert report["ledger"]["tensors_restored"] == report["ledger"]["tensors_expected"] == 18
    assert report["output"]["needs_k2to3_portable"]


ANAGO_CRF = FIXTURES / "weights" / "anago_crf" / "weights.h5"  # use_crf=True


@pytest.mark.slow
def test_anago_with_crf_stops_on_the_crf(pool, tmp_path):
    """use_crf=True: without anago/layers.py beside models.py the build calls the CRF stand-in, and the stop names
    it and where it is imported; with it (Hironsan/anago 7b4802c, unchanged; passed, or found beside models.py from
    its `from anago.layers import CRF`), the first of its Keras 2 calls without a keras.ops rewrite (K.T.unbroadcast,
    Theano's, in the branch for that backend). Either way exit 2 and nothing written (docs/convert.md, anago's CRF)."""
    layers = ANAGO_SRC.with_name("layers.py")
    alone = tmp_path / "alone" / "anago" / "models.py"  # the package without its layers.py
    alone.parent.mkdir(parents=True)
    alone.write_text(ANAGO_SRC.read_text())
    for sources, words in (((str(alone),), "BiLSTMCRF(params.json).build() calls CRF, imported from "
                            f"anago.layers ({alone}:10), which is neither installed nor in the --src files"),
                           ((str(ANAGO_SRC),), "K.T.unbroadcast has no keras.ops equivalent"),
                           ((str(ANAGO_SRC), str(layers)), "K.T.unbroadcast has no keras.ops equivalent")):
        with pytest.raises(InputError) as exc:
            convert(Options(src=ANAGO_CRF, output=tmp_path / "m.keras", sources=sources,
                            backends=("tensorflow",)), pool=pool)
        assert exc.value.code == 2 and words in exc.value.line()
    assert not (tmp_path / "m.keras").exists()
