"""`.keras` files written by k2to3 before the wave-3 redesign (tests/fixtures/make_portable_fixtures.py) still load
with today's k2to3.portable, with keras alone and safe_mode=True, on every backend they were verified on, and
compute the Keras 2 outputs their golden files hold: moving the runtime package must keep every registered name
and import path those files use."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT

DIR = FIXTURES / "portable"
MANIFEST = json.loads((DIR / "manifest.json").read_text())


def test_public_names_and_registered_objects_are_kept():
    """Generated modules call k2to3.portable.NAME; saved configs name k2to3>Name: every one still resolves."""
    code = (f"import json, keras, k2to3.portable as p; m = json.load(open({str(DIR / 'manifest.json')!r}));"
            "print(json.dumps({'missing': [n for n in m['portable_names'] if not hasattr(p, n)],"
            "'unregistered': sorted({r for f in m['files'].values() for r in f['registered'] if r.startswith('k2to3>')"
            " and keras.saving.get_registered_object(r) is None})}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"missing": [], "unregistered": []}
    assert len(MANIFEST["portable_names"]) >= 40


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_files_written_before_the_move_load_and_compute_the_same(backend):
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "portable_load_probe.py")], capture_output=True,
                         text=True, env={**os.environ, "KERAS_BACKEND": backend}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    expected = {n for n, f in MANIFEST["files"].items() if backend in f["backends"]}
    assert set(rows) == expected
    bad = {n: r for n, r in rows.items() if not r["ok"]}
    assert not bad, bad
    assert rows["rmsprop_keras2"]["optimizer"] == "Keras2RMSprop"
    assert rows["adagrad_keras2"]["optimizer"] == "Keras2Adagrad"
