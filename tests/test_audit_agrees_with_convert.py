"""The audit predicts what convert does (issue 48.5): over a store built from committed fixtures (tests/store_tree.py,
plus a weights file with its JSON architecture beside it under another name, a siamese network with a
Model-subclass tower and a subclassed classifier saved whole as a SavedModel and a
`.keras` archive, each with its source in the tree), every artifact is converted as a user would after reading the
audit (with the `src` files its row names), and the outcome must be the one the static verdict predicted:
portable (with source) -> parity, tf-only -> tf_only, blocked -> a precise stop, also with every source of the tree
passed (the audit says no source in the tree completes it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES
from store_tree import make_tree

from k2to3.core.options import ConvertOptions
from k2to3.errors import K2to3Error
from k2to3.pipeline.convert import convert
from k2to3.stores.audit import run_audit

EXTRA = {"sub/tower_savedmodel": FIXTURES / "subclass" / "tower_savedmodel",
         "sub/tower.keras": FIXTURES / "subclass" / "tower.keras",
         "sub/tower_subclass.py": FIXTURES / "src" / "tower_subclass.py",
         "sub/siamese.h5": FIXTURES / "subclass" / "siamese.h5",
         "sub/siamese_subclass.py": FIXTURES / "src" / "siamese_subclass.py",
         # save_weights beside its to_json under another name: convert and the audit find the same config
         "pair/cnn_weights.h5": FIXTURES / "longtail" / "pairs" / "cnn_weights.h5",
         "pair/cnn.json": FIXTURES / "longtail" / "pairs" / "cnn.json"}


def _store(root: Path) -> Path:
    make_tree(root)
    for rel, src in EXTRA.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / rel)
    return root


def _outcome(pool, path: Path, sources: tuple[str, ...], out: Path) -> str:
    try:
        report = convert(ConvertOptions(src=path, output=out, sources=sources, force=True), pool=pool)
    except K2to3Error as exc:
        assert int(exc.code) in (2, 3), exc.line()  # a precise stop, never k2to3's own bug
        return "stop"
    return str(report["verdict"])


@pytest.mark.slow
def test_every_static_verdict_is_what_convert_then_does(pool, tmp_path):
    root = _store(tmp_path / "store")
    rows = run_audit([root], tmp_path / "audit")["artifacts"]
    assert len(rows) == 10, [r["path"] for r in rows]
    every_source = tuple(str(p) for p in sorted(root.rglob("*.py")))
    expected = {"portable": "parity", "portable with source": "parity", "tf-only": "tf_only", "blocked": "stop"}
    got = {}
    for i, row in enumerate(rows):
        path = Path(row["path"])
        got[path.relative_to(root).as_posix()] = (row["verdict"], _outcome(
            pool, path, tuple(row.get("src") or ()), tmp_path / f"m{i}.keras"))
        if row["verdict"] == "blocked":
            assert _outcome(pool, path, every_source, tmp_path / f"m{i}-all.keras") == "stop", row
    wrong = {k: v for k, v in got.items() if expected[v[0]] != v[1]}
    assert not wrong, wrong
    assert got["sub/tower_savedmodel"] == got["sub/tower.keras"] == ("portable with source", "parity")
    assert got["pair/cnn_weights.h5"] == ("portable", "parity")
