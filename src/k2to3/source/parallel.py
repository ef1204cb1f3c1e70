"""Run a function over many items on every core: forked processes (no re-import, nothing to pickle on the way in)
that claim chunks of items from one pipe, so a process that drew small files takes more chunks. Serial where fork
is not available or not safe (another thread running), and for few items, where a fork costs more than it saves."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
MIN_ITEMS = 48  # below this a lint run is too short for a fork to pay off
CHUNK = 8
_INT = 4  # bytes per chunk number in the task pipe


def workers() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the cores this process may use (a container's share)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _can_fork() -> bool:
    threading = sys.modules.get("threading")
    return hasattr(os, "fork") and (threading is None or threading.active_count() == 1)


def map_items(fn: Callable[[T], R], items: Sequence[T], jobs: int = 0, min_items: int = MIN_ITEMS) -> list[R]:
    """[fn(x) for x in items], in order. `jobs`: processes (0: one per core)."""
    jobs = jobs or workers()
    if jobs < 2 or len(items) < min_items or not _can_fork():
        return [fn(x) for x in items]
    size = max(CHUNK, -(-len(items) // 4096))  # the chunk numbers (16 KB) fit in a pipe before anyone reads
    chunks = [range(i, min(i + size, len(items))) for i in range(0, len(items), size)]
    tasks_r, tasks_w = os.pipe()
    os.write(tasks_w, b"".join(i.to_bytes(_INT, "little") for i in range(len(chunks))))
    os.close(tasks_w)  # an empty read then means every chunk is claimed
    sys.stdout.flush(), sys.stderr.flush()
    children = [_fork(fn, items, chunks, tasks_r) for _ in range(min(jobs, len(chunks)) - 1)]
    done = _claim(fn, items, chunks, tasks_r)
    for pid, fd in children:
        done.update(_collect(pid, fd))
    os.close(tasks_r)
    out: list[Any] = [None] * len(items)
    for c, chunk in enumerate(chunks):
        results = done.get(c)
        if results is None:  # a process that died: its chunks again, here
            results = [fn(items[i]) for i in chunk]
        for i, r in zip(chunk, results):
            out[i] = r
    return out


def _claim(fn: Callable[[T], R], items: Sequence[T], chunks: list[range], tasks: int) -> dict[int, list[R]]:
    done: dict[int, list[R]] = {}
    while len(b := os.read(tasks, _INT)) == _INT:  # a pipe read of 4 bytes is atomic: each chunk goes to one process
        c = int.from_bytes(b, "little")
        done[c] = [fn(items[i]) for i in chunks[c]]
    return done


def _fork(fn: Callable[[T], R], items: Sequence[T], chunks: list[range], tasks: int) -> tuple[int, int]:
    import pickle  # before the fork: a child imports nothing (another thread may hold the import lock)

    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        return pid, r
    code = 1  # the child: claim chunks, send the results, and leave without running the parent's exit handlers
    try:
        os.close(r)
        data = pickle.dumps(_claim(fn, items, chunks, tasks), pickle.HIGHEST_PROTOCOL)
        with os.fdopen(w, "wb") as fh:
            fh.write(data)
        code = 0
    except BaseException:  # nothing may escape a forked child; the parent redoes its chunks
        pass
    os._exit(code)


def _collect(pid: int, fd: int) -> dict[int, Any]:
    import pickle

    with os.fdopen(fd, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return {}
    try:
        return pickle.loads(data)
    except Exception:  # a child killed mid-write: its chunks are redone
        return {}
