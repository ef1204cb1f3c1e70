"""Benchmark: compare_arrays on weight- and gradient-sized arrays (output=False, with the gradient check's norms),
block by block (core/compare.py CHUNK) against the whole-array float64 path, in this process, interleaved.

Usage: python bench/compare.py [--repeat N]
Prints per size the median time of each path and their ratio, and checks that both give the same figures."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from k2to3.core import compare as C

# ResNet50's largest weights: fc 2048x1000, a 3x3x512x512 kernel, a 1x1x512x2048 one, a 3x3x256x256 one
SIZES = {"2048x1000": (2048, 1000), "3x3x512x512": (3, 3, 512, 512), "1x1x512x2048": (1, 1, 512, 2048),
         "3x3x256x256": (3, 3, 256, 256)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for name, shape in SIZES.items():
        ref = rng.standard_normal(shape).astype(np.float32)
        got = ref + rng.standard_normal(shape).astype(np.float32) * 1e-4
        times: dict[str, list[float]] = {"blocks": [], "whole": []}
        figures = {}
        for _ in range(args.repeat):
            for path, minimum in (("blocks", C.CHUNKED_MIN), ("whole", 1 << 62)):
                saved, C.CHUNKED_MIN = C.CHUNKED_MIN, min(minimum, ref.size - 1) if path == "blocks" else minimum
                try:
                    t0 = time.perf_counter()
                    figures[path] = C.compare_arrays(got, ref, 1e-4, 1e-5, output=False, norms={})
                    times[path].append(time.perf_counter() - t0)
                finally:
                    C.CHUNKED_MIN = saved
        b, w = statistics.median(times["blocks"]), statistics.median(times["whole"])
        same = figures["blocks"] == figures["whole"]
        print(f"{name:14s} {ref.size:>9d} elements: blocks {b * 1e3:6.1f} ms, whole {w * 1e3:6.1f} ms, "
              f"ratio {b / w:.2f}x, same figures: {same}")


if __name__ == "__main__":
    main()
