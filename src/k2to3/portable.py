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


@keras.saving.register_keras_serializable(package=PACKAGE)
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
        fn = ops
        parts = self.function.split(".")
        if parts[0] == PACKAGE:
            import k2to3.portable as fn

            parts = parts[2:]
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
# --- Keras 2 keras.backend (K.*) functions with no single keras.ops call, in keras.ops with Keras 2's semantics
# (tf_keras/src/backend.py). rules/ops.toml points K.<name> here; `k2to3 fix` and `convert --src` then write
# `k2to3.portable.<name>(...)`, so the rewritten code needs k2to3 installed at run time.

def _data_format(data_format):
    data_format = keras.config.image_data_format() if data_format is None else data_format
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(f"Unknown data_format: {data_format}")
    return data_format


def _is_tensor(x) -> bool:
    return ops.is_tensor(x) or isinstance(x, (keras.Variable, keras.KerasTensor))


def int_shape(x):
    """K.int_shape: the static shape as a tuple of ints (None where unknown)."""
    return tuple(None if d is None else int(d) for d in x.shape)


def count_params(x):
    """K.count_params: the number of elements of a tensor with a fully static shape."""
    import numpy as np

    return int(np.prod(int_shape(x)))


def dtype(x):
    """K.dtype: the dtype's name ("float32")."""
    return keras.backend.standardize_dtype(x.dtype)


def cast_to_floatx(x):
    """K.cast_to_floatx: a tensor is cast to floatx; anything else becomes a numpy array of floatx (a numpy scalar
    for a number)."""
    if _is_tensor(x):
        return ops.cast(x, keras.config.floatx())
    import numpy as np

    out = np.asarray(x, dtype=keras.config.floatx())
    return out[()] if out.ndim == 0 else out  # a numpy scalar: a torch tensor divides by it, not by a 0-d array


def constant(value, dtype=None, shape=None, name=None):
    """K.constant (tf.constant with floatx by default): with `shape`, a scalar is filled in and a value with as
    many elements is reshaped."""
    import numpy as np

    x = ops.convert_to_tensor(value, dtype=dtype or keras.config.floatx())
    if shape is None:
        return x
    shape = tuple(int(d) for d in shape)
    size = int(np.prod(int_shape(x)))
    if size == int(np.prod(shape)):
        return ops.reshape(x, shape)
    if size == 1:
        return ops.broadcast_to(ops.reshape(x, ()), shape)
    raise ValueError(f"constant: {size} values do not fill shape {shape}")


def arange(start, stop=None, step=1, dtype="int32"):
    """K.arange: like numpy (a negative `start` alone gives an empty range), int32 unless `dtype` says."""
    if stop is None:
        start, stop = 0, max(start, 0)
    return ops.cast(ops.arange(start, stop, step), dtype)


def eye(size, dtype=None, name=None):
    """K.eye: an identity matrix of floatx; `size` an int or (rows, columns)."""
    rows, cols = (size, None) if isinstance(size, int) else tuple(size)
    return ops.eye(rows, cols, dtype=dtype or keras.config.floatx())


def batch_dot(x, y, axes=None):
    """K.batch_dot: per-sample dot product over axes[0] of x and axes[1] of y (axis 0 is the batch). axes=None is
    (x's last, y's last for a 2-D y else its second-to-last); an int is used for both. The result has x's other
    axes then y's; a 2-D input's added axis is removed again, so two 2-D inputs give (batch, 1)."""
    x_ndim, y_ndim = len(x.shape), len(y.shape)
    if x_ndim < 2 or y_ndim < 2:
        raise ValueError(f"batch_dot needs inputs of rank >= 2, got shapes {x.shape} and {y.shape}")
    if isinstance(axes, int):
        axes = [axes, axes]
    if axes is None:
        axes = [x_ndim - 1, y_ndim - 1 if y_ndim == 2 else y_ndim - 2]
    if any(isinstance(a, (list, tuple)) for a in axes):
        raise ValueError(f"batch_dot: multiple target dimensions are not supported, got axes={axes}")
    a0, a1 = (a + n if a < 0 else a for a, n in zip(axes, (x_ndim, y_ndim)))
    if 0 in (a0, a1):
        raise ValueError("batch_dot cannot contract axis 0 (the batch)")
    if x_ndim == 2:
        x, a0 = ops.expand_dims(x, 1), a0 + 1
    if y_ndim == 2:
        y = ops.expand_dims(y, 2)
    x = ops.moveaxis(x, a0, -1)  # (batch, x's other axes..., k)
    y = ops.moveaxis(y, a1, 1)  # (batch, k, y's other axes...)
    x_mid, y_trail = tuple(x.shape[1:-1]), tuple(y.shape[2:])
    k = x.shape[-1] if x.shape[-1] is not None else y.shape[1]
    if None not in (*x_mid, *y_trail, k):  # static sizes (a symbolic batch, as when Keras 3 builds, is -1)
        import numpy as np

        x3 = ops.reshape(x, (-1, int(np.prod(x_mid)), k))
        y3 = ops.reshape(y, (-1, k, int(np.prod(y_trail))))
        return _batch_dot_squeeze(ops.reshape(ops.matmul(x3, y3), (-1, *x_mid, *y_trail)), x_ndim, y_ndim)
    xs, ys = ops.shape(x), ops.shape(y)  # symbolic sizes: read them at run time
    x_mid, y_trail, batch = tuple(xs[1:-1]), tuple(ys[2:]), xs[0]
    x3 = ops.reshape(x, (batch, -1, xs[-1]))
    y3 = ops.reshape(y, (batch, ys[1], -1))
    return _batch_dot_squeeze(ops.reshape(ops.matmul(x3, y3), (batch, *x_mid, *y_trail)), x_ndim, y_ndim)


