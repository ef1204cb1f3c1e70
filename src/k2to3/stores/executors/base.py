"""What every executor shares: the work function, the result callback, the protocol and the result of an artifact
whose every attempt was lost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Work = Callable[[dict[str, Any], Any], dict[str, Any]]
Done = Callable[[dict[str, Any], dict[str, Any]], None]


class Executor(Protocol):
    def run(self, fn: Work, items: list[dict[str, Any]], done: Done) -> None: ...

    def close(self) -> None: ...


def error_result(item: dict[str, Any], reason: str, attempts: int) -> dict[str, Any]:
    """The result of an artifact whose every attempt was lost (a worker crash, an OOM kill, a node lost)."""
    return {"rel": item.get("rel"), "input": item.get("input"), "output": item.get("output"), "verdict": "error",
            "exit_code": 4, "reason": reason, "attempts": attempts}
