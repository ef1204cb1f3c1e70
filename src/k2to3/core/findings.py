"""Findings: one record per thing k2to3 changed, noticed or could not do."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

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
        tail = f" Fix: {self.fix}" if self.fix else ""
        return f"{self.code} {where}{self.message}{tail}"
