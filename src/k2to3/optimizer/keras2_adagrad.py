"""Keras 2's Adagrad update for Keras 3 (rule K2T610, rules/optimizers.toml).

tf.keras optimizer_v2 Adagrad (TF's ApplyAdagradV2 kernel) and standalone Keras 2's Adagrad divide by
`sqrt(accumulator) + epsilon`; Keras 3's divides by `sqrt(accumulator + epsilon)`. With the default initial
accumulator of 0.1 the two agree to float32 rounding, but standalone Keras 2 starts its accumulators at 0, and a
migrated accumulator of a rarely updated weight (an Embedding row) can be near 0: there the steps differ by orders
of magnitude. This subclass keeps Keras 2's formula and nothing else. Imported by k2to3.portable."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="k2to3")
class Keras2Adagrad(keras.optimizers.Adagrad):
    """Adagrad with epsilon outside the square root, as Keras 2 computes it."""

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        accumulator = self._accumulators[self._get_variable_index(variable)]
        self.assign_add(accumulator, ops.square(gradient))
        self.assign_sub(variable, ops.divide(ops.multiply(lr, gradient),
                                             ops.add(ops.sqrt(accumulator), self.epsilon)))
