"""TF-format checkpoints (`save_weights('ckpt')` without .h5, the TF 2 default, and ModelCheckpoint's files):
PREFIX.index + PREFIX.data-NNNNN-of-NNNNN, and the `checkpoint` state file naming the latest PREFIX. Named by its
prefix, its .index, a .data shard or the directory holding `checkpoint`. Here the paths only (no TensorFlow): every
file the checkpoint consists of must sit in the prefix's directory, and a state file whose path points outside
its directory is refused. The index is read, its declared sizes checked, and the values loaded in the tensorflow
worker (workers/checkpoints.py); nothing in a checkpoint is executed."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from k2to3.errors import InputError

SHARD = re.compile(r"^(?P<prefix>.+)\.data-(?P<i>\d{5})-of-(?P<n>\d{5})$")
STATE = "checkpoint"
STATE_MAX_BYTES = 1 << 16
_STATE_LINE = re.compile(r'^\s*model_checkpoint_path:\s*"(?P<path>(?:[^"\\]|\\.)*)"\s*$', re.M)


def prefix_of(path: Path) -> Path | None:
    """The checkpoint prefix `path` names, or None when it is not a TF checkpoint. Raises InputError for a state
    file that points outside its directory or a checkpoint whose files are not all beside its index."""
    if path.is_dir() and (path / STATE).is_file():
        prefix = _from_state(path / STATE)
    elif path.name == STATE and path.is_file():
        prefix = _from_state(path)
    elif path.suffix == ".index" and path.is_file():
        prefix = path.with_suffix("")
    elif SHARD.match(path.name) and path.is_file():
        prefix = path.with_name(SHARD.match(path.name)["prefix"])  # type: ignore[index]
    elif not path.exists() and path.with_name(path.name + ".index").is_file():
        prefix = path
    else:
        return None
    check_files(prefix)
    return prefix


def _from_state(state: Path) -> Path:
    if state.stat().st_size > STATE_MAX_BYTES:
        raise InputError(f"{state}: a checkpoint state file of {state.stat().st_size} bytes",
                         hint="pass the checkpoint's PREFIX.index instead")
    try:
        m = _STATE_LINE.search(state.read_text())
    except UnicodeDecodeError:
        m = None
    if m is None:
        raise InputError(f"{state}: no model_checkpoint_path in the checkpoint state file",
                         hint="pass the checkpoint's PREFIX.index instead")
    named = m["path"]
    where = state.parent.resolve()
    target = (where / named).resolve()
    if Path(named).is_absolute() or target.parent != where:
        raise InputError(f"{state}: model_checkpoint_path {named!r} points outside {state.parent}/",
                         hint="k2to3 reads only the checkpoint files beside the state file; pass PREFIX.index")
    return state.parent / Path(named).name


def shards(prefix: Path) -> list[Path]:
    return sorted(p for p in prefix.parent.glob(prefix.name + ".data-*") if SHARD.match(p.name))


def check_files(prefix: Path) -> None:
    """Every file of the checkpoint is a regular file in the prefix's own directory, the shards a complete set."""
    index = prefix.with_name(prefix.name + ".index")
    where = prefix.parent.resolve()
    data = shards(prefix)
    for f in [index, *data]:
        if not f.is_file():
            raise InputError(f"{f}: no such checkpoint file", hint="pass a checkpoint with its .index and .data")
        if f.resolve().parent != where:
            raise InputError(f"{f}: links outside the checkpoint's directory ({f.resolve()})",
                             hint="copy the checkpoint files themselves into one directory")
    counts = {int(SHARD.match(p.name)["n"]) for p in data}  # type: ignore[index]
    if not data or len(counts) != 1 or len(data) != counts.pop():
        raise InputError(f"{prefix}: the checkpoint's data shards are missing or incomplete "
                         f"({', '.join(p.name for p in data) or 'none'})",
                         hint="pass the checkpoint with every PREFIX.data-NNNNN-of-NNNNN file")


def sha256(prefix: Path) -> str:
    """sha256 over the index and the data shards, in that order."""
    h = hashlib.sha256()
    for f in [prefix.with_name(prefix.name + ".index"), *shards(prefix)]:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def data_bytes(prefix: Path) -> int:
    return sum(p.stat().st_size for p in shards(prefix))
