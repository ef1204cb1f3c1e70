"""Layer and model names: every rename of the upgrade happens here and is recorded in `Plan.renames`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .refs import _is_ref

if TYPE_CHECKING:
    from .core import Upgrader


class Names:
    def __init__(self, up: Upgrader) -> None:
        self.up = up
        self._used: set[str] = set()
        self._seen: dict[str, str] = {}

    def name(self, orig: str) -> str:
        up = self.up
        if orig in self._seen:
            return self._seen[orig]
        new = orig
        if "/" in orig:
            new = re.sub(r"/+", "_", orig)
            base, i = new, 1
            while new in self._used:
                new = f"{base}_{i}"
                i += 1
            up.plan.renames[orig] = new
            up.note(up.code("names"), "info", f"renamed to '{new}' ('/' is not allowed in Keras 3)", orig)
        self._seen[orig] = new
        self._used.add(new)
        return new

    def refs(self, data: Any) -> Any:
        """Rename layer references anywhere in node data or kwargs."""
        if _is_ref(data):
            out = [self.name(data[0]), *data[1:3]]
            if len(data) == 4:
                out.append(self.refs(data[3]))
            return out
        if isinstance(data, list):
            return [self.refs(x) for x in data]
        if isinstance(data, dict):
            return {k: self.refs(v) for k, v in data.items()}
        return data
