"""Benchmark: how a training step's arrays travel from a worker to the parent, in one process.

ResNet50-size arrays (25.6M float32 elements over its 320 weight shapes, about 100 MB; the same for its step
gradients and its optimizer slots). Three ways, each timed as CPU seconds of this process, write + read + one pass
over the values (the parent compares every element once), median of --repeat runs:

- baseline: `.npz` (np.savez, then np.load of every member), as before core/arrayfile.py;
- arrayfile: core/arrayfile.write, then arrayfile.read (read-only views of a memory map);
- slots: the optimizer state as loaded, `.npz` written and read and compared with the file's slots (before) against
  one core.compare.value_digest per variable (now: the parent compares digests).

Usage: python bench/arrayfile.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from k2to3.core import arrayfile
from k2to3.core.compare import value_digest


def resnet50_like() -> list[np.ndarray]:
    """320 arrays, 25.6M float32 elements: ResNet50's conv kernels, biases and BatchNormalization vectors."""
    rng = np.random.default_rng(0)
    shapes = [(7, 7, 3, 64)] + [(1, 1, 256, 64), (3, 3, 64, 64), (1, 1, 64, 256)] * 3 \
        + [(1, 1, 512, 128), (3, 3, 128, 128), (1, 1, 128, 512)] * 4 \
        + [(1, 1, 1024, 256), (3, 3, 256, 256), (1, 1, 256, 1024)] * 6 \
        + [(1, 1, 2048, 512), (3, 3, 512, 512), (1, 1, 512, 2048)] * 3 + [(2048, 1000)]
    vectors = [(s[-1],) for s in shapes for _ in range(5)]  # bias, gamma, beta, moving mean and variance
    return [rng.standard_normal(s).astype(np.float32) for s in shapes + vectors[:320 - len(shapes)]]


def cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    arrays = resnet50_like()
    mb = sum(a.nbytes for a in arrays) / 1e6
    slots = [a.copy() for a in arrays]  # what the file holds: the same values
    with tempfile.TemporaryDirectory() as tmp:
        npz, raw = Path(tmp) / "w.npz", Path(tmp) / "w.arrays"

        def via_npz() -> None:
            np.savez(npz, **{f"w{i}": a for i, a in enumerate(arrays)})
            with np.load(npz) as z:
                got = [z[f"w{i}"] for i in range(len(z.files))]
            sum(float(np.abs(g).max()) for g in got)

        def via_arrayfile() -> None:
            arrayfile.write(raw, arrays)
            got = arrayfile.read(raw)
            sum(float(np.abs(g).max()) for g in got)

        def slots_npz() -> None:
            np.savez(npz, **{f"v{i}": a for i, a in enumerate(arrays)})
            with np.load(npz) as z:
                loaded = [z[f"v{i}"] for i in range(len(z.files))]
            assert all(np.array_equal(a, b) for a, b in zip(loaded, slots))

        def slots_digest() -> None:
            got = [value_digest(a) for a in arrays]  # in the worker
            assert got == [value_digest(a) for a in slots]  # in the parent (once per run, not per backend: upper bound)

        rows = []
        for name, base, new in (("weights or gradients", via_npz, via_arrayfile), ("optimizer slots", slots_npz,
                                                                                   slots_digest)):
            b = statistics.median(cpu(base) for _ in range(args.repeat))
            n = statistics.median(cpu(new) for _ in range(args.repeat))
            rows.append((name, b, n))
    print(f"{len(arrays)} arrays, {mb:.0f} MB, median of {args.repeat} (CPU seconds of this process)")
    for name, b, n in rows:
        print(f"{name:22s} before {b:6.3f} s   now {n:6.3f} s   {n / b:.2f}x")


if __name__ == "__main__":
    main()
