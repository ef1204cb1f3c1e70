"""Benchmark: `k2to3 convert` (golden + build + verify on tensorflow, torch and jax) against the naive
recipe, both run from this script on the same ResNet50-size legacy model:

  naive: a tensorflow process loads the .h5 with plain Keras 3 and saves .keras; then a fresh process per
         backend (tensorflow, torch, jax), one after another, loads it and predicts.
  k2to3: one `k2to3 convert` process (warm-up free: it starts its workers itself).

Prints wall time and peak memory (sum of the RSS of all live processes of each run, sampled every 50 ms),
and the ratios k2to3 / naive. Usage: python bench/convert.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "tests" / ".cache"
MODEL = CACHE / "resnet50.h5"

NAIVE_SAVE = """
import sys, keras
m = keras.saving.load_model(sys.argv[1], compile=False)
m.save(sys.argv[2])
"""
NAIVE_RUN = """
import sys, keras, numpy as np
m = keras.saving.load_model(sys.argv[1])
x = np.random.default_rng(0).standard_normal((2, 224, 224, 3)).astype("float32")
y = keras.ops.convert_to_numpy(m(x, training=False))
print(y.shape)
"""


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                kids = [int(k) for k in fh.read().split()]
        except OSError:
            kids = []
        out.extend(kids)
        todo.extend(kids)
    return out


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class PeakMemory:
    """Peak of the summed RSS of this process's descendants while the block runs."""

    def __enter__(self) -> PeakMemory:
        self.peak_kb = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            total = sum(_rss_kb(p) for p in _descendants(me))
            self.peak_kb = max(self.peak_kb, total)
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def _env(backend: str) -> dict[str, str]:
    return {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


def naive(work: Path) -> tuple[float, int]:
    out = work / "naive.keras"
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", NAIVE_SAVE, str(MODEL), str(out)], env=_env("tensorflow"),
                       check=True, capture_output=True)
        for backend in ("tensorflow", "torch", "jax"):
            subprocess.run([sys.executable, "-c", NAIVE_RUN, str(out)], env=_env(backend), check=True,
                           capture_output=True)
        wall = time.perf_counter() - t0
    return wall, mem.peak_kb


def k2to3(work: Path) -> tuple[float, int]:
    out = work / "k2to3.keras"
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(MODEL), "-o", str(out), "--force"],
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"k2to3 convert failed ({r.returncode}): {r.stderr[-500:]}")
    return wall, mem.peak_kb


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if not MODEL.exists():
        subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "make_fixtures.py"), "--large",
                        str(CACHE)], check=True, capture_output=True)
    print(f"model: {MODEL.name} ({MODEL.stat().st_size / 1e6:.0f} MB), cores: {os.cpu_count()}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        for i in range(args.repeat):
            nw, nm = naive(work)
            kw, km = k2to3(work)
            rows.append((nw, nm, kw, km))
            print(f"run {i + 1}: naive {nw:6.1f} s {nm / 1024:7.0f} MB | k2to3 {kw:6.1f} s {km / 1024:7.0f} MB | "
                  f"wall ratio {kw / nw:.2f}x, peak memory ratio {km / nm:.2f}x")
    nw = sorted(r[0] for r in rows)[len(rows) // 2]
    kw = sorted(r[2] for r in rows)[len(rows) // 2]
    print(f"median wall: naive {nw:.1f} s, k2to3 {kw:.1f} s -> ratio {kw / nw:.2f}x "
          "(k2to3 also computes the tf_keras golden and compares; the naive recipe compares nothing)")


if __name__ == "__main__":
    main()
