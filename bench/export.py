"""Benchmark: `k2to3 export` (export + the exported file run in its own runtime + the golden comparison) for each
format, against a plain `k2to3 convert` of the same Keras 2 model (golden + build + verify on tensorflow, torch
and jax), each a fresh `k2to3` process as a user runs it.

Prints wall time and peak memory (the summed RSS of all processes of a run, sampled every 50 ms, as
bench/convert.py) and the ratios export / convert. The exports read the golden file the convert wrote
(`--golden`), so they measure the export and its check, not tf_keras again.

Usage: python bench/export.py [--model LEGACY.h5 ...] [--formats onnx,litert,savedmodel,torch]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convert import PeakMemory

ROOT = Path(__file__).resolve().parents[1]
MODELS = [ROOT / "tests" / "fixtures" / "optimizers" / "conv_bn_adam.h5", ROOT / "tests" / "fixtures" / "h5" /
          "embedding_lstm.h5"]
SUFFIX = {"onnx": ".onnx", "litert": ".tflite", "savedmodel": "_savedmodel", "torch": ".pt2"}


def _k2to3(*args: str) -> tuple[float, int, int]:
    """(wall seconds, peak kB, exit code) of one k2to3 process."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    with PeakMemory() as mem:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "k2to3", *args], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if r.returncode not in (0, 1, 3):
        sys.exit(f"k2to3 {' '.join(args)} failed ({r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
    return wall, mem.peak_kb, r.returncode


def bench(model: Path, formats: list[str], work: Path) -> None:
    keras = work / f"{model.stem}.keras"
    wall, peak, _ = _k2to3("convert", str(model), "-o", str(keras), "--save-golden")
    print(f"{model.name}: convert {wall:.1f} s, peak {peak / 1024:.0f} MB")
    golden = keras.with_suffix(".golden.npz")
    for fmt in formats:
        out = work / f"{model.stem}{SUFFIX[fmt]}"
        ew, ep, code = _k2to3("export", str(keras), "--format", fmt, "-o", str(out), "--golden", str(golden))
        print(f"  export {fmt:<10} {ew:6.1f} s ({ew / wall:.2f}x convert)  peak {ep / 1024:6.0f} MB "
              f"({ep / peak:.2f}x)  exit {code}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, action="append")
    ap.add_argument("--formats", default="onnx,litert,savedmodel,torch")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="k2to3-bench-export-") as d:
        for model in args.model or MODELS:
            bench(model, args.formats.split(","), Path(d))


if __name__ == "__main__":
    main()
