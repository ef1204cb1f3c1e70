"""Keras 2 (tf_keras) reference implementations of custom layers that popular Keras 2 libraries define, for the
golden reference only (imported by the tensorflow worker and by the fixture script that writes test files).

Each is a transcription of the library's own code (cited below) with the same class name, registration and
get_config keys, so tf_keras can load a file that library wrote without the library installed (tensorflow-addons
is end-of-life and does not install beside TF 2.21). The Keras 3 side is independent: rules K2T431-K2T434 map
these classes to Keras 3 layers or to k2to3.portable, and the conversion is verified against these.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras
from tf_keras import backend as K


def _set_affine(layer, beta_initializer, gamma_initializer, beta_regularizer, gamma_regularizer, beta_constraint,
                gamma_constraint) -> None:
    """The gamma/beta settings both libraries' normalization layers take, resolved as they resolve them."""
    layer.beta_initializer = tf_keras.initializers.get(beta_initializer)
    layer.gamma_initializer = tf_keras.initializers.get(gamma_initializer)
    layer.beta_regularizer = tf_keras.regularizers.get(beta_regularizer)
    layer.gamma_regularizer = tf_keras.regularizers.get(gamma_regularizer)
    layer.beta_constraint = tf_keras.constraints.get(beta_constraint)
    layer.gamma_constraint = tf_keras.constraints.get(gamma_constraint)


def _affine_weights(layer, shape) -> None:
    layer.gamma = layer.add_weight(shape=shape, name="gamma", initializer=layer.gamma_initializer,
                                   regularizer=layer.gamma_regularizer, constraint=layer.gamma_constraint) \
        if layer.scale else None
    layer.beta = layer.add_weight(shape=shape, name="beta", initializer=layer.beta_initializer,
                                  regularizer=layer.beta_regularizer, constraint=layer.beta_constraint) \
        if layer.center else None


def _affine_config(layer) -> dict:
    return {"beta_initializer": tf_keras.initializers.serialize(layer.beta_initializer),
            "gamma_initializer": tf_keras.initializers.serialize(layer.gamma_initializer),
            "beta_regularizer": tf_keras.regularizers.serialize(layer.beta_regularizer),
            "gamma_regularizer": tf_keras.regularizers.serialize(layer.gamma_regularizer),
            "beta_constraint": tf_keras.constraints.serialize(layer.beta_constraint),
            "gamma_constraint": tf_keras.constraints.serialize(layer.gamma_constraint)}


