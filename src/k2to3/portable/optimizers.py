"""Keras 3 optimizers that keep Keras 2's update where plain Keras 3 computes another one (rules/optimizers.toml).

Keras2RMSprop (K2T-OPT RMSprop epsilon): tf.keras optimizer_v2 RMSprop with momentum=0 (the default) divides by
`sqrt(ms) + epsilon` (and by `sqrt(ms - mg^2) + epsilon` when centered); Keras 3's RMSprop divides by
`sqrt(ms + epsilon)`. With small gradients the two differ by tens of percent per step.

Keras2Adagrad (K2T610): tf.keras optimizer_v2 Adagrad (TF's ApplyAdagradV2 kernel) and standalone Keras 2's Adagrad
divide by `sqrt(accumulator) + epsilon`; Keras 3's divides by `sqrt(accumulator + epsilon)`. With the default
initial accumulator of 0.1 the two agree to float32 rounding, but standalone Keras 2 starts its accumulators at 0,
and a migrated accumulator of a rarely updated weight (an Embedding row) can be near 0: there the steps differ by
orders of magnitude.

Keras2Nadam (K2T605, K2T606): Keras 2's Nadam schedules its momentum with a running product `u_product` of
`beta_1 * (1 - 0.5 * 0.96 ** (schedule_decay * t))`. Two rules, by the layout of the file's optimizer:
- `u_product_rule="per_step"` (tf.keras optimizer_v2 and standalone Keras 2): one factor per step, with their
  `schedule_decay` (0.004 by default), starting from the product the file saved (`momentum_cache`, `m_schedule`);
- `u_product_rule="tf_keras_compiled"` (tf.keras >= 2.11): `schedule_decay` 1, and the product as tf_keras's compiled
  train step computes it after loading a file: a Python counter fixed when the step is traced makes every variable
  but the one at index `iterations + 1` multiply it again, in variable order (so from step 1 on, once per variable
  per step), starting from 1.0 (the file does not save it).

SummedRows<Optimizer> (K2T612), and every class above: an Embedding's gradient on the TensorFlow backend is a
tf.IndexedSlices with one row per occurrence of a token in the batch. Keras 2 (tf.keras optimizer_v2 and >= 2.11
both) sums repeated rows before the update; Keras 3's optimizers on the TensorFlow backend apply `ops.square` (and
`abs`) to the slices' values, so a token repeated in the batch gets a second moment of sum(g_i^2) instead of
(sum g_i)^2. torch and jax hand the optimizer a dense gradient, already summed. summed_rows adds the gradient to a
dense zero tensor first on the TensorFlow backend, which sums the rows; on the others it does nothing.

Each subclass keeps Keras 2's formula and nothing else."""

from __future__ import annotations

from keras import config, ops, optimizers

from k2to3.portable.registry import register


def summed_rows(gradient, variable):
    """The gradient as one dense tensor, repeated rows of a sparse gradient summed (K2T612). Only the TensorFlow
    backend hands an optimizer a sparse gradient: elsewhere the gradient is returned as it is (no extra pass over
    an embedding matrix per step)."""
    if config.backend() != "tensorflow":
        return gradient
    return ops.add(ops.zeros(variable.shape, variable.dtype), gradient)


class _SummedRows:
    """Keras 3's update of the base class, on the gradient with its repeated rows summed (K2T612)."""

    def update_step(self, gradient, variable, learning_rate):
        return super().update_step(summed_rows(gradient, variable), variable, learning_rate)


@register
class SummedRowsAdam(_SummedRows, optimizers.Adam):
    """Adam, repeated rows of a sparse gradient summed first (K2T612)."""


@register
class SummedRowsAdamW(_SummedRows, optimizers.AdamW):
    """AdamW, repeated rows of a sparse gradient summed first (K2T612)."""


@register
class SummedRowsAdamax(_SummedRows, optimizers.Adamax):
    """Adamax, repeated rows of a sparse gradient summed first (K2T612)."""


@register
class SummedRowsAdadelta(_SummedRows, optimizers.Adadelta):
    """Adadelta, repeated rows of a sparse gradient summed first (K2T612)."""


@register
class SummedRowsAdagrad(_SummedRows, optimizers.Adagrad):
    """Adagrad (tf.keras >= 2.11's formula, Keras 3's), repeated rows of a sparse gradient summed first (K2T612)."""


