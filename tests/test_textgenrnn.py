"""minimaxir/textgenrnn's weights-only files: `textgenrnn_model(num_classes, cfg, ...)` found in its package source,
num_classes (the package passes len(vocab) + 1) read from the file's weight shapes, cfg from the config JSON beside
the weights or the class's default `config`, the CuDNNLSTM-layout weights of a GPU-trained file converted as
tf_keras's loader converts them, and AttentionWeightedAverage rewritten to keras.ops. Fixtures:
tests/fixtures/make_textgenrnn_fixtures.py (the package's files copied to tests/fixtures/src/textgenrnn/, MIT)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES

from k2to3.core.options import ConvertOptions as Options
from k2to3.formats.artifact import read_artifact
from k2to3.pipeline.build_search import weight_groups
from k2to3.pipeline.convert import convert
from k2to3.pipeline.sources import parse_sources
from k2to3.source.build_candidates import find_builders
from k2to3.source.extract import index_sources
from k2to3.upgrade.cudnn import convert_weights, file_layout

SRC = FIXTURES / "src" / "textgenrnn"
TINY = FIXTURES / "weights" / "textgenrnn" / "tiny_weights.hdf5"
TINY_BI = FIXTURES / "weights" / "textgenrnn_bi" / "tiny_bi_weights.hdf5"


def _builder(weights):
    groups = weight_groups(read_artifact(weights, weights_only_ok=True))
    found = find_builders(index_sources(sorted(SRC.glob("*.py"))), [g["name"] for g in groups], weights,
                          groups=groups)
    return groups, found[0]


def test_num_classes_from_the_weight_shapes_and_cfg_from_the_json_beside_them():
    groups, b = _builder(TINY)
    assert b.fn == "textgenrnn_model" and b.required == ["num_classes", "cfg"] and b.score == len(groups) == 5
    # Embedding(num_classes, ...) and Dense(num_classes, ...): the dimension both groups share comes first
    assert b.values["num_classes"][0] == 12
    assert b.origin("num_classes", 12) == "the weight shapes of embedding, output"
    cfg, default = b.values["cfg"][:2]
    assert cfg["rnn_size"] == 8 and b.origin("cfg", cfg) == "tiny_config.json beside the weights"
    # then the package's own default: `cfg=self.config`, the class attribute textgenrnn.config
    assert default["rnn_size"] == 128 and b.origin("cfg", default).startswith("textgenrnn.config (textgenrnn.py:")
    # the vocabulary beside the weights holds none of the keys textgenrnn_model reads: not a cfg candidate
    assert not any("a" in v for v in b.values["cfg"])
    assert b.combos()[0] == {"num_classes": 12, "cfg": cfg}


def test_a_named_file_brings_the_files_of_its_package_it_imports_and_that_import_it():
    files, fn = parse_sources((f"{SRC / 'model.py'}:textgenrnn_model",))
    # its layer class, and textgenrnn.py, where the package calls textgenrnn_model(..., cfg=self.config)
    assert [f.name for f in files] == ["AttentionWeightedAverage.py", "model.py", "textgenrnn.py"]
    assert fn == "textgenrnn_model"


def test_cudnn_layout_is_recognised_and_converted_as_tf_keras_does():
    import tf_keras
    from tf_keras.src.saving.legacy import hdf5_format

    rng = np.random.default_rng(0)
    kernel, rec, bias = (rng.standard_normal(s).astype("float32") for s in ((5, 32), (8, 32), (64,)))
    assert file_layout("LSTM", [[5, 32], [8, 32], [64]], [[5, 32], [8, 32], [32]]) == "LSTM"
    assert file_layout("LSTM", [[5, 32], [8, 32], [32]], [[5, 32], [8, 32], [32]]) is None  # already plain
    assert file_layout("Dense", [[5, 32], [8, 32], [64]], [[5, 32], [8, 32], [32]]) is None
    ours, _ = convert_weights("LSTM", [kernel, rec, bias])
    layer = tf_keras.layers.LSTM(8)
    layer.build((None, 3, 5))
    theirs = hdf5_format.preprocess_weights_for_loading(layer, [kernel, rec, bias], "2.1.5", "tensorflow")
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
    # CuDNNGRU: (6 * units,) biases -> GRU(reset_after=True)'s (2, 3 * units)
    gru = [a[:, :24] if a.ndim == 2 else a[:48] for a in (kernel, rec, bias)]
    assert file_layout("GRU", [list(a.shape) for a in gru], [[5, 24], [8, 24], [2, 24]]) == "GRU"
    ours, _ = convert_weights("GRU", gru)
    layer = tf_keras.layers.GRU(8)
    layer.build((None, 3, 5))
    theirs = hdf5_format.preprocess_weights_for_loading(layer, gru, "2.1.5", "tensorflow")
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("weights,src", [(TINY, str(SRC)), (TINY_BI, f"{SRC / 'model.py'}")])
def test_textgenrnn_converts_with_parity(pool, tmp_path, weights, src):
    """The package directory (or its model.py alone) and a GPU-trained file: found, confirmed by one tf_keras
    build, converted and verified on every backend against tf_keras running textgenrnn's own code."""
    report = convert(Options(src=weights, output=tmp_path / "tg.keras", sources=(src,)), pool=pool)
    for b in ("tensorflow", "torch", "jax"):
        assert report["backends"][b]["status"] == "parity", (b, report["backends"][b])
    match = report["source"]["match"]
    assert "num_classes=12 from the weight shapes of embedding, output" in match["summary"]
    assert match["cudnn_layout"] == "rnn_1, rnn_2" and match["builds_tried"] == 1
    assert report["ledger"]["tensors_restored"] == report["ledger"]["tensors_expected"]
    assert any("AttentionWeightedAverage" == o["name"] for o in report["source"]["objects"])
    assert report["reference"]["from"] == "the --src build function"
    if weights == TINY:  # the module's `from tensorflow import config` (new_rnn looks for a GPU) is optional
        block = ("import builtins, os, sys\nreal = builtins.__import__\n"
                 "def imp(name, *a, **k):\n    if name.split('.')[0] == 'tensorflow':\n"
                 "        raise ImportError(name)\n    return real(name, *a, **k)\n"
                 "builtins.__import__ = imp\nos.environ['KERAS_BACKEND'] = 'jax'\nimport keras, numpy as np\n"
                 f"sys.path.insert(0, {str(tmp_path)!r})\nimport tg_k3\n"
                 f"m = keras.saving.load_model({str(tmp_path / 'tg.keras')!r}, safe_mode=True)\n"
                 "print(m.predict(np.zeros((1, 6)), verbose=0).shape, 'tensorflow' in sys.modules)\n")
        r = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.split()[-1] == "False", r.stderr[-2000:]


@pytest.mark.slow
def test_wrong_config_beside_the_weights_is_one_line(tmp_path):
    """A config JSON that does not fit the file, and the package default neither: exit 2, one line naming the
    first group that differs."""
    import json
    import shutil

    shutil.copy(TINY, tmp_path / "w.hdf5")
    cfg = json.loads((TINY.parent / "tiny_config.json").read_text())
    (tmp_path / "w_config.json").write_text(json.dumps({**cfg, "rnn_size": 4}))
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(tmp_path / "w.hdf5"), "--src", str(SRC),
                        "-o", str(tmp_path / "m.keras"), "--backends", "tensorflow"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "no candidate build matches its 5 weight groups" in r.stderr
