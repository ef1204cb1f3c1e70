"""The file a worker writes its per-step arrays to (weights after the training steps, step gradients) and the parent
reads them from: a JSON header and the raw elements, each array 64-byte aligned.

A run with `--grads --fit-steps 1` moves several copies of the model's weights through these files. An `.npz`
costs a zip CRC and a copy on each side; this format is written straight from each array's buffer and read as
read-only views of one memory map (the page cache holds the data; nothing is copied until it is compared). The files
live in the run's own work directory, but the reader still checks the header before it maps anything: dtypes
numeric, shapes non-negative, every array inside the file."""

from __future__ import annotations

import json
import mmap
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

MAGIC = b"K2TO3ARR"
ALIGN = 64
MAX_HEADER = 64 << 20
_KINDS = set("biufc")  # bool, ints, floats, complex: no objects, strings or structured records


class ArrayFileError(ValueError):
    """The file is not an array file this module wrote."""


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def write(path: str | Path, arrays: Sequence[np.ndarray]) -> None:
    """`arrays` in order, each from its own buffer (one copy only for a non-contiguous array)."""
    flat = [np.asarray(a) for a in arrays]
    flat = [a if a.flags.c_contiguous else a.copy(order="C") for a in flat]  # (ascontiguousarray makes 0-d 1-d)
    for a in flat:
        if a.dtype.kind not in _KINDS:
            raise ArrayFileError(f"{path}: dtype {a.dtype} is not numeric")
    header = json.dumps({"arrays": [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in flat]}).encode()
    start = _aligned(len(MAGIC) + 8 + len(header))
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(header)) + header)
        pos = len(MAGIC) + 8 + len(header)
        for a in flat:
            f.write(b"\0" * (start - pos))
            f.write(a.reshape(-1).view(np.uint8).data)
            pos = start + a.nbytes
            start = _aligned(pos)


def read(path: str | Path) -> list[np.ndarray]:
    """The arrays as read-only views of a memory map of the file (kept open while any view lives)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        lead = f.read(len(MAGIC) + 8)
        if len(lead) < len(MAGIC) + 8 or lead[:len(MAGIC)] != MAGIC:
            raise ArrayFileError(f"{path}: not an array file")
        (n,) = struct.unpack("<Q", lead[len(MAGIC):])
        if n > min(MAX_HEADER, size - len(lead)):
            raise ArrayFileError(f"{path}: header of {n} bytes in a file of {size}")
        try:
            specs = json.loads(f.read(n))["arrays"]
            dtypes = [np.dtype(s["dtype"]) for s in specs]
            shapes = [tuple(int(d) for d in s["shape"]) for s in specs]
        except (ValueError, TypeError, KeyError) as exc:
            raise ArrayFileError(f"{path}: unreadable header ({exc})") from None
        places, pos = [], len(lead) + n
        for dt, shape in zip(dtypes, shapes):
            if dt.kind not in _KINDS or any(d < 0 for d in shape):
                raise ArrayFileError(f"{path}: array of dtype {dt} and shape {shape}")
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            start = _aligned(pos)
            pos = start + count * dt.itemsize
            if pos > size:
                raise ArrayFileError(f"{path}: arrays end at byte {pos}, the file has {size}")
            places.append((start, count))
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    out = []
    for dt, shape, (start, count) in zip(dtypes, shapes, places):
        if count == 0:
            out.append(np.empty(shape, dt))
        else:
            out.append(np.frombuffer(mm, dt, count, start).reshape(shape))
    return out
