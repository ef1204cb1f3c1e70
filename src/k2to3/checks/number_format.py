"""Numbers as report.md and the console print them."""

from __future__ import annotations

from typing import Any


def fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return "" if x is None else str(x)