@register
class SummedRowsRMSprop(_SummedRows, optimizers.RMSprop):
    """RMSprop (tf.keras >= 2.11's formula, Keras 3's), repeated rows of a sparse gradient summed first (K2T612)."""


@register
class SummedRowsFtrl(_SummedRows, optimizers.Ftrl):
    """Ftrl, repeated rows of a sparse gradient summed first (K2T612)."""


@register
class Keras2RMSprop(optimizers.RMSprop):
    """RMSprop with epsilon outside the square root when momentum == 0, as tf.keras optimizer_v2 computes it.
    (With momentum > 0, optimizer_v2 called TF's ApplyRMSProp kernels, which put epsilon inside, as Keras 3.)"""

    def update_step(self, gradient, variable, learning_rate):
        gradient = summed_rows(gradient, variable)
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
        gradient = summed_rows(gradient, variable)
        accumulator = self._accumulators[self._get_variable_index(variable)]
        self.assign_add(accumulator, ops.square(gradient))
        self.assign_sub(variable, ops.divide(ops.multiply(lr, gradient),
                                             ops.add(ops.sqrt(accumulator), self.epsilon)))


@register
class Keras2Nadam(optimizers.Nadam):
    """Nadam with Keras 2's momentum product (`u_product_rule` above); `_u_product` is saved with the model."""

    RULES = ("per_step", "tf_keras_compiled")

    def __init__(self, *args, schedule_decay=0.004, u_product_rule="per_step", **kwargs):
        super().__init__(*args, **kwargs)
        if u_product_rule not in self.RULES:
            raise ValueError(f"u_product_rule={u_product_rule!r}: one of {self.RULES}")
        self.schedule_decay = float(schedule_decay)
        self.u_product_rule = u_product_rule

    def _momentum_cache(self, step, dtype):
        decay = 1.0 if self.u_product_rule == "tf_keras_compiled" else self.schedule_decay
        return ops.cast(self.beta_1, dtype) * (1.0 - 0.5 * ops.power(ops.cast(0.96, dtype),
                                                                     ops.cast(decay, dtype) * step))

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if self.u_product_rule == "per_step":
            dtype = self._u_product.dtype
            self.assign(self._u_product, self._u_product * self._momentum_cache(
                ops.cast(self.iterations + 1, dtype), dtype))
        # not Nadam's own product (one factor of 0.96 ** t per step): the grandparent's loop over update_step
        super(optimizers.Nadam, self)._backend_update_step(grads, trainable_variables, learning_rate)

    def update_step(self, gradient, variable, learning_rate):
        var_dtype = variable.dtype
        lr = ops.cast(learning_rate, var_dtype)
        gradient = ops.cast(summed_rows(gradient, variable), var_dtype)
        local_step = ops.cast(self.iterations + 1, var_dtype)
        u_t = self._momentum_cache(local_step, var_dtype)
        u_t_1 = self._momentum_cache(ops.cast(self.iterations + 2, var_dtype), var_dtype)
        if self.u_product_rule == "tf_keras_compiled":
            # tf_keras: tf.cond(counter == iterations + 2, cached, multiply), the counter fixed at 1 + index
            cached = ops.equal(self.iterations + 1, self._get_variable_index(variable))
            current = ops.convert_to_tensor(self._u_product)
            self.assign(self._u_product, ops.where(cached, current, current * ops.cast(u_t, current.dtype)))
        beta_1 = ops.cast(self.beta_1, var_dtype)
        beta_2 = ops.cast(self.beta_2, var_dtype)
        u_product_t = ops.cast(self._u_product, var_dtype)
        u_product_t_1 = u_product_t * u_t_1
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), (1 - beta_1)))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), (1 - beta_2)))
        m_hat = ops.add(ops.divide(ops.multiply(u_t_1, m), 1 - u_product_t_1),
                        ops.divide(ops.multiply(1 - u_t, gradient), 1 - u_product_t))
        v_hat = ops.divide(v, (1 - ops.power(beta_2, local_step)))
        self.assign_sub(variable, ops.divide(ops.multiply(m_hat, lr), ops.add(ops.sqrt(v_hat), self.epsilon)))

    def get_config(self):
        return {**super().get_config(), "schedule_decay": self.schedule_decay,
                "u_product_rule": self.u_product_rule}
