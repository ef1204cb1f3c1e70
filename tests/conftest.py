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
