"""Benchmark: `k2to3 convert` (golden + build + verify on tensorflow, torch and jax) against the naive
recipe, both run from this script on the same ResNet50-size legacy model:

  naive: a tensorflow process loads the .h5 with plain Keras 3 and saves .keras; then a fresh process per
         backend (tensorflow, torch, jax), one after another, loads it and predicts.
  k2to3: one `k2to3 convert` process (warm-up free: it starts its workers itself) with the defaults, and
         again with the schedule the default did not pick: all backends side by side (K2TO3_CORES=64) when
         the default ran one at a time (fewer than 6 cores), else one at a time (`--max-memory 1M`).

Prints wall time and peak memory (sum of the RSS of all live processes of each run, sampled every 50 ms),
and the ratios k2to3 / naive. Then the same k2to3 runs on a VGG16 (138 M parameters, 5.4x ResNet50's
weights; generated on demand by tf_keras with weights=None into tests/.cache): the peak's growth divided by
the weights' growth is how many copies of the weights are resident at the peak. The naive recipe's own
growth is printed beside it: loading a model costs more than one copy in Keras itself (the file's array, the
variable, the assignment's temporary), and VGG16's largest variable is 78% of its weights.

Usage: python bench/convert.py [--repeat N] [--no-large]
"""

from __future__ import annotations

import argparse
import json
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
LARGE = CACHE / "vgg16.h5"
MAKE_LARGE = """
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tf_keras
tf_keras.utils.set_random_seed(0)
m = tf_keras.applications.VGG16(weights=None, input_shape=(224, 224, 3), classes=1000)
m.save(sys.argv[1] + ".tmp", save_format="h5")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
"""

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


