"""QKeras layers (QDense, QConv2D, QActivation, QBatchNormalization) in keras.ops, computing the same quantized
arithmetic as qkeras 0.9 (qkeras/quantizers.py, qlayers.py, qconvolutional.py, qnormalization.py) in inference.

A quantizer is carried as plain config `{"quantizer": NAME, "config": {...}}` (qkeras's own get_config keys).
Every expression keeps qkeras's order of operations (`x + (-x + q)` for the straight-through estimator, the
scale loops of alpha='auto'/'auto_po2'), so a value on a rounding boundary rounds as qkeras rounds it;
`ops.round` rounds half to even on every backend, as tf.round does. The power-of-two quantizers take their
exponent from float32 `log(x) / log(2)`, as qkeras does: on torch and jax, whose log differs from tf's by an ulp, an
input next to a log2 rounding boundary may take the neighbouring exponent. Stochastic rounding and sigmoid
quantizers are refused when the model is converted (rule K2T940), not here; the folded layers are in
qkeras_folded.py.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

from k2to3.portable.quantizers import QuantizerTable
from k2to3.portable.registry import register

EPSILON = 1e-7  # tf_keras backend.epsilon(), which qkeras adds to its scales
LOG2 = float(np.log(2.0))


def _ste(x: Any, q: Any) -> Any:
    """qkeras's `x + tf.stop_gradient(-x + q)`: q forward, identity gradient."""
    return x + ops.stop_gradient(-x + q)


def _round_through(x: Any) -> Any:
    return _ste(x, ops.round(x))


def _channel_axes(ndim: int) -> list[int] | None:
    """qkeras _get_scaling_axis for channels_last: every axis but the last; a 1-D tensor scales as one."""
    return list(range(ndim - 1)) if ndim > 1 else None


def _least_squares_scale(alpha: str, x: Any, q: Any) -> Any:
    """qkeras _get_scale (per-channel, channels_last)."""
    axes = _channel_axes(len(x.shape))
    if axes is None:
        qx, qq = x * q, q * q
    else:
        qx = ops.mean(ops.multiply(x, q), axis=axes, keepdims=True)
        qq = ops.mean(ops.multiply(q, q), axis=axes, keepdims=True)
    scale = qx / (qq + EPSILON)
    if alpha == "auto_po2":
        scale = ops.power(2.0, ops.round(ops.log(scale + EPSILON) / LOG2))
    return scale


def _qnoise(x: Any, xq: Any, c: dict[str, Any]) -> Any:
    f = c.get("qnoise_factor", 1.0)
    f = 1.0 if f is None else float(f)
    return x + ops.stop_gradient(f * (-x + xq))


def quantized_bits(x: Any, c: dict[str, Any]) -> Any:
    bits, integer = int(c.get("bits", 8)), int(c.get("integer", 0))
    keep_negative, alpha = bool(c.get("keep_negative", True)), c.get("alpha")
    symmetric = True if isinstance(alpha, str) else c.get("symmetric", 0)
    x = ops.cast(x, "float32")
    unsigned_bits = bits - int(keep_negative)
    m, m_i = float(2.0 ** unsigned_bits), float(2.0 ** integer)
    if isinstance(alpha, str):
        axes = _channel_axes(len(x.shape)) or [0]
        x = x / m_i
        levels = (2 ** (bits - 1) - 1) * 2 if symmetric else 2 ** bits - 1
        scale = (ops.max(ops.abs(x), axis=axes, keepdims=True) * 2) / levels
        if "po2" in alpha:
            scale = ops.power(2.0, ops.round(ops.log(scale + EPSILON) / LOG2))
            for _ in range(5):
                z = _auto_levels(x, scale, levels)
                scale = _least_squares_scale("auto_po2", x, z)
        else:
            z = _auto_levels(x, scale, levels)
        scale = scale * m
        x = m_i * x
        xq = scale * (m_i * z / m)
        return _qnoise(x, xq, c)
    scale = 1.0 if alpha is None else float(alpha)
    if unsigned_bits > 0:
        p = x * m / m_i
        xq = m_i * ops.clip(_round_through(p), float(int(keep_negative) * (-m + int(symmetric))), m - 1) / m
    else:
        xq = ops.sign(x)
        xq = xq + (1.0 - ops.abs(xq))
        if not keep_negative:
            xq = (xq + 1.0) / 2.0
    return _qnoise(x, scale * xq, c)


