"""What every upgrade step sees of the upgrade in progress (core.Upgrader implements it): the rules, the --src
resolution, the plan being written, the names, and the one place findings are recorded. The steps type against this
protocol, so none of them imports the Upgrader that calls them."""

from __future__ import annotations

from typing import Any, Protocol

from k2to3.core.rules import Rule
from k2to3.upgrade.plan import Plan


class UpgradeState(Protocol):
    rules: tuple[Rule, ...]
    source: Any  # a source.resolution.Resolution when --src was given
    plan: Plan
    names: Any  # names.Names

    def note(self, code: str, severity: str, message: str, layer: str | None = None,
             fix: str | None = None) -> None: ...

    def code(self, builtin: str) -> str: ...

    def model(self, class_name: str, config: Any) -> dict[str, Any]: ...