def _label(pid: int) -> str:
    """A process's role for the peak breakdown: a k2to3 worker's kind, else its command's last word."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            args = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = dict(e.decode(errors="replace").partition("=")[::2] for e in fh.read().split(b"\0") if b"=" in e)
    except OSError:
        return "?"
    if any("k2to3.workers" in a for a in args):
        return "worker:" + env.get("KERAS_BACKEND", "?") + ("+tf_keras" if env.get("TF_USE_LEGACY_KERAS") else "")
    return " ".join(args[1:3])[:40]


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
        self.at_peak: list[tuple[str, int]] = []
        while not self._stop.is_set():
            sizes = {p: _rss_kb(p) for p in _descendants(me)}
            total = sum(sizes.values())
            if total > self.peak_kb:
                self.peak_kb = total
                self.at_peak = [(_label(p), kb) for p, kb in sizes.items() if kb]
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def _env(backend: str) -> dict[str, str]:
    return {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


def naive(work: Path, model: Path = MODEL) -> tuple[float, int]:
    out = work / "naive.keras"
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", NAIVE_SAVE, str(model), str(out)], env=_env("tensorflow"),
                       check=True, capture_output=True)
        for backend in ("tensorflow", "torch", "jax"):
            subprocess.run([sys.executable, "-c", NAIVE_RUN, str(out)], env=_env(backend), check=True,
                           capture_output=True)
        wall = time.perf_counter() - t0
    return wall, mem.peak_kb


def k2to3(work: Path, model: Path = MODEL, *extra: str, env: dict[str, str] | None = None) -> tuple[float, int, dict]:
    out = work / "k2to3.keras"
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(model), "-o", str(out), "--force",
                            "--json", *extra], env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                                    # cold: jax's compilation cache would make later runs faster
                                                    "K2TO3_JAX_CACHE": "off", **(env or {})},
                           capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"k2to3 convert failed ({r.returncode}): {r.stderr[-500:]}")
    rep = json.loads(r.stdout)
    rep["bench_at_peak"] = mem.at_peak  # which processes made the peak (not part of k2to3's report)
    return wall, mem.peak_kb, rep


def other_schedule(rep: dict) -> tuple[str, tuple[str, ...], dict[str, str]]:
    """The schedule the default did not pick: side by side (cores assumed plenty) when the default ran one
    backend at a time, else one at a time (a budget nothing fits)."""
    if rep["memory"]["sequential"]:
        return "side by side (K2TO3_CORES=64)", (), {"K2TO3_CORES": "64"}
    return "one at a time (--max-memory 1M)", ("--max-memory", "1M"), {}


def _workers(rep: dict) -> str:
    mem = rep["memory"]
    peaks = ", ".join(f"{b} {v['peak_rss_mb']:.0f}" for b, v in mem["workers"].items())
    at = ", ".join(f"{label} {kb / 1024:.0f}" for label, kb in sorted(rep.get("bench_at_peak", [])))
    return (f"worker peaks MB: {peaks}, parent {mem['parent_peak_rss_mb']:.0f}; sequential={mem['sequential']}; "
            f"at the summed peak: {at}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--no-large", action="store_true", help="skip the VGG16 runs")
    args = ap.parse_args()
    if not MODEL.exists():
        subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "make_fixtures.py"), "--skip-small",
                        "--large", str(CACHE)], check=True, capture_output=True)
    print(f"model: {MODEL.name} ({MODEL.stat().st_size / 1e6:.0f} MB), cores: {os.cpu_count()}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        for i in range(args.repeat):
            nw, nm = naive(work)
            kw, km, rep = k2to3(work)
            label, extra, env = other_schedule(rep)
            tw, tm, trep = k2to3(work, MODEL, *extra, env=env)
            rows.append((nw, nm, kw, km, tw, tm))
            print(f"run {i + 1}: naive {nw:6.1f} s {nm / 1024:7.0f} MB | k2to3 {kw:6.1f} s {km / 1024:7.0f} MB | "
                  f"wall ratio {kw / nw:.2f}x, peak memory ratio {km / nm:.2f}x")
            print(f"       {_workers(rep)}")
            print(f"       k2to3 {label} {tw:6.1f} s {tm / 1024:7.0f} MB | wall ratio {tw / nw:.2f}x, "
                  f"peak memory ratio {tm / nm:.2f}x; {_workers(trep)}")
        med = [sorted(r[k] for r in rows)[len(rows) // 2] for k in range(6)]
        print(f"median wall: naive {med[0]:.1f} s, k2to3 {med[2]:.1f} s -> ratio {med[2] / med[0]:.2f}x "
              f"({label}: {med[4] / med[0]:.2f}x); median peak memory ratio {med[3] / med[1]:.2f}x "
              f"({label}: {med[5] / med[1]:.2f}x). k2to3 also computes the tf_keras golden and compares; "
              "the naive recipe compares nothing")
        if args.no_large:
            return
        if not LARGE.exists():
            subprocess.run([sys.executable, "-c", MAKE_LARGE, str(LARGE)], check=True, capture_output=True,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        small_w = rep["memory"]["weights_mb"]
        _, lnm = naive(work, LARGE)
        _, lm, lrep = k2to3(work, LARGE)
        _, ltm, ltrep = k2to3(work, LARGE, *extra, env=env)
        large_w = lrep["memory"]["weights_mb"]
        grow = large_w - small_w
        print(f"{LARGE.name}: weights {large_w:.0f} MB vs {small_w:.0f} MB | naive peak {lnm / 1024:.0f} MB "
              f"(+{(lnm - nm) / 1024:.0f} MB = {(lnm - nm) / 1024 / grow:.1f} copies: what one Keras load costs) | "
              f"k2to3 peak {lm / 1024:.0f} MB (+{(lm - km) / 1024:.0f} MB = {(lm - km) / 1024 / grow:.1f} copies "
              f"of the extra weights); {label} peak {ltm / 1024:.0f} MB (+{(ltm - tm) / 1024:.0f} MB = "
              f"{(ltm - tm) / 1024 / grow:.1f} copies)")
        print(f"       {_workers(lrep)}")
        print(f"       {label}: {_workers(ltrep)}")

if __name__ == "__main__":
    main()
