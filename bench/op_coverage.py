"""Op coverage of real Keras 2 code: runs `k2to3 lint` and `k2to3 fix --write` on a copy of a corpus and prints
how many tf.* / K.* call sites were rewritten among those whose function has a keras.ops expression in
rules/ops.toml, whether every rewritten file parses and is a fixed point of a second `fix`, and the names left
by count.

Corpus: the installed tf_keras tree, tests/fixtures/src, and the sdists (*.tar.gz, *.zip) in
tests/.cache/real_code (fetch them with `pip download --no-deps --no-binary :all: -d tests/.cache/real_code
keras-tcn keras-self-attention ...`; nothing downloaded is committed).

Usage: python bench/op_coverage.py [--cache DIR] [--top N] [--no-tf-keras]

Measured 2026-12-01 (branch opcov, loaded 2-core machine), --no-tf-keras on tests/fixtures/src and the sdists of
efficientnet 1.1.1, image-classifiers 1.0.0, keras-bert 0.89.0, keras-embed-sim 0.10.0, keras-layer-normalization
0.16.0, keras-multi-head 0.29.0, keras-pos-embd 0.13.0, keras-position-wise-feed-forward 0.8.0, keras-resnet
0.2.0, keras-retinanet 1.0.0, keras-self-attention 0.51.0, keras-transformer 0.40.0, keras-tcn 3.5.7,
keras-vggface 0.6, segmentation-models 1.0.1 (245 files, 26,059 lines): 520 tf.*/K.* call sites, 412 with a
keras.ops expression, 408 of them fixed (99.0%); 108 files rewritten, all parse, none changed by a second fix.
With the installed tf_keras tree too (831 files, 191,676 lines; 21 min): 4,944 call sites (778 of them
tf_export.keras_export decorators, 460 tf.nest.*), 2,333 with a keras.ops expression, 2,282 fixed (97.8%);
636 files rewritten, all parse, none changed by a second fix.

Measured 2026-12-01 (branch gaps, loaded 2-core machine), --no-tf-keras --cache tests/.cache/real_code/sdist on
tests/fixtures/src and the 22 sdists bench/real_code.py --fetch downloads (360 files, 37,968 lines; ~11 min):
before the branch 718 call sites, 632 with a keras.ops expression, 624 fixed (98.7%; 87% of all call sites);
after (tf.einsum, tf.gather_nd, tensorflow.python.ops re-exports and TF1's tensorflow.python namespace resolved)
717 call sites, 667 with a keras.ops expression, 659 fixed (98.8%; 92% of all); 128 files rewritten, all parse,
none changed by a second fix. Left by count: tf.group 9, tf.control_dependencies 9, convert_to_tensor 10,
K.is_keras_tensor 4 and tf.where 4 (blocked by an argument), K.set_image_dim_ordering 3, ...

Measured 2026-12-01 (branch shapeops, loaded 2-core machine, the sdists not on disk): the installed tf_keras tree
and tests/fixtures/src (594 files, 166,055 lines; 29 min): 4,429 call sites, 2,196 with a keras.ops expression,
2,097 of them fixed (95.5%); 332 files rewritten, all parse, none changed by a second fix.
"""

from __future__ import annotations

import argparse
import ast
import collections
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from k2to3.core import optable as ops  # noqa: E402

TF_CODES = {"K2T101", "K2T102", "K2T103"}
K_CODES = {"K2T201", "K2T202", "K2T203"}
NAME = re.compile(r"^((?:tf|K)\.[A-Za-z0-9_.]+)")


