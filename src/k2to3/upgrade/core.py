"""The Upgrader: the state one upgrade shares (rules, --src resolution, the plan being written, names) and
the one place findings are recorded. Each concern lives in its own module (names, values, activations,
layers, specs, graph, training)."""

from __future__ import annotations

from typing import Any

from k2to3.core import rules as rules_mod
from k2to3.core.findings import Finding
from k2to3.upgrade import graph
from k2to3.upgrade.names import Names
from k2to3.upgrade.plan import Plan


class Upgrader:
    def __init__(self, source: Any = None) -> None:
        self.rules = rules_mod.layer_rules()
        self.source = source  # a source.hoist.Resolution when --src was given
        self.plan = Plan(model={})
        self.names = Names(self)

    def note(self, code: str, severity: str, message: str, layer: str | None = None, fix: str | None = None):
        f = Finding(code, severity, message, layer, fix)  # type: ignore[arg-type]
        if f not in self.plan.findings:
            self.plan.findings.append(f)

    def code(self, builtin: str) -> str:
        return rules_mod.builtin_code(builtin)

    def model(self, class_name: str, config: Any) -> dict[str, Any]:
        """A (nested) model config -> its graph spec."""
        return graph.model(self, class_name, config)
