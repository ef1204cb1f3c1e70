"""Checking an output location before any work: a run that cannot write its result must fail in its first second
with one line (exit 2), not after the conversion with a traceback."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from k2to3.errors import InputError


def nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_dir(path: Path, flag: str) -> None:
    """`path` is (or can be created as) a directory we can write into. Nothing is created: the nearest existing
    ancestor gets a real write probe (os.access says yes to root even on a read-only mount)."""
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path}: exists and is not a directory", hint="choose a directory path")
    base = nearest_existing(path)
    if not base.is_dir():
        raise InputError(f"{flag} {path}: {base} is a file, not a directory", hint="choose another path")
    try:
        with tempfile.NamedTemporaryFile(dir=base, prefix=".k2to3-probe-"):
            pass
    except OSError as exc:
        raise InputError(f"{flag} {path}: {base} is not writable ({exc.strerror or exc})",
                         hint="choose a writable location") from None


def write_atomic(path: Path, text: str) -> None:
    """Write beside `path`, then rename: a reader never sees half a file. A file replaced keeps its permission
    bits (an executable script stays executable after `fix --write`)."""
    tmp = path.with_name(f".{path.name}.k2to3-tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        if path.exists():
            shutil.copymode(path, tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
