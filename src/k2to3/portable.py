"""The Keras 3 objects a converted model may need at load time. Imports keras only.

    import k2to3.portable  # registers k2to3>* objects
    model = keras.saving.load_model("model.keras")  # safe_mode stays on
"""

from __future__ import annotations

import keras
from keras import ops

PACKAGE = "k2to3"


@keras.saving.register_keras_serializable(package=PACKAGE)
def keras2_hard_sigmoid(x):
    """Keras 2's hard_sigmoid: clip(0.2 * x + 0.5, 0, 1). Keras 3's is relu6(x + 3) / 6."""
    x = ops.convert_to_tensor(x)
    return ops.clip(ops.add(ops.multiply(x, 0.2), 0.5), 0.0, 1.0)


@keras.saving.register_keras_serializable(package=PACKAGE)
class ThresholdedReLU(keras.layers.Layer):
    """Keras 2 ThresholdedReLU: x if x > theta else 0."""

    def __init__(self, theta: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.theta = float(theta)

    def call(self, inputs):
        return ops.multiply(inputs, ops.cast(ops.greater(inputs, self.theta), inputs.dtype))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "theta": self.theta}


@keras.saving.register_keras_serializable(package=PACKAGE)
class LayerScale(keras.layers.Layer):
    """ConvNeXt LayerScale (tf_keras.applications.convnext): x * gamma, gamma of shape (projection_dim,)."""

    def __init__(self, init_values: float, projection_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.init_values = init_values
        self.projection_dim = projection_dim

    def build(self, input_shape):
        self.gamma = self.add_weight(
            name="gamma",
            shape=(self.projection_dim,),
            initializer=keras.initializers.Constant(self.init_values),
            trainable=True,
        )

    def call(self, x):
        return x * ops.cast(self.gamma, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "init_values": self.init_values, "projection_dim": self.projection_dim}


@keras.saving.register_keras_serializable(package=PACKAGE)
class StochasticDepth(keras.layers.Layer):
    """ConvNeXt StochasticDepth: drops the residual path per sample in training; identity in inference."""

    def __init__(self, drop_path_rate: float, **kwargs):
        super().__init__(**kwargs)
        self.drop_path_rate = drop_path_rate
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, x, training=None):
        if training and self.drop_path_rate > 0:
            keep = 1.0 - self.drop_path_rate
            shape = (ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
            mask = ops.floor(keep + keras.random.uniform(shape, 0, 1, seed=self.seed_generator))
            return (x / keep) * mask
        return x

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "drop_path_rate": self.drop_path_rate}


def fake_quant_with_min_max_vars(inputs, min=-6.0, max=6.0, num_bits=8, narrow_range=False):
    """tf.quantization.fake_quant_with_min_max_vars in keras.ops (keras.ops has no fake-quant op).

    Follows TensorFlow's kernel (core/kernels/fake_quant_ops_functor.h): nudge [min, max] so that 0 is exactly
    representable, clamp, then snap to the grid with floor(x / scale + 0.5), all in float32. With Python
    numbers for min/max (Keras 2 Lambdas pass them through `arguments`) the nudge is computed in numpy
    float32, as TF computes it on the host."""
    import numpy as np

    quant_min = np.float32(1 if narrow_range else 0)
    quant_max = np.float32(2 ** int(num_bits) - 1)
    x = ops.convert_to_tensor(inputs, dtype="float32")
    if isinstance(min, (int, float)) and isinstance(max, (int, float)):
        lo, hi = np.float32(min), np.float32(max)
        scale = (hi - lo) / (quant_max - quant_min)
        zero_from_min = quant_min - lo / scale
        if zero_from_min < quant_min:
            zero = quant_min
        elif zero_from_min > quant_max:
            zero = quant_max
        else:
            zero = np.float32(np.floor(np.abs(zero_from_min) + np.float32(0.5)) * np.sign(zero_from_min))  # std::round
        nudged_min = (quant_min - zero) * scale
        nudged_max = (quant_max - zero) * scale
        inv_scale = np.float32(1.0) / scale
        scale, nudged_min, nudged_max, inv_scale = (float(v) for v in (scale, nudged_min, nudged_max, inv_scale))
    else:
        lo, hi = ops.cast(min, "float32"), ops.cast(max, "float32")
        scale = (hi - lo) / (quant_max - quant_min)
        zero_from_min = quant_min - lo / scale
        zero = ops.clip(ops.sign(zero_from_min) * ops.floor(ops.abs(zero_from_min) + 0.5), quant_min, quant_max)
        nudged_min = (quant_min - zero) * scale
        nudged_max = (quant_max - zero) * scale
        inv_scale = 1.0 / scale
    clamped = ops.minimum(ops.maximum(x, nudged_min), nudged_max)
    return ops.add(ops.multiply(ops.floor(ops.add(ops.multiply(ops.subtract(clamped, nudged_min), inv_scale), 0.5)),
                                scale), nudged_min)


