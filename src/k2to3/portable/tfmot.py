"""tensorflow-model-optimization's quantization-aware training layers (QuantizeLayer, QuantizeWrapperV2 with the
default 8-bit scheme) in keras.ops, computing what tfmot 0.8 computes (quantization/keras/quant_ops.py,
quantize_wrapper.py, quantize_aware_activation.py, default_8bit/): weights, activations and outputs through
TensorFlow's fake-quant op with the min/max variables the file holds. In inference the stored ranges are used as
they are; in training they are updated first as tfmot updates them (the weights' last value, an exponential
moving average of 0.999 for activations and outputs, the running extremes for QuantizeLayer's AllValues), and the
gradient passes straight through inside the nudged range, as TensorFlow's fake-quant gradient does.

A quantizer is plain config: `{"kind": "last_value" | "moving_average" | "all_values", "num_bits": 8,
"per_axis": bool, "symmetric": bool, "narrow_range": bool}`. Which layers and configs convert is decided when the
model is converted (upgrade/tfmot.py; rule K2T945 names what does not)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from k2to3.portable.registry import register

EMA_DECAY = 0.999  # quant_ops.MovingAvgQuantize's default, which tfmot's quantizers keep
PRE_QUANT = frozenset({"softmax", "sigmoid", "tanh", "gelu"})  # quantize_aware_activation.py
POST_QUANT = frozenset({"linear", "relu", "swish", "gelu"})


def exact_div(a: Any, c: float) -> Any:
    """a / c correctly rounded, as TensorFlow's kernel divides, on every backend: XLA turns a division by a
    constant into a multiplication by its reciprocal, one ulp off for some float32 values, which moves a
    nudged range's end across the extreme weight it was computed from. A divisor built from `a` stays a
    division (XLA does not fold `a * 0`, which is NaN for an infinite a)."""
    return a / (a * 0.0 + c)


def nudge(lo: Any, hi: Any, num_bits: int, narrow_range: bool) -> tuple[Any, Any, Any, Any]:
    """TensorFlow's Nudge (core/kernels/fake_quant_ops_functor.h) on float32 tensors: (nudged min, max, scale,
    inverse scale) so that 0 is exactly representable; the zero point rounds half away from zero (std::round), and
    the inverse is its own division, (qmax - qmin) / (max - min), not 1 / scale."""
    qmin, qmax = float(1 if narrow_range else 0), float(2 ** int(num_bits) - 1)
    lo, hi = ops.cast(lo, "float32"), ops.cast(hi, "float32")
    scale = exact_div(hi - lo, qmax - qmin)
    d = hi - lo
    inv_scale = (d * 0.0 + (qmax - qmin)) / d  # tensor / tensor: torch computes number / tensor as reciprocal * number
    zero_from_min = qmin - lo / scale
    zero = ops.clip(ops.sign(zero_from_min) * ops.floor(ops.abs(zero_from_min) + 0.5), qmin, qmax)
    return (qmin - zero) * scale, (qmax - zero) * scale, scale, inv_scale


def snap(shifted: Any, scale: Any, inv_scale: Any, nmin: Any, per_channel: bool) -> Any:
    """TensorFlow 2.x's fake-quant kernels on `shifted` = clamped - nudged min, bit for bit: the quantized zero
    quant_zero = floor(-nudged_min * inv_scale + 0.5), then floor(shifted / scale - quant_zero + 0.5) * scale for
    FakeQuantWithMinMaxVars (one range) and floor(shifted * inv_scale - quant_zero + 0.5) * scale for the per-channel
    kernel. The division stays one on XLA (exact_div's divisor built from `shifted`). Computed as
    floor(shifted / scale + 0.5) * scale + nmin instead, the output differs from the kernel's by an ulp on most
    values and by a whole step on a rare few."""
    quant_zero = ops.floor(-nmin * inv_scale + 0.5)
    # per channel, max(., 0) is the identity (shifted >= 0, inv_scale > 0) that keeps XLA from fusing the product
    # and the subtraction below into one fused multiply-add (on jax: a rare value a whole step off)
    ratio = ops.maximum(shifted * inv_scale, 0.0) if per_channel else shifted / (shifted * 0.0 + scale)
    return ops.floor(ratio - quant_zero + 0.5) * scale


def fake_quant(x: Any, lo: Any, hi: Any, num_bits: int = 8, narrow_range: bool = False) -> Any:
    """tf.quantization.fake_quant_with_min_max_vars (..._per_channel when lo/hi are vectors over the last axis), with
    its gradient: 1 inside [nudged min, nudged max], 0 outside."""
    nmin, nmax, scale, inv_scale = nudge(lo, hi, num_bits, narrow_range)
    clamped = ops.minimum(ops.maximum(x, nmin), nmax)
    q = snap(clamped - nmin, scale, inv_scale, nmin, len(ops.shape(nmin)) > 0)
    inside = ops.cast(ops.logical_and(ops.greater_equal(x, nmin), ops.less_equal(x, nmax)), x.dtype)
    return ops.stop_gradient(q) + (x - ops.stop_gradient(x)) * ops.stop_gradient(inside)


def _batch_range(x: Any, spec: dict[str, Any]) -> tuple[Any, Any]:
    axes = tuple(range(len(x.shape) - 1)) if spec.get("per_axis") and len(x.shape) >= 2 else None
    bmin, bmax = ops.min(x, axis=axes), ops.max(x, axis=axes)
    if spec.get("symmetric"):
        bits = int(spec.get("num_bits", 8))
        ratio = -1.0 if spec.get("narrow_range") else -((1 << bits) - 2) / (1 << bits)
        if spec.get("kind") == "all_values":  # AllValuesQuantize updates batch_min before it reads it
            bmin = ops.minimum(bmin, exact_div(bmax, ratio))
            return bmin, ops.maximum(bmax, bmin * ratio)
        return ops.minimum(bmin, exact_div(bmax, ratio)), ops.maximum(bmax, bmin * ratio)
    if spec.get("kind") == "all_values":
        return bmin, bmax
    return ops.minimum(bmin, 0.0), ops.maximum(bmax, 0.0)


def quantize(x: Any, spec: dict[str, Any], lo_var: Any, hi_var: Any, training: bool) -> Any:
    """x through one tfmot quantizer and its range variables; in training the range is updated first."""
    if training:
        rmin, rmax = _batch_range(ops.stop_gradient(x), spec)
        kind = spec.get("kind")
        if kind == "moving_average":
            rmin = lo_var - (lo_var - rmin) * (1.0 - EMA_DECAY)
            rmax = hi_var - (hi_var - rmax) * (1.0 - EMA_DECAY)
        elif kind == "all_values":
            rmin = ops.minimum(ops.minimum(lo_var, rmin), 0.0)
            rmax = ops.maximum(ops.maximum(hi_var, rmax), 0.0)
        lo_var.assign(rmin)
        hi_var.assign(rmax)
    return fake_quant(x, lo_var, hi_var, int(spec.get("num_bits", 8)), bool(spec.get("narrow_range")))


def _range_weights(layer: keras.layers.Layer, name: str, shape: tuple[int, ...] = ()) -> tuple[Any, Any]:
    lo = layer.add_weight(name=f"{name}_min", shape=shape, initializer=keras.initializers.Constant(-6.0),
                          trainable=False)
    hi = layer.add_weight(name=f"{name}_max", shape=shape, initializer=keras.initializers.Constant(6.0),
                          trainable=False)
    return lo, hi


def _step(layer: keras.layers.Layer) -> Any:
    return layer.add_weight(name="optimizer_step", shape=(), initializer=keras.initializers.Constant(-1),
                            dtype="int32", trainable=False)


def _training(training: Any) -> bool:
    return bool(training) if training is not None else False


@register
class QuantizeLayer(keras.layers.Layer):
    """tfmot QuantizeLayer: the model's input through its quantizer (AllValues in the default 8-bit scheme)."""

    def __init__(self, quantizer=None, **kwargs):
        super().__init__(**kwargs)
        self.quantizer = quantizer

    def build(self, input_shape):
        if self.quantizer:
            self.quantize_layer_min, self.quantize_layer_max = _range_weights(self, "quantize_layer")
            self.optimizer_step = _step(self)

    def call(self, inputs, training=None):
        if not self.quantizer:
            return inputs
        return quantize(inputs, self.quantizer, self.quantize_layer_min, self.quantize_layer_max,
                        _training(training))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "quantizer": self.quantizer}


