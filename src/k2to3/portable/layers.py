"""Layers of Keras 2 and of popular Keras 2 libraries that Keras 3 does not have, in keras.ops."""

from __future__ import annotations

import keras
from keras import ops

from k2to3.portable.registry import register


@register
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


@register
class AddLoss(keras.layers.Layer):
    """tf.keras's `model.add_loss(tensor)` on a functional model: a layer that adds its input as a loss and passes
    it through (identity in inference); Keras 3 has no such layer, but Layer.add_loss in call does the same."""

    def __init__(self, unconditional: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.unconditional = bool(unconditional)

    def call(self, inputs):
        self.add_loss(inputs)
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "unconditional": self.unconditional}


@register
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


@register
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


@register
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