@keras.saving.register_keras_serializable(package=PACKAGE)
class ContribInstanceNormalization(keras.layers.Layer):
    """keras-contrib InstanceNormalization: (x - mean) / (std + epsilon) * gamma + beta over the non-batch axes
    other than `axis` (all of them when axis is None, with scalar gamma/beta). Keras 3's GroupNormalization
    divides by sqrt(var + epsilon) instead, a relative difference of about epsilon / (2 std)."""

    def __init__(self, axis=None, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self.axis, self.epsilon, self.center, self.scale = axis, epsilon, center, scale
        self.beta_initializer = keras.initializers.get(beta_initializer)
        self.gamma_initializer = keras.initializers.get(gamma_initializer)
        self.beta_regularizer = keras.regularizers.get(beta_regularizer)
        self.gamma_regularizer = keras.regularizers.get(gamma_regularizer)
        self.beta_constraint = keras.constraints.get(beta_constraint)
        self.gamma_constraint = keras.constraints.get(gamma_constraint)

    def build(self, input_shape):
        shape = (1,) if self.axis is None else (input_shape[self.axis],)
        self.gamma = self.add_weight(shape=shape, name="gamma", initializer=self.gamma_initializer,
                                     regularizer=self.gamma_regularizer, constraint=self.gamma_constraint) \
            if self.scale else None
        self.beta = self.add_weight(shape=shape, name="beta", initializer=self.beta_initializer,
                                    regularizer=self.beta_regularizer, constraint=self.beta_constraint) \
            if self.center else None

    def call(self, inputs):
        rank = len(inputs.shape)
        axes = [a for a in range(1, rank) if self.axis is None or a != self.axis % rank]
        mean = ops.mean(inputs, axis=axes, keepdims=True)
        std = ops.std(inputs, axis=axes, keepdims=True)
        normed = (inputs - mean) / (std + self.epsilon)
        shape = [1] * rank
        if self.axis is not None:
            shape[self.axis] = inputs.shape[self.axis]
        if self.scale:
            normed = normed * ops.reshape(self.gamma, shape)
        if self.center:
            normed = normed + ops.reshape(self.beta, shape)
        return normed

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        s = keras.initializers.serialize
        return {**super().get_config(), "axis": self.axis, "epsilon": self.epsilon, "center": self.center,
                "scale": self.scale, "beta_initializer": s(self.beta_initializer),
                "gamma_initializer": s(self.gamma_initializer),
                "beta_regularizer": keras.regularizers.serialize(self.beta_regularizer),
                "gamma_regularizer": keras.regularizers.serialize(self.gamma_regularizer),
                "beta_constraint": keras.constraints.serialize(self.beta_constraint),
                "gamma_constraint": keras.constraints.serialize(self.gamma_constraint)}



@keras.saving.register_keras_serializable(package=PACKAGE)
class TFOpLayer(keras.layers.Layer):
    """A TFOpLambda node whose TensorFlow function has no keras.ops equivalent, kept as that TensorFlow call:
    the model then runs on the tensorflow backend only (k2to3 convert reports it as TF-only). `template` is the
    call's [first argument, keyword arguments] with every tensor replaced by {"__tensor__": i}, i indexing the
    layer's input list."""

    def __init__(self, function: str, template: list, **kwargs):
        super().__init__(**kwargs)
        self.function = function
        self.call_template = template

    @staticmethod
    def template(value, tensors: list, tensor_type: type):
        if isinstance(value, tensor_type):
            tensors.append(value)
            return {"__tensor__": len(tensors) - 1}
        if isinstance(value, (list, tuple)):
            return [TFOpLayer.template(v, tensors, tensor_type) for v in value]
        if isinstance(value, dict):
            return {k: TFOpLayer.template(v, tensors, tensor_type) for k, v in value.items()}
        return value

    def _fill(self, value, tensors):
        if isinstance(value, dict) and set(value) == {"__tensor__"}:
            return tensors[value["__tensor__"]]
        if isinstance(value, list):
            return [self._fill(v, tensors) for v in value]
        if isinstance(value, dict):
            return {k: self._fill(v, tensors) for k, v in value.items()}
        return value

    def call(self, tensors):
        if keras.backend.backend() != "tensorflow":
            raise RuntimeError(f"layer {self.name!r} calls tf.{self.function}, which has no keras.ops equivalent: "
                               "this model runs on the tensorflow backend only")
        import tensorflow as tf

        fn = tf
        for part in self.function.split("."):
            fn = getattr(fn, part)
        first, kwargs = self._fill(self.call_template, list(tensors))
        return fn(first, **kwargs)

    def get_config(self):
        return {**super().get_config(), "function": self.function, "template": self.call_template}


def matmul(x1, x2, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False):
    """tf.linalg.matmul's transpose/adjoint flags in keras.ops (keras.ops.matmul has none): swap the last two
    axes (and conjugate for the adjoint) before multiplying. Built from keras.ops only, so a converted model
    holds built-in nodes and needs no k2to3 import."""

    def prep(x, transpose, adjoint):
        if transpose or adjoint:
            x = ops.swapaxes(x, -1, -2)
        if adjoint and "complex" in str(x.dtype):
            x = ops.conj(x)
        return x

    return ops.matmul(prep(x1, transpose_a, adjoint_a), prep(x2, transpose_b, adjoint_b))


def squared_difference(x1, x2):
    """tf.math.squared_difference in keras.ops (which has no such op): (x1 - x2) ** 2."""
    return ops.square(ops.subtract(x1, x2))
