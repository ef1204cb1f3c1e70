"""Keras 2's mask propagation where Keras 3 computes a different mask (the layers' outputs are the same).

* ``Keras2Concatenate``: Keras 2 (tf_keras ``Concatenate.compute_mask``) keeps a timestep only when *every* input
  keeps it (``all``; an unmasked input counts as all ones); Keras 3 keeps it when *any* input does (``any``), so
  a masked tensor concatenated with an unmasked one loses its mask in Keras 3.
* ``Keras2TimeDistributed``: Keras 2 (tf_keras ``TimeDistributed.compute_mask``) asks the wrapped layer for its
  output mask, and when the wrapped layer returns none (an RNN without ``return_sequences``, which reduces each
  timestep's inner sequence to one vector) reduces the input mask over the inner axes with ``any``; Keras 3 returns
  the input mask unchanged (``Layer.compute_mask``), a mask of more dimensions than the output's timesteps.

Both are the Keras 3 layer (same config, same weights, same call) with Keras 2's ``compute_mask``.
"""

from __future__ import annotations

import keras
from keras import ops

from k2to3.portable.registry import register


@register
class Keras2Concatenate(keras.layers.Concatenate):
    """``Concatenate`` whose output mask is Keras 2's: ``all`` over the inputs' masks."""

    def compute_mask(self, inputs, mask=None):
        if mask is None or all(m is None for m in mask):
            return None
        if self.axis in (-1, len(inputs[0].shape) - 1):
            # all(concatenate(masks, axis=-1), axis=-1) without the concatenation, whose auto-named operation
            # would clash with a layer named "concatenate" in a rebuilt graph; an unmasked input adds nothing
            out = None
            for x, m in zip(inputs, mask):
                if m is None:
                    continue
                m = ops.cast(m, "bool")
                if len(m.shape) == len(x.shape):
                    m = ops.all(m, axis=-1)
                out = m if out is None else ops.logical_and(out, m)
            return out
        masks = []
        for x, m in zip(inputs, mask):
            if m is None:
                masks.append(ops.ones_like(x, dtype="bool"))
            elif len(m.shape) < len(x.shape):
                masks.append(ops.expand_dims(ops.cast(m, "bool"), axis=-1))
            else:
                masks.append(ops.cast(m, "bool"))
        return ops.all(ops.concatenate(masks, axis=self.axis), axis=-1)


@register
class Keras2TimeDistributed(keras.layers.TimeDistributed):
    """``TimeDistributed`` whose output mask is Keras 2's: the wrapped layer's, else the input mask reduced to
    (batch, timesteps). The wrapped layer's ``compute_mask`` sees the whole (batch, timesteps, ...) tensors rather
    than Keras 2's (batch * timesteps, ...) reshape: the same values for the layers whose mask is elementwise or
    over the last axis (RNNs, Bidirectional, Masking, Embedding, Dense, Dropout)."""

    def compute_mask(self, inputs, mask=None):
        output_mask = self.layer.compute_mask(inputs, mask)
        if output_mask is not None:
            return output_mask
        if mask is None:
            return None
        for _ in range(2, len(mask.shape)):
            mask = ops.any(mask, axis=-1)
        return mask
