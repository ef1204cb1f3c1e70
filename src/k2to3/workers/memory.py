"""Process memory figures from /proc (Linux), for the report and the memory budget. No backend import: the
parent, the workers and the benchmark all use it.

VmHWM is the peak resident set size of the process so far; writing "5" to /proc/self/clear_refs resets it
to the current RSS, so a warm worker reports the peak of each job, not of its whole life."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import resource
from typing import Any

MB = 1024 * 1024


def _status_kb(field: str, pid: str = "self") -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def rss_bytes(pid: int | str = "self") -> int:
    """Current resident set size (0 when the process is gone)."""
    kb = _status_kb("VmRSS", str(pid))
    return (kb or 0) * 1024


def peak_rss_bytes() -> int:
    """Peak RSS of this process since it started or since the last reset_peak()."""
    kb = _status_kb("VmHWM")
    if kb is None:  # no /proc: ru_maxrss is the lifetime peak (KiB on Linux)
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb * 1024


def reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass  # older kernels, no /proc: the peak stays the lifetime peak (an over-estimate)


def release_freed() -> None:
    """Collect garbage and hand freed heap pages back to the OS: glibc keeps them otherwise, and a warm worker
    would stay as large as the largest model it ever held."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        try:
            libc.malloc_trim(0)
        except AttributeError:  # not glibc
            pass


@functools.cache
def _libc() -> Any:
    """glibc, found once per process: ctypes.util.find_library runs `ldconfig -p` in a child process, and a
    worker of hundreds of MB forked after every job would briefly count twice in any RSS sum of its process tree."""
    for find in (lambda: "libc.so.6", lambda: ctypes.util.find_library("c")):  # the second only if needed
        name = find()
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                continue
    return None


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo: what can be allocated without swapping (None when unknown)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def figures() -> dict[str, float]:
    """What a worker adds to each reply: its RSS now and its peak since the last reset, in MB."""
    return {"rss_mb": round(rss_bytes() / MB, 1), "peak_rss_mb": round(peak_rss_bytes() / MB, 1)}


def parse_size(text: str) -> int:
    """'4G', '1500M', '2.5GB', '800MiB', '123456789' (bytes) -> bytes."""
    s = text.strip().upper().removesuffix("B").removesuffix("I")
    units = {"K": 1024, "M": MB, "G": 1024 * MB, "T": 1024 * 1024 * MB}
    mult = units.get(s[-1:], 1)
    number = s[:-1] if s[-1:] in units else s
    value = float(number)  # ValueError for anything else
    if value <= 0:
        raise ValueError(text)
    return int(value * mult)
