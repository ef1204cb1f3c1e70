"""larq binarized layers (QuantDense, QuantConv1D, QuantConv2D, QuantDepthwiseConv2D) in keras.ops, computing what
larq 0.13-0.14 computes (larq/quantizers.py, math.py, layers_base.py): the input quantizer on the layer's input,
the kernel quantizer on the kernel, then the float layer; `pad_values` pads a 'same' convolution with that value
instead of zeros, as larq does (binary activations are ±1, so zero padding would be a third value).

A quantizer is carried as plain config `{"quantizer": NAME, "config": {...}}`. larq's quantizers are sign
functions with straight-through gradients (`tf.custom_gradient`); here each is written as
`stop_gradient(q) + (x - stop_gradient(x)) * g` with `g` the gradient larq's custom gradient multiplies by, so the
forward value is exactly q on every backend and training sees the same gradient. A quantizer this module does not
know is refused when the model is converted (rule K2T946), not here.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from k2to3.portable.quantizers import QuantizerTable
from k2to3.portable.registry import register


def _sign(x: Any) -> Any:
    """larq.math.sign: tf.sign(tf.sign(x) + 0.1), so sign(0) = +1."""
    return ops.sign(ops.sign(x) + 0.1)


def _through(x: Any, q: Any, g: Any = None) -> Any:
    """q forward; gradient `g` * upstream (identity when g is None)."""
    d = x - ops.stop_gradient(x)
    return ops.stop_gradient(q) + (d if g is None else d * ops.stop_gradient(g))


def _clip_mask(x: Any, clip_value: Any) -> Any:
    """larq _clipped_gradient: the gradient passes where |x| <= clip_value (everywhere when None)."""
    if clip_value is None:
        return None
    return ops.cast(ops.less_equal(ops.abs(x), float(clip_value)), x.dtype)


def ste_sign(x: Any, c: dict[str, Any]) -> Any:
    return _through(x, _sign(x), _clip_mask(x, c.get("clip_value", 1.0)))


def approx_sign(x: Any, c: dict[str, Any]) -> Any:
    ax = ops.abs(x)
    return _through(x, _sign(x), ops.where(ops.less(ax, 1.0), (1.0 - ax) * 2.0, ops.zeros_like(x)))


def swish_sign(x: Any, c: dict[str, Any]) -> Any:
    beta = float(c.get("beta", 5.0))
    bx = beta * x
    return _through(x, _sign(x), beta * (2.0 - bx * ops.tanh(bx * 0.5)) / (1.0 + ops.cosh(bx)))


def ste_heaviside(x: Any, c: dict[str, Any]) -> Any:
    """larq.math.heaviside: tf.sign(tf.nn.relu(x)), 1 for x > 0 else 0."""
    return _through(x, ops.sign(ops.relu(x)), _clip_mask(x, c.get("clip_value", 1.0)))


def magnitude_aware_sign(x: Any, c: dict[str, Any]) -> Any:
    """The mean |x| over every axis but the last (a constant for the gradient) times ste_sign."""
    scale = ops.stop_gradient(ops.mean(ops.abs(x), axis=tuple(range(len(x.shape) - 1))))
    return scale * ste_sign(x, c)


def ste_tern(x: Any, c: dict[str, Any]) -> Any:
    if c.get("ternary_weight_networks"):
        threshold = 0.7 * ops.sum(ops.abs(x)) / ops.cast(ops.size(x), x.dtype)
    else:
        threshold = float(c.get("threshold_value", 0.05))
    q = ops.sign(ops.sign(x + threshold) + ops.sign(x - threshold))
    return _through(x, q, _clip_mask(x, c.get("clip_value", 1.0)))


def dorefa(x: Any, c: dict[str, Any]) -> Any:
    """DoReFa k-bit: activations clipped to [0, 1]; weights tanh-limited, max-normed to [0, 1]
    (divide_no_nan), rounded to 2^k - 1 levels with an identity gradient, then mapped back to [-1, 1]."""
    n = float(2 ** int(c.get("k_bit", 2)) - 1)
    weights = c.get("mode", "activations") == "weights"
    if weights:
        limited = ops.tanh(x)
        dividend = ops.stop_gradient(ops.max(ops.abs(limited)))
        den = 2.0 * dividend
        safe = ops.where(ops.equal(den, 0.0), ops.ones_like(den), den)
        x = ops.where(ops.equal(den, 0.0), ops.zeros_like(limited), limited / safe) + 0.5
    else:
        x = ops.clip(x, 0.0, 1.0)
    out = _through(x, ops.round(x * n) / n)
    return 2.0 * out - 1.0 if weights else out


def no_op(x: Any, c: dict[str, Any]) -> Any:
    return x


QUANTIZERS = {"ste_sign": ste_sign, "approx_sign": approx_sign, "swish_sign": swish_sign,
              "ste_heaviside": ste_heaviside, "magnitude_aware_sign": magnitude_aware_sign, "ste_tern": ste_tern,
              "dorefa_quantizer": dorefa, "no_op": no_op}


_TABLE = QuantizerTable('larq', QUANTIZERS)
quantize, _check = _TABLE.apply, _TABLE.check


def _same_padding(size: int, k: int, stride: int, dilation: int) -> tuple[int, int]:
    """larq/layers_base._compute_padding: TensorFlow's SAME split (the extra row or column at the end)."""
    eff = (k - 1) * dilation + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


