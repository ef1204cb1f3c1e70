"""Keras 2 model sources written for the tests: after `k2to3 fix`, the module builds the same model under
tensorflow, torch and jax and, with the same weights, computes what the original computes under tf_keras."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES, ROOT

from k2to3.source.fix import fix_source
from k2to3.source.lint import lint_source

pytestmark = pytest.mark.slow
SRC = FIXTURES / "src" / "k2_model.py"


def run(path, env) -> dict:
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "model_source_probe.py"), str(path)],
                       capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env},
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    d = tmp_path_factory.mktemp("fixed")
    out, n = fix_source(SRC.read_text(), str(SRC))
    assert n > 0
    (d / "k2_model.py").write_text(out)
    return d / "k2_model.py"


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    d = tmp_path_factory.mktemp("orig")
    shutil.copy(SRC, d / "k2_model.py")
    return run(d / "k2_model.py", {"TF_USE_LEGACY_KERAS": "1"})


def test_fixed_source_has_no_tensorflow_left(fixed):
    text = fixed.read_text()
    assert "tensorflow" not in text and "K." not in text
    remaining = [f.code for f in lint_source(text, "k2_model.py")[0]]
    assert set(remaining) <= {"K2T301"}, remaining  # Lambda layers stay (reported, bodies rewritten)


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_fixed_source_matches_keras2(backend, fixed, original):
    got = run(fixed, {"KERAS_BACKEND": backend, "TF_USE_LEGACY_KERAS": ""})
    assert got["n_weights"] == original["n_weights"]
    for key in ("out", "loss", "metric"):
        np.testing.assert_allclose(np.array(got[key]), np.array(original[key]), rtol=1e-5, atol=1e-6,
                                   err_msg=key)
    if backend != "tensorflow":
        assert "tensorflow" not in got["imported"]