def _auto_levels(x: Any, scale: Any, levels: int) -> Any:
    v = ops.floor(ops.abs(x) / scale + 0.5)
    return ops.sign(x) * ops.where(v < levels / 2, v, ops.ones_like(v) * (levels / 2))


def quantized_relu(x: Any, c: dict[str, Any]) -> Any:
    bits, integer = int(c.get("bits", 8)), int(c.get("integer", 0))
    slope = float(c.get("negative_slope", 0.0) or 0.0)
    non_sign_bits = bits - (slope != 0.0)
    x = ops.cast(x, "float32")
    m, m_i = float(2.0 ** non_sign_bits), float(2.0 ** integer)
    m_f = float(np.float32(2.0) ** np.float32(integer - non_sign_bits))
    upper = c.get("relu_upper_bound")
    relu = ops.where(x >= 0, x, x * slope) if slope else ops.relu(x)
    if c.get("is_quantized_clip", True):
        x_u = ops.where(x <= m_i - m_f, relu, ops.ones_like(x) * (m_i - m_f))
    elif upper is not None:
        x_u = ops.where(x <= upper, relu, ops.ones_like(x) * upper)
    else:
        x_u = relu
    p = x * m / m_i
    xq = m_i * ops.clip(_round_through(p) / m, 0.0, 1.0 - 1.0 / m)
    if slope > 0:
        neg_factor = 1 / (slope * m)
        xq = xq + m_i * slope * ops.clip(_round_through(p * slope) * neg_factor, -1.0, 0.0)
    if upper and not c.get("is_quantized_clip", True):
        xq = ops.where(xq <= upper, xq, ops.ones_like(xq) * upper)
    return _qnoise(x_u, xq, c)


def binary(x: Any, c: dict[str, Any]) -> Any:
    alpha = c.get("alpha")
    k_sign = ops.sign(x)
    k_sign = k_sign + (1.0 - ops.abs(k_sign))
    if c.get("use_01"):
        k_sign = (k_sign + 1.0) / 2.0
    if alpha is None:
        x = ops.tanh(x)
    scale = _least_squares_scale(alpha, x, k_sign) if isinstance(alpha, str) else (
        1.0 if alpha is None else float(alpha))
    return _ste(x, scale * k_sign)


def ternary(x: Any, c: dict[str, Any]) -> Any:
    alpha, threshold = c.get("alpha"), c.get("threshold")
    if isinstance(alpha, str):
        axes = _channel_axes(len(x.shape))
        scale = 2 * ops.max(ops.abs(x), axis=axes, keepdims=True) / 3.0
        if "po2" in alpha:
            scale = ops.power(2.0, ops.round(ops.log(scale + EPSILON) / LOG2))
        for _ in range(int(c.get("number_of_unrolls", 5))):
            thres = scale / 2.0
            v = scale * _round_through(x / scale)
            q = ops.cast(ops.abs(v) >= thres, "float32") * ops.sign(x)
            scale = _least_squares_scale(alpha, x, q)
    else:
        scale = 1.0 if alpha is None else float(alpha)
        thres = 0.33 if threshold is None else float(threshold)
        q = ops.cast(ops.abs(x) >= thres, "float32") * ops.sign(x)
    if alpha is None:
        x = ops.tanh(x)
    return _ste(x, scale * q)