def tf_keras_dir() -> Path:
    spec = importlib.util.find_spec("tf_keras")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("tf_keras is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def build_corpus(dest: Path, cache: Path, with_tf_keras: bool = True) -> list[str]:
    used = ["tests/fixtures/src"]
    if with_tf_keras:  # 165k lines: fix takes ~15 min of one loaded core
        used.insert(0, "tf_keras (installed)")
        shutil.copytree(tf_keras_dir(), dest / "tf_keras", ignore=shutil.ignore_patterns("*.pyc", "__pycache__"))
    shutil.copytree(ROOT / "tests" / "fixtures" / "src", dest / "fixtures_src")
    for archive in sorted(cache.glob("*")) if cache.is_dir() else []:
        out = dest / "pypi" / archive.name
        if archive.name.endswith(".tar.gz"):
            with tarfile.open(archive) as tar:
                members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")]
                tar.extractall(out, members=members, filter="data")
        elif archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                z.extractall(out, members=[n for n in z.namelist() if n.endswith(".py") and ".." not in n])
        else:
            continue
        used.append(archive.name)
    return used


def lint(path: Path) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "k2to3", "lint", "--no-cache", "--format", "json", str(path)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return json.loads(r.stdout)["findings"]


def fix(path: Path) -> None:
    subprocess.run([sys.executable, "-m", "k2to3", "fix", "--write", str(path)], capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def call_sites(findings: list[dict]) -> collections.Counter:
    """(path, function) -> count of tf.* / K.* call-site findings."""
    out: collections.Counter = collections.Counter()
    for f in findings:
        if f["code"] in TF_CODES | K_CODES:
            m = NAME.match(f["message"])
            if m:
                out[(f["path"], m.group(1))] += 1
    return out


def has_keras_ops(name: str) -> bool:
    if name.startswith("K."):
        n = name[2:]
        return n in ops.by_backend_name() or n in ops.config_aliases()
    try:
        ops.lookup(name[3:])
        return True
    except ops.Untranslatable:
        return False


def digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.py"))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, default=ROOT / "tests" / ".cache" / "real_code")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--no-tf-keras", action="store_true", help="only the fixture sources and the sdists (fast)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus"
        used = build_corpus(corpus, args.cache, not args.no_tf_keras)
        files = sorted(corpus.rglob("*.py"))
        lines = sum(len(p.read_bytes().splitlines()) for p in files)
        print(f"corpus: {len(files)} files, {lines} lines: {', '.join(used)}")
        t0 = time.perf_counter()
        before = call_sites(lint(corpus))
        original = digest(corpus)
        fix(corpus)
        fixed_once = digest(corpus)
        after = call_sites(lint(corpus))
        fix(corpus)
        fixed_twice = digest(corpus)
        rewritten = [p for p, h in fixed_once.items() if original.get(p) != h]
        broken = []
        for p in rewritten:
            try:
                ast.parse(Path(p).read_bytes())
            except SyntaxError as exc:
                broken.append(f"{p}: {exc}")
        not_fixed_point = [p for p, h in fixed_twice.items() if fixed_once.get(p) != h]
        elapsed = time.perf_counter() - t0

    total = sum(before.values())
    expressible = {k: n for k, n in before.items() if has_keras_ops(k[1])}
    n_expr = sum(expressible.values())
    left_expr = sum(min(after.get(k, 0), n) for k, n in expressible.items())
    fixed_expr = n_expr - left_expr
    fixed_all = total - sum(min(after.get(k, 0), n) for k, n in before.items())
    print(f"tf.*/K.* call sites: {total}; fixed: {fixed_all} ({fixed_all / max(total, 1):.0%})")
    print(f"with a keras.ops expression in rules/ops.toml: {n_expr} ({n_expr / max(total, 1):.0%} of all); "
          f"fixed: {fixed_expr} = {fixed_expr / max(n_expr, 1):.1%} (target >= 90%)")
    print(f"rewritten files: {len(rewritten)}; failing to parse: {len(broken)}; "
          f"changed by a second fix: {len(not_fixed_point)}  ({elapsed:.0f} s)")
    for b in broken[:10]:
        print("  does not parse:", b)
    for p in not_fixed_point[:10]:
        print("  not a fixed point:", p)
    left: collections.Counter = collections.Counter()
    for (_, name), n in after.items():
        left[name] += n
    print(f"\nleft after fix, by count (top {args.top}; * = the table has an entry, blocked by an argument):")
    for name, n in left.most_common(args.top):
        print(f"  {n:5d}  {name}{' *' if has_keras_ops(name) else ''}")


if __name__ == "__main__":
    main()
