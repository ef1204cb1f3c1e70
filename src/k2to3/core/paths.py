"""Where k2to3's data and caches are: rules/ (shipped in the wheel, or the checkout's) and the cache directory (the
lint results, the rule tables, the help texts, jax's compiled programs), and how a cache entry is written. Imports
only the standard library, so the fast paths of `k2to3 lint` and `--help` can use it."""

from __future__ import annotations

import json
import os
from contextlib import suppress
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/k2to3 in a checkout, site-packages/k2to3 in a wheel


def rules_dir() -> Path:
    """rules/ ships inside the wheel as k2to3/rules; in a source checkout it is the repo's rules/."""
    packaged = PACKAGE_DIR / "rules"
    if packaged.is_dir():
        return packaged
    return PACKAGE_DIR.parents[1] / "rules"


def cache_dir() -> Path:
    """K2TO3_CACHE_DIR, else ~/.cache/k2to3."""
    return Path(os.environ.get("K2TO3_CACHE_DIR") or Path.home() / ".cache" / "k2to3")


def store_json(path: Path, data: Any) -> None:
    """A cache entry written whole or not at all (a temporary file renamed into place: a concurrent run reads
    either). An unwritable cache (a read-only home) is not an error: the entry is computed again next time."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
