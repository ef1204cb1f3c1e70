"""Keras 2's plain RMSprop update for Keras 3 (rule K2T-OPT RMSprop epsilon, rules/optimizers.toml).

tf.keras optimizer_v2 RMSprop with momentum=0 (the default) divides by `sqrt(ms) + epsilon` (and by
`sqrt(ms - mg^2) + epsilon` when centered); Keras 3's RMSprop divides by `sqrt(ms + epsilon)`. With small
gradients the two differ by tens of percent per step. This subclass keeps Keras 2's formula and nothing else.
Imported by k2to3.portable, so `import k2to3.portable` registers it for safe_mode loading."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="k2to3")
class Keras2RMSprop(keras.optimizers.RMSprop):
    """RMSprop with epsilon outside the square root when momentum == 0, as tf.keras optimizer_v2 computes it.
    (With momentum > 0, optimizer_v2 called TF's ApplyRMSProp kernels, which put epsilon inside, as Keras 3.)"""

    def update_step(self, gradient, variable, learning_rate):
        if self.momentum > 0:
            return super().update_step(gradient, variable, learning_rate)
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        i = self._get_variable_index(variable)
        velocity = self._velocities[i]
        rho = self.rho
        self.assign(velocity, ops.add(ops.multiply(rho, velocity), ops.multiply(1 - rho, ops.square(gradient))))
        denominator = velocity
        if self.centered:
            average_grad = self._average_gradients[i]
            self.assign(average_grad, ops.add(ops.multiply(rho, average_grad), ops.multiply(1 - rho, gradient)))
            denominator = ops.subtract(velocity, ops.square(average_grad))
        self.assign_sub(variable, ops.divide(ops.multiply(lr, gradient),
                                             ops.add(ops.sqrt(denominator), self.epsilon)))
