"""Benchmark: what `--grads` adds to `convert`, on a ResNet50-size legacy model (tf_keras ResNet50, weights=None,
saved as HDF5 into tests/.cache; generated on demand, as for bench/convert.py).

Both runs share one warm worker pool started by this script (so backend imports are paid once, before either
timed run), on tensorflow, torch and jax, in the same order each repeat: plain `convert`, then
`convert --grads --fit-steps 1`. Prints the wall time of each, the time --grads added and its ratio to the plain convert
(targets, issue 25: at most 1.0 with a warm compile cache, 1.5 cold), and where the time went.

Where the time went: the CPU seconds of each worker (from /proc, Linux) and of this process over each run, their
sum, and that sum spread over the machine's cores: the wall time no schedule of the same work can beat.

Usage: python bench/grads.py [--repeat N] [--warm]
  cold (default): jax's persistent compilation cache off, as a first conversion on a machine
  --warm: the cache on, and one untimed run of each kind first (a team converting its second model)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
CACHE = ROOT / "tests" / ".cache"
MODEL = CACHE / "resnet50_sgd.h5"
# Compiled and trained one step, so the file carries a training_config and SGD momentum slots: the
# `--fit-steps 1` part has a Keras 2 reference to resume from, as a real checkpoint would.
MAKE = """
import os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np
import tf_keras
tf_keras.utils.set_random_seed(0)
m = tf_keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000)
m.compile(optimizer=tf_keras.optimizers.SGD(0.01, momentum=0.9), loss="categorical_crossentropy")
rng = np.random.default_rng(0)
m.train_on_batch(rng.standard_normal((2, 224, 224, 3)).astype("float32"), np.eye(1000)[[3, 7]].astype("float32"))
m.save(sys.argv[1] + ".tmp", save_format="h5")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
"""


def _proc_cpu(pid: int) -> float | None:
    """utime + stime of a live process, in seconds (None where /proc cannot tell)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def cpu_by_role(pool: Any) -> dict[str, float]:
    """CPU seconds so far of each worker of the pool (by role) and of this process (`parent`)."""
    t = os.times()
    got = {"parent": t.user + t.system}
    for role, w in pool.workers.items():
        c = _proc_cpu(w.proc.pid)
        if c is not None:
            got[role] = c
    return got


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What each role used over a run (a worker started during it: all of its CPU, its imports included)."""
    return {r: after[r] - before.get(r, 0.0) for r in after}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--warm", action="store_true")
    args = ap.parse_args()
    if not MODEL.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-c", MAKE, str(MODEL)], check=True)
    # Cold, as a first conversion: jax's persistent compilation cache would serve later runs the compiled
    # predict and training step (docs/convert.md#jax-compilation-cache).
    os.environ["K2TO3_JAX_CACHE"] = "on" if args.warm else "off"
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert
    from k2to3.workers.pool import Pool

    plain, grads, detail = [], [], []
    cpu: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with Pool() as pool, tempfile.TemporaryDirectory() as tmp:
        pool.start()
        for w in pool.workers.values():
            w.wait_ready()
        if args.warm:
            for with_grads in (False, True):
                out = Path(tmp) / f"warm-{int(with_grads)}.keras"
                convert(Options(src=MODEL, output=out, grads=with_grads, fit_steps=int(with_grads)), pool=pool)
                out.unlink()
        for i in range(args.repeat):
            for with_grads, times in ((False, plain), (True, grads)):
                out = Path(tmp) / f"r{i}-{int(with_grads)}.keras"
                c0, t0 = cpu_by_role(pool), time.perf_counter()
                rep = convert(Options(src=MODEL, output=out, grads=with_grads, fit_steps=1 if with_grads else 0),
                              pool=pool)
                times.append(time.perf_counter() - t0)
                cpu[with_grads].append(spent(c0, cpu_by_role(pool)))
                print(f"run {i} {'--grads' if with_grads else 'plain  '}: {times[-1]:7.1f} s  verdict "
                      f"{rep['verdict']}" + (f", gradients {rep['gradients']['verdict']}, training "
                                             f"{rep['training'].get('status')}, noise probe "
                                             f"{(rep['training'].get('noise_probe') or {}).get('seconds', 0):.1f} s"
                                             if with_grads else ""),
                      flush=True)
                if with_grads:
                    g = rep["gradients"]
                    detail.append({"total": g["seconds"], **{b: v.get("seconds") for b, v in g["backends"].items()},
                                   **{f"{b} worst rel_l2": v.get("max_rel_l2") for b, v in g["backends"].items()}})
                out.unlink()
    p, g = statistics.median(plain), statistics.median(grads)
    print(f"\nResNet50 ({MODEL.stat().st_size / 2**20:.0f} MB h5), cores: {os.cpu_count()}, repeats: {args.repeat}, "
          f"jax compilation cache {'warm' if args.warm else 'off (cold)'}")
    print(f"plain convert:   {p:7.1f} s (median)")
    print(f"convert --grads: {g:7.1f} s (median)")
    print(f"added by --grads: {g - p:6.1f} s = {((g - p) / p):.2f}x of plain convert (target <= "
          f"{'1.0' if args.warm else '1.5'}x)")
    step = statistics.median(d["total"] for d in detail)
    print(f"the gradient step alone (wall, measured inside convert --grads): {step:6.1f} s = {step / p:.2f}x of plain "
          "convert (the honest figure when the machine is loaded and the two runs' other steps vary)")
    print(f"gradient step (wall, inside convert; per-backend seconds are the differentiation alone): {detail[-1]}")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"\nCPU seconds by process (medians; from /proc), against the wall time; 'floor' = the sum over {cores} "
          "cores, the wall time no schedule of this work can beat:")
    for with_grads, wall in ((False, p), (True, g)):
        roles = sorted({r for c in cpu[with_grads] for r in c})
        med = {r: statistics.median(c.get(r, 0.0) for c in cpu[with_grads]) for r in roles}
        total = statistics.median(sum(c.values()) for c in cpu[with_grads])
        print(f"  {'convert --grads' if with_grads else 'plain convert  '}: "
              + ", ".join(f"{r} {v:.1f}" for r, v in med.items())
              + f"; total {total:.1f} CPU-s, floor {total / cores:.1f} s, wall {wall:.1f} s")


if __name__ == "__main__":
    main()
