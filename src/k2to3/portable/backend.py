"""Keras 2 keras.backend (K.*) functions with no single keras.ops call, in keras.ops with Keras 2's semantics
(tf_keras/src/backend.py). rules/ops.toml points K.<name> here; `k2to3 fix` and `convert --src` then write
`k2to3.portable.<name>(...)`, so the rewritten code needs k2to3 installed at run time."""

from __future__ import annotations

import keras
from keras import ops


def _data_format(data_format):
    data_format = keras.config.image_data_format() if data_format is None else data_format
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(f"Unknown data_format: {data_format}")
    return data_format


def _is_tensor(x) -> bool:
    return ops.is_tensor(x) or isinstance(x, (keras.Variable, keras.KerasTensor))


def int_shape(x):
    """K.int_shape: the static shape as a tuple of ints (None where unknown)."""
    return tuple(_static_size(d) for d in x.shape)


def _static_size(d):
    if d is None:
        return None
    try:
        return int(d)
    except Exception:  # jax's symbolic batch dimension while Keras infers an output shape: unknown, as K's None
        return None


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


def in_train_phase(x, alt, training=None):
    """K.in_train_phase: `x` in training, `alt` otherwise, each called first when callable. Keras 3 calls a layer
    with training=None outside fit (Keras 2 read its learning phase there): None is inference. A tensor flag selects
    with keras.ops.cond."""
    pick = [x, alt]
    if training is None or isinstance(training, (bool, int)):
        chosen = pick[0] if training else pick[1]
        return chosen() if callable(chosen) else chosen
    return ops.cond(training, lambda: x() if callable(x) else x, lambda: alt() if callable(alt) else alt)


def in_test_phase(x, alt, training=None):
    """K.in_test_phase: `x` at inference, `alt` in training."""
    return in_train_phase(alt, x, training=training)


def rnn(step_function, inputs, initial_states, go_backwards=False, mask=None, constants=None, unroll=False,
        input_length=None, time_major=False, zero_output_for_mask=False, return_all_outputs=True):
    """K.rnn: Keras 3's own loop over time (the one its RNN layers run, with K.rnn's arguments and results)."""
    from keras.src import backend as keras_backend

    if constants:  # K.rnn passed them after the states, on every backend; Keras 3's jax and torch loops do not
        inner, extra = step_function, list(constants)

        def step_function(x, states):
            return inner(x, [*states, *extra])

        constants = None
    return keras_backend.rnn(step_function, inputs, initial_states, go_backwards=go_backwards, mask=mask,
                             constants=constants, unroll=unroll, input_length=input_length, time_major=time_major,
                             zero_output_for_mask=zero_output_for_mask, return_all_outputs=return_all_outputs)


def keras2_backend():
    """K.backend() in a module k2to3 generates: "tensorflow", the backend the Keras 2 model ran on, so code that
    branches on it (`if K.backend() == "tensorflow": ...`) takes the branch k2to3 rewrote to keras.ops on every
    backend."""
    return "tensorflow"


def shape_list(shape):
    """TensorShape.as_list() where Keras 3 gives a tuple (a layer's build input_shape, compute_output_shape's
    result): the list of sizes either way."""
    return list(shape) if isinstance(shape, (tuple, list)) else shape.as_list()


def model_io(obj, which):
    """Keras 2's `model.input` / `model.output` ("input" or "output"): Keras 3 gives a Sequential built from its
    first layer's input_shape= `inputs` / `outputs` but no `input` / `output` until it is called; one tensor for
    one, a list for several, as Keras 2 did."""
    try:
        return getattr(obj, which)
    except AttributeError:
        many = getattr(obj, which + "s", None)
        if not many:
            raise
        return many[0] if len(many) == 1 else list(many)
