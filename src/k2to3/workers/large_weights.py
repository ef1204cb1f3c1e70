"""Moving large weights without whole copies, inside a worker (backend code lives here, in the workers).

Keras 3 loads a variable as `v.assign(store[key])`: the store reads the dataset whole into a numpy array,
the backend makes a tensor from it, and the variable keeps its own buffer, so the largest variable is alive
two or three times over (one large Dense kernel can be most of a model's weights). Saving is the mirror image, and
tf_keras's HDF5 loader reads every array of the model before it assigns any. Inside these context managers a
dataset of SLICED_BYTES or more travels as a `Big` (the open dataset, not its values) and is written into the
variable slice by slice of its first axis:

  tensorflow  the tf.Variable's slices are assigned in place;
  torch       the parameter's slices are copied into in place;
  jax         arrays are immutable: the slices fill one 64-byte-aligned buffer, which the CPU client then
              adopts without a copy.

The values are the file's bytes either way (the tests compare weight hashes with the whole-array path). Any
other use of a `Big` (`np.asarray(big)`) reads it whole, as before: correct, only not lean.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import numpy as np

from k2to3.workers.chunked_arrays import SLICED_BYTES, Chunked, slices


class Big:
    """A dataset of an open HDF5 file, read only when it is assigned (by slices when is_big)."""

    def __init__(self, ds: Any):
        self.ds = ds
        self.shape = tuple(ds.shape)
        self.dtype = ds.dtype
        self.ndim = ds.ndim

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = np.asarray(self.ds[()])  # a scalar dataset reads as a numpy scalar, which __array__ must not return
        return a if dtype is None else a.astype(dtype, copy=False)

    def slices(self) -> Iterator[tuple[slice, np.ndarray]]:
        starts = slices(self.shape, self.dtype.itemsize)
        for i in starts:
            sl = slice(i, i + starts.step)
            yield sl, self.ds[sl]


def is_big(ds: Any) -> bool:
    return _deferrable(ds) and ds.ndim > 0 and ds.shape[0] > 1 and ds.nbytes >= SLICED_BYTES


def _deferrable(ds: Any) -> bool:
    import h5py

    # a bfloat16 dataset (attrs["dtype"]) is read by Keras's own path
    return isinstance(ds, h5py.Dataset) and ds.dtype.kind == "f" and "dtype" not in ds.attrs


def aligned_empty(shape: tuple[int, ...], dtype: Any, zeroed: bool = False) -> np.ndarray:
    """An array whose buffer starts on 64 bytes: jax's CPU client adopts such a buffer (device_put without a
    copy) and copies any other. Its pages are resident only once written (zeroed: calloc'd zero pages)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = (np.zeros if zeroed else np.empty)(n + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + n].view(dtype).reshape(shape)


def lazy_zeros(shape: tuple[int, ...], dtype: Any) -> Any:
    """A zero tensor of the running backend that costs no resident memory until written where the backend
    allows it: torch shares calloc'd numpy pages, jax adopts them; tensorflow has its own buffer (one copy)."""
    import keras

    backend = keras.backend.backend()
    if backend in ("torch", "jax") and _kind(dtype) not in "fiub":  # bfloat16: torch.from_numpy refuses it
        return keras.ops.zeros(shape, dtype)
    if backend == "torch":
        import torch

        return torch.from_numpy(aligned_empty(shape, dtype, zeroed=True))
    if backend == "jax":
        import jax

        return jax.device_put(aligned_empty(shape, dtype, zeroed=True))
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.zeros(shape, dtype)
    return np.zeros(shape, dtype)


def host_ones(shape: tuple[int, ...], dtype: Any) -> Any:
    """A tensor of ones of the running backend made from a host array: on jax, jnp.ones compiles a program per
    shape; elsewhere keras.ops.ones."""
    import keras

    if keras.backend.backend() == "jax" and _kind(dtype) in "fiub":
        import jax

        return jax.device_put(np.ones(shape, dtype))
    return keras.ops.ones(shape, dtype)


def _kind(dtype: Any) -> str:
    try:
        return np.dtype(dtype).kind
    except TypeError:
        return "?"


def _fill_keras3(var: Any, big: Big) -> bool:
    """Write `big` into a Keras 3 variable of the running backend; False when its shape or dtype differs
    (the caller then takes Keras's own path)."""
    import keras
    from keras.src.backend.common.stateless_scope import in_stateless_scope

    dtype = np.dtype(keras.backend.standardize_dtype(var.dtype))
    if big.shape != tuple(var.shape) or big.dtype != dtype or in_stateless_scope():
        return False
    backend = keras.backend.backend()
    if backend == "tensorflow":
        tf_fill(var._value, big.slices())  # the tf.Variable itself (var.value may be an autocast copy)
    elif backend == "torch":
        import torch

        with torch.no_grad():
            target = var.value
            for sl, chunk in big.slices():
                target[sl].copy_(torch.from_numpy(chunk))
    elif backend == "jax":
        import jax

        buf = aligned_empty(big.shape, dtype)
        for sl, chunk in big.slices():
            buf[sl] = chunk
        var._direct_assign(jax.device_put(buf))  # adopted, not copied: the buffer is aligned
    else:
        return False
    return True


@contextmanager
def keras3_loading() -> Iterator[None]:
    """keras.saving.load_model with large datasets assigned by slices (see the module docstring)."""
    import keras
    from keras.src.saving import saving_lib

    store_get = saving_lib.H5IOStore.__getitem__
    var_cls = keras.src.backend.Variable
    assign = var_cls.assign

    def getitem(self: Any, key: str) -> Any:
        ds = saving_lib.safe_get_h5_dataset(self._h5_entry_group, key)  # Keras's own safety checks first
        return Big(ds) if is_big(ds) else store_get(self, key)

    def lean_assign(self: Any, value: Any) -> Any:
        if isinstance(value, Big):
            if _fill_keras3(self, value):
                return self.value
            value = np.asarray(value)
        return assign(self, value)

    with ExitStack() as stack:
        stack.enter_context(_patched(saving_lib.H5IOStore, "__getitem__", getitem))
        stack.enter_context(_patched(var_cls, "assign", lean_assign))
        yield


@contextmanager
def keras3_saving() -> Iterator[None]:
    """model.save with a large variable written into its dataset slice by slice (one numpy copy of the whole
    variable otherwise). The dataset is created as Keras creates it (contiguous, uncompressed)."""
    import keras
    from keras.src.saving import saving_lib

    store_set = saving_lib.H5IOStore.__setitem__

    def setitem(self: Any, key: str, value: Any) -> None:
        if not _big_variable(keras, value) or self.mode != "w":
            return store_set(self, key, value)
        if not self._h5_entry_initialized:
            self._create_h5_group(self._h5_entry_path)
        dtype = np.dtype(keras.backend.standardize_dtype(value.dtype))
        ds = self._h5_entry_group.create_dataset(key, shape=tuple(value.shape), dtype=dtype)
        for sl, chunk in variable_slices(keras, value):
            ds[sl] = chunk

    with _patched(saving_lib.H5IOStore, "__setitem__", setitem):
        yield


def _big_variable(keras: Any, v: Any) -> bool:
    if not isinstance(v, keras.Variable) or len(v.shape) == 0 or int(v.shape[0]) < 2:
        return False
    dtype = np.dtype(keras.backend.standardize_dtype(v.dtype)) if v.dtype != "bfloat16" else None
    return dtype is not None and dtype.kind == "f" and int(np.prod(v.shape)) * dtype.itemsize >= SLICED_BYTES


def variable_slices(keras: Any, v: Any) -> Iterator[tuple[slice, np.ndarray]]:
    """(rows, numpy copy of those rows) of a Keras 3 variable, SLICE_BYTES at a time."""
    shape = tuple(int(d) for d in v.shape)
    starts = slices(shape, np.dtype(keras.backend.standardize_dtype(v.dtype)).itemsize)
    value = v.value
    for i in starts:
        yield slice(i, i + starts.step), np.asarray(keras.ops.convert_to_numpy(value[i:i + starts.step]))


def hashable(keras: Any, v: Any) -> Any:
    """What weights.weight_hash takes for a Keras 3 variable: the array, or its slices when it is large (the
    same bytes in the same order, so the same hash)."""
    if _big_variable(keras, v):
        return Chunked(tuple(int(d) for d in v.shape), (c for _, c in variable_slices(keras, v)))
    return np.asarray(keras.ops.convert_to_numpy(v))


@contextmanager
def tf_keras_loading() -> Iterator[None]:
    """tf_keras's HDF5 weight loader with every float dataset kept in the file until its variable is assigned
    (tf_keras reads all the model's arrays before it assigns the first: one more copy of the weights at the
    peak), the large ones then assigned by slices."""
    from tf_keras.src import backend as k2_backend
    from tf_keras.src.saving.legacy import hdf5_format

    batch_set = k2_backend.batch_set_value
    preprocess = hdf5_format.preprocess_weights_for_loading

    def lean_subset(f: Any) -> list[Any]:
        names = hdf5_format.load_attributes_from_hdf5_group(f, "weight_names")
        return [Big(f[n]) if _deferrable(f[n]) else np.asarray(f[n]) for n in names]

    def lean_preprocess(layer: Any, weights: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        # Most layers pass through unchanged; a conversion (Keras 1, cuDNN) that does more with an array than
        # numpy functions (which read a Big through __array__) fails on a Big and gets the arrays instead.
        try:
            return preprocess(layer, weights, *args, **kwargs)
        except Exception:
            return preprocess(layer, [np.asarray(w) if isinstance(w, Big) else w for w in weights], *args, **kwargs)

    def lean_batch_set(tuples: Any) -> None:
        for x, value in tuples:  # one array read at a time, and dropped once assigned
            if isinstance(value, Big):
                if is_big(value.ds) and _fill_tf_variable(x, value):
                    continue
                value = np.asarray(value)
            batch_set([(x, value)])

    def zeros(self: Any, shape: Any, a: Any = 0.0, b: Any = 1.0, dtype: Any = None, nonce: Any = None) -> Any:
        import tensorflow as tf

        return tf.zeros(shape, dtype=dtype or k2_backend.floatx())

    with ExitStack() as stack:
        # Random initial values are drawn and then overwritten by the file's: extra copies of the weights at the
        # peak. Zeros instead; the loader fails on any layer whose weights the file does not have, so none of them
        # survives into the golden model.
        for name in ("random_uniform", "random_normal", "truncated_normal"):
            stack.enter_context(_patched(k2_backend.RandomGenerator, name, zeros))
        stack.enter_context(_patched(hdf5_format, "load_subset_weights_from_hdf5_group", lean_subset))
        stack.enter_context(_patched(hdf5_format, "preprocess_weights_for_loading", lean_preprocess))
        stack.enter_context(_patched(k2_backend, "batch_set_value", lean_batch_set))
        yield


def _fill_tf_variable(x: Any, big: Big) -> bool:
    import tensorflow as tf

    if not tf.executing_eagerly() or tuple(x.shape) != big.shape or np.dtype(x.dtype.as_numpy_dtype) != big.dtype:
        return False
    tf_fill(x, big.slices())
    return True


def tf_fill(variable: Any, slices: Iterator[tuple[slice, np.ndarray]]) -> None:
    """variable[rows] = chunk for each (rows, chunk), in place, into a tf.Variable. Not `variable[a:b].assign`:
    that reads the variable first, and the read tensor shares its buffer, so each update copies all of it
    (copy-on-write). A strided assign also turns on the variable's copy-on-read mode, in which every later
    read (each predict) copies the whole variable; turned off again once it is filled. On a large kernel each
    costs about another copy of it, and slows the fill."""
    import tensorflow as tf

    rest = [int(d) for d in variable.shape[1:]]
    for rows, chunk in slices:
        tf.raw_ops.ResourceStridedSliceAssign(
            ref=variable.handle, begin=[rows.start, *[0] * len(rest)], end=[rows.start + len(chunk), *rest],
            strides=[1] * (1 + len(rest)), value=chunk)
    tf.raw_ops.DisableCopyOnRead(resource=variable.handle)


@contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    had = name in vars(owner)
    saved = vars(owner).get(name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if had:
            setattr(owner, name, saved)
        else:
            delattr(owner, name)
