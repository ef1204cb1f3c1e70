"""Keras 2 activations whose Keras 3 namesake computes something else."""

from __future__ import annotations

from keras import ops

from k2to3.portable.registry import register


@register
def keras2_hard_sigmoid(x):
    """Keras 2's hard_sigmoid: clip(0.2 * x + 0.5, 0, 1). Keras 3's is relu6(x + 3) / 6."""
    x = ops.convert_to_tensor(x)
    return ops.clip(ops.add(ops.multiply(x, 0.2), 0.5), 0.0, 1.0)
