"""Large arrays by slices of their first axis, and the weight hash (numpy only): what the restore, the lean loaders and
the hashes share, so that no whole extra copy of a large tensor is ever made."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

# Datasets from this size up are read and assigned by slices (Restorer.assign_in_slices); K2TO3_SLICED_BYTES
# lowers it (the tests run every dataset of a small model through the sliced path).
SLICED_BYTES = int(os.environ.get("K2TO3_SLICED_BYTES", 64 << 20))


SLICE_BYTES = min(16 << 20, SLICED_BYTES)


def slices(shape: tuple[int, ...], itemsize: int) -> range:
    """Start rows of SLICE_BYTES slices of the first axis of an array (a dataset, a variable) of that shape."""
    rows = max(1, SLICE_BYTES // max(1, int(np.prod(shape[1:])) * itemsize))
    return range(0, shape[0], rows)


def nonfinite(ds: Any) -> bool:
    """Any NaN/Inf in a float dataset, read by slices of the first axis when it is large."""
    if ds.dtype.kind != "f":
        return False
    if ds.ndim == 0 or ds.nbytes < SLICED_BYTES:
        return not np.isfinite(np.asarray(ds)).all()
    starts = slices(ds.shape, ds.dtype.itemsize)
    return any(not np.isfinite(ds[i:i + starts.step]).all() for i in starts)


def weight_hash(arrays: Iterable[np.ndarray]) -> str:
    """sha256 over float32 little-endian bytes, in order (shapes included so reshapes differ).

    `arrays` may be a generator: each array is hashed and dropped before the next is made, so hashing a
    model's weights holds one variable's copy at a time, not a copy of all of them. The buffer is hashed
    in place (no `tobytes` copy) when it already is contiguous little-endian float32."""
    h = hashlib.sha256()
    for a in arrays:
        chunks: Iterable[Any] = a.chunks if isinstance(a, Chunked) else [a]
        h.update(str(a.shape if isinstance(a, Chunked) else np.asarray(a).shape).encode())
        for c in chunks:
            h.update(np.ascontiguousarray(c, dtype="<f4").reshape(-1).view(np.uint8))
    return h.hexdigest()


class Chunked(NamedTuple):
    """A large array given to weight_hash as consecutive slices of its first axis (C order: the same bytes,
    the same hash), so that no whole copy of it is made."""

    shape: tuple[int, ...]
    chunks: Iterable[np.ndarray]
