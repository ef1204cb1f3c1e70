"""Benchmark the start-up a user feels: each command against a baseline measured in the same run, the pair
interleaved (command, baseline, command, ...) so machine load hits both alike. Prints medians, the ratio and
whether it meets its goal. A section is a `Pair` in `sections()`; add one there.

Usage: python bench/startup.py [--repeat N] [--only NAME]

k2to3 runs as `python -m k2to3` (PYTHONPATH decides which checkout), with a temporary K2TO3_CACHE_DIR that the
untimed first run of each command fills (what a second run on a user's machine finds); `first` is that run."""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CONVERTED = os.path.join(tempfile.gettempdir(), "k2to3-bench-startup.keras")


@dataclass(frozen=True)
class Pair:
    name: str
    command: list[str]
    baseline: list[str]
    goal: float  # the most the command may take: a ratio to the baseline, or seconds when `seconds`
    seconds: bool = False


def k2to3(*args: str) -> list[str]:
    return [PY, "-m", "k2to3", *args]


def tf_keras_dir() -> Path:
    spec = importlib.util.find_spec("tf_keras")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("tf_keras is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def ruff() -> list[str]:
    """The ruff binary itself (not `python -m ruff`, which starts an interpreter first)."""
    from ruff.__main__ import find_ruff_bin

    return [os.fsdecode(find_ruff_bin())]


def sections() -> list[Pair]:
    one = ROOT / "tests" / "fixtures" / "src" / "k2_zoo.py"  # 112 lines, findings of every family
    tree = tf_keras_dir()
    return [
        Pair("lint one file", k2to3("lint", str(one), "--no-cache"), [PY, "-c", "pass"], 5.0),
        Pair("lint one file vs ruff", k2to3("lint", str(one), "--no-cache"),
             [*ruff(), "check", "--isolated", "--no-cache", "-q", str(one)], 0.0),  # 0: no goal, for the record
        Pair("--help", k2to3("--help"), [PY, "-c", "pass"], 0.15, seconds=True),
        Pair("lint tf_keras tree", k2to3("lint", str(tree), "--no-cache"),
             [*ruff(), "check", "--isolated", "--no-cache", "-q", str(tree)], 5.0),
        # The README example (142 parameters): everything beyond importing the three backends is tiny, so the
        # floor is importing tensorflow, torch and jax once, one after another, in one process.
        Pair("convert README example", k2to3("convert", str(ROOT / "tests" / "fixtures" / "h5" /
                                                         "fm19_hard_sigmoid.h5"), "-o", CONVERTED, "--force"),
             [PY, "-c", "import tensorflow, torch, jax"], 1.0),
    ]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    elapsed = time.perf_counter() - t0
    if done.returncode not in (0, 1):  # lint exits 1 on findings; anything else means nothing was measured
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        sys.exit(f"bench: {' '.join(cmd[:4])} ... exited {done.returncode}: {tail[0]}")
    return elapsed


def run(pair: Pair, repeat: int, env: dict[str, str]) -> str:
    first = timed(pair.command, env)  # fills the cache directory, compiles .pyc files
    timed(pair.baseline, env)
    cmd, base = [], []
    for i in range(repeat):
        for which in ((pair.command, cmd), (pair.baseline, base))[:: 1 if i % 2 == 0 else -1]:
            which[1].append(timed(which[0], env))
    c, b = statistics.median(cmd), statistics.median(base)
    ratio = c / b
    if pair.goal <= 0:
        verdict = ""
    elif pair.seconds:
        verdict = f"goal <= {pair.goal:.2f} s: {'met' if c <= pair.goal else 'MISSED'}"
    else:
        verdict = f"goal <= {pair.goal:.1f}x: {'met' if ratio <= pair.goal else 'MISSED'}"
    return (f"{pair.name:<22} {c:7.3f} s  baseline {b:7.3f} s  {ratio:6.2f}x  first {first:6.3f} s  "
            f"{verdict}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", help="run the sections whose name contains this")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]} ({PY}), cores: {os.cpu_count()}, "
          f"load: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; medians of {args.repeat}, interleaved")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "K2TO3_CACHE_DIR": cache}
        for pair in sections():
            if args.only and args.only not in pair.name:
                continue
            print(run(pair, args.repeat, env), flush=True)


if __name__ == "__main__":
    main()
