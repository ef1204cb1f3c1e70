"""Keras 3 optimizers that keep Keras 2's update where plain Keras 3 computes another one (rules/optimizers.toml).

Keras2RMSprop (K2T-OPT RMSprop epsilon): tf.keras optimizer_v2 RMSprop with momentum=0 (the default) divides by
`sqrt(ms) + epsilon` (and by `sqrt(ms - mg^2) + epsilon` when centered); Keras 3's RMSprop divides by
`sqrt(ms + epsilon)`. With small gradients the two differ by tens of percent per step.

Keras2Adagrad (K2T610): tf.keras optimizer_v2 Adagrad (TF's ApplyAdagradV2 kernel) and standalone Keras 2's Adagrad
divide by `sqrt(accumulator) + epsilon`; Keras 3's divides by `sqrt(accumulator + epsilon)`. With the default
initial accumulator of 0.1 the two agree to float32 rounding, but standalone Keras 2 starts its accumulators at 0,
and a migrated accumulator of a rarely updated weight (an Embedding row) can be near 0: there the steps differ by
orders of magnitude.

Each subclass keeps Keras 2's formula and nothing else."""

from __future__ import annotations

from keras import ops, optimizers

from k2to3.portable.registry import register


@register
class Keras2RMSprop(optimizers.RMSprop):
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


@register
class Keras2Adagrad(optimizers.Adagrad):
    """Adagrad with epsilon outside the square root, as Keras 2 computes it."""

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        accumulator = self._accumulators[self._get_variable_index(variable)]
        self.assign_add(accumulator, ops.square(gradient))
        self.assign_sub(variable, ops.divide(ops.multiply(lr, gradient),
                                             ops.add(ops.sqrt(accumulator), self.epsilon)))
