"""The op table: every entry is checked by a differential test (TF eager vs its keras.ops translation)
on tensorflow, torch and jax. A backend disagreement is recorded in the table (known_failures) and must
keep failing here, so a fixed backend is noticed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, record_line

from k2to3 import ops

BACKENDS = ("tensorflow", "torch", "jax")


@pytest.fixture(scope="module")
def diff_results() -> dict[str, list[dict]]:
    out = {}
    for b in BACKENDS:
        env = {**os.environ, "KERAS_BACKEND": b, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
        r = subprocess.run([sys.executable, str(ROOT / "tests" / "op_diff_probe.py")], capture_output=True,
                           text=True, env=env, timeout=900)
        assert r.returncode == 0, r.stderr[-2000:]
        out[b] = json.loads(r.stdout.strip().splitlines()[-1])["results"]
    return out


def test_table_loads_and_names_are_unique():
    assert len(ops.table()) >= 60
    assert all(e.cases for e in ops.table()), [e.name for e in ops.table() if not e.cases]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_differential(backend, diff_results):
    known = {(e.name, k["case"]) for e in ops.table() for k in e.known_failures if k["backend"] == backend}
    results = diff_results[backend]
    unexpected = [r for r in results if not r["ok"] and (r["op"], r["case"]) not in known]
    fixed = [r for r in results if r["ok"] and (r["op"], r["case"]) in known]
    passing = sum(r["ok"] for r in results)
    record_line("ops", {"backend": backend, "cases": len(results), "passing": passing,
                        "known_failures": sorted(known),
                        "worst_max_abs": max((r["max_abs"] for r in results if r["ok"]), default=0.0)})
    assert not unexpected, unexpected
    assert not fixed, f"recorded as failing but now pass: {fixed}"


def test_translation_values():
    e = ops.lookup("split")
    assert ops.translate(e, "x", {"num_or_size_splits": [1, 2, 3], "axis": 0})["indices_or_sections"] == [1, 3]
    assert ops.translate(ops.lookup("nn.gelu"), "x", {})["approximate"] is False
    assert ops.translate(ops.lookup("math.argmax"), "x", {})["axis"] == 0
    assert ops.translate(ops.lookup("compat.v1.pad"), "x", {"mode": "REFLECT"})["mode"] == "reflect"
    assert ops.check("math.cumsum", {"axis": 1, "exclusive": True})
    assert ops.check("raw_ops.AddV2", {})
    assert ops.check("math.l2_normalize", {}) and not ops.check("math.l2_normalize", {"axis": -1})


def test_slice_index():
    spec = [{"start": None, "stop": None, "step": None}, None, {"class_name": "__ellipsis__"}, -1,
            {"start": 1, "stop": -1, "step": 2}]
    assert ops.slice_index(spec) == (slice(None), None, Ellipsis, -1, slice(1, -1, 2))


def test_ops_doc_is_current():
    from k2to3.opsdoc import render

    assert (ROOT / "docs" / "ops.md").read_text() == render(), "run: python -m k2to3.opsdoc > docs/ops.md"
