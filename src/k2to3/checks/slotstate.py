"""Does the optimizer a backend loaded from the .keras hold the legacy file's slots, bit for bit? The fit worker
replies one digest per optimizer variable (core.compare.value_digest) so the slots need not travel through a file."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.core.compare import value_digest
from k2to3.core.h5safe import open_checked, read_dataset


def state_as_loaded(h5: Path, optimizer: dict[str, Any] | None, digests: list[str] | None,
                    saved: dict[str, str] | None = None) -> dict[str, Any] | None:
    """Does the optimizer this backend loaded from the .keras hold the file's slots, bit for bit? `digests` are
    the worker's (core.compare.value_digest of each optimizer variable before the steps); `saved` caches the file's
    slot digests between calls (filled by the first; `digests` None only fills it)."""
    slots = (optimizer or {}).get("slots")
    if not slots:
        return None
    saved = {} if saved is None else saved
    if not saved:
        with contextlib.closing(open_checked(h5)) as f:
            saved.update({n: value_digest(read_dataset(f, f"optimizer_weights/{n}")) for n in slots})
    if digests is None:
        return None
    equal = [n for n, i in slots.items() if i < len(digests) and _same_slot(h5, n, saved[n], digests[i])]
    return {"slots": len(slots), "equal": len(equal), "differ": sorted(set(slots) - set(equal))[:5]}


def _same_slot(h5: Path, name: str, want: str, got: str) -> bool:
    """The file's slot `name` (digest `want`) and a loaded variable (digest `got`) hold the same values: the same
    digest, or, when the variable has another dtype, the file's values cast to it losslessly give its digest."""
    if got == want:
        return True
    dtype = got.split(":", 1)[0]
    if dtype == want.split(":", 1)[0]:
        return False
    with contextlib.closing(open_checked(h5)) as f:
        a = read_dataset(f, f"optimizer_weights/{name}")
    try:
        b = a.astype(np.dtype(dtype))
    except TypeError:
        return False
    return bool(np.array_equal(b.astype(a.dtype), a)) and value_digest(b) == got
