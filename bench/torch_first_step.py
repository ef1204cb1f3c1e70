"""Benchmark: the CPU time of a torch worker's first training step with torch._dynamo kept unloaded
(workers/deferred_imports.dynamo_scope, as the worker runs `fit` and `grads`) against the same step without the scope
(torch's first call of a function it marks `_disable_dynamo` imports dynamo to wrap it). Each run is a fresh
process started as a torch worker starts (keras imported with the stand-in), the two kinds interleaved so machine
load hits both alike; two steps of a seeded small CNN + Adam on a batch of 8. Prints medians, the ratio, and
whether the two kinds' losses agree to the bit (they must).

Usage: python bench/torch_first_step.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STEP = r"""
import contextlib, json, resource, sys
from k2to3.workers import deferred_imports
deferred_imports.block_ipython()
sys.modules.setdefault("jax", None)
with deferred_imports.dynamo_stand_in():
    from keras.src.utils import module_utils
    module_utils.tensorflow._available = False
    import keras
import numpy as np

keras.utils.set_random_seed(0)
m = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(16, 3, activation="relu"),
                      keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)])
m.compile(keras.optimizers.Adam(1e-3), keras.losses.CategoricalCrossentropy(from_logits=True))
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 32, 32, 3)).astype("float32")
y = np.eye(10, dtype="float32")[rng.integers(0, 10, 8)]


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


c0 = cpu()
with deferred_imports.dynamo_scope(keras) if sys.argv[1] == "scoped" else contextlib.nullcontext():
    losses = [float(m.train_on_batch(x, y)) for _ in range(2)]
print(json.dumps({"cpu": cpu() - c0, "losses": losses, "dynamo": deferred_imports._real_dynamo() is not None}))
"""


def once(kind: str) -> dict:
    env = {**os.environ, "KERAS_BACKEND": "torch", "TF_CPP_MIN_LOG_LEVEL": "3", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", STEP, kind], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {"scoped": [], "unscoped": []}
    for _ in range(args.repeat):
        for kind in runs:
            runs[kind].append(once(kind))
    med = {k: statistics.median(r["cpu"] for r in v) for k, v in runs.items()}
    same = all(a["losses"] == b["losses"] for a, b in zip(runs["scoped"], runs["unscoped"]))
    print(f"first two torch training steps, CPU seconds, medians of {args.repeat} interleaved fresh processes:")
    print(f"  dynamo kept unloaded (the worker's scope): {med['scoped']:.3f} s "
          f"(dynamo loaded in {sum(r['dynamo'] for r in runs['scoped'])} runs)")
    print(f"  without the scope (baseline):              {med['unscoped']:.3f} s "
          f"(dynamo loaded in {sum(r['dynamo'] for r in runs['unscoped'])} runs)")
    print(f"  ratio {med['scoped'] / med['unscoped']:.2f}x, saved {med['unscoped'] - med['scoped']:.3f} s; "
          f"losses identical to the bit: {same}")


if __name__ == "__main__":
    main()