@register
class QuantizeWrapperV2(keras.layers.Wrapper):
    """tfmot QuantizeWrapperV2 under a default 8-bit QuantizeConfig: the wrapped Dense / Conv / DepthwiseConv2D
    computes with its kernel fake-quantized (`weight_quantizer`), its activation quantized before and/or after
    as QuantizeAwareActivation does (`activation_quantizer`), and its output quantized (`output_quantizer`);
    any other wrapped layer runs as it is, then its output is quantized."""

    def __init__(self, layer, weight_quantizer=None, activation_quantizer=None, output_quantizer=None, **kwargs):
        super().__init__(layer, **kwargs)
        self.weight_quantizer, self.activation_quantizer = weight_quantizer, activation_quantizer
        self.output_quantizer = output_quantizer

    def build(self, input_shape):
        if not self.layer.built:
            self.layer.build(input_shape)
        self.optimizer_step = _step(self)
        if self.weight_quantizer:
            shape = (int(self.layer.kernel.shape[-1]),) if self.weight_quantizer.get("per_axis") else ()
            self.kernel_min, self.kernel_max = _range_weights(self, "kernel", shape)
        act = self._activation_name()
        if self.activation_quantizer and act in PRE_QUANT:
            self.pre_activation_min, self.pre_activation_max = _range_weights(self, "pre_activation")
        if self.activation_quantizer and act in POST_QUANT:
            self.post_activation_min, self.post_activation_max = _range_weights(self, "post_activation")
        if self.output_quantizer:
            self.output_min, self.output_max = _range_weights(self, "output")
        self.built = True

    def _activation_name(self) -> str | None:
        act = getattr(self.layer, "activation", None)
        return getattr(act, "__name__", None) if act is not None else None

    def _linear(self, inputs: Any, kernel: Any) -> Any:
        layer = self.layer
        if isinstance(layer, keras.layers.Dense):
            y = ops.matmul(inputs, kernel)
        elif isinstance(layer, keras.layers.DepthwiseConv2D):
            y = ops.depthwise_conv(inputs, kernel, strides=layer.strides, padding=layer.padding,
                                   dilation_rate=layer.dilation_rate, data_format=layer.data_format)
        else:
            y = ops.conv(inputs, kernel, strides=layer.strides, padding=layer.padding,
                         dilation_rate=layer.dilation_rate, data_format=layer.data_format)
        if layer.use_bias:
            rank = len(y.shape)
            first = getattr(layer, "data_format", "channels_last") == "channels_first"
            shape = [1] * rank
            shape[1 if first else -1] = -1
            y = ops.add(y, ops.reshape(layer.bias, shape))
        return y

    def _activate(self, y: Any, training: bool) -> Any:
        act, name = self.layer.activation, self._activation_name()
        if self.activation_quantizer and name in PRE_QUANT:
            y = quantize(y, self.activation_quantizer, self.pre_activation_min, self.pre_activation_max, training)
        y = act(y)
        if self.activation_quantizer and name in POST_QUANT:
            y = quantize(y, self.activation_quantizer, self.post_activation_min, self.post_activation_max, training)
        return y

    def call(self, inputs, training=None):
        training = _training(training)
        if self.weight_quantizer:
            kernel = quantize(self.layer.kernel, self.weight_quantizer, self.kernel_min, self.kernel_max, training)
            y = self._activate(self._linear(inputs, kernel), training)
        else:
            y = self.layer(inputs, training=training)
        if self.output_quantizer:
            y = quantize(y, self.output_quantizer, self.output_min, self.output_max, training)
        return y

    def compute_output_shape(self, input_shape):
        return self.layer.compute_output_shape(input_shape)

    @property
    def non_trainable_weights(self):
        """The wrapped layer's first, then the wrapper's own: tf_keras's order (the saved file's, and what a
        training comparison pairs by position); Keras 3 lists a layer's own variables first."""
        inner = list(self.layer.non_trainable_weights)
        ids = {id(v) for v in inner}
        return inner + [v for v in super().non_trainable_weights if id(v) not in ids]

    def get_config(self):
        return {**super().get_config(), "weight_quantizer": self.weight_quantizer,
                "activation_quantizer": self.activation_quantizer, "output_quantizer": self.output_quantizer}