def _batch_dot_squeeze(result, x_ndim, y_ndim):
    if x_ndim == 2:
        return ops.squeeze(result, 1)
    if y_ndim == 2:
        return ops.squeeze(result, -1)
    return result


def bias_add(x, bias, data_format=None):
    """K.bias_add: a 1-D bias is added along the channel axis (axis 1 for channels_first, the last otherwise);
    a bias of rank ndim(x) - 1 holds (spatial..., channels) and is moved to match. data_format=None reads
    keras.config.image_data_format(), as K read its own global."""
    data_format = _data_format(data_format)
    rank, bias_shape = len(x.shape), tuple(bias.shape)
    if len(bias_shape) not in (1, rank - 1):
        raise ValueError(f"Unexpected bias dimensions {len(bias_shape)}, expect to be 1 or {rank - 1} dimensions")
    if len(bias_shape) == 1:
        if data_format == "channels_first" and rank > 2:
            return ops.add(x, ops.reshape(bias, (1, bias_shape[0]) + (1,) * (rank - 2)))
        return ops.add(x, bias)
    if data_format == "channels_first" and rank in (3, 4, 5):
        return ops.add(x, ops.reshape(bias, (1, bias_shape[-1], *bias_shape[:-1])))
    return ops.add(x, ops.reshape(bias, (1, *bias_shape)))


def switch(condition, then_expression, else_expression):
    """K.switch: a scalar condition picks one branch (callables are called only then); a condition of rank
    >= 2 is padded with size-1 axes on the right and tiled to the branches' shape; rank 1 broadcasts as
    tf.where does (from the right)."""
    condition = ops.cast(condition, "bool")
    if len(condition.shape) == 0:
        then_fn = then_expression if callable(then_expression) else (lambda: then_expression)
        else_fn = else_expression if callable(else_expression) else (lambda: else_expression)
        return ops.cond(condition, then_fn, else_fn)
    then_expression = then_expression() if callable(then_expression) else then_expression
    else_expression = else_expression() if callable(else_expression) else else_expression
    cond_ndim, expr_ndim = len(condition.shape), len(then_expression.shape)
    if cond_ndim > expr_ndim:
        raise ValueError(f"switch: the condition's rank {cond_ndim} exceeds the branches' rank {expr_ndim}")
    if cond_ndim > 1:
        condition = ops.reshape(condition, tuple(ops.shape(condition)) + (1,) * (expr_ndim - cond_ndim))
        condition = ops.broadcast_to(condition, ops.shape(then_expression))
    return ops.where(condition, then_expression, else_expression)


def temporal_padding(x, padding=(1, 1)):
    """K.temporal_padding: zero-pads axis 1 of a 3-D tensor."""
    return ops.pad(x, [[0, 0], list(padding), [0, 0]])


def spatial_2d_padding(x, padding=((1, 1), (1, 1)), data_format=None):
    """K.spatial_2d_padding: zero-pads the two spatial axes of a 4-D tensor."""
    pads = [list(p) for p in padding]
    if _data_format(data_format) == "channels_first":
        return ops.pad(x, [[0, 0], [0, 0], *pads])
    return ops.pad(x, [[0, 0], *pads, [0, 0]])


def spatial_3d_padding(x, padding=((1, 1), (1, 1), (1, 1)), data_format=None):
    """K.spatial_3d_padding: zero-pads the three spatial axes of a 5-D tensor."""
    pads = [list(p) for p in padding]
    if _data_format(data_format) == "channels_first":
        return ops.pad(x, [[0, 0], [0, 0], *pads])
    return ops.pad(x, [[0, 0], *pads, [0, 0]])


def batch_flatten(x):
    """K.batch_flatten: (batch, ...) -> (batch, prod(...))."""
    rest = x.shape[1:]
    if None in rest:
        return ops.reshape(x, (ops.shape(x)[0], -1))
    import numpy as np

    return ops.reshape(x, (-1, int(np.prod(rest))))


