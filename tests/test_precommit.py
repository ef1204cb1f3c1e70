"""The pre-commit hooks, run through pre-commit itself on a temporary git repository whose
.pre-commit-config.yaml names this repository at its HEAD commit (as a user's config names a tag): pre-commit
installs the hook environment once for the three tests (`try-repo` built a fresh one per call, 20 s each). So
they test what is committed, as CI's clean clone is."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import CACHE, ROOT

pytestmark = pytest.mark.slow


def sh(*cmd, cwd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    if shutil.which("pre-commit") is None or shutil.which("git") is None:
        pytest.skip("pre-commit or git not installed")
    d = tmp_path_factory.mktemp("userrepo")
    sh("git", "init", "-q", cwd=d)
    sh("git", "config", "user.email", "t@example.invalid", cwd=d)
    sh("git", "config", "user.name", "t", cwd=d)
    (d / "bad.py").write_text("import tensorflow as tf\n\n\ndef f(x):\n    return tf.reduce_mean(x, 1)\n")
    (d / "clean.py").write_text("import keras\n\n\ndef f(x):\n    return keras.ops.mean(x, axis=1)\n")
    rev = sh("git", "rev-parse", "HEAD", cwd=ROOT).stdout.strip()
    (d / ".pre-commit-config.yaml").write_text(f"repos:\n- repo: {ROOT}\n  rev: {rev}\n  hooks:\n"
                                               "  - id: k2to3-lint\n  - id: k2to3-fix\n")
    sh("git", "add", ".", cwd=d)
    sh("git", "commit", "-qm", "init", cwd=d)
    return d


ENV = {"PRE_COMMIT_HOME": str(CACHE / "pre-commit"), "PIP_CONSTRAINT": str(ROOT / "constraints.txt")}


def test_hook_blocks_non_portable_op(repo):
    r = sh("pre-commit", "run", "k2to3-lint", "--files", "bad.py", cwd=repo, env=ENV)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "K2T101" in r.stdout


def test_hook_passes_clean_file(repo):
    r = sh("pre-commit", "run", "k2to3-lint", "--files", "clean.py", cwd=repo, env=ENV)
    assert r.returncode == 0, r.stdout + r.stderr


def test_fix_hook_rewrites(repo):
    r = sh("pre-commit", "run", "k2to3-fix", "--files", "bad.py", cwd=repo, env=ENV)
    assert r.returncode == 1  # files were modified: pre-commit fails so the user reviews
    assert "keras.ops.mean(x, 1)" in (repo / "bad.py").read_text()  # positional kept, equal default not written
