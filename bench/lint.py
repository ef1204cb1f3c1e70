"""Benchmark `k2to3 lint` against flake8 on the same files (the installed tf_keras source), in one script:
cold (empty cache) and warm (cache keyed by content hash and tool version), plus one small file against
`python -c "import libcst"`. Prints times and ratios. Usage: python bench/lint.py [--repeat N]"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def tf_keras_dir() -> Path:
    spec = importlib.util.find_spec("tf_keras")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("tf_keras is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def timed(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    src = tf_keras_dir()
    files = sorted(str(p) for p in src.rglob("*.py"))
    lines = sum(len(Path(f).read_bytes().splitlines()) for f in files)
    print(f"corpus: {src} ({len(files)} files, {lines} lines), cores: {os.cpu_count()}")
    k2 = [sys.executable, "-m", "k2to3", "lint", str(src)]
    f8 = [sys.executable, "-m", "flake8", "--isolated", str(src)]
    cold, warm, flake = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            env = {"K2TO3_CACHE_DIR": cache}
            cold.append(timed(k2, env))
            warm.append(timed(k2, env))
        flake.append(timed(f8))
    c, w, f = statistics.median(cold), statistics.median(warm), statistics.median(flake)
    print(f"flake8 {f:.2f} s | k2to3 lint cold {c:.2f} s ({c / f:.2f}x flake8) | warm {w:.2f} s ({w / c:.2f}x cold)")
    # The same work in this process, without interpreter and CLI start-up (typer/pydantic: ~0.3 s).
    from k2to3.source.files import Cache, Config
    from k2to3.source.run import lint_paths

    with tempfile.TemporaryDirectory() as cache_dir:
        t0 = time.perf_counter()
        lint_paths([src], Config(), Cache(Path(cache_dir)))
        t1 = time.perf_counter()
        lint_paths([src], Config(), Cache(Path(cache_dir)))
        t2 = time.perf_counter()
    print(f"in-process lint work: cold {t1 - t0:.2f} s, warm {t2 - t1:.3f} s ({(t2 - t1) / (t1 - t0):.3f}x cold)")
    with tempfile.TemporaryDirectory() as d:
        small = Path(d) / "small.py"
        small.write_text("import tensorflow as tf\n\n\ndef f(x):\n    return tf.reduce_mean(x, axis=1)\n")
        one = [timed([sys.executable, "-m", "k2to3", "lint", str(small), "--no-cache"]) for _ in range(5)]
        base = [timed([sys.executable, "-c", "import libcst"]) for _ in range(5)]
    o, b = statistics.median(one), statistics.median(base)
    print(f"one small file: k2to3 lint {o:.3f} s vs python -c 'import libcst' {b:.3f} s -> {o / b:.2f}x")


if __name__ == "__main__":
    main()