def repeat(x, n):
    """K.repeat: (batch, dim) -> (batch, n, dim)."""
    if len(x.shape) != 2:
        raise ValueError(f"repeat needs a 2-D input, got shape {x.shape}")
    return ops.tile(ops.expand_dims(x, 1), [1, n, 1])


def resize_images(x, height_factor, width_factor, data_format, interpolation="nearest"):
    """K.resize_images: scales the spatial axes by integer factors. "nearest" repeats rows and columns (what
    TF's nearest resize does for integer factors); other methods go through keras.ops.image.resize."""
    rows = {"channels_first": 2, "channels_last": 1}.get(data_format)
    if rows is None:
        raise ValueError(f"Invalid `data_format` argument: {data_format}")
    if interpolation == "nearest":
        return ops.repeat(ops.repeat(x, height_factor, axis=rows), width_factor, axis=rows + 1)
    size = (int(x.shape[rows]) * height_factor, int(x.shape[rows + 1]) * width_factor)
    return ops.image.resize(x, size, interpolation=interpolation, antialias=False, data_format=data_format)


def resize_volumes(x, depth_factor, height_factor, width_factor, data_format):
    """K.resize_volumes: repeats the three spatial axes by integer factors."""
    first = {"channels_first": 2, "channels_last": 1}.get(data_format)
    if first is None:
        raise ValueError(f"Invalid data_format: {data_format}")
    for axis, factor in zip(range(first, first + 3), (depth_factor, height_factor, width_factor)):
        x = ops.repeat(x, factor, axis=axis)
    return x


def conv1d(x, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """K.conv1d: keras.ops.conv, with "causal" padding as K did it (left-pad dilation * (width - 1), valid)."""
    if padding == "causal":
        left = int(dilation_rate) * (int(kernel.shape[0]) - 1)
        pads = [[0, 0], [left, 0], [0, 0]] if _data_format(data_format) == "channels_last" else \
            [[0, 0], [0, 0], [left, 0]]
        x, padding = ops.pad(x, pads), "valid"
    return ops.conv(x, kernel, strides, padding, _data_format(data_format), dilation_rate)


def _pool(x, pool_size, strides, padding, data_format, pool_mode):
    if pool_mode not in ("max", "avg"):
        raise ValueError(f"Invalid pool_mode: {pool_mode}")
    pool = ops.max_pool if pool_mode == "max" else ops.average_pool
    return pool(x, tuple(pool_size), tuple(strides), padding, _data_format(data_format))


def pool2d(x, pool_size, strides=(1, 1), padding="valid", data_format=None, pool_mode="max"):
    """K.pool2d: keras.ops.max_pool / average_pool by pool_mode ("max" | "avg")."""
    return _pool(x, pool_size, strides, padding, data_format, pool_mode)


def pool3d(x, pool_size, strides=(1, 1, 1), padding="valid", data_format=None, pool_mode="max"):
    """K.pool3d: keras.ops.max_pool / average_pool by pool_mode ("max" | "avg")."""
    return _pool(x, pool_size, strides, padding, data_format, pool_mode)


def ctc_batch_cost(y_true, y_pred, input_length, label_length):
    """K.ctc_batch_cost: per-sample CTC loss, shape (batch, 1). y_pred holds softmax outputs (batch, time,
    classes) with the blank as the last class; K passed log(y_pred + epsilon) to TF as logits, and so does this
    (keras.ops.ctc_loss log-softmaxes its `output`)."""
    classes = int(y_pred.shape[-1])
    logits = ops.log(ops.add(ops.convert_to_tensor(y_pred), keras.config.epsilon()))
    loss = ops.ctc_loss(ops.cast(y_true, "int32"), logits,
                        ops.cast(ops.reshape(label_length, (-1,)), "int32"),
                        ops.cast(ops.reshape(input_length, (-1,)), "int32"), mask_index=classes - 1)
    return ops.expand_dims(loss, 1)


def in_top_k(predictions, targets, k):
    """K.in_top_k(predictions, targets, k) with Keras 2's argument order (keras.ops.in_top_k takes targets first)."""
    return ops.in_top_k(targets, predictions, k)


# Layers Keras 3 removed (LocallyConnected1D/2D) and library layers with no Keras 3 class (tfa Maxout): importing
# k2to3.portable registers them too.
from k2to3.optimizer.keras2_adagrad import Keras2Adagrad  # noqa: E402,F401  Keras 2's Adagrad update (K2T610)
from k2to3.optimizer.keras2_rmsprop import Keras2RMSprop  # noqa: E402,F401  optimizer with Keras 2's update (K2T-OPT)
from k2to3.portable_removed import (  # noqa: E402,F401
    Highway,
    LocallyConnected1D,
    LocallyConnected2D,
    Maxout,
    MaxoutDense,
    WeightNormalization,
)
