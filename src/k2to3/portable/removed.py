"""Layers Keras 3 removed whose Keras 2 weights must survive, in keras.ops (imported by k2to3.portable, which
registers them as k2to3>Name so safe_mode loads a converted file).

LocallyConnected1D/2D keep Keras 2's own kernel layout for each `implementation` mode, so the saved tensors are
restored unchanged (tf_keras/src/layers/locally_connected/):
  1: kernel (output positions, prod(kernel_size) * channels_in, filters); each output position multiplies its
     receptive field flattened as the input slice is laid out ((k..., c) channels_last, (c, k...) channels_first).
  2: a dense kernel (in spatial..., c_in, out spatial..., filters) channels_last, (c_in, in spatial..., filters,
     out spatial...) channels_first, masked by the connectivity of the receptive fields.
  3: the non-zero entries of the (output size, input size) matrix, in sorted (out index, in index) order.
The bias is (out spatial..., filters) in every mode; channels_first adds it reshaped (not transposed) to
(filters, out spatial...), as Keras 2's K.bias_add did.
"""

from __future__ import annotations

import itertools

import keras
import numpy as np
from keras import ops

from k2to3.portable.registry import register


def _output_length(length: int, kernel: int, padding: str, stride: int) -> int:
    """tf_keras conv_utils.conv_output_length (dilation 1)."""
    if padding == "valid":
        length = length - kernel + 1
    return (length + stride - 1) // stride


def _connected(in_shape, kernel, out_pos, strides, padding) -> list[range]:
    """tf_keras conv_utils.conv_connected_inputs: the input ranges one output position reads."""
    ranges = []
    for d in range(len(in_shape)):
        left = kernel[d] // 2
        center = out_pos[d] * strides[d] + (left if padding == "valid" else 0)
        ranges.append(range(max(0, center - left), min(in_shape[d], center + kernel[d] - left)))
    return ranges


def connectivity_mask(in_shape, kernel, strides, padding) -> np.ndarray:
    """tf_keras conv_utils.conv_kernel_mask: bool (in spatial..., out spatial...)."""
    out_shape = tuple(_output_length(n, k, padding, s) for n, k, s in zip(in_shape, kernel, strides))
    mask = np.zeros(tuple(in_shape) + out_shape, bool)
    for out_pos in itertools.product(*(range(n) for n in out_shape)):
        for in_pos in itertools.product(*_connected(in_shape, kernel, out_pos, strides, padding)):
            mask[in_pos + out_pos] = True
    return mask


