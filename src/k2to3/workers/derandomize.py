"""Training-time randomness switched off, the same way in every job that compares a training computation across sides
(the gradients of workers/grads.py, the steps of workers/training/fit_ops.py), on tf_keras and Keras 3 models alike:
every dropout rate and noise level set to 0, so both sides compute the same deterministic function (BatchNormalization
still uses batch statistics in training mode)."""

from __future__ import annotations

from typing import Any

NOISE_ATTRS = ("rate", "stddev")  # layers whose class name says Dropout or Noise (Dropout family, GaussianNoise, ...)
RNN_ATTRS = ("dropout", "recurrent_dropout")  # on any layer: RNN layers and cells, Attention
INNER = ("cell", "forward_layer", "backward_layer", "layer")  # wrapped layers that are not in `layers`


def layers(model: Any) -> list[Any]:
    """Every layer under `model` once, in order: nested models, RNN cells, wrapped layers, and what the layer
    tracks itself (_flatten_layers: a MultiHeadAttention's own dropout layer)."""
    seen: set[int] = {id(model)}
    out: list[Any] = []

    def visit(layer: Any) -> None:
        subs = [*(getattr(layer, "layers", None) or []), *(getattr(layer, a, None) for a in INNER)]
        if hasattr(layer, "_flatten_layers"):
            subs += list(layer._flatten_layers(include_self=False, recursive=False))
        for sub in subs:
            if sub is not None and id(sub) not in seen:
                seen.add(id(sub))
                out.append(sub)
                visit(sub)

    visit(model)
    return out


def noise_off(model: Any) -> list[tuple[str, str]]:
    """Set every training-time noise rate under `model` to 0; returns (layer name, attribute) of each one set."""
    changed = []
    for layer in layers(model):
        name = type(layer).__name__
        for attr in (*(NOISE_ATTRS if ("Dropout" in name or "Noise" in name) else ()), *RNN_ATTRS):
            v = getattr(layer, attr, None)
            if isinstance(v, float | int) and not isinstance(v, bool) and v > 0:
                try:
                    setattr(layer, attr, 0.0)
                except AttributeError:  # an RNN layer's read-only view of its cell's rate: the cell is set
                    continue
                changed.append((layer.name, attr))
    return changed
