"""A mechanical Python 2 -> 3 step for `--src` files and `lint`: only the fixers that turn Python 2 *syntax* into
the same program in Python 3 (print and exec statements, `except X, e`, backticks, `<>`, `ur''`, octal and long
literals, `raise E, msg`) and the Python 2 tab rule. Nothing that changes what a program computes (dict views,
map/zip/filter, integer division) is touched, and every fixer keeps each statement on its line, so line numbers
of findings and definitions stay those of the file. lib2to3 (stdlib up to 3.12) or its fork fissix."""

from __future__ import annotations

import io
import tokenize
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any

# Syntax-only fixers; all of them keep line numbers (tuple_params, which adds lines, is left out).
FIXERS = ("print", "except", "repr", "ne", "numliterals", "exec", "raise", "unicode", "execfile")


@dataclass(frozen=True)
class Py2:
    text: str  # the Python 3 text (same lines)
    first_error: str  # "line N: <the Python 3 syntax error>" of the original, said once in the report


@cache
def _tool() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lib2to3 is deprecated; it is only a parser here
        try:
            from lib2to3 import refactor  # type: ignore[import-not-found]
            prefix = "lib2to3.fixes.fix_"
        except ImportError:
            try:
                from fissix import refactor  # type: ignore[import-not-found,no-redef]
                prefix = "fissix.fixes.fix_"
            except ImportError:
                return None
        return refactor.RefactoringTool([prefix + f for f in FIXERS], {"print_function": False})


def _expand_tabs(text: str) -> str:
    """Python 2 indentation: a tab moves to the next multiple of 8 (Python 3 rejects a mix it cannot order).
    Lines inside a multi-line string keep their bytes."""
    inside: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        pass
    out = []
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        body = line.lstrip(" \t")
        if n in inside or "\t" not in line[: len(line) - len(body)]:
            out.append(line)
        else:
            out.append(line[: len(line) - len(body)].expandtabs(8) + body)
    return "".join(out)


def to_py3(text: str, error: SyntaxError) -> Py2 | None:
    """The Python 3 reading of a Python 2 file, or None when it is not Python 2 either (or no 2to3 parser is
    installed). `error` is Python 3's syntax error on the original."""
    first = f"line {error.lineno}: {error.msg}"
    new = text
    tool = _tool()
    if tool is not None and not isinstance(error, TabError):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                new = str(tool.refactor_string(text if text.endswith("\n") else text + "\n", "<src>"))
        except Exception:  # lib2to3's ParseError and tokenizer errors: not Python 2 either
            return None
    new = _expand_tabs(new)
    try:
        compile(new, "<src>", "exec", dont_inherit=True)
    except SyntaxError:
        return None
    return Py2(new, first)
