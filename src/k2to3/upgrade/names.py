"""Layer and model names: the one place names are made valid and unique for every backend.

Keras 3 rejects '/' in names (Operation.__init__), and torch rejects '.' in parameter names (a layer's
variables are tracked in a torch.nn.ParameterDict keyed by their path, 'Conv4.1/kernel'). Such names are
replaced by a name that no layer, model or inner layer of the file uses (all are reserved up front, so a
renamed layer never takes the name of one seen later), and recorded in `Plan.renames` (original -> new;
weights are restored and per-layer outputs compared by original name through it). Names Keras 3 would
generate itself (the keras.ops calls TFOpLambda nodes become are auto-named 'multiply', 'add', ... and can
collide with a Keras 2 layer of that name) are given instead by `unique`, from the plan's names
(rebuild.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from k2to3.upgrade.node_refs import is_ref

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState

INVALID = re.compile(r"[/.]+")
WHY = {"/": "'/' is not allowed in Keras 3", ".": "'.' is not allowed in torch parameter names"}


def is_valid(name: str) -> bool:
    return bool(name) and not INVALID.search(name)


def unique(base: str, taken: Iterable[str] | set[str]) -> str:
    """`base`, or `base_1`, `base_2`, ... : the first not in `taken`."""
    taken = taken if isinstance(taken, set) else set(taken)
    new, i = base, 1
    while new in taken:
        new = f"{base}_{i}"
        i += 1
    return new


def all_names(config: Any) -> set[str]:
    """Every name a model config gives: layers, nested models and their layers, inner layers of wrappers."""
    found: set[str] = set()
    stack = [config]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if isinstance(x.get("name"), str):
                found.add(x["name"])
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return found


class Names:
    def __init__(self, up: UpgradeState) -> None:
        self.up = up
        self._reserved: set[str] = set()  # every name in the file
        self._used: set[str] = set()  # every name given so far
        self._seen: dict[str, str] = {}

    def reserve(self, config: Any) -> None:
        self._reserved |= all_names(config)

    def name(self, orig: str) -> str:
        """The Keras 3 name of a layer, model or inner layer (the same one wherever `orig` appears)."""
        if orig in self._seen:
            return self._seen[orig]
        new = orig
        if not is_valid(orig):
            new = self.fresh(INVALID.sub("_", orig) or "layer")
            up = self.up
            up.plan.renames[orig] = new
            why = "; ".join(w for c, w in WHY.items() if c in orig) or "an empty name is not allowed"
            up.note(up.code("names"), "info", f"renamed to '{new}' ({why})", orig)
        self._seen[orig] = new
        self._used.add(new)
        return new

    def fresh(self, base: str) -> str:
        """A name for something the file does not name (e.g. Sequential's implicit input): unused anywhere."""
        new = unique(base, self._reserved | self._used)
        self._used.add(new)
        return new

    def refs(self, data: Any) -> Any:
        """Rename layer references anywhere in node data or kwargs."""
        if is_ref(data):
            out = [self.name(data[0]), *data[1:3]]
            if len(data) == 4:
                out.append(self.refs(data[3]))
            return out
        if isinstance(data, list):
            return [self.refs(x) for x in data]
        if isinstance(data, dict):
            return {k: self.refs(v) for k, v in data.items()}
        return data
