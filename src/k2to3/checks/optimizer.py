"""The optimizer state check (report section `optimizer`, docs/optimizers.md): whether the Keras 2 optimizer state
(slots, iteration, schedule) travelled into the `.keras`. The tensorflow worker maps every saved slot onto the
Keras 3 optimizer while it rebuilds the model (workers/optstate.py, all or nothing); this check reports what it
did. That each backend then loads those slots bit for bit, and trains on from them as tf_keras does, is the
training check's (`training.backends.<b>.state_as_loaded`)."""

from __future__ import annotations

from typing import Any

from k2to3.checks.base import Check, Done, Run


def applies(run: Run) -> bool:
    return run.build is not None  # convert: the build migrated the state; verify reads a .keras as it is


def collect(run: Run, done: dict[str, Done]) -> None:
    assert run.build is not None
    run.report["optimizer"] = run.build.get("optimizer")


def summary(o: dict[str, Any] | None) -> str:
    """One line: `restored: Adam, step 3, 12/12 slots`, `none: the file stores no optimizer state`, `dropped: ...`."""
    if not o:
        return "not read"
    if o["status"] != "restored":
        return f"{o['status']}: {o.get('reason') or '?'}"
    led = o.get("ledger") or {}
    what = [o.get("class_name"), f"step {o['iteration']}" if o.get("iteration") is not None else None,
            f"{led['slots_restored']}/{led['slots_expected']} slots" if led else None,
            f"as {o['keras3_class']}" if o.get("keras3_class") and o.get("keras3_class") != o.get("class_name")
            else None]
    return "restored: " + ", ".join(x for x in what if x)


def markdown(report: dict[str, Any]) -> list[str]:
    o = report.get("optimizer")
    if "optimizer" not in report:
        return []
    lines = [summary(o) + "."]
    if o and o.get("layout"):
        lines.append(f"\nSaved layout: {o['layout']}, {o.get('n_saved')} tensors in the file.")
    if o and o.get("note"):
        lines.append(f"\nNote: {o['note']}")
    return lines


CHECK = Check(key="optimizer", title="Optimizer state", stage=0, applies=applies, collect=collect,
              markdown=markdown)