class _QuantConv:
    """What every larq convolution shares: the input quantizer, then a 'same' padding by `pad_values` when it is
    not 0 (the float convolution then runs 'valid'), as larq's QuantizerBaseConv does."""

    pad_values: float

    def _quantized_input(self, inputs: Any) -> Any:
        inputs = quantize(inputs, self.input_quantizer)
        if self.padding != "same" or not self.pad_values:
            return inputs
        rank = len(self.kernel_size)
        last = self.data_format == "channels_last"
        spatial = inputs.shape[1:-1] if last else inputs.shape[2:]
        if any(d is None for d in spatial):
            raise ValueError(f"{self.name}: pad_values={self.pad_values} with padding='same' needs a static "
                             f"spatial input shape, got {tuple(inputs.shape)}")
        pads = [_same_padding(int(spatial[i]), self.kernel_size[i], self.strides[i], self.dilation_rate[i])
                for i in range(rank)]
        full = [(0, 0), *pads, (0, 0)] if last else [(0, 0), (0, 0), *pads]
        return ops.pad(inputs, full, constant_values=float(self.pad_values))

    def _conv_padding(self) -> str:
        return "valid" if self.padding == "same" and self.pad_values else self.padding


@register
class QuantDense(keras.layers.Dense):
    """larq QuantDense: activation(dot(input_quantizer(x), kernel_quantizer(kernel)) + bias)."""

    def __init__(self, units, input_quantizer=None, kernel_quantizer=None, **kwargs):
        super().__init__(units, **kwargs)
        self.input_quantizer, self.kernel_quantizer = _check(input_quantizer), _check(kernel_quantizer)

    def call(self, inputs):
        output = ops.matmul(quantize(inputs, self.input_quantizer), quantize(self.kernel, self.kernel_quantizer))
        if self.use_bias:
            output = ops.add(output, self.bias)
        return self.activation(output) if self.activation is not None else output

    def get_config(self):
        return {**super().get_config(), "input_quantizer": self.input_quantizer,
                "kernel_quantizer": self.kernel_quantizer}


def _conv_call(layer: Any, inputs: Any, kernel: Any) -> Any:
    outputs = ops.conv(layer._quantized_input(inputs), kernel, strides=layer.strides,
                       padding=layer._conv_padding(), dilation_rate=layer.dilation_rate,
                       data_format=layer.data_format)
    if layer.use_bias:
        rank = len(layer.kernel_size)
        shape = (1,) * (rank + 1) + (-1,) if layer.data_format == "channels_last" else (1, -1) + (1,) * rank
        outputs = ops.add(outputs, ops.reshape(layer.bias, shape))
    return layer.activation(outputs) if layer.activation is not None else outputs


def _conv_class(base: type, name: str) -> type:
    def __init__(self, filters, kernel_size, input_quantizer=None, kernel_quantizer=None, pad_values=0.0,
                 **kwargs):
        base.__init__(self, filters, kernel_size, **kwargs)
        self.input_quantizer, self.kernel_quantizer = _check(input_quantizer), _check(kernel_quantizer)
        self.pad_values = float(pad_values)

    def call(self, inputs):
        return _conv_call(self, inputs, quantize(self.kernel, self.kernel_quantizer))

    def get_config(self):
        return {**base.get_config(self), "input_quantizer": self.input_quantizer,
                "kernel_quantizer": self.kernel_quantizer, "pad_values": self.pad_values}

    doc = f"larq {name}: the input and kernel quantizers, `pad_values` for 'same' padding, then {base.__name__}."
    return type(name, (_QuantConv, base), {"__init__": __init__, "call": call, "get_config": get_config,
                                           "__doc__": doc, "__module__": __name__})


QuantConv1D = register(_conv_class(keras.layers.Conv1D, "QuantConv1D"))
QuantConv2D = register(_conv_class(keras.layers.Conv2D, "QuantConv2D"))


@register
class QuantDepthwiseConv2D(_QuantConv, keras.layers.DepthwiseConv2D):
    """larq QuantDepthwiseConv2D: the input quantizer, `pad_values`, the depthwise kernel through
    `depthwise_quantizer`, then DepthwiseConv2D."""

    def __init__(self, kernel_size, input_quantizer=None, depthwise_quantizer=None, pad_values=0.0, **kwargs):
        super().__init__(kernel_size, **kwargs)
        self.input_quantizer, self.depthwise_quantizer = _check(input_quantizer), _check(depthwise_quantizer)
        self.pad_values = float(pad_values)

    def call(self, inputs):
        x = self._quantized_input(inputs)
        kernel = quantize(self.kernel, self.depthwise_quantizer)
        outputs = ops.depthwise_conv(x, kernel, strides=self.strides, padding=self._conv_padding(),
                                     dilation_rate=self.dilation_rate, data_format=self.data_format)
        if self.use_bias:
            shape = (1, 1, 1, -1) if self.data_format == "channels_last" else (1, -1, 1, 1)
            outputs = ops.add(outputs, ops.reshape(self.bias, shape))
        return self.activation(outputs) if self.activation is not None else outputs

    def get_config(self):
        return {**super().get_config(), "input_quantizer": self.input_quantizer,
                "depthwise_quantizer": self.depthwise_quantizer, "pad_values": self.pad_values}
