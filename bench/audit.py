"""Benchmark `k2to3 audit --verify` on 20 legacy artifacts: the cost of the first model (which pays the
backend imports of the warm worker pool) and the mean cost of the rest. Usage: python bench/audit.py"""

from __future__ import annotations

import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from k2to3.stores.audit import run_audit  # noqa: E402


def main() -> None:
    manifest = json.loads((ROOT / "tests" / "fixtures" / "h5" / "manifest.json").read_text())
    names = [m["file"] for m in manifest if not m.get("bad")][:20]
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "store"
        store.mkdir()
        for n in names:
            shutil.copy(ROOT / "tests" / "fixtures" / "h5" / n, store / n)
        marks: list[float] = []
        t0 = time.perf_counter()
        rep = run_audit([store], Path(d) / "out", verify=True,
                        progress=lambda i, n, p: marks.append(time.perf_counter()))
        total = time.perf_counter() - t0
    costs = [b - a for a, b in itertools.pairwise(marks)]
    first, rest = costs[0], costs[1:]
    verdicts = [a["verify"]["verdict"] for a in rep["artifacts"]]
    print(f"{len(costs)} artifacts, total {total:.1f} s; verdicts: "
          f"{ {v: verdicts.count(v) for v in set(verdicts)} }")
    print(f"first model {first:.2f} s (includes starting the tensorflow, torch and jax workers); "
          f"rest mean {statistics.mean(rest):.2f} s, median {statistics.median(rest):.2f} s "
          f"-> rest/first = {statistics.mean(rest) / first:.2f}x")


if __name__ == "__main__":
    main()
