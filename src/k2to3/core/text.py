"""Words in messages: counts with the right plural, lists cut to a readable length."""

from __future__ import annotations

from collections.abc import Sequence


def plural(n: int, one: str, many: str | None = None) -> str:
    """`1 file`, `2 files`, `0 files` (`many` for irregular plurals: config fix -> config fixes)."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def some(items: Sequence[str], limit: int = 3) -> str:
    """`a, b, c` or `a, b, c and 10 more`."""
    head = ", ".join(items[:limit])
    return head if len(items) <= limit else f"{head} and {len(items) - limit} more"


def clip(text: str, limit: int = 100) -> str:
    """The first line of `text`, cut at a word boundary with `…` (never mid-word, never an open parenthesis)."""
    line = text.splitlines()[0] if text else ""
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0].rstrip(",;:(")
    if cut.count("(") > cut.count(")"):
        cut = cut[:cut.rfind("(")].rstrip()
    return cut + " …"
