"""`k2to3 audit`: static verdicts over the real corpus, agreement with --verify, resumable verify."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ARTIFACTS, FIXTURES, H5

from k2to3.stores.audit import run_audit
from k2to3.stores.auditreport import write


def test_static_audit_of_corpus_writes_three_forms(corpus, tmp_path):
    rep = run_audit([corpus, FIXTURES / "src"], tmp_path)
    written = write(rep, tmp_path, ["md", "html", "json"])
    assert [p.name for p in written] == ["audit.md", "audit.html", "audit.json"]
    assert len(rep["artifacts"]) == 20
    by = {os.path.relpath(a["path"], corpus): a for a in rep["artifacts"]}
    # Lambda bytecode, resolved from the training scripts in tests/fixtures/src (written for the tests)
    assert by["carnd_1560800/model.h5"]["verdict"] == "portable with source"
    assert by["nnom/keras_mnist_model.h5"]["src"] == [str(FIXTURES / "src" / "nnom_model.py")]
    assert by["ethnicolr/wiki_name_lstm.h5"]["verdict"] == "portable"
    assert by["ethnicolr/wiki_name_lstm.h5"]["rules"]["K2T401"] == 1
    assert by["sleap/minimal_instance.UNet.centroid.best_model.h5"]["layers"]["Conv2DTranspose"] == 1
    assert rep["rule_totals"]["K2T101"] > 0 and rep["worst_verdict"] == "portable with source"
    html = (tmp_path / "audit.html").read_text()
    assert "<table id='artifacts'>" in html and "http" not in html.replace("http-equiv", "")


def test_artifacts_found_by_content_not_extension(tmp_path):
    shutil.copy(H5 / "fm02_training_config.h5", tmp_path / "model.bin")
    (tmp_path / "notes.txt").write_text("not a model")
    rep = run_audit([tmp_path], tmp_path / "out")
    assert [os.path.basename(a["path"]) for a in rep["artifacts"]] == ["model.bin"]


@pytest.mark.slow
def test_static_verdicts_agree_with_verify(corpus, tmp_path):
    rep = run_audit([corpus], tmp_path, verify=True)
    for a in rep["artifacts"]:
        converted = a["verify"]["converted"]
        assert converted == (a["verdict"] == "portable"), (a["path"], a["verdict"], a["verify"])
    write(rep, tmp_path, ["html"])
    assert "layer-plot" in (tmp_path / "audit.html").read_text()  # the sleap mismatch gets a per-layer plot
    render_in_chromium(tmp_path / "audit.html", tmp_path)


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def render_in_chromium(page, tmp_path) -> None:
    """Open the report in a real headless Chromium (no network): the DOM it renders has the table rows and
    the per-layer plot, and the screenshot is kept in test-artifacts/ for a person to look at."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (.ci/run installs Debian's chromium)")
    base = [chromium, *CHROMIUM_FLAGS]
    dom = subprocess.run([*base, f"--user-data-dir={tmp_path / 'chr1'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert dom.count("<tr>") >= 21 and 'id="artifacts"' in dom
    assert '<svg class="layer-plot"' in dom and "<polyline" in dom
    shot = ARTIFACTS / "audit.png"
    ARTIFACTS.mkdir(exist_ok=True)
    subprocess.run([*base, f"--user-data-dir={tmp_path / 'chr2'}", "--window-size=1400,3000",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def interruptible() -> None:
    """In the child before exec: a suite started in the background of a non-interactive shell ignores SIGINT,
    children inherit that, and Python then installs no KeyboardInterrupt handler: Ctrl-C would not reach k2to3."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_interrupted_verify_resumes(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    # Enough artifacts that the interrupt lands mid-run: warm workers verify a small file in about a second.
    names = ("fm05_rnn_time_major", "fm12_thresholded_relu", "fm15_spatial_dropout", "fm16_axis_lists",
             "fm06_depthwise_groups", "fm07_conv1d", "fm13_mha", "fm14_seq2seq_initial_state",
             "fm19_hard_sigmoid", "fm20_initializer_dtype", "embedding_lstm", "convnext_blocks")
    for name in names:
        shutil.copy(H5 / f"{name}.h5", store / f"{name}.h5")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "k2to3", "audit", str(store), "--verify", "-o", str(out), "--format", "json"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    cache = out / ".k2to3-audit-cache.json"
    deadline = time.time() + 600
    while time.time() < deadline:
        if cache.exists() and len(json.loads(cache.read_text() or "{}")) >= 1:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    done = len(json.loads(cache.read_text()))
    assert 1 <= done < len(names)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads((out / "audit.json").read_text())
    cached = [a for a in rep["artifacts"] if a["verify"].get("cached")]
    assert len(cached) == done and all(a["verify"]["verdict"] == "parity" for a in rep["artifacts"])


def test_lambda_files_are_portable_with_the_trees_source(corpus, tmp_path):
    """The nnom and CarND files' Lambdas resolve from the training scripts in the same tree, each script on its
    own (tests/fixtures/src also holds k2_zoo.py, whose inline Lambdas would make CarND's ambiguous in a merged
    index)."""
    from k2to3.stores.audit import run_audit

    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "src", repo / "src")
    shutil.copy(corpus / "nnom" / "keras_mnist_model.h5", repo / "nnom.h5")
    shutil.copy(corpus / "carnd_1560800" / "model.h5", repo / "carnd.h5")
    rows = {Path(a["path"]).name: a for a in run_audit([repo], tmp_path / "out")["artifacts"]}
    nnom = rows["nnom.h5"]
    assert nnom["verdict"] == "portable with source" and nnom["src"] == [str(repo / "src" / "nnom_model.py")]
    assert nnom["source_objects"][0]["name"] == "quant_layer" and len(nnom["source_objects"][0]["layers"]) == 13
    carnd = rows["carnd.h5"]
    assert carnd["verdict"] == "portable with source" and carnd["src"] == [str(repo / "src" / "carnd_model.py")]
    (repo / "src" / "carnd_model.py").unlink()  # then only k2_zoo's inline lambdas are left: no single answer
    rows = {Path(a["path"]).name: a for a in run_audit([repo], tmp_path / "out2")["artifacts"]}
    assert rows["carnd.h5"]["verdict"] == "blocked" and "call sites" in rows["carnd.h5"]["reason"]
