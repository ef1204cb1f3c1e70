"""The one way k2to3 opens an untrusted HDF5 file: h5py + numpy only (docs/security.md).

The whole structure is walked once, without reading any data, before anything else looks at the file:
links that leave the object (external, soft), datasets whose bytes live in another file (external storage,
virtual datasets), declared sizes the file does not hold (shape bombs) and non-numeric weights are refused
with one line naming the dataset path and why.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.core.text import clip
from k2to3.errors import InputError

# Largest single weight tensor k2to3 will read; the biggest Keras application tensors are ~400 MB.
MAX_TENSOR_BYTES = int(os.environ.get("K2TO3_MAX_TENSOR_BYTES", str(2 << 30)))
# A compressed dataset may declare at most this many times the bytes it stores.
MAX_COMPRESSION_RATIO = 1000
KERAS_GROUPS = ("model_weights/", "optimizer_weights/")  # what Keras 2's load_model reads of a full model file
_HINT = "the file is not a plain Keras 2 save; re-save it with model.save('x.h5'); see docs/security.md"


def _refuse(path: Path, where: str, why: str) -> InputError:
    return InputError(f"{path}: HDF5 {where}: {why}; refused", hint=_HINT)


def _check_dataset(path: Path, name: str, ds: Any, keras_reads: bool = True) -> None:
    """`keras_reads`: under model_weights/ or optimizer_weights/ of a full model file (or anywhere in another file):
    its values are read as weights, so they must be numbers. Data an application stored beside them (a decoding
    table of strings) is never read, and only its links, storage and sizes are checked."""
    import h5py

    if ds.is_virtual:
        raise _refuse(path, f"dataset /{name}", "is a virtual dataset mapping other files")
    if ds.external:
        raise _refuse(path, f"dataset /{name}", "has external storage (its bytes live in another file)")
    if ds.dtype.kind not in "biuf":
        if not keras_reads:
            return
        raise _refuse(path, f"dataset /{name}", f"has non-numeric dtype {ds.dtype} (weights are numbers)")
    shape = ds.shape or ()
    declared = int(np.prod(shape, dtype=object)) * ds.dtype.itemsize if shape is not None else 0
    if declared > MAX_TENSOR_BYTES:
        raise _refuse(path, f"dataset /{name}", f"declares shape {shape} = {declared} bytes, over the "
                      f"{MAX_TENSOR_BYTES}-byte cap (K2TO3_MAX_TENSOR_BYTES)")
    if declared == 0:
        return
    stored = ds.id.get_storage_size()
    layout = ds.id.get_create_plist().get_layout()
    if layout == h5py.h5d.COMPACT:
        return  # the bytes are in the object header itself
    filtered = layout == h5py.h5d.CHUNKED and ds.id.get_create_plist().get_nfilters() > 0
    if (stored < declared and not filtered) or (filtered and declared > stored * MAX_COMPRESSION_RATIO):
        raise _refuse(path, f"dataset /{name}", f"declares shape {shape} = {declared} bytes but stores {stored}")


def check_open(path: Path, f: Any) -> None:
    """Walk every link of an open file; raise InputError at the first one that is not plain local data."""
    import h5py

    full = "model_config" in f.attrs and "model_weights" in f  # Keras reads model_weights/, optimizer_weights/
    stack = [("", f)]
    while stack:
        prefix, group = stack.pop()
        for key in group:
            name = f"{prefix}{key}"
            link = group.get(key, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                raise _refuse(path, f"/{name}", f"is an external link to {link.filename}:{link.path}")
            if isinstance(link, h5py.SoftLink):
                raise _refuse(path, f"/{name}", f"is a soft link to {link.path}")
            if not isinstance(link, h5py.HardLink):
                raise _refuse(path, f"/{name}", f"is a {type(link).__name__}")
            obj = group[key]
            if isinstance(obj, h5py.Dataset):
                _check_dataset(path, name, obj, not full or name.startswith(KERAS_GROUPS))
            elif isinstance(obj, h5py.Group):
                stack.append((f"{name}/", obj))
            else:
                raise _refuse(path, f"/{name}", f"is a {type(obj).__name__}, not a group or dataset")


def hdf5_reason(exc: BaseException) -> str:
    """HDF5's own reason in a few whole words: 'Unable to synchronously open file (truncated file: eof = 13100,
    sblock->base_addr = 0, stored_eof = 26200)' -> '13,100 of its 26,200 bytes are there'."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    m = re.search(r"\(([^()]*)\)\s*$", text)  # the innermost, last parenthesis holds the reason
    reason = m.group(1) if m else text
    sizes = re.match(r"truncated file: eof = (\d+).*stored_eof = (\d+)", reason)
    if sizes:
        return f"{int(sizes.group(1)):,} of its {int(sizes.group(2)):,} bytes are there"
    return clip(reason)


# The files this process has walked, by what identifies their bytes: one convert --fit-steps opens the same file
# in several places (reader, optimizer state, slot digests per backend), and a large file's walk is not free.
_PASSED: dict[tuple[int, ...], None] = {}
_PASSED_MAX = 16


def _stamp(f: Any) -> tuple[int, ...] | None:
    """The opened file's device, inode, size and modification and change times (fstat of the descriptor h5py
    holds, not of the path: a file swapped in under the same name is another file). Any write changes the change
    time, which no user can set back. None when the driver has no descriptor."""
    try:
        st = os.fstat(f.id.get_vfd_handle())
    except (AttributeError, OSError, TypeError, ValueError):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def open_checked(path: str | Path) -> Any:
    """h5py.File opened read-only, after check_open (once per unchanged file in this process); the caller closes
    it."""
    import h5py

    p = Path(path)
    try:
        f = h5py.File(p, "r")
    except OSError as exc:
        raise InputError(f"{p}: HDF5 file is truncated or corrupt: {hdf5_reason(exc)}",
                         hint="copy the file again from its source") from None
    stamp = _stamp(f)
    if stamp is not None and stamp in _PASSED:
        return f
    try:
        check_open(p, f)
    except BaseException:
        f.close()
        raise
    if stamp is not None:
        if len(_PASSED) >= _PASSED_MAX:
            _PASSED.pop(next(iter(_PASSED)))
        _PASSED[stamp] = None
    return f


def check_file(path: str | Path) -> None:
    """Validate a file before a library that does not check (tf_keras) opens it."""
    open_checked(path).close()


def read_dataset(f: Any, h5path: str) -> np.ndarray:
    """Read one dataset of a file that passed check_open (so it is local, numeric and of checked size)."""
    return np.asarray(f[h5path])
