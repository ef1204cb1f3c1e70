"""TensorFlow ops of TFOpLambda layers and tf.* calls with no single keras.ops equivalent, in keras.ops
(rules/ops.toml points their translations here), and the layers that keep a TF-only call or a dynamic shape in a
rebuilt graph."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from k2to3.portable import backend
from k2to3.portable.registry import PACKAGE, register
from k2to3.portable.tfmot import nudge, snap


def fake_quant_with_min_max_vars(inputs, min=-6.0, max=6.0, num_bits=8, narrow_range=False):
    """tf.quantization.fake_quant_with_min_max_vars in keras.ops (keras.ops has no fake-quant op).

    Follows TensorFlow's kernel (core/kernels/fake_quant_ops_functor.h, FakeQuantWithMinMaxVarsFunctor): nudge
    [min, max] so that 0 is exactly representable, clamp, then snap to the grid (tfmot.snap), all in float32. With
    Python numbers for min/max (Keras 2 Lambdas pass them through `arguments`) the nudge is computed in numpy
    float32, as TF computes it on the host."""
    import numpy as np

    quant_min = np.float32(1 if narrow_range else 0)
    quant_max = np.float32(2 ** int(num_bits) - 1)
    x = ops.convert_to_tensor(inputs, dtype="float32")
    if isinstance(min, (int, float)) and isinstance(max, (int, float)):
        lo, hi = np.float32(min), np.float32(max)
        scale = (hi - lo) / (quant_max - quant_min)
        inv_scale = (quant_max - quant_min) / (hi - lo)
        zero_from_min = quant_min - lo / scale
        if zero_from_min < quant_min:
            zero = quant_min
        elif zero_from_min > quant_max:
            zero = quant_max
        else:
            zero = np.float32(np.floor(np.abs(zero_from_min) + np.float32(0.5)) * np.sign(zero_from_min))  # std::round
        nudged_min = (quant_min - zero) * scale
        nudged_max = (quant_max - zero) * scale
        scale, nudged_min, nudged_max, inv_scale = (float(v) for v in (scale, nudged_min, nudged_max, inv_scale))
    else:
        nudged_min, nudged_max, scale, inv_scale = nudge(min, max, num_bits, narrow_range)
    clamped = ops.minimum(ops.maximum(x, nudged_min), nudged_max)
    return snap(ops.subtract(clamped, nudged_min), scale, inv_scale, nudged_min, per_channel=False)


def _fill_template(value, tensors, fill):
    """A call template with each {"__tensor__": i} replaced by tensors[i]; nested values go through `fill`, so a
    layer with markers of its own (ShapeOp) handles them at every depth."""
    if isinstance(value, dict) and set(value) == {"__tensor__"}:
        return tensors[value["__tensor__"]]
    if isinstance(value, list):
        return [fill(v, tensors) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, tensors) for k, v in value.items()}
    return value


@register
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
        return _fill_template(value, tensors, self._fill)

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


def norm(x, ord=None, axis=None, keepdims=False):
    """keras.ops.norm for a model graph: a reloaded Norm node keeps its axis as a list, which jax cannot hash
    (Keras 3.15), so the rebuilt graph spells the vector/Frobenius norm with sum/sqrt/abs/max nodes (TF computes
    tf.norm the same way: sqrt(reduce_sum(x * x)))."""
    if ord is None or ord == 2:  # 2 reaches here over one axis only (ops._norm_ord)
        return ops.sqrt(ops.sum(ops.square(x), axis=axis, keepdims=keepdims))
    if ord == 1:
        return ops.sum(ops.abs(x), axis=axis, keepdims=keepdims)
    if ord == float("inf"):
        return ops.max(ops.abs(x), axis=axis, keepdims=keepdims)
    if ord == float("-inf"):
        return ops.min(ops.abs(x), axis=axis, keepdims=keepdims)
    return ops.norm(x, ord=ord, axis=axis, keepdims=keepdims)


def one_hot(x, num_classes, axis=-1, dtype=None):
    """keras.ops.one_hot for a model graph with TF's semantics on every backend: an index outside
    [0, num_classes) is a row of zeros (torch's one_hot raises on one >= num_classes; negatives are zeros in
    Keras 3 on every backend)."""
    x = ops.where(ops.less(x, num_classes), x, -1)
    return ops.one_hot(x, num_classes, axis=axis, dtype=dtype)


def gather_nd(params, indices):
    """tf.gather_nd (batch_dims=0) in keras.ops, which has no gather_nd: the first K axes of params (K = the
    indices' last size) flattened row-major and indexed with the linear index. Needs K and params' axes 1..K-1
    and after K static (the leading axis may be symbolic)."""
    k = indices.shape[-1]
    if not isinstance(k, int):
        raise ValueError("gather_nd needs the indices' last dimension to be static")
    params = ops.convert_to_tensor(params)  # a constant table arrives as the nested list tf_keras stored
    shape = tuple(params.shape)
    idx = ops.cast(indices, "int32")
    linear = idx[..., k - 1]
    stride = 1
    for i in range(k - 2, -1, -1):
        stride *= shape[i + 1]
        linear = linear + idx[..., i] * stride
    return ops.take(ops.reshape(params, (-1, *shape[k:])), linear, axis=0)


def segment_sum(data, segment_ids, num_segments=None, sorted=False):
    """tf.math.segment_sum in keras.ops: TF computes the number of segments from the ids, jax needs it static, so
    constant ids (tf_keras stores them as a nested list) give num_segments = max(ids) + 1."""
    if num_segments is None and not (ops.is_tensor(segment_ids) or isinstance(segment_ids, keras.KerasTensor)):
        ids = keras.tree.flatten(segment_ids.tolist() if hasattr(segment_ids, "tolist") else segment_ids)
        num_segments = int(max(ids)) + 1 if ids else 0
        segment_ids = ops.convert_to_tensor(ids, "int32")
        sorted = False  # only a speed hint; keras' tensorflow backend refuses num_segments with sorted=True
    return ops.segment_sum(data, segment_ids, num_segments=num_segments, sorted=sorted)


def shape(x, out_type="int32"):
    """tf.shape: the shape as a 1-D int tensor (keras.ops.shape is a tuple, with the unknown dimensions as scalar
    tensors on tensorflow, ints on torch and jax)."""
    return shape_tensor(ops.shape(x), out_type)


def shape_tensor(dims, dtype="int32"):
    """A shape tuple (or one dimension) from keras.ops.shape -> an int tensor: the dimensions may be ints or,
    on tensorflow, scalar tensors."""
    if not isinstance(dims, (tuple, list)):
        return ops.cast(dims, dtype)
    return ops.stack([ops.cast(d, dtype) for d in dims]) if dims else ops.zeros((0,), dtype)


@register
class ShapeOp(keras.layers.Layer):
    """A TFOpLambda node that consumes tf.shape(x) of a dimension unknown when the model is built (the batch axis):
    tf.zeros(tf.shape(x)), tf.range(tf.shape(x)[0]), tf.scatter_nd(i, u, tf.shape(x)), ... `template` is the
    keras.ops call's [positional arguments, keyword arguments] with every tensor replaced by {"__tensor__": i} and
    every shape by {"__shape__": i, "index": [...]} (the shape of input i, indexed as the graph's slicing did:
    shape_index), and arithmetic on dimensions by {"__shape_op__": op, "args": [...]} (shape_arith). The shape is
    read in call() with keras.ops.shape, so jax and torch see ints and tensorflow the dynamic dimensions, and
    `function` (a keras.ops or k2to3.portable name) gets it as a shape."""

    def __init__(self, function: str, template: list, **kwargs):
        super().__init__(**kwargs)
        self.function = function
        self.call_template = template

    def _fill(self, value, tensors):
        if isinstance(value, dict) and set(value) == {"__shape__", "index"}:
            return shape_index(ops.shape(tensors[value["__shape__"]]), value["index"])
        if isinstance(value, dict) and set(value) == {"__shape_op__", "args"}:
            return shape_arith(value["__shape_op__"], *(self._fill(v, tensors) for v in value["args"]))
        return _fill_template(value, tensors, self._fill)

    def call(self, tensors):
        fn: Any = ops
        parts = self.function.split(".")
        if parts[0] == PACKAGE:  # k2to3.portable.NAME: a function of this module or of backend.py
            fn = globals()[parts[2]] if parts[2] in globals() else getattr(backend, parts[2])
            parts = parts[3:]
        for part in parts:
            fn = getattr(fn, part)
        args, kwargs = self._fill(self.call_template, list(tensors))
        return fn(*args, **kwargs)

    def compute_output_spec(self, tensors):
        # Keras 3 marks x * 2.0 sparse (a Python number counts as sparse in Multiply's spec); jax would then trace
        # call() with a BCOO array, which reshape rejects. The inputs of a converted graph are dense.
        return super().compute_output_spec([keras.KerasTensor(t.shape, t.dtype) for t in tensors])

    def get_config(self):
        return {**super().get_config(), "function": self.function, "template": self.call_template}


def shape_arith(op, a, b):
    """+, -, *, // of shape dimensions: ints, or on tensorflow scalar tensors (// floors in both, as TF's floordiv)."""
    if op == "add":
        return a + b
    if op == "subtract":
        return a - b
    if op == "multiply":
        return a * b
    if op == "floor_divide":
        return a // b
    raise ValueError(f"shape arithmetic {op!r} is not supported")


def shape_index(dims, index):
    """A shape tuple indexed as ShapeOp's template says: a list of steps applied in turn, each an int or a slice
    [start, stop, step] (the graph's SlicingOpLambda nodes on tf.shape)."""
    out = tuple(dims)
    for step in index:
        out = out[slice(*step)] if isinstance(step, list) else out[step]
    return out


def squared_difference(x1, x2):
    """tf.math.squared_difference in keras.ops (which has no such op): (x1 - x2) ** 2."""
    return ops.square(ops.subtract(x1, x2))


def psnr(a, b, max_val):
    """tf.image.psnr: one value per image (the mean squared error over the last three axes), where keras.ops.psnr
    gives one over the whole tensor."""
    a, b = ops.convert_to_tensor(a), ops.convert_to_tensor(b)
    mse = ops.mean(ops.square(ops.cast(a, "float32") - ops.cast(b, "float32")), axis=(-3, -2, -1))
    return 10.0 * ops.log(ops.square(ops.cast(max_val, "float32")) / mse) / ops.log(10.0)


def matrix_diag(diagonal):
    """tf.linalg.diag (k=0): a batch of diagonal matrices from a batch of diagonals, where keras.ops.diag (numpy's)
    returns the diagonal of a 2-D input."""
    diagonal = ops.convert_to_tensor(diagonal)
    n = diagonal.shape[-1]
    if not isinstance(n, int):
        raise ValueError("tf.linalg.diag needs the diagonal's last dimension to be static")
    return ops.expand_dims(diagonal, -1) * ops.eye(n, dtype=diagonal.dtype)


def bincount(arr, weights=None, minlength=0):
    """tf.math.bincount (axis=None): the values of an array of any rank counted together, where keras.ops.bincount
    counts each row of a 2-D one."""
    flat = ops.reshape(ops.convert_to_tensor(arr), (-1,))
    w = None if weights is None else ops.reshape(ops.convert_to_tensor(weights), (-1,))
    return ops.bincount(flat, weights=w, minlength=minlength)


def _complex(parts):
    real, imag = parts
    return ops.view_as_complex(ops.stack([real, imag], axis=-1))


def fft(x):
    """tf.signal.fft: a complex tensor's transform over its last axis, as one complex tensor (keras.ops.fft takes and
    returns (real, imaginary) pairs)."""
    x = ops.convert_to_tensor(x)
    return _complex(ops.fft((ops.real(x), ops.imag(x))))


def rfft(x, fft_length=None):
    """tf.signal.rfft: a real signal's transform over its last axis, as one complex tensor."""
    x = ops.convert_to_tensor(x)
    n = fft_length[0] if isinstance(fft_length, (list, tuple)) else fft_length
    return _complex(ops.rfft(x, fft_length=n))


def irfft(x, fft_length=None):
    """tf.signal.irfft: a complex spectrum back to a real signal (keras.ops.irfft takes a (real, imaginary) pair)."""
    x = ops.convert_to_tensor(x)
    n = fft_length[0] if isinstance(fft_length, (list, tuple)) else fft_length
    return ops.irfft((ops.real(x), ops.imag(x)), fft_length=n)


def stft(signals, frame_length, frame_step, fft_length=None):
    """tf.signal.stft with its default periodic Hann window and no padding, as one complex tensor: keras.ops.stft
    with window="hann", center=False gives its (real, imaginary) parts."""
    n = fft_length if fft_length is not None else 1 << (int(frame_length) - 1).bit_length()
    if int(n) != int(frame_length):  # keras.ops.stft frames by fft_length, TF by frame_length and then pads
        raise ValueError(f"tf.signal.stft with fft_length {n} != frame_length {frame_length} has no keras.ops form")
    return _complex(ops.stft(ops.convert_to_tensor(signals), frame_length, frame_step, n, window="hann",
                             center=False))


def normalize(tensor, ord="euclidean", axis=None):
    """tf.linalg.normalize: (tensor / norm, norm), the norm kept with its reduced axes (keras.ops.normalize returns
    the normalized tensor only)."""
    tensor = ops.convert_to_tensor(tensor)
    order = None if ord in ("euclidean", None) else ord
    if isinstance(axis, list):
        axis = tuple(axis)
    n = ops.norm(tensor, ord=order, axis=axis, keepdims=True)
    return tensor / n, n


def tf_slice(input_, begin, size):
    """tf.slice (and Keras 2.2's K.slice): a size of -1 runs to the end of that axis, which keras.ops.slice (sizes
    only) cannot say: it becomes the axis length minus the start."""
    x = ops.convert_to_tensor(input_)
    dims = ops.shape(x)
    sizes = [dims[i] - begin[i] if isinstance(s, int) and s == -1 else s for i, s in enumerate(size)]
    return ops.slice(x, begin, sizes)
