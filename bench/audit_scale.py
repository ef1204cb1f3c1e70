"""Benchmark the static `k2to3 audit` and its report on a synthetic store (tests/fixtures/make_audit_store.py).

Prints, for N artifacts, in CPU seconds of this process (the machine may be shared): the audit's time per
artifact against a baseline run in the same script (reading each artifact's config and hashing it, the least a
static audit must do), the report rendering time, and the effect of memoising the custom-object resolution on a
small store (before, each artifact with custom code generated and linted the Keras 3 module of every candidate
script). Usage: python bench/audit_scale.py [N]  (default 10000)"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

from make_audit_store import make_store  # noqa: E402

from k2to3.errors import K2to3Error  # noqa: E402
from k2to3.formats.artifact import file_sha256, read_artifact  # noqa: E402
from k2to3.source.extract import index_sources  # noqa: E402
from k2to3.stores.audit import run_audit  # noqa: E402
from k2to3.stores.auditreport import write  # noqa: E402
from k2to3.stores.discover import walk  # noqa: E402
from k2to3.stores.static import definitions as _definitions  # noqa: E402
from k2to3.stores.static import static_verdict  # noqa: E402


def baseline(paths: list[Path]) -> float:
    t0 = time.process_time()
    for p in paths:
        try:
            read_artifact(p)
        except K2to3Error:
            pass
        file_sha256(p)
    return time.process_time() - t0


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "store"
        t0 = time.perf_counter()
        make_store(store, n)
        print(f"generated {n} artifacts in {time.perf_counter() - t0:.1f} s")
        tree = walk([store])
        base = baseline(tree.artifacts)
        t0, c0 = time.perf_counter(), time.process_time()
        rep = run_audit([store], Path(d) / "out")
        wall, audit = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        written = write(rep, Path(d) / "out", ["json", "md", "html"])
        render = time.perf_counter() - t0
        sizes = ", ".join(f"{p.name} {p.stat().st_size / 1e6:.1f} MB" for p in written)
        print(f"static audit: {wall:.1f} s wall, {audit:.1f} s CPU = {audit / n * 1e3:.2f} ms/artifact; baseline (read "
              f"config + sha256): {base / n * 1e3:.2f} ms CPU/artifact -> audit/baseline = {audit / base:.2f}x")
        print(f"report: {render:.1f} s ({sizes}); totals {rep['totals']}")
        small = Path(d) / "small"
        make_store(small, 200, teams=5)  # 20 artifacts with custom code, 3 distinct classes
        tree = walk([small])
        defs = _definitions(tree.sources)
        index = index_sources([p for p in tree.sources if p.suffix == ".py"], skip_bad=True)
        custom = [p for p in tree.artifacts if int(p.stem.split("-")[1]) % 20 in (12, 13)]
        times = []
        for memo in (None, {}):
            t0 = time.process_time()
            for p in custom:
                static_verdict(p, defs, index, memo)
            times.append(time.process_time() - t0)
        print(f"{len(custom)} artifacts with custom code: unmemoised {times[0]:.1f} s, memoised {times[1]:.1f} s "
              f"-> {times[0] / times[1]:.1f}x")


if __name__ == "__main__":
    main()