def _po2_exponents(bits: int, max_value: Any, quadratic: bool) -> tuple[int, int]:
    """qkeras _need_exponent_sign_bit_check + _get_min_max_exponents: the exponent range of `bits` bits (the
    exponent needs a sign bit unless max_value <= 1)."""
    effect = bits - (0 if max_value is not None and max_value <= 1 else 1)
    min_exp, max_exp = -(2 ** effect), 2 ** effect - 1
    return min_exp, 2 * (max_exp // 2) if quadratic else max_exp


def _clip_power_of_two(x_abs: Any, min_exp: int, max_exp: int, c: dict[str, Any]) -> Any:
    """qkeras _clip_power_of_two: the clipped base-2 exponent of x_abs (>= 0); below epsilon it is min_exp."""
    max_value = c.get("max_value")
    x_filter = ops.where(x_abs < EPSILON, EPSILON, x_abs)
    if max_value is not None:
        x_filter = ops.where(x_filter >= max_value, ops.ones_like(x_filter) * max_value, x_filter)
    q_factor, x_input = (2.0, ops.sqrt(x_filter)) if c.get("quadratic_approximation") else (1.0, x_filter)
    log2 = ops.log(x_input) / LOG2
    x_log2 = _ste(log2, ops.floor(log2)) if c.get("log2_rounding", "rnd") == "floor" else _round_through(log2)
    clipped = q_factor * ops.clip(x_log2, float(min_exp), float(max_exp))
    return ops.where(x_abs < EPSILON, ops.ones_like(x_abs) * min_exp, clipped)


def quantized_po2(x: Any, c: dict[str, Any]) -> Any:
    bits, max_value = int(c.get("bits", 8)), c.get("max_value")
    min_exp, max_exp = _po2_exponents(bits - 1, max_value, bool(c.get("quadratic_approximation")))
    x = ops.cast(x, "float32")
    x_sign = ops.sign(x)
    x_sign = x_sign + (1.0 - ops.abs(x_sign))  # zero counts as positive: 0 -> +2^min_exp
    xq = x_sign * ops.power(2.0, _clip_power_of_two(ops.abs(x), min_exp, max_exp, c))
    return _qnoise(x, xq, c)


def quantized_relu_po2(x: Any, c: dict[str, Any]) -> Any:
    bits, max_value = int(c.get("bits", 8)), c.get("max_value")
    slope = float(c.get("negative_slope", 0) or 0)
    min_exp, max_exp = _po2_exponents(bits, max_value, bool(c.get("quadratic_approximation")))
    x_original = ops.cast(x, "float32")
    relu = ops.where(x_original >= 0, x_original, x_original * slope) if slope else ops.relu(x_original)
    x = relu if max_value is None else ops.where(x_original <= max_value, relu, ops.ones_like(relu) * max_value)
    pos = ops.power(2.0, _clip_power_of_two(ops.relu(x_original), min_exp, max_exp, c))
    if slope == 0.0:  # qkeras's where(x >= 0 or slope == 0): every input takes the positive branch
        return _qnoise(x, pos, c)
    neg = -ops.power(2.0, _clip_power_of_two(ops.relu(-x_original) * slope, min_exp, max_exp, c))
    return _qnoise(x, ops.where(x_original >= 0.0, pos, neg), c)


QUANTIZERS = {"quantized_bits": quantized_bits, "quantized_relu": quantized_relu, "binary": binary,
              "ternary": ternary, "quantized_po2": quantized_po2, "quantized_relu_po2": quantized_relu_po2}


_TABLE = QuantizerTable('qkeras', QUANTIZERS)
quantize, _check = _TABLE.apply, _TABLE.check


@register
class QClip(keras.constraints.Constraint):
    """qkeras.qlayers.Clip: weights clipped to [min_value, max_value] after each training update."""

    def __init__(self, min_value: float = 0.0, max_value: float = 1.0):
        self.min_value, self.max_value = min_value, max_value

    def __call__(self, w):
        # tf_keras backend.clip raises max to min when max < min
        return ops.clip(w, self.min_value, max(self.max_value, self.min_value))

    def get_config(self):
        return {"min_value": self.min_value, "max_value": self.max_value}


@register
class QDense(keras.layers.Dense):
    """qkeras QDense: Dense whose kernel and bias pass through their quantizers at call time; `activation` may be
    a quantizer (`activation_quantizer`)."""

    def __init__(self, units, kernel_quantizer=None, bias_quantizer=None, activation_quantizer=None, **kwargs):
        super().__init__(units, **kwargs)
        self.kernel_quantizer = _check(kernel_quantizer)
        self.bias_quantizer = _check(bias_quantizer)
        self.activation_quantizer = _check(activation_quantizer)

    def call(self, inputs):
        output = ops.matmul(inputs, quantize(self.kernel, self.kernel_quantizer))
        if self.use_bias:
            output = ops.add(output, quantize(self.bias, self.bias_quantizer))
        if self.activation_quantizer:
            return quantize(output, self.activation_quantizer)
        return self.activation(output) if self.activation is not None else output

    def get_config(self):
        return {**super().get_config(), "kernel_quantizer": self.kernel_quantizer,
                "bias_quantizer": self.bias_quantizer, "activation_quantizer": self.activation_quantizer}


@register
class QConv2D(keras.layers.Conv2D):
    """qkeras QConv2D: Conv2D whose kernel and bias pass through their quantizers at call time."""

    def __init__(self, filters, kernel_size, kernel_quantizer=None, bias_quantizer=None, activation_quantizer=None,
                 **kwargs):
        super().__init__(filters, kernel_size, **kwargs)
        self.kernel_quantizer = _check(kernel_quantizer)
        self.bias_quantizer = _check(bias_quantizer)
        self.activation_quantizer = _check(activation_quantizer)

    def call(self, inputs):
        outputs = self.convolution_op(inputs, quantize(self.kernel, self.kernel_quantizer))
        if self.use_bias:
            shape = (1, 1, 1, self.filters) if self.data_format == "channels_last" else (1, self.filters, 1, 1)
            outputs = ops.add(outputs, ops.reshape(quantize(self.bias, self.bias_quantizer), shape))
        if self.activation_quantizer:
            return quantize(outputs, self.activation_quantizer)
        return self.activation(outputs) if self.activation is not None else outputs

    def get_config(self):
        return {**super().get_config(), "kernel_quantizer": self.kernel_quantizer,
                "bias_quantizer": self.bias_quantizer, "activation_quantizer": self.activation_quantizer}


@register
class QActivation(keras.layers.Layer):
    """qkeras QActivation: a quantizer (or a plain Keras activation) applied to its input."""

    def __init__(self, quantizer=None, activation=None, **kwargs):
        super().__init__(**kwargs)
        self.quantizer = _check(quantizer)
        self.activation = activation
        self._fn = keras.activations.get(activation) if activation is not None else None

    def call(self, inputs):
        return quantize(inputs, self.quantizer) if self.quantizer else self._fn(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "quantizer": self.quantizer, "activation": self.activation}


@register
class QBatchNormalization(keras.layers.BatchNormalization):
    """qkeras QBatchNormalization: BatchNormalization whose gamma, beta, moving mean and moving variance pass
    through their quantizers; tf.nn.batch_normalization's formula x * inv + (beta - mean * inv),
    inv = rsqrt(var + epsilon) * gamma. Training normalizes with the quantized batch moments."""

    def __init__(self, beta_quantizer=None, gamma_quantizer=None, mean_quantizer=None, variance_quantizer=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.beta_quantizer, self.gamma_quantizer = _check(beta_quantizer), _check(gamma_quantizer)
        self.mean_quantizer, self.variance_quantizer = _check(mean_quantizer), _check(variance_quantizer)

    def call(self, inputs, training=None, mask=None):
        if training and self.trainable:
            super().call(inputs, training=True)  # moving statistics updated as BatchNormalization does
            axes = [i for i in range(len(inputs.shape)) if i != self.axis % len(inputs.shape)]
            mean, variance = ops.moments(inputs, axes=axes)
        else:
            mean, variance = self.moving_mean, self.moving_variance
        shape = [1] * len(inputs.shape)
        shape[self.axis] = inputs.shape[self.axis]
        inv = ops.rsqrt(ops.reshape(quantize(variance, self.variance_quantizer), shape) + self.epsilon)
        if self.scale:
            inv = inv * ops.reshape(quantize(self.gamma, self.gamma_quantizer), shape)
        offset = -ops.reshape(quantize(mean, self.mean_quantizer), shape) * inv
        if self.center:
            offset = ops.reshape(quantize(self.beta, self.beta_quantizer), shape) + offset
        return inputs * inv + offset

    def get_config(self):
        return {**super().get_config(), "beta_quantizer": self.beta_quantizer,
                "gamma_quantizer": self.gamma_quantizer, "mean_quantizer": self.mean_quantizer,
                "variance_quantizer": self.variance_quantizer}