class _LocallyConnected(keras.layers.Layer):
    rank = 0

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None, activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, implementation=1, **kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        def as_tuple(v) -> tuple[int, ...]:
            return (int(v),) * self.rank if isinstance(v, int) else tuple(int(x) for x in v)

        self.filters = int(filters)
        self.kernel_size, self.strides = as_tuple(kernel_size), as_tuple(strides)
        self.padding = str(padding).lower()
        self.data_format = data_format or keras.config.image_data_format()
        self.activation = keras.activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.implementation = int(implementation)
        if self.implementation not in (1, 2, 3):
            raise ValueError(f"Unrecognized implementation mode: {self.implementation}")
        if self.padding != "valid" and self.implementation == 1:
            raise ValueError(f"Invalid padding {padding!r}: implementation=1 supports only 'valid'")

    def _split(self, shape):
        if self.data_format == "channels_first":
            return tuple(shape[2:]), shape[1]
        return tuple(shape[1:-1]), shape[-1]

    def build(self, input_shape):
        in_spatial, c_in = self._split(input_shape)
        if None in in_spatial or c_in is None:
            raise ValueError(f"{self.name}: the spatial and channel sizes must be known, got {input_shape}")
        self.in_spatial, self.c_in = tuple(int(n) for n in in_spatial), int(c_in)
        self.out_spatial = tuple(_output_length(n, k, self.padding, s)
                                 for n, k, s in zip(self.in_spatial, self.kernel_size, self.strides))
        if min(self.out_spatial) <= 0:
            raise ValueError(f"{self.name}: input {input_shape} gives an empty output")
        first = self.data_format == "channels_first"
        n_out, f = int(np.prod(self.out_spatial)), self.filters
        mask = connectivity_mask(self.in_spatial, self.kernel_size, self.strides, self.padding)
        r = self.rank
        # The impl-2 mask layout: (1, in..., 1, out...) channels_first, (in..., 1, out..., 1) channels_last.
        mask2 = np.expand_dims(np.expand_dims(mask, r), -1) if not first else \
            np.expand_dims(np.expand_dims(mask, 0), -r - 1)
        if self.implementation == 1:
            shape = (n_out, int(np.prod(self.kernel_size)) * self.c_in, f)
            self._gather = self._patch_indices()
        elif self.implementation == 2:
            shape = ((self.c_in, *self.in_spatial, f, *self.out_spatial) if first
                     else (*self.in_spatial, self.c_in, *self.out_spatial, f))
            self._mask = mask2.astype("float32")
        else:
            full = np.broadcast_to(mask2, (self.c_in, *self.in_spatial, f, *self.out_spatial) if first
                                   else (*self.in_spatial, self.c_in, *self.out_spatial, f))
            dense = full.reshape(self.c_in * int(np.prod(self.in_spatial)), n_out * f).T  # (out size, in size)
            self._idxs = np.argwhere(dense).astype("int32")  # row-major: sorted (out, in) as tf_keras sorts them
            self._dense_shape = dense.shape
            shape = (len(self._idxs),)
        self.kernel = self.add_weight(name="kernel", shape=shape, initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = self.add_weight(name="bias", shape=(*self.out_spatial, f), initializer=self.bias_initializer,
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None

    def _patch_indices(self) -> np.ndarray:
        """(output positions, receptive field) indices into the flattened input, in backend.local_conv's order."""
        first = self.data_format == "channels_first"
        dims = (self.c_in, *self.in_spatial) if first else (*self.in_spatial, self.c_in)
        flat = np.arange(int(np.prod(dims))).reshape(dims)
        rows = []
        for pos in itertools.product(*(range(n) for n in self.out_spatial)):
            sl = tuple(slice(p * s, p * s + k) for p, s, k in zip(pos, self.strides, self.kernel_size))
            rows.append(flat[(slice(None), *sl) if first else (*sl, slice(None))].reshape(-1))
        return np.stack(rows).astype("int32")

    def call(self, inputs):
        first = self.data_format == "channels_first"
        x = ops.reshape(inputs, (-1, self.c_in * int(np.prod(self.in_spatial))))
        kernel = ops.cast(self.kernel, x.dtype)
        if self.implementation == 1:
            patches = ops.take(x, self._gather, axis=1)  # (batch, positions, field)
            out = ops.einsum("bpk,pkf->bpf", patches, kernel)
            out = ops.reshape(out, (-1, *self.out_spatial, self.filters))
            if first:
                out = ops.moveaxis(out, -1, 1)
        else:
            if self.implementation == 2:
                w = ops.reshape(kernel * ops.cast(self._mask, x.dtype), (x.shape[1], -1))
            else:
                w = ops.transpose(ops.scatter(self._idxs, kernel, self._dense_shape))
            out = ops.matmul(x, w)
            out = ops.reshape(out, (-1, self.filters, *self.out_spatial) if first
                              else (-1, *self.out_spatial, self.filters))
        if self.use_bias:
            bias = ops.cast(self.bias, out.dtype)
            # channels_first: K.bias_add reshapes (not transposes) the (out..., filters) bias to (filters, out...)
            out = out + ops.reshape(bias, (1, self.filters, *self.out_spatial) if first else (1, *bias.shape))
        return self.activation(out)

    def compute_output_shape(self, input_shape):
        in_spatial, _ = self._split(input_shape)
        out = tuple(None if n is None else _output_length(n, k, self.padding, s)
                    for n, k, s in zip(in_spatial, self.kernel_size, self.strides))
        if self.data_format == "channels_first":
            return (input_shape[0], self.filters, *out)
        return (input_shape[0], *out, self.filters)

    def get_config(self):
        ser = keras.saving.serialize_keras_object
        return {**super().get_config(), "filters": self.filters, "kernel_size": self.kernel_size,
                "strides": self.strides, "padding": self.padding, "data_format": self.data_format,
                "activation": keras.activations.serialize(self.activation), "use_bias": self.use_bias,
                "kernel_initializer": ser(self.kernel_initializer), "bias_initializer": ser(self.bias_initializer),
                "kernel_regularizer": ser(self.kernel_regularizer), "bias_regularizer": ser(self.bias_regularizer),
                "kernel_constraint": ser(self.kernel_constraint), "bias_constraint": ser(self.bias_constraint),
                "implementation": self.implementation}


@register
class LocallyConnected1D(_LocallyConnected):
    """Keras 2 LocallyConnected1D (removed in Keras 3): an unshared 1-D convolution, Keras 2's weight layout."""

    rank = 1


@register
class LocallyConnected2D(_LocallyConnected):
    """Keras 2 LocallyConnected2D (removed in Keras 3): an unshared 2-D convolution, Keras 2's weight layout."""

    rank = 2


@register
class Maxout(keras.layers.Layer):
    """tensorflow-addons `tfa.layers.Maxout` (tensorflow_addons/layers/maxout.py): the axis of size C is split
    into (C // num_units, num_units) and the maximum over the first taken."""

    def __init__(self, num_units: int, axis: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.num_units, self.axis = int(num_units), int(axis)

    def call(self, inputs):
        rank = len(inputs.shape)
        axis = self.axis % rank
        channels = inputs.shape[axis]
        if channels is None or channels % self.num_units:
            raise ValueError(f"{self.name}: {channels} channels are not a multiple of num_units={self.num_units}")
        shape = [-1 if d is None else d for d in inputs.shape]
        shape[axis:axis + 1] = [channels // self.num_units, self.num_units]
        return ops.max(ops.reshape(inputs, shape), axis=axis)

    def compute_output_shape(self, input_shape):
        shape = list(input_shape)
        shape[self.axis % len(shape)] = self.num_units
        return tuple(shape)

    def get_config(self):
        return {**super().get_config(), "num_units": self.num_units, "axis": self.axis}


@register
class WeightNormalization(keras.layers.Wrapper):
    """tensorflow-addons `tfa.layers.WeightNormalization` (tensorflow_addons/layers/wrappers.py): the wrapped
    layer runs with kernel = l2_normalize(v, all axes but the last) * g, v being its saved kernel (for an RNN,
    the recurrent kernel). Weights in tfa's saved order: g, the layer's own, the `initialized` flag, and with
    data_init=True the non-trainable clone tfa kept for its data-dependent initialisation (unused in inference).
    The normalized kernel is given to the layer through a keras.StatelessScope, so any wrapped layer works."""

    def __init__(self, layer, data_init: bool = True, **kwargs):
        super().__init__(layer, **kwargs)
        self.data_init = bool(data_init)
        self.is_rnn = isinstance(layer, keras.layers.RNN)

    def build(self, input_shape):
        if not self.layer.built:
            self.layer.build(input_shape)
        target = self.layer.cell if self.is_rnn else self.layer
        self.v = target.recurrent_kernel if self.is_rnn else target.kernel
        depth = int(self.v.shape[-1])
        self.g = self.add_weight(name="g", shape=(depth,), initializer="ones", trainable=True)
        self.initialized = self.add_weight(name="initialized", shape=(), initializer="zeros", dtype="bool",
                                           trainable=False)
        self.clone_weights = []
        if self.data_init:
            for w in self.layer.weights:
                self.clone_weights.append(self.add_weight(name=w.name, shape=w.shape, initializer="zeros",
                                                          dtype=w.dtype, trainable=False))
        self.built = True

    def call(self, inputs):
        axes = list(range(len(self.v.shape) - 1))
        v = ops.convert_to_tensor(self.v)
        kernel = v * ops.rsqrt(ops.maximum(ops.sum(ops.square(v), axis=axes, keepdims=True), 1e-12)) * self.g
        with keras.StatelessScope(state_mapping=[(self.v, kernel)]):
            return self.layer(inputs)

    def compute_output_shape(self, input_shape):
        return self.layer.compute_output_shape(input_shape)

    def get_config(self):
        return {**super().get_config(), "data_init": self.data_init}


@register
class MaxoutDense(keras.layers.Layer):
    """Keras 1 `MaxoutDense` (keras/layers/core.py, Keras 1.2; keras/legacy/layers.py in Keras 2.0-2.2):
    max over nb_feature dense maps, W (nb_feature, input_dim, output_dim), b (nb_feature, output_dim)."""

    def __init__(self, output_dim: int, nb_feature: int = 4, bias: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.output_dim, self.nb_feature, self.bias = int(output_dim), int(nb_feature), bool(bias)

    def build(self, input_shape):
        dim = int(input_shape[-1])
        self.W = self.add_weight(name="W", shape=(self.nb_feature, dim, self.output_dim))
        self.b = self.add_weight(name="b", shape=(self.nb_feature, self.output_dim), initializer="zeros") \
            if self.bias else None

    def call(self, x):
        out = ops.einsum("bi,fio->bfo", x, ops.cast(self.W, x.dtype))
        if self.bias:
            out = out + ops.cast(self.b, x.dtype)
        return ops.max(out, axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.output_dim)

    def get_config(self):
        return {**super().get_config(), "output_dim": self.output_dim, "nb_feature": self.nb_feature,
                "bias": self.bias}


@register
class Highway(keras.layers.Layer):
    """Keras 1 `Highway` (keras/layers/core.py, Keras 1.2; keras/legacy/layers.py in Keras 2.0-2.2):
    t = sigmoid(x W_carry + b_carry); y = activation(x W + b) * t + x * (1 - t). Weights W, W_carry, b, b_carry
    (add_weight order; the restore pairs Keras 1's `<layer>_W`, ... names by suffix)."""

    def __init__(self, activation="linear", transform_bias: float = -2.0, bias: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.activation = keras.activations.get(activation)
        self.transform_bias, self.bias = float(transform_bias), bool(bias)

    def build(self, input_shape):
        dim = int(input_shape[-1])
        self.W = self.add_weight(name="W", shape=(dim, dim))
        self.W_carry = self.add_weight(name="W_carry", shape=(dim, dim))
        if self.bias:
            self.b = self.add_weight(name="b", shape=(dim,), initializer="zeros")
            self.b_carry = self.add_weight(name="b_carry", shape=(dim,), initializer="ones")

    def call(self, x):
        y = ops.matmul(x, ops.cast(self.W_carry, x.dtype))
        act = ops.matmul(x, ops.cast(self.W, x.dtype))
        if self.bias:
            y, act = y + ops.cast(self.b_carry, x.dtype), act + ops.cast(self.b, x.dtype)
        t = ops.sigmoid(y)
        return self.activation(act) * t + (1.0 - t) * x

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "activation": keras.activations.serialize(self.activation),
                "transform_bias": self.transform_bias, "bias": self.bias}


@register
class Keras1Merge(keras.layers.Layer):
    """Keras 1 `Merge` in mode `dot` or `cos` (keras/engine/topology.py, Keras 1.2.2 Merge.call), for inputs of
    equal rank 2 or 3, where Keras 1's TensorFlow and Theano backends computed the same `K.batch_dot`:

    * dot: batch_dot(a, b, dot_axes): per sample, a tensordot over axis dot_axes[0] of a and dot_axes[1] of b;
      rank 2 gives (batch, 1);
    * cos: batch_dot(a, b) / max(sqrt(batch_dot(a, a) * batch_dot(b, b)), epsilon), every batch_dot over the same
      dot_axes. At rank 2 that is a cosine; at rank 3 the denominator is the elementwise product of two Gram
      matrices (NaN where it is negative), which is what Keras 1 computed.

    The output has Keras 1's declared shape (`get_output_shape_for`): a's shape less dot_axes[0], then b's less the
    batch axis and dot_axes[1]. (Keras 1's `cos` added a unit axis at position 1 at run time that its own shape
    inference did not list; the layers after it were built for the declared shape.) Any other rank raises when the
    layer is built: Keras 1's backends disagreed there (rules K2T489, K2T909)."""

    def __init__(self, mode: str = "dot", dot_axes=-1, epsilon: float = 1e-7, **kwargs):
        super().__init__(**kwargs)
        if mode not in ("dot", "cos"):
            raise ValueError(f"Keras1Merge mode must be 'dot' or 'cos', not {mode!r}")
        self.mode, self.epsilon = mode, float(epsilon)
        self.dot_axes = list(dot_axes) if isinstance(dot_axes, (list, tuple)) else int(dot_axes)
        self._axes: tuple[int, int] | None = None

    def _resolve(self, shapes) -> tuple[int, int]:
        r1, r2 = len(shapes[0]), len(shapes[1])
        d = self.dot_axes
        axes = [d % r1, d % r2] if isinstance(d, int) and d < 0 else [d, d] if isinstance(d, int) else list(d)
        where = f"Keras 1 Merge(mode={self.mode!r}, dot_axes={self.dot_axes!r}) on inputs of ranks {r1} and {r2}"
        if r1 != r2 or r1 not in (2, 3):
            raise ValueError(f"K2T909 {where}: Keras 1's TensorFlow and Theano backends computed it differently")
        if r1 == 2:
            if not all(a in (1, -1) for a in axes):
                raise ValueError(f"K2T909 {where}: contracts the batch axis")
            return 1, 1
        if not all(a in (1, 2) for a in axes):
            raise ValueError(f"K2T909 {where}: Keras 1's backends read these axes differently")
        if self.mode == "cos" and tuple(shapes[0]) != tuple(shapes[1]):
            raise ValueError(f"K2T909 {where}: Keras 1's cos takes inputs of one shape")
        return int(axes[0]), int(axes[1])

    def build(self, input_shape):
        self._axes = self._resolve(input_shape)

    def _batch_dot(self, x, y):
        assert self._axes is not None
        if len(x.shape) == 2:
            return ops.sum(x * y, axis=1, keepdims=True)
        if self._axes[0] == 1:  # contract x's axis 1: (b, d, n) @ ...
            x = ops.transpose(x, (0, 2, 1))
        if self._axes[1] == 2:  # contract y's axis 2: ... @ (b, d, m)
            y = ops.transpose(y, (0, 2, 1))
        return ops.matmul(x, y)

    def call(self, inputs):
        x, y = inputs
        if self._axes is None:
            self._axes = self._resolve([x.shape, y.shape])
        out = self._batch_dot(x, y)
        if self.mode == "dot":
            return out
        den = ops.sqrt(self._batch_dot(x, x) * self._batch_dot(y, y))
        return out / ops.maximum(den, ops.cast(self.epsilon, den.dtype))

    def compute_output_shape(self, input_shape):
        a0, a1 = self._resolve(input_shape)
        s1, s2 = list(input_shape[0]), list(input_shape[1])
        s1.pop(a0)
        s2.pop(a1)
        out = s1 + s2[1:]
        return tuple([*out, 1] if len(out) == 1 else out)

    def get_config(self):
        return {**super().get_config(), "mode": self.mode, "dot_axes": self.dot_axes, "epsilon": self.epsilon}
