"""Benchmark a store conversion: N small generated Keras 2 artifacts (nested folders) converted with the local
warm pool and with Ray (a local Ray on this machine, one actor holding the same warm pool), same options.

Prints each executor's start-up (time to the first finished artifact) and steady per-artifact cost (the rest),
Ray's ratio to the local pool, and a projection for 10,000 artifacts on 1..N nodes (docs/scale.md).
Usage: python bench/store.py [--n 200] [--backends tensorflow,torch,jax] [--ray-cpus 2]"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from k2to3.stores import batch  # noqa: E402
from k2to3.stores.executors.local import LocalExecutor  # noqa: E402

GENERATE = textwrap.dedent("""
    import os, sys
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np, tf_keras as K
    root, n = sys.argv[1], int(sys.argv[2])
    for i in range(n):
        K.utils.set_random_seed(i)
        m = K.Sequential([K.layers.Dense(8 + i % 5, activation="relu", input_shape=(6,)),
                          K.layers.Dense(4, activation="hard_sigmoid" if i % 2 else "softmax")])
        d = os.path.join(root, f"team{i % 7}", f"run{i % 3}")
        os.makedirs(d, exist_ok=True)
        m.save(os.path.join(d, f"model_{i:04d}.h5"))
""")


def generate(store: Path, n: int) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    subprocess.run([sys.executable, "-c", GENERATE, str(store), str(n)], check=True, env=env)


def timed(store: Path, out: Path, executor: object, settings: dict) -> dict[str, float]:
    marks: list[float] = []
    t0 = time.perf_counter()
    items = batch.plan([str(store)], str(out), settings)
    t_plan = time.perf_counter() - t0
    rep = batch.run_batch([str(store)], items, str(out), executor, lambda i, r: marks.append(time.perf_counter()))
    total = time.perf_counter() - t0
    steady = [b - a for a, b in itertools.pairwise(marks)]
    assert rep["convert_totals"] == {"parity": len(items)}, rep["convert_totals"]
    return {"n": len(items), "plan_s": t_plan, "first_s": marks[0] - t0 - t_plan, "total_s": total,
            "per_artifact_s": (marks[-1] - marks[0]) / max(len(marks) - 1, 1),
            "median_s": statistics.median(steady) if steady else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--backends", default="tensorflow,torch,jax")
    ap.add_argument("--ray-cpus", type=int, default=2)
    args = ap.parse_args()
    settings = {"backends": tuple(args.backends.split(","))}
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "store"
        generate(store, args.n)
        local = timed(store, Path(d) / "out-local", LocalExecutor(backends=settings.backends), settings)
        import ray

        from k2to3.stores.executors.ray import RayExecutor

        t = time.perf_counter()
        ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - t
        try:
            on_ray = timed(store, Path(d) / "out-ray", RayExecutor(backends=settings.backends), settings)
        finally:
            ray.shutdown()
    print(f"{args.n} artifacts, backends {args.backends}, {os.cpu_count()} CPUs")
    for name, r in (("local pool", local), ("ray", on_ray)):
        print(f"  {name:10s}: plan {r['plan_s']:.1f} s, first artifact {r['first_s']:.1f} s (worker start-up), "
              f"then {r['per_artifact_s']:.3f} s/artifact (median {r['median_s']:.3f} s); total {r['total_s']:.1f} s")
    print(f"  ray.init (local cluster start): {ray_start:.1f} s")
    ratio = on_ray["per_artifact_s"] / local["per_artifact_s"]
    print(f"ray per-artifact cost / local pool per-artifact cost = {ratio:.2f}x (target <= 1.2x)")
    per = on_ray["per_artifact_s"]
    print("projection for 10,000 artifacts, one actor per node, this machine's per-artifact cost:")
    for nodes in (1, 4, 16, 64):
        hours = (10_000 * per / nodes + on_ray["first_s"]) / 3600
        print(f"  {nodes:3d} nodes: 10000 x {per:.3f} s / {nodes} + {on_ray['first_s']:.0f} s start-up = {hours:.2f} h")


if __name__ == "__main__":
    main()
