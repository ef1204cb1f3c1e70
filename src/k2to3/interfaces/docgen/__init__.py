"""docs/rules.md, docs/ops.md, the optimizer table of docs/optimizers.md and the worker ops' table of
docs/architecture.md, generated from rules/*.toml and the worker protocol (tests fail when a generated page is not
current)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parents[4] / "docs"


def replace_section(doc: str, begin: str, end: str, rendered: str) -> str:
    """`doc` with the generated section between its markers replaced by `rendered` (which holds the markers)."""
    head, _, rest = doc.partition(begin)
    _, _, tail = rest.partition(end)
    return head + rendered + tail


def section_main(page: str, render: Callable[[], str], updated: Callable[[str], str]) -> None:
    """`python -m ...` prints the section; with --write, docs/PAGE is rewritten with it."""
    if "--write" in sys.argv:
        path = DOCS / page
        path.write_text(updated(path.read_text()))
    else:
        print(render())
