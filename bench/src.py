"""Benchmark the `--src` source index (what `convert --src` and `audit` do with a tree's .py files) against the
floor it cannot beat: `ast.parse` of the same files, in the same process. Corpus: the installed tf_keras
source (586 files). Prints times and the ratio. Usage: python bench/src.py [--repeat N]"""

from __future__ import annotations

import argparse
import ast
import statistics
import time
from pathlib import Path

from lint import tf_keras_dir

from k2to3.source.extract import index_sources


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    files = sorted(Path(p) for p in tf_keras_dir().rglob("*.py"))
    texts = [p.read_text(encoding="utf-8") for p in files]  # both sides then read warm page cache
    print(f"corpus: {len(files)} files, {sum(t.count(chr(10)) for t in texts)} lines")
    parse, index = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for p, t in zip(files, texts):
            try:
                ast.parse(t, filename=str(p))
            except SyntaxError:
                pass
        parse.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ix = index_sources(files, skip_bad=True)  # ast + symtable + definitions + Lambda call sites
        index.append(time.perf_counter() - t0)
    p, i = statistics.median(parse), statistics.median(index)
    print(f"ast.parse only: {p:.2f} s; index_sources: {i:.2f} s ({len(ix.defs)} definitions, {len(ix.sites)} "
          f"Lambda sites); ratio {i / p:.2f}x (median of {args.repeat})")


if __name__ == "__main__":
    main()
