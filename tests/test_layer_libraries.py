"""Keras 2 layer libraries as sources: `--src` takes a library's folder or its installed package name, follows its
package (re-exports in __init__.py, sibling modules), and translates its classes as user code; without `--src` the
error line names the library (rules/libraries.toml). Fixture: tests/fixtures/libs/attention_model.h5
(tests/fixtures/make_library_fixtures.py) built from tests/fixtures/libs/k2to3_fixture_attention, written the way
keras-multi-head 0.29 and keras-pos-embd 0.13 are (a class named like Keras's MultiHeadAttention saved with head_num,
a build that tests isinstance(input_shape, list), a config with input_dim/output_dim)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES

from k2to3.core import rules as rules_mod
from k2to3.formats import open_input
from k2to3.pipeline.prepare import prepare
from k2to3.pipeline.sources import installed_package, parse_sources, read_sources
from k2to3.upgrade.keras1.translate import is_keras1
from k2to3.upgrade.needed_code import foreign_keys

LIBS = FIXTURES / "libs"
H5 = LIBS / "attention_model.h5"
PACKAGE = LIBS / "k2to3_fixture_attention"


def test_without_sources_the_error_names_the_library(tmp_path):
    plan = prepare(open_input(H5, tmp_path), read_sources(()), tmp_path / "m.keras", False).plan
    msgs = {f.layer: f"{f.message} ({f.fix})" for f in plan.errors}
    assert "keras-pos-embd" in msgs["position_embedding"] and "--src keras_pos_embd" in msgs["position_embedding"]
    assert "saved with head_num, which Keras 3's MultiHeadAttention does not take" in msgs["multi_head_attention"]
    assert "--src keras_multi_head" in msgs["multi_head_attention"]
    assert rules_mod.library_hint("CRF").startswith("CRF is keras-contrib's")
    assert rules_mod.library_hint("Dense") is None


def test_a_library_class_is_not_keras1_and_a_keras_name_with_foreign_keys_is_another_class(tmp_path):
    config = open_input(H5, tmp_path).artifact.model_config
    assert not is_keras1(config)  # PositionEmbedding's output_dim is its own key, not Keras 1's Dense
    assert foreign_keys("MultiHeadAttention", {"name": "m", "head_num": 2}) == ["head_num"]
    assert foreign_keys("MultiHeadAttention", {"name": "m", "num_heads": 2, "key_dim": 4}) == []
    assert foreign_keys("MyOwnLayer", {"head_num": 2}) == []


def test_the_package_is_followed_and_its_classes_are_taken(tmp_path):
    prepared = prepare(open_input(H5, tmp_path), read_sources((str(PACKAGE),)), tmp_path / "m.keras", False)
    assert not prepared.plan.errors, [f.message for f in prepared.plan.errors]
    assert prepared.resolution.classes == {"PositionEmbedding": "PositionEmbedding",
                                           "MultiHeadAttention": "MultiHeadAttention"}
    code = prepared.resolution.k3_code
    assert "MultiHeadAttention = _k2to3_build_shapes(MultiHeadAttention)" in code and "tensorflow" not in code
    compile(code, "m_k3.py", "exec")


def test_an_installed_package_by_name(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(LIBS))
    assert installed_package("k2to3_fixture_attention") == PACKAGE
    assert installed_package(str(H5)) is None and installed_package("no_such_package_k2to3") is None
    files, _ = parse_sources(("k2to3_fixture_attention",))
    assert {f.name for f in files} == {"__init__.py", "attention.py", "position.py"}


@pytest.mark.slow
def test_library_model_converts_at_parity_with_the_package_name(tmp_path):
    out = tmp_path / "att.keras"
    env = {**os.environ, "PYTHONPATH": str(LIBS)}
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(H5), "--src", "k2to3_fixture_attention",
                        "-o", str(out)], capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((tmp_path / "att.keras.report" / "report.json").read_text())
    assert report["verdict"] == "parity" and set(report["backends"]) == {"tensorflow", "torch", "jax"}


def test_keras_2_2_library_idioms(tmp_path):
    """keras-contrib's CRF (written for standalone Keras 2.2), read as written: K.slice and K.logsumexp, which
    tf_keras dropped, are their TF calls ([[k_removed]]); in a generated module K.backend() is the TensorFlow the
    model ran on (its `if K.backend() == 'tensorflow'` branch is the rewritten one); keras-contrib's
    `if keras.__name__ == 'keras': is_tf_keras = False elif ...` gives Keras's own branch as a constant."""
    from k2to3.source.classify import MODEL_CODE, CallArgs, classify_call

    assert classify_call("keras.backend.slice", CallArgs(["x", [0, 1], [-1, 2]], {})).target == \
        "k2to3.portable.tf_slice"
    assert classify_call("keras.backend.logsumexp", CallArgs(["x"], {"axis": 1})).target == \
        "keras.ops.logsumexp"
    assert classify_call("keras.backend.backend", CallArgs([], {})).target == "keras.config.backend"
    token = MODEL_CODE.set(True)
    try:
        assert classify_call("keras.backend.backend", CallArgs([], {})).target == "k2to3.portable.keras2_backend"
    finally:
        MODEL_CODE.reset(token)
    src = tmp_path / "test_utils.py"
    src.write_text("import keras\n\nif keras.__name__ == 'keras':\n    is_tf_keras = False\n"
                   "elif keras.__name__ == 'tensorflow.keras':\n    is_tf_keras = True\nelse:\n"
                   "    raise KeyError('Cannot detect if using keras or tf.keras.')\n")
    index = read_sources((str(src),)).index
    assert index.defs["is_tf_keras"].kind == "constant" and "is_tf_keras = False" in index.defs["is_tf_keras"].code


def test_a_library_class_keras3_rejects_is_named_with_its_cause():
    """keras-embed-sim's EmbeddingRet returns two outputs from an Embedding subclass, which Keras 3 cannot infer: the
    stop names the cause Keras wraps on a later line, not "Exception encountered when calling ..." alone."""
    from k2to3.workers.rebuild import _first_line

    exc = ValueError("Exception encountered when calling EmbeddingRet.call().\n\n\x1b[1mCannot convert "
                     "'[(None, 7, 8), (20, 8)]' to a shape.\x1b[0m\n\nArguments received by EmbeddingRet.call():\n"
                     "  • args=('<KerasTensor>',)")
    assert _first_line(exc) == ("Exception encountered when calling EmbeddingRet.call(). Cannot convert "
                                "'[(None, 7, 8), (20, 8)]' to a shape.")
