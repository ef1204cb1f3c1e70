"""Benchmark `k2to3 fix` on the installed tf_keras source, in one process, against two baselines on the same
files: libcst's own round trip (parse + print, the floor of any libcst rewrite), and the same transformer run
through libcst's textbook codemod pipeline (`CodemodCommand.transform_module`: a deep copy of the tree, then
AddImportsVisitor and RemoveImportsVisitor over the whole tree). Checks that both rewrites give the same text.
Usage: python bench/fix.py [--files N]"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext

from k2to3.source.fix import RELEVANT, FixCommand, fix_module


class Textbook(CodemodCommand):
    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.fix = FixCommand(self.context)
        return tree.visit(self.fix)


def textbook(code: str, path: str) -> tuple[str, int]:
    if not RELEVANT.search(code):
        return code, 0
    cmd = Textbook(CodemodContext(filename=path))
    new = cmd.transform_module(cst.parse_module(code))
    return new.code, cmd.fix.changed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=0, help="only the first N files (0: all)")
    args = ap.parse_args()
    spec = importlib.util.find_spec("tf_keras")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("tf_keras is not installed")
    files = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.py"))
    files = files[: args.files] if args.files else files
    codes = [(str(f), f.read_text()) for f in files]
    print(f"corpus: tf_keras, {len(codes)} files, {sum(c.count(chr(10)) for _, c in codes)} lines")
    times = {"libcst parse + print": 0.0, "textbook codemod pipeline": 0.0, "k2to3 fix": 0.0}
    rewritten = 0
    for path, code in codes:
        t0 = time.perf_counter()
        _ = cst.parse_module(code).code
        t1 = time.perf_counter()
        slow = textbook(code, path)
        t2 = time.perf_counter()
        new, n, _ = fix_module(code, path)
        t3 = time.perf_counter()
        if (new, n) != slow:
            sys.exit(f"{path}: k2to3 fix and the textbook pipeline differ")
        rewritten += n > 0
        for k, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            times[k] += dt
    print(f"{rewritten} files rewritten; the same text from both pipelines on every file")
    base = times["libcst parse + print"]
    for k, t in times.items():
        print(f"{k:28s} {t:7.1f} s  {t / base:5.2f}x the round trip")
    print(f"k2to3 fix against the textbook pipeline: {times['k2to3 fix'] / times['textbook codemod pipeline']:.2f}x")


if __name__ == "__main__":
    main()
