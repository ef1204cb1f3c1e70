"""Findings: one record per thing k2to3 changed, noticed or could not do."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from k2to3.core.text import plural, some

Severity = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    message: str
    layer: str | None = None
    fix: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)

    def line(self) -> str:
        where = f"layer '{self.layer}': " if self.layer else ""
        tail = f" ({self.fix})" if self.fix else ""
        return f"{self.code} {where}{self.message}{tail}"


def grouped_lines(findings: list[Any]) -> list[str]:
    """One line per distinct problem, not per layer: 13 bytecode Lambdas are `K2T901 on 13 layers ('lambda',
    'lambda_1', 'lambda_2' and 10 more): ... (fix)`. Takes Finding objects or their dicts."""
    groups: dict[tuple[str, str, str | None], list[str]] = {}
    for f in findings:
        d = f if isinstance(f, dict) else f.to_dict()
        groups.setdefault((d["code"], d["message"], d.get("fix")), []).append(d.get("layer") or "")
    out = []
    for (code, message, fix), layers in groups.items():
        named = [f"'{x}'" for x in layers if x]
        if len(named) == 1:
            where = f" layer {named[0]}:"
        elif named:
            where = f" on {plural(len(named), 'layer')} ({some(named)}):"
        else:
            where = ""
        out.append(f"{code}{where} {message}" + (f" ({fix})" if fix else ""))
    return out


def not_portable_line(errors: list[Any]) -> str:
    """The one-line error of a model that is not portable: its one problem, or the first and how many more (the
    command line prints them all above it; the report lists every layer)."""
    lines = grouped_lines(errors)
    more = len(lines) - 1
    return lines[0] + (f"; and {plural(more, 'more problem')} above" if more else "")
