"""K2T436-K2T437 while a --src build function runs: the Concatenate and TimeDistributed layers a mask reaches
compute Keras 2's mask (upgrade/masks.py does the same on a rebuild plan, by naming the portable classes).

A Keras 3 functional model records the masks its layers computed while it was built as operations of its graph
(`NotEqual`, `Any`, ... nodes feeding each RNN's `mask` argument), so the mask must be Keras 2's while the build
function calls the layers, not afterwards: Keras 3's `Concatenate.compute_mask` and `TimeDistributed.compute_mask`
are Keras 2's for the duration of the build. Each layer that computed a mask so then becomes the portable class
(a subclass adding only that compute_mask), so the saved .keras names it and a layer called again keeps it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from k2to3.portable.masking import Keras2Concatenate, Keras2TimeDistributed

CONCATENATE_NOTE = ("K2T436", "Concatenate -> k2to3>Keras2Concatenate (a mask reaches it: Keras 2 keeps a timestep "
                    "only where every input's mask does)")


def _inner_makes_mask(layer: Any) -> bool:
    inner = layer.layer
    return type(inner).__name__ == "Masking" or bool(getattr(inner, "mask_zero", False))


def _builtin(layer: Any) -> bool:
    return type(layer).__module__.startswith("keras.") and not getattr(layer, "stateful", False)


@contextmanager
def keras2_masks(keras: Any, notes: list[dict[str, str]]) -> Iterator[None]:
    """Appends one note per layer changed: {code, layer, message}."""
    concat, td = keras.layers.Concatenate, keras.layers.TimeDistributed
    saved = concat.compute_mask, td.compute_mask
    seen: dict[int, Any] = {}

    def concat_mask(self: Any, inputs: Any, mask: Any = None) -> Any:
        if type(self) is not concat or mask is None or all(m is None for m in mask):
            return saved[0](self, inputs, mask)
        seen[id(self)] = self
        return Keras2Concatenate.compute_mask(self, inputs, mask)

    def td_mask(self: Any, inputs: Any, mask: Any = None) -> Any:
        if type(self) is not td or not _builtin(self.layer) or (mask is None and not _inner_makes_mask(self)):
            return saved[1](self, inputs, mask)
        seen[id(self)] = self
        return Keras2TimeDistributed.compute_mask(self, inputs, mask)

    concat.compute_mask, td.compute_mask = concat_mask, td_mask
    try:
        yield
    finally:
        concat.compute_mask, td.compute_mask = saved
    for layer in seen.values():
        if type(layer) is concat:
            layer.__class__ = Keras2Concatenate
            code, message = CONCATENATE_NOTE
        else:
            layer.__class__ = Keras2TimeDistributed
            code, message = "K2T437", ("TimeDistributed -> k2to3>Keras2TimeDistributed (a mask reaches it: Keras 2 "
                                       "reduces it to (batch, timesteps) when the wrapped "
                                       f"{type(layer.layer).__name__} returns none)")
        notes.append({"code": code, "layer": layer.name, "message": message})
