"""What one job of a run loads and a later job of the same run reuses, in this worker process, so that `--fit-steps`
loads no model twice: the .keras op verify loaded (slot "keras3", for op fit), the tf_keras model op golden_reference
loaded (slot "golden", for op fit_golden), and that reference with its state before the steps (slot "reference",
for the noise probe after a training mismatch, noise_fit.py) and its weights after them (slot
"reference_after", what the probe's runs are measured against).
One entry per slot, keyed by the requests that made it; a new entry replaces the old one, and the parent drops it
when the run no longer needs it (op `drop_held`), so a warm worker never accumulates models."""

from __future__ import annotations

from typing import Any

from k2to3.workers.protocol import DropHeldRequest, Keras3Model

_HELD: dict[str, tuple[tuple[Any, ...], Any]] = {}


def hold(slot: str, key: tuple[Any, ...], value: Any) -> None:
    _HELD[slot] = (key, value)


def take(slot: str, key: tuple[Any, ...], keep: bool = False) -> Any | None:
    """The value held under `slot` for `key` (None if another run's or none); removed unless `keep`."""
    entry = _HELD.get(slot)
    if entry is None or entry[0] != key:
        return None
    if not keep:
        del _HELD[slot]
    return entry[1]


def keras3_key(req: Keras3Model[Any]) -> tuple[Any, ...]:
    """What makes two requests load the same .keras (slot "keras3": op verify holds it for op fit)."""
    return str(req.keras), tuple(req.modules or ())


def op_drop_held(req: DropHeldRequest) -> dict[str, Any]:
    import gc

    dropped = sorted(_HELD) if req.slot is None else [s for s in _HELD if s == req.slot]
    for s in dropped:
        del _HELD[s]
    gc.collect()
    return {"dropped": dropped}
