"""`k2to3 lint` for a pre-commit hook: its options parsed here, without typer, rich or pydantic (most of the full
command line's start-up). A second parser is needed because the first one is click's, and a hook runs on every
commit: importing the full command line costs more than the lint of a few files. What it shares with the full
command is everything but the parsing: which flags lint takes and which of them take a value come from the one
options model (core/options.py `LintOptions`, as the full command line's lint is derived), and both run the same
function (source/command.py), so what it prints is the same; anything it does not parse exactly as click would
(another option, a repeated one, `--`, a value that looks like an option) is left to the full command line, and so
is an error it could not print exactly as rich does (on a terminal, in colour). tests/test_startup.py compares its
parse with click's for every lint option."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from k2to3.core.options import LintOptions, fields_of, flags
from k2to3.errors import K2to3Error

# Long flags of plain values only: a short flag (`-x=v` is the value `=v` to click) or a list, a size, a choice
# (converted by interfaces/cli_options.py) is left to the full command line.
_PLAIN = [(flag, f) for f in fields_of(LintOptions, "lint") if f.metadata["cli"] is None
          for flag in flags(f) if flag.startswith("--")]
FLAGS = {flag: f.name for flag, f in _PLAIN if f.type == "bool"}
VALUED = {flag: f.name for flag, f in _PLAIN if f.type != "bool"}
# What rich's print changes in a line: control characters and :emoji: codes.
_RICH_CHANGES = re.compile(r"[\x00-\x1f\x7f]|:\S*?:")


def parse(args: list[str]) -> tuple[list[Path], dict[str, str | bool]] | None:
    """`lint`'s arguments -> (paths, options), or None where the full command line must decide."""
    paths: list[Path] = []
    opts: dict[str, str | bool] = {}
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-") or a == "":
            paths.append(Path(a))
            continue
        name, eq, value = a.partition("=")
        if name in FLAGS and not eq:
            opts[FLAGS[name]] = True
            continue
        if name not in VALUED or VALUED[name] in opts:
            return None  # --help, `--`, `-`, an unknown or repeated option: click's rules and messages
        if not eq:
            if i == len(args) or args[i].startswith("-"):
                return None
            value = args[i]
            i += 1
        opts[VALUED[name]] = value
    return paths, opts


def _plain_stderr() -> bool:
    """Whether rich would print to stderr without colour codes."""
    env = os.environ
    return "TTY_COMPATIBLE" not in env and "FORCE_COLOR" not in env and not sys.stderr.isatty()


def run(args: list[str]) -> int | None:
    """Lint as the full command would; the exit code, or None to hand the arguments to the full command line."""
    parsed = parse(args)
    if parsed is None:
        return None
    from k2to3.source.command import lint

    paths, opts = parsed
    try:
        text, code = lint(paths, **opts)  # type: ignore[arg-type]
    except K2to3Error as exc:
        line = exc.line()
        if not (_plain_stderr() and not _RICH_CHANGES.search(line)):
            return None
        sys.stderr.write(f"error: {line}\n")
        return int(exc.code)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `k2to3 lint | head`: as click, exit 1 without a traceback
        sys.stdout = open(os.devnull, "w")  # the interpreter's final flush must not fail again
        return 1
    return code
