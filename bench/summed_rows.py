"""Benchmark: what K2T612's k2to3>SummedRowsAdam costs a training step on the TensorFlow backend, in one process.

A text model of ethnicolr's shape, scaled up so the embedding dominates: Embedding(50000, 128) over 20 tokens,
LSTM(64), Dense(10); batch 64. The same compiled train step (`train_on_batch`, after warm-up) with Keras 3's Adam
(the baseline: one row per token occurrence, squared one by one) and with SummedRowsAdam (the gradient added to a
dense zero tensor first, so repeated rows are summed as in Keras 2). Both optimizers already update m and v over the
whole embedding matrix every step (Keras 3 writes them densely), so the extra dense add is one more pass over it.
Median wall time per step over --steps steps, --repeat times each, interleaved; prints the ratio.

Usage: python bench/summed_rows.py [--steps N] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import keras
import numpy as np

from k2to3.portable.optimizers import SummedRowsAdam

VOCAB, DIM, TOKENS, BATCH = 50_000, 128, 20, 64


def model(optimizer: keras.optimizers.Optimizer) -> keras.Model:
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((TOKENS,), dtype="int32"), keras.layers.Embedding(VOCAB, DIM),
                          keras.layers.LSTM(64), keras.layers.Dense(10)])
    m.compile(optimizer=optimizer, loss="mse")
    return m


def per_step(m: keras.Model, x: np.ndarray, y: np.ndarray, steps: int) -> float:
    m.train_on_batch(x, y)  # traced and compiled here, not timed
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        m.train_on_batch(x, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    # Zipf-like token ids: the frequent tokens repeat within a batch, as in text
    x = np.minimum(rng.zipf(1.3, (BATCH, TOKENS)), VOCAB - 1).astype("int32")
    y = rng.standard_normal((BATCH, 10)).astype("float32")
    plain, summed = model(keras.optimizers.Adam(1e-3)), model(SummedRowsAdam(1e-3))
    a, b = [], []
    for _ in range(args.repeat):
        a.append(per_step(plain, x, y, args.steps))
        b.append(per_step(summed, x, y, args.steps))
    pa, pb = statistics.median(a), statistics.median(b)
    repeated = BATCH * TOKENS - len(np.unique(x))
    print(f"Embedding({VOCAB}, {DIM}) + LSTM(64), batch {BATCH} x {TOKENS} tokens ({repeated} repeated "
          f"occurrences), TensorFlow backend, {args.steps} steps x {args.repeat}")
    print(f"Keras 3 Adam (baseline): {pa * 1e3:.1f} ms/step (runs: {', '.join(f'{t * 1e3:.1f}' for t in a)})")
    print(f"SummedRowsAdam:          {pb * 1e3:.1f} ms/step (runs: {', '.join(f'{t * 1e3:.1f}' for t in b)})")
    print(f"ratio: {pb / pa:.2f}x")


if __name__ == "__main__":
    main()
