"""qkeras's folded layers QConv2DBatchnorm (qkeras/qconv2d_batchnorm.py, qkeras 0.9) and QDenseBatchnorm
(qkeras/qdense_batchnorm.py of google/qkeras pull request 74, in no release) in keras.ops, inference forward pass.

At inference qkeras folds the batch norm into the layer before quantizing, with the moving statistics whatever
`folding_mode` says (both modes take moving_mean / moving_variance once the BN is not training):
`inv = rsqrt(moving_variance + epsilon) * gamma`, kernel `q(inv * kernel)`, bias `q(inv * (bias - moving_mean) +
beta)`, then the conv / matmul with the quantized folded kernel, the quantized folded bias added, the activation.
The layer keeps qkeras's variables (kernel, bias, the BN's gamma, beta, moving_mean, moving_variance and the
int64 `iteration` counter) so every tensor of the file is restored.

Training (`training=True`) computes what qkeras computes once the BN is frozen (`iteration > ema_freeze_delay`):
the same folded forward pass, the moving statistics left as they are, `iteration` counting steps. qkeras's
earlier phase (batch statistics, the ema correction factor, the moving-average update) is not reproduced.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from k2to3.portable.qkeras import QConv2D, QDense, quantize
from k2to3.portable.registry import register

# qkeras passes these to its inner BatchNormalization; get_config writes them flat into the layer's config
BN_KEYS = ("axis", "momentum", "epsilon", "center", "scale", "beta_initializer", "gamma_initializer",
           "moving_mean_initializer", "moving_variance_initializer", "beta_regularizer", "gamma_regularizer",
           "beta_constraint", "gamma_constraint")
FOLD_KEYS = ("ema_freeze_delay", "folding_mode")


class _Folded:
    """The BN half shared by the two folded layers (a mixin over the portable QDense / QConv2D)."""

    def _init_bn(self, bn: dict[str, Any]) -> None:
        axis = bn.get("axis", -1)
        self.bn_axis = axis[0] if isinstance(axis, (list, tuple)) else axis
        self.momentum, self.epsilon = float(bn.get("momentum", 0.99)), float(bn.get("epsilon", 0.001))
        self.center, self.scale = bool(bn.get("center", True)), bool(bn.get("scale", True))
        self.bn_initializers = {k: keras.initializers.get(bn.get(f"{k}_initializer", d)) for k, d in (
            ("beta", "zeros"), ("gamma", "ones"), ("moving_mean", "zeros"), ("moving_variance", "ones"))}
        self.beta_regularizer = keras.regularizers.get(bn.get("beta_regularizer"))
        self.gamma_regularizer = keras.regularizers.get(bn.get("gamma_regularizer"))
        self.beta_constraint = keras.constraints.get(bn.get("beta_constraint"))
        self.gamma_constraint = keras.constraints.get(bn.get("gamma_constraint"))
        self.ema_freeze_delay, self.folding_mode = bn.get("ema_freeze_delay"), bn.get("folding_mode",
                                                                                       "ema_stats_folding")

    def _build_bn(self, channels: int) -> None:
        # Creation order = qkeras's: trainable gamma, beta after kernel and bias; then iteration, moving stats.
        init = self.bn_initializers
        self.gamma = self.add_weight(shape=(channels,), name="gamma", initializer=init["gamma"],
                                     regularizer=self.gamma_regularizer, constraint=self.gamma_constraint
                                     ) if self.scale else None
        self.beta = self.add_weight(shape=(channels,), name="beta", initializer=init["beta"],
                                    regularizer=self.beta_regularizer, constraint=self.beta_constraint
                                    ) if self.center else None
        self.iteration = self.add_weight(shape=(), name="iteration", initializer=keras.initializers.Constant(-1),
                                         dtype="int64", trainable=False)
        self.moving_mean = self.add_weight(shape=(channels,), name="moving_mean", initializer=init["moving_mean"],
                                           trainable=False)
        self.moving_variance = self.add_weight(shape=(channels,), name="moving_variance",
                                               initializer=init["moving_variance"], trainable=False)

    def folded_weights(self) -> tuple[Any, Any]:
        """qkeras's quantized folded kernel and bias (moving statistics)."""
        inv = ops.rsqrt(self.moving_variance + self.epsilon)
        if self.gamma is not None:
            inv = inv * self.gamma
        bias = self.bias if self.use_bias else 0.0
        folded_bias = inv * (bias - self.moving_mean)
        if self.beta is not None:
            folded_bias = folded_bias + self.beta
        return (quantize(inv * self.kernel, self.kernel_quantizer),
                quantize(folded_bias, self.bias_quantizer))

    def _finish(self, outputs: Any, training: Any) -> Any:
        if training:
            self.iteration.assign_add(ops.cast(1, "int64"))
        if self.activation_quantizer:
            return quantize(outputs, self.activation_quantizer)
        return self.activation(outputs) if self.activation is not None else outputs

    # Keras 3's Dense / Conv save only their kernel and bias (and quantization variables) in `.keras`: the
    # generic Layer store keeps the BN variables and iteration too.
    def save_own_variables(self, store: Any) -> None:
        keras.layers.Layer.save_own_variables(self, store)

    def load_own_variables(self, store: Any) -> None:
        keras.layers.Layer.load_own_variables(self, store)

    def _bn_config(self) -> dict[str, Any]:
        ser = keras.saving.serialize_keras_object
        init = {f"{k}_initializer": ser(v) for k, v in self.bn_initializers.items()}
        return {"axis": self.bn_axis, "momentum": self.momentum, "epsilon": self.epsilon, "center": self.center,
                "scale": self.scale, **init, "beta_regularizer": ser(self.beta_regularizer),
                "gamma_regularizer": ser(self.gamma_regularizer), "beta_constraint": ser(self.beta_constraint),
                "gamma_constraint": ser(self.gamma_constraint), "ema_freeze_delay": self.ema_freeze_delay,
                "folding_mode": self.folding_mode}


def _split(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs.pop(k) for k in (*BN_KEYS, *FOLD_KEYS) if k in kwargs}


@register
class QDenseBatchnorm(_Folded, QDense):
    """qkeras QDenseBatchnorm: QDense with a BatchNormalization folded into its quantized kernel and bias."""

    def __init__(self, units, **kwargs):
        bn = _split(kwargs)
        super().__init__(units, **kwargs)
        self._init_bn(bn)

    def build(self, input_shape):
        super().build(input_shape)
        self._build_bn(self.units)

    def call(self, inputs, training=None):
        kernel, bias = self.folded_weights()
        return self._finish(ops.add(ops.matmul(inputs, kernel), bias), training)

    def get_config(self):
        return {**super().get_config(), **self._bn_config()}


@register
class QConv2DBatchnorm(_Folded, QConv2D):
    """qkeras QConv2DBatchnorm: QConv2D with a BatchNormalization folded into its quantized kernel and bias."""

    def __init__(self, filters, kernel_size, **kwargs):
        bn = _split(kwargs)
        super().__init__(filters, kernel_size, **kwargs)
        self._init_bn(bn)

    def build(self, input_shape):
        super().build(input_shape)
        self._build_bn(self.filters)

    def call(self, inputs, training=None):
        kernel, bias = self.folded_weights()
        outputs = self.convolution_op(inputs, kernel)
        return self._finish(ops.add(outputs, ops.reshape(bias, (1, 1, 1, self.filters))), training)

    def get_config(self):
        return {**super().get_config(), **self._bn_config()}