@tf_keras.utils.register_keras_serializable(package="Addons")
class GroupNormalization(tf_keras.layers.Layer):
    """tensorflow-addons 0.23 `tfa.layers.GroupNormalization` (tensorflow_addons/layers/normalizations.py)."""

    def __init__(self, groups=32, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.groups, self.axis, self.epsilon, self.center, self.scale = groups, axis, epsilon, center, scale
        _set_affine(self, beta_initializer, gamma_initializer, beta_regularizer, gamma_regularizer, beta_constraint,
                    gamma_constraint)

    def build(self, input_shape):
        dim = input_shape[self.axis]
        if self.groups == -1:
            self.groups = dim
        _affine_weights(self, (dim,))
        super().build(input_shape)

    def call(self, inputs):
        input_shape = K.int_shape(inputs)
        tensor_input_shape = tf.shape(inputs)
        instance = (input_shape[self.axis] // self.groups) == 1
        if not instance:
            group_shape = [tensor_input_shape[i] for i in range(len(input_shape))]
            group_shape[self.axis] = input_shape[self.axis] // self.groups
            group_shape.insert(self.axis, self.groups)
            reshaped = tf.reshape(inputs, tf.stack(group_shape))
        else:
            reshaped = inputs
        axes = list(range(1, len(K.int_shape(reshaped))))
        axes.pop((-2 if self.axis == -1 else self.axis - 1) if not instance else
                 (-1 if self.axis == -1 else self.axis - 1))
        mean, variance = tf.nn.moments(reshaped, axes, keepdims=True)
        broadcast = [1] * len(input_shape)
        if not instance:
            broadcast[self.axis] = input_shape[self.axis] // self.groups
            broadcast.insert(self.axis, self.groups)
        else:
            broadcast[self.axis] = self.groups
        gamma = tf.reshape(self.gamma, broadcast) if self.scale else None
        beta = tf.reshape(self.beta, broadcast) if self.center else None
        out = tf.nn.batch_normalization(reshaped, mean=mean, variance=variance, scale=gamma, offset=beta,
                                        variance_epsilon=self.epsilon)
        return tf.reshape(out, tensor_input_shape) if not instance else out

    def get_config(self):
        config = {"groups": self.groups, "axis": self.axis, "epsilon": self.epsilon, "center": self.center,
                  "scale": self.scale, **_affine_config(self)}
        return {**super().get_config(), **config}


@tf_keras.utils.register_keras_serializable(package="Addons", name="InstanceNormalization")
class TfaInstanceNormalization(GroupNormalization):
    """tensorflow-addons 0.23 `tfa.layers.InstanceNormalization`: GroupNormalization with groups=-1."""

    def __init__(self, **kwargs):
        kwargs["groups"] = -1
        super().__init__(**kwargs)


class InstanceNormalization(tf_keras.layers.Layer):
    """keras-contrib `InstanceNormalization` (keras_contrib/layers/normalization/instancenormalization.py),
    saved under the class name "InstanceNormalization". Note (x - mean) / (std + epsilon), not sqrt(var + eps)."""

    def __init__(self, axis=None, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True
        self.axis, self.epsilon, self.center, self.scale = axis, epsilon, center, scale
        _set_affine(self, beta_initializer, gamma_initializer, beta_regularizer, gamma_regularizer, beta_constraint,
                    gamma_constraint)

    def build(self, input_shape):
        _affine_weights(self, (1,) if self.axis is None else (input_shape[self.axis],))
        self.built = True

    def call(self, inputs, training=None):
        input_shape = K.int_shape(inputs)
        reduction_axes = list(range(0, len(input_shape)))
        if self.axis is not None:
            del reduction_axes[self.axis]
        del reduction_axes[0]
        mean = K.mean(inputs, reduction_axes, keepdims=True)
        stddev = K.std(inputs, reduction_axes, keepdims=True) + self.epsilon
        normed = (inputs - mean) / stddev
        broadcast_shape = [1] * len(input_shape)
        if self.axis is not None:
            broadcast_shape[self.axis] = input_shape[self.axis]
        if self.scale:
            normed = normed * K.reshape(self.gamma, broadcast_shape)
        if self.center:
            normed = normed + K.reshape(self.beta, broadcast_shape)
        return normed

    def get_config(self):
        config = {"axis": self.axis, "epsilon": self.epsilon, "center": self.center, "scale": self.scale,
                  **_affine_config(self)}
        return {**super().get_config(), **config}


class FixedDropout(tf_keras.layers.Dropout):
    """qubvel/efficientnet `efficientnet` package (efficientnet/model.py, get_dropout): Dropout whose noise_shape
    may hold None; identical to Dropout in inference."""

    def _get_noise_shape(self, inputs):
        if self.noise_shape is None:
            return self.noise_shape
        symbolic_shape = K.shape(inputs)
        return tuple(symbolic_shape[axis] if shape is None else shape for axis, shape in enumerate(self.noise_shape))


@tf_keras.utils.register_keras_serializable(package="Addons")
class Maxout(tf_keras.layers.Layer):
    """tensorflow-addons 0.23 `tfa.layers.Maxout` (tensorflow_addons/layers/maxout.py)."""

    def __init__(self, num_units, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.num_units, self.axis = num_units, axis

    def call(self, inputs):
        inputs = tf.convert_to_tensor(inputs)
        shape = inputs.get_shape().as_list()
        for i in range(len(shape)):
            if shape[i] is None:
                shape[i] = tf.shape(inputs)[i]
        num_channels = shape[self.axis]
        axis = self.axis + len(shape) if self.axis < 0 else self.axis
        expand_shape = shape[:]
        expand_shape[axis] = self.num_units
        expand_shape.insert(axis, num_channels // self.num_units)
        return tf.math.reduce_max(tf.reshape(inputs, expand_shape), axis, keepdims=False)

    def compute_output_shape(self, input_shape):
        input_shape = tf.TensorShape(input_shape).as_list()
        input_shape[self.axis] = self.num_units
        return tf.TensorShape(input_shape)

    def get_config(self):
        return {**super().get_config(), "num_units": self.num_units, "axis": self.axis}


@tf_keras.utils.register_keras_serializable(package="Addons")
class SpectralNormalization(tf_keras.layers.Wrapper):
    """tensorflow-addons 0.23 `tfa.layers.SpectralNormalization` (tensorflow_addons/layers/spectral_normalization.py):
    the wrapped layer's kernel is divided by its largest singular value (power iteration, non-trainable `sn_u`)
    in training only; inference calls the wrapped layer with the kernel as saved."""

    def __init__(self, layer, power_iterations=1, **kwargs):
        super().__init__(layer, **kwargs)
        if power_iterations <= 0:
            raise ValueError(f"`power_iterations` should be greater than zero, got {power_iterations}")
        self.power_iterations = power_iterations

    def build(self, input_shape):
        super().build(input_shape)
        input_shape = tf.TensorShape(input_shape)
        self.input_spec = tf_keras.layers.InputSpec(shape=[None, *input_shape[1:]])
        self.w = self.layer.kernel if hasattr(self.layer, "kernel") else self.layer.embeddings
        self.w_shape = self.w.shape.as_list()
        self.u = self.add_weight(shape=(1, self.w_shape[-1]),
                                 initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02), trainable=False,
                                 name="sn_u", dtype=self.w.dtype)

    def call(self, inputs, training=None):
        if training is None:
            training = tf_keras.backend.learning_phase()
        if training:
            self.normalize_weights()
        return self.layer(inputs)

    def compute_output_shape(self, input_shape):
        return tf.TensorShape(self.layer.compute_output_shape(input_shape).as_list())

    def normalize_weights(self):
        w = tf.reshape(self.w, [-1, self.w_shape[-1]])
        u = self.u
        for _ in range(self.power_iterations):
            v = tf.math.l2_normalize(tf.matmul(u, w, transpose_b=True))
            u = tf.math.l2_normalize(tf.matmul(v, w))
        sigma = tf.matmul(tf.matmul(v, w), u, transpose_b=True)
        self.w.assign(tf.cast(tf.reshape(self.w / sigma, self.w_shape), self.w.dtype))
        self.u.assign(tf.cast(u, self.u.dtype))

    def get_config(self):
        return {**super().get_config(), "power_iterations": self.power_iterations}


@tf_keras.utils.register_keras_serializable(package="Addons")
class WeightNormalization(tf_keras.layers.Wrapper):
    """tensorflow-addons 0.23 `tfa.layers.WeightNormalization` (tensorflow_addons/layers/wrappers.py)."""

    def __init__(self, layer, data_init=True, **kwargs):
        super().__init__(layer, **kwargs)
        self.data_init = data_init
        self._track_trackable(layer, name="layer")
        self.is_rnn = isinstance(self.layer, tf_keras.layers.RNN)

    def build(self, input_shape):
        input_shape = tf.TensorShape(input_shape)
        self.input_spec = tf_keras.layers.InputSpec(shape=[None, *input_shape[1:]])
        if not self.layer.built:
            self.layer.build(input_shape)
        kernel_layer = self.layer.cell if self.is_rnn else self.layer
        kernel = kernel_layer.recurrent_kernel if self.is_rnn else kernel_layer.kernel
        self.layer_depth = int(kernel.shape[-1])
        self.kernel_norm_axes = list(range(kernel.shape.rank - 1))
        self.g = self.add_weight(name="g", shape=(self.layer_depth,), initializer="ones", dtype=kernel.dtype,
                                 trainable=True)
        self.v = kernel
        self._initialized = self.add_weight(name="initialized", shape=None, initializer="zeros",
                                            dtype=tf.dtypes.bool, trainable=False)
        if self.data_init:
            with tf.name_scope("data_dep_init"):
                layer_config = tf_keras.layers.serialize(self.layer)
                layer_config["config"]["trainable"] = False
                self._naked_clone_layer = tf_keras.layers.deserialize(layer_config)
                self._naked_clone_layer.build(input_shape)
                self._naked_clone_layer.set_weights(self.layer.get_weights())
                if not self.is_rnn:
                    self._naked_clone_layer.activation = None
        self.built = True

    def call(self, inputs):
        def _do_nothing():
            return tf.identity(self.g)

        def _update_weights():
            with tf.control_dependencies(self._initialize_weights(inputs)):
                return tf.identity(self.g)

        g = tf.cond(self._initialized, _do_nothing, _update_weights)
        with tf.name_scope("compute_weights"):
            kernel = tf.nn.l2_normalize(self.v, axis=self.kernel_norm_axes) * g
            if self.is_rnn:
                self.layer.cell.recurrent_kernel = kernel
                update_kernel = tf.identity(self.layer.cell.recurrent_kernel)
            else:
                self.layer.kernel = kernel
                update_kernel = tf.identity(self.layer.kernel)
            with tf.control_dependencies([update_kernel]):
                return self.layer(inputs)

    def compute_output_shape(self, input_shape):
        return tf.TensorShape(self.layer.compute_output_shape(input_shape).as_list())

    def _initialize_weights(self, inputs):
        assign = self._data_dep_init(inputs) if self.data_init else self._init_norm()
        assign.append(self._initialized.assign(True))
        return assign

    def _init_norm(self):
        v_norm = tf.linalg.norm(tf.reshape(self.v, [-1, self.layer_depth]), axis=0)
        return [self.g.assign(tf.reshape(v_norm, (self.layer_depth,)))]

    def _data_dep_init(self, inputs):
        x_init = self._naked_clone_layer(inputs)
        m_init, v_init = tf.nn.moments(x_init, list(range(x_init.shape.rank - 1)))
        scale_init = 1.0 / tf.math.sqrt(v_init + 1e-10)
        if scale_init.shape[0] != self.g.shape[0]:
            scale_init = tf.tile(scale_init, [int(self.g.shape[0] / scale_init.shape[0])])
        g_tensor = self.g.assign(self.g * scale_init)
        if hasattr(self.layer, "bias") and self.layer.bias is not None:
            return [g_tensor, self.layer.bias.assign(-m_init * scale_init)]
        return [g_tensor]

    def get_config(self):
        return {**super().get_config(), "data_init": self.data_init}


# Class names as the libraries' files store them.
OBJECTS = {"Addons>GroupNormalization": GroupNormalization, "Addons>InstanceNormalization": TfaInstanceNormalization,
           "InstanceNormalization": InstanceNormalization, "FixedDropout": FixedDropout}
OBJECTS.update({"Addons>Maxout": Maxout, "Addons>SpectralNormalization": SpectralNormalization,
                "Addons>WeightNormalization": WeightNormalization})


def _names_a_class(h5: str, classes: object) -> bool:
    """Whether the file's model config names one of `classes` (the optional library is imported only then)."""
    from k2to3.formats.artifact import read_artifact
    from k2to3.upgrade.needed_code import walk_layers

    art = read_artifact(h5, weights_only_ok=True)
    return bool({lay.get("class_name") for lay in walk_layers(art.model_config or {})} & set(classes))


def qkeras_objects(h5: str) -> dict:
    """qkeras's own layers and quantizers (the reference is qkeras itself, not a transcription) when the file
    names a QKeras class; qkeras is optional and only imported then. Without it tf_keras cannot load the file and
    the reference falls back as for any missing code."""
    from k2to3.upgrade.qkeras import QUANTIZER_KEYS

    if not _names_a_class(h5, QUANTIZER_KEYS):
        return {}
    try:
        from qkeras.utils import _add_supported_quantized_objects
    except ImportError:
        return {}
    objects: dict = {}
    _add_supported_quantized_objects(objects)
    return objects


def larq_objects(h5: str) -> dict:
    """larq's own layers, quantizers and constraints (the reference is larq itself) when the file names a larq
    layer; larq is optional and only imported then (it builds on tf.keras, which is tf_keras in this worker)."""
    from k2to3.upgrade.larq import QUANTIZER_KEYS

    if not _names_a_class(h5, QUANTIZER_KEYS):
        return {}
    try:
        import larq
    except ImportError:
        return {}
    objects: dict = {}
    for module in (larq.layers, larq.quantizers, larq.constraints):
        objects.update({k: v for k, v in vars(module).items() if isinstance(v, type) or callable(v)})
    return objects


def tfmot_objects(h5: str) -> dict:
    """tensorflow-model-optimization's QAT layers, quantizers and QuantizeConfigs (its own quantize_scope) when
    the file names a QAT layer; tfmot is optional and only imported then."""
    from k2to3.upgrade.tfmot import CLASSES

    if not _names_a_class(h5, CLASSES):
        return {}
    try:
        from tensorflow_model_optimization.python.core.quantization.keras import quantize
    except ImportError:
        return {}
    objects: dict = {}
    for d in quantize.quantize_scope().custom_objects:  # the scope's dictionaries, not yet entered
        objects.update(d)
    return objects
