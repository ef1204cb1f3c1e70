"""`k2to3 convert STORE/ -o OUT/` with the local executor: a mirrored tree, per-artifact and store reports, the exit
code of the worst verdict, a rerun that converts nothing, and the inputs never touched."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest
from conftest import H5
from store_tree import EXPECTED, N_ARTIFACTS, OUTPUTS, make_tree

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "COLUMNS": "200"}


def interruptible() -> None:
    """In the child before exec: a suite started in the background of a non-interactive shell ignores SIGINT,
    children inherit that, and Python then installs no KeyboardInterrupt handler: Ctrl-C would not reach k2to3."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def k2to3(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "k2to3", *args], env=ENV, capture_output=True, text=True,
                          timeout=1200)


def digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Interrupted with Ctrl-C once an artifact is recorded, then run again to the end."""
    root = tmp_path_factory.mktemp("batch")
    store = make_tree(root / "store")
    before = digest(store)
    cmd = [sys.executable, "-m", "k2to3", "convert", str(store), "-o", str(root / "out"), "--backends",
           "tensorflow", "--jobs", "2"]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    cache = root / "out" / ".k2to3-batch-cache.json"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if cache.exists() and json.loads(cache.read_text() or "{}"):
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    interrupted = {"code": proc.returncode, "stderr": stderr, "done": len(json.loads(cache.read_text())),
                   "partial": [p.name for p in (root / "out").rglob("*partial*")]}
    first = k2to3(*cmd[3:])
    return root, store, before, first, interrupted


@pytest.mark.slow
def test_interrupted_store_resumes(converted):
    *_, r, interrupted = converted
    assert interrupted["code"] == 130, interrupted["stderr"][-2000:]
    assert "run the same command to resume" in interrupted["stderr"] and "Traceback" not in interrupted["stderr"]
    assert interrupted["partial"] == []  # no partial .keras left by the artifacts in flight
    assert 1 <= interrupted["done"] < N_ARTIFACTS
    assert r.returncode == 3, r.stderr[-3000:]


@pytest.mark.slow
def test_store_converted_to_a_mirrored_tree(converted):
    root, store, before, r, interrupted = converted
    assert r.returncode == 3, r.stderr[-3000:]  # worst verdict: not_portable (blocked/payload.h5)
    out = root / "out"
    assert {p.relative_to(out).as_posix() for p in out.rglob("*.keras") if p.is_file()} == OUTPUTS
    assert (out / "lam" / "lambda_activation_k3.py").is_file()  # the generated module beside its .keras
    rep = json.loads((out / "store-report.json").read_text())
    assert len(rep["artifacts"]) == N_ARTIFACTS and rep["exit_code"] == 3
    assert rep["cached"] == interrupted["done"]  # what the interrupted run finished is not converted again
    got = {a["rel"]: a["verify"]["verdict"] for a in rep["artifacts"]}
    assert got == EXPECTED
    for a in rep["artifacts"]:  # every artifact has its own report, the blocked one too
        rj = json.loads((out / (a["verify"]["output"][len(str(out)) + 1:] + ".report") / "report.json").read_text())
        assert rj["verdict"] == a["verify"]["verdict"]
        assert Path(rj["input"]["path"]) == store / a["rel"]
    assert "payload" in (out / "store-report.md").read_text()
    assert "<table id='artifacts'>" in (out / "store-report.html").read_text()
    assert not list(out.rglob("*partial*")) and not list(out.rglob("*.tmp"))
    assert digest(store) == before  # inputs untouched


@pytest.mark.slow
def test_rerun_converts_nothing(converted):
    root, store, *_ = converted
    out = root / "out"
    keras_before = digest(out)
    r = k2to3("convert", str(store), "-o", str(out), "--backends", "tensorflow")
    assert r.returncode == 3, r.stderr[-3000:]
    rep = json.loads((out / "store-report.json").read_text())
    assert rep["cached"] == N_ARTIFACTS and all(a["verify"]["cached"] for a in rep["artifacts"])
    after = digest(out)
    assert {k: v for k, v in after.items() if k.endswith(".keras")} == \
        {k: v for k, v in keras_before.items() if k.endswith(".keras")}
    # Other options are other work: a new tolerance misses the cache for every artifact.
    from k2to3.stores import batch
    items = batch.plan([str(store)], str(out), {"backends": ("tensorflow",), "rtol": 1e-3})
    from k2to3.stores.cache import BATCH_CACHE, StoreCache

    cache = StoreCache(str(out), BATCH_CACHE)
    assert all(cache.get(i["key"]) is None for i in items)


def test_output_inside_the_store_is_refused(tmp_path):
    store = make_tree(tmp_path / "store")
    before = digest(store)
    for out in (store / "converted", tmp_path):
        r = k2to3("convert", str(store), "-o", str(out))
        assert r.returncode == 2 and "overlaps the input" in r.stderr and "Traceback" not in r.stderr
    assert digest(store) == before


def test_single_model_options_are_refused_for_a_store(tmp_path):
    store = make_tree(tmp_path / "store")
    r = k2to3("convert", str(store), "-o", str(tmp_path / "out"), "--src", str(store / "lam" / "k2_zoo.py"))
    assert r.returncode == 2 and "--src applies to one model" in r.stderr
    r = k2to3("convert", str(store), "-o", str(tmp_path / "out"), "--executor", "spark")
    assert r.returncode == 2 and "unknown executor" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_store_passes_target_keras_and_export_to_every_artifact(tmp_path):
    """A tree of 2 fixtures converted with --target-keras/--target-python and --export: each artifact's conversion
    wrote its file for that release, loaded it there and exported beside its .keras, checked against its golden.
    The release is the installed one named by this interpreter (no environment created from the index: older
    releases are tests/test_target_keras.py's)."""
    store = tmp_path / "store"
    (store / "a").mkdir(parents=True)
    shutil.copy(H5 / "fm19_hard_sigmoid.h5", store / "hs.h5")
    shutil.copy(H5 / "fm07_conv1d.h5", store / "a" / "conv.h5")
    release = ".".join(metadata.version("keras").split(".")[:2])
    out = tmp_path / "out"
    r = k2to3("convert", str(store), "-o", str(out), "--backends", "tensorflow", "--export", "onnx",
              "--target-keras", release, "--target-python", sys.executable)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((out / "store-report.json").read_text())
    assert {a["rel"] for a in rep["artifacts"]} == {"hs.h5", "a/conv.h5"}
    for a in rep["artifacts"]:
        v = a["verify"]
        assert v["export"]["status"] == "parity" and v["export"]["written"], v
        assert Path(v["export"]["path"]) == out / Path(a["rel"]).with_suffix(".onnx")
        assert Path(v["export"]["path"]).is_file()
        assert v["target"]["status"] == "parity" and v["target"]["keras"] == release, v
        rj = json.loads((Path(v["output"] + ".report") / "report.json").read_text())
        assert rj["target"]["keras_version"].startswith(release) and rj["export"]["format"] == "onnx"
        t = a["targets"]  # the audit column: what ran is verified
        assert t["formats"]["onnx"] == {**t["formats"]["onnx"], "reach": "yes", "evidence": "verified"}
        assert t["keras"]["target"] == {"keras": release, "status": "parity", "evidence": "verified"}
    assert "onnx yes (verified)" in (out / "store-report.md").read_text()


def test_store_deployment_options_are_checked_before_the_scan(tmp_path):
    store = make_tree(tmp_path / "store")
    r = k2to3("convert", str(store), "-o", str(tmp_path / "out"), "--target-python", sys.executable)
    assert r.returncode == 2 and "--target-python applies to --target-keras only" in r.stderr
    r = k2to3("convert", str(store), "-o", str(tmp_path / "out"), "--export", "torch", "--backends", "jax")
    assert r.returncode == 2 and "--export torch exports on the torch backend" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()


def test_store_table_paths_are_relative_and_reasons_one_line():
    """The console table's output column is relative to -o, a reason is its first line, and a store that is one
    SavedModel directory writes saved_model.keras, not '..keras'."""
    from k2to3.interfaces.cli_store import _first_line, _relative
    from k2to3.stores.batch import _target

    assert _relative("/out/dir/sub/model.keras", "/out/dir") == "sub/model.keras"
    assert _relative("/out/dir/model.keras", "/out/dir/") == "model.keras"
    assert _relative("s3://bucket/out/m.keras", "s3://bucket/out") == "m.keras"
    assert _first_line("error: one\nTraceback (most recent call last):") == "error: one"
    assert _target(".", set()) == "saved_model.keras" and _target("sm", set()) == "sm.keras"
    taken: set[str] = set()
    assert (_target("m.h5", taken), _target("m.hdf5", taken)) == ("m.keras", "m.hdf5.keras")
