"""`k2to3 --help` (and `k2to3 COMMAND --help`, `-h`, no arguments) replayed from what the full command line printed
the first time: rendering it means importing typer, rich and the options model, most of the command's start-up;
printing it back costs next to nothing. It is a cache, not a second rendering: what it prints is what typer and rich
printed, so there is no help text to keep in step with the options model (tests/test_startup.py compares it with
the full command line's for every command). An entry is keyed by everything the rendering depends on: the arguments,
the k2to3, Python, typer, click and rich installed (and the command-line modules' files, for a source checkout),
whether each stream is a terminal and its size, and the environment variables rich and typer read (COLUMNS,
NO_COLOR, FORCE_COLOR, ...). Entries live in K2TO3_CACHE_DIR/help (default ~/.cache/k2to3/help), written whole
or not at all."""

from __future__ import annotations

import json
import os
import re
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from k2to3.core.paths import cache_dir, store_json

HELP = ("--help", "-h")
_WORD = re.compile(r"[a-z][a-z0-9_-]{0,30}")  # a command name, not a path or an option value
ENV = ("COLUMNS", "LINES", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS",
       "TERMINAL_WIDTH", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES", "UNICODE_VERSION",
       "DATABRICKS_RUNTIME_VERSION", "TYPER_USE_RICH", "_TYPER_FORCE_DISABLE_TERMINAL", "_TYPER_STANDARD_TRACEBACK",
       "PYTHONIOENCODING", "LANG", "LC_ALL", "LC_CTYPE")
PACKAGE = Path(__file__).resolve().parents[1]
# The modules the help text comes from (a source checkout changes them without changing the version).
SOURCES = (PACKAGE / "interfaces", PACKAGE / "core" / "options.py")


def cacheable(args: list[str]) -> bool:
    """No arguments (the top-level help), or command names followed by --help or -h."""
    return not args or (args[-1] in HELP and len(args) <= 3 and all(_WORD.fullmatch(a) for a in args[:-1]))


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "-"
    return f"{st.st_mtime_ns}:{st.st_size}"


def _installed() -> list[str]:
    """Where typer, click and rich are and when they were installed, found without importing them."""
    from importlib.util import find_spec

    out = []
    for name in ("typer", "click", "rich"):
        spec = find_spec(name)
        out.append(f"{name}={_stamp(Path(spec.origin)) if spec and spec.origin else '-'}")
    return out


def _stream(s: TextIO | None, fd: int) -> str:
    try:
        if s is None or not s.isatty():
            return f"{fd}:pipe:{getattr(s, 'encoding', '')}"
        size = os.get_terminal_size(fd)
    except (OSError, ValueError):
        return f"{fd}:?"
    return f"{fd}:tty:{size.columns}x{size.lines}:{s.encoding}"


def key(args: list[str]) -> str:
    from k2to3.version import __version__

    parts = [__version__, sys.version, sys.executable, *args, "\0"]
    parts += [_stream(s, fd) for fd, s in enumerate((sys.stdin, sys.stdout, sys.stderr))]
    parts += [f"{k}={os.environ[k]}" for k in ENV if k in os.environ]
    for src in SOURCES:
        files = sorted(src.glob("*.py")) if src.is_dir() else [src]
        parts += [f"{f.name}={_stamp(f)}" for f in files]
    parts += _installed()
    text = "\n".join(parts).encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(text):08x}{zlib.adler32(text):08x}{len(text):x}"


def _path(args: list[str]) -> Path:

    return cache_dir() / "help" / f"{key(args)}.json"


class _Tee:
    """A stream that also keeps what is written to it; everything else (isatty, encoding, fileno) is the stream's,
    so rich renders exactly as it would on it."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.text: list[str] = []

    def write(self, s: str) -> int:
        n = self._stream.write(s)  # first: click probes with write(b"") and expects the TypeError
        self.text.append(s)
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def replay(args: list[str]) -> int | None:
    """Print the cached output for `args`; its exit code, or None when there is none."""
    try:
        entry = json.loads(_path(args).read_text(encoding="utf-8"))
        out, err, code = entry["stdout"], entry["stderr"], entry["code"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(out, str) and isinstance(err, str) and isinstance(code, int)):
        return None
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


def render(args: list[str], full: Callable[[], None]) -> None:
    """Run the full command line (`full`) for `args`, keep what it prints, exit as it does."""
    path = _path(args)
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    try:
        full()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.stdout, sys.stderr = out._stream, err._stream
    if code is None:
        code = 0
    if isinstance(code, int):
        store_json(path, {"stdout": "".join(out.text), "stderr": "".join(err.text), "code": code})
    sys.exit(code)


