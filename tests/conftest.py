"""Shared test setup. Slow tests start real backend worker processes (one warm pool per session)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
H5 = FIXTURES / "h5"
BAD = FIXTURES / "bad"
CORPUS = ROOT.parent / "shared" / "corpus" / "real-h5"
CACHE = ROOT / "tests" / ".cache"
ARTIFACTS = ROOT / "test-artifacts"


def manifest() -> list[dict]:
    return json.loads((H5 / "manifest.json").read_text())


def good_fixtures() -> list[dict]:
    return [m for m in manifest() if not m.get("bad")]


@pytest.fixture(scope="session")
def pool():
    from k2to3.workers.pool import Pool

    with Pool() as p:
        p.start()
        yield p


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def record(name: str, report: dict) -> None:
    """Keep per-model figures (worst errors per backend) as a test artifact for the issue notes."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "parity.jsonl"
    row = {"model": name, "verdict": report.get("verdict"), "reference": report.get("reference", {}).get("kind")}
    for b, v in report.get("backends", {}).items():
        outs = v.get("outputs", [])
        row[b] = {"max_abs": max((o["max_abs"] for o in outs), default=None),
                  "max_rel": max((o["max_rel"] for o in outs), default=None),
                  "min_atol": max((o["min_atol"] for o in outs), default=None)}
    with open(path, "a") as fh:
        fh.write(json.dumps(row) + "\n")


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def record_line(kind: str, row: dict) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    with open(ARTIFACTS / f"{kind}.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")


def pytest_sessionstart(session) -> None:
    for name in ("parity.jsonl", "ops.jsonl", "lint.jsonl"):
        (ARTIFACTS / name).unlink(missing_ok=True)


# Every generated `*_k3.py` a test leaves in its tmp_path, bound to the installed Keras 3 once at the end of the
# session (tests/bindcheck.py in a subprocess: the test process never imports keras); a failure fails the run.
_GENERATED: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _generated_modules(request):
    yield
    tmp = request.node.funcargs.get("tmp_path") if hasattr(request.node, "funcargs") else None
    if isinstance(tmp, Path):
        for p in tmp.rglob("*_k3.py"):
            _GENERATED[f"{request.node.nodeid} {p.relative_to(tmp)}"] = p.read_text(errors="replace")


def pytest_sessionfinish(session, exitstatus) -> None:
    if not _GENERATED:
        return
    import subprocess
    import sys
    import tempfile

    names = sorted(_GENERATED)
    with tempfile.TemporaryDirectory() as d:
        pairs = []
        for i, name in enumerate(names):
            (f := Path(d) / f"{i}_k3.py").write_text(_GENERATED[name])
            pairs.append([None, str(f)])
        (spec := Path(d) / "bind.json").write_text(json.dumps(pairs))
        env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
        r = subprocess.run([sys.executable, str(ROOT / "tests" / "bindcheck.py"), str(spec)], capture_output=True,
                           text=True, env=env)
    got = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if got is None or got["failures"]:
        # "<tmp>/3_k3.py:12: why" -> "<test id> <file>:12: why"
        lines = [r.stderr[-2000:]] if got is None else [
            f"{names[int(Path(f.split(':')[0]).name.split('_')[0])]}:{f.split(':', 1)[1]}" for f in got["failures"]]
        if tr:
            tr.write_line("generated *_k3.py modules that do not compile or bind:\n" + "\n".join(lines), red=True)
        session.exitstatus = 1
    elif tr:
        tr.write_line(f"{len(names)} generated *_k3.py modules: {got['calls']} Keras 3 calls bound")
