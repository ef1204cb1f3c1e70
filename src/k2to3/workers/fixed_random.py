"""Random draws replaced by one fixed pattern, the same on the Keras 2 side and on every Keras 3 backend, so a model
whose graph draws random numbers (a VAE's sampling layer) can be compared value by value.

Keras 3 draws from its own SeedGenerator stream, TensorFlow from its own: no seed makes the two streams agree. For
the length of one worker job (the parent's `fixed_random` switch, child._job_switches), every random function the
model's code can call (keras.random on Keras 3; tf.random, tf.nn.dropout and tf_keras.backend on Keras 2) returns
the pattern below instead of a draw: what is compared is the model's arithmetic around the draws (a wrong mean or
scale of the noise still shows), not the random stream itself (docs/verify.md "Random ops").

The pattern: u = sin(0.61803 * (i mod 997) + 0.5) over the flat index i, in [-1, 1]; normal and truncated normal
draws are mean + 1.3 * u * stddev, uniform ones minval + (maxval - minval) * (0.5 + 0.45 * u), dropout keeps the
elements where 0.5 + 0.5 * u >= rate (scaled by 1 / (1 - rate)), shuffle leaves the order as it is."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

PERIOD = 997
STEP = 0.61803
PHASE = 0.5


@contextlib.contextmanager
def patched(replacements: dict[Any, Any], prefixes: tuple[str, ...]) -> Iterator[None]:
    """Every module attribute under `prefixes` that is one of the original functions (keys) set to its replacement
    for the block, restored after it: a function is exported under several modules (tf.random.normal,
    tf.compat.v1.random_normal; tf_keras.backend and tf.keras.backend are different module objects)."""
    by_id = {id(k): (k, v) for k, v in replacements.items()}
    saved: list[tuple[Any, str, Any]] = []
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith(prefixes):
            continue
        for attr, value in list(getattr(mod, "__dict__", {}).items()):
            hit = by_id.get(id(value))
            if hit is not None and hit[0] is value:
                saved.append((mod, attr, value))
    try:
        for mod, attr, value in saved:
            setattr(mod, attr, by_id[id(value)][1])
        yield
    finally:
        for mod, attr, value in saved:
            setattr(mod, attr, value)


# -- Keras 3 ----------------------------------------------------------------------------------------------------
def keras3_fixed() -> contextlib.AbstractContextManager[None]:
    import keras

    ops = keras.ops

    def unit(shape: Any, dtype: Any) -> Any:
        dims = tuple(shape) if isinstance(shape, (tuple, list)) else tuple(ops.convert_to_numpy(shape).tolist())
        n: Any = 1
        for d in dims:
            n = n * d
        i = ops.mod(ops.arange(n, dtype="int32"), PERIOD)
        u = ops.sin(ops.cast(i, "float32") * STEP + PHASE)
        return ops.cast(ops.reshape(u, dims), dtype or keras.config.floatx())

    def normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = None, seed: Any = None) -> Any:
        return mean + 1.3 * unit(shape, dtype) * stddev

    def uniform(shape: Any, minval: Any = 0.0, maxval: Any = 1.0, dtype: Any = None, seed: Any = None) -> Any:
        return minval + (maxval - minval) * (0.5 + 0.45 * unit(shape, dtype))

    def dropout(inputs: Any, rate: Any, noise_shape: Any = None, seed: Any = None) -> Any:
        keep = ops.cast(0.5 + 0.5 * unit(noise_shape if noise_shape is not None else ops.shape(inputs), None)
                        >= rate, inputs.dtype)
        return inputs * keep / (1.0 - rate)

    def shuffle(x: Any, axis: int = 0, seed: Any = None) -> Any:
        return x

    r = keras.random
    return patched({r.normal: normal, r.truncated_normal: normal, r.uniform: uniform, r.dropout: dropout,
                    r.shuffle: shuffle}, ("keras",))


# -- Keras 2 (TensorFlow, tf_keras) -----------------------------------------------------------------------------
def tf_fixed() -> contextlib.AbstractContextManager[None]:
    import tensorflow as tf
    import tf_keras

    def unit(shape: Any, dtype: Any) -> Any:
        shape = tf.convert_to_tensor(shape, dtype="int32") if not isinstance(shape, tf.TensorShape) else shape
        n = tf.reduce_prod(shape)
        u = tf.sin(tf.cast(tf.math.floormod(tf.range(n, dtype="int32"), PERIOD), "float32") * STEP + PHASE)
        return tf.cast(tf.reshape(u, shape), dtype or "float32")

    def normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = None, seed: Any = None,
               name: Any = None) -> Any:
        return mean + 1.3 * unit(shape, dtype) * stddev

    def uniform(shape: Any, minval: Any = 0, maxval: Any = None, dtype: Any = None, seed: Any = None,
                name: Any = None) -> Any:
        maxval = 1.0 if maxval is None else maxval
        return minval + (maxval - minval) * (0.5 + 0.45 * unit(shape, dtype))

    def nn_dropout(x: Any, rate: Any, noise_shape: Any = None, seed: Any = None, name: Any = None) -> Any:
        x = tf.convert_to_tensor(x)
        keep = tf.cast(0.5 + 0.5 * unit(noise_shape if noise_shape is not None else tf.shape(x), None) >= rate,
                       x.dtype)
        return x * keep / (1.0 - rate)

    def k_dropout(x: Any, level: Any, noise_shape: Any = None, seed: Any = None) -> Any:
        return nn_dropout(x, level, noise_shape)

    def shuffle(value: Any, seed: Any = None, name: Any = None) -> Any:
        return value

    k = tf_keras.backend
    return patched({k.random_normal: normal, k.truncated_normal: normal, k.random_uniform: uniform,
                    k.dropout: k_dropout, tf.random.normal: normal, tf.random.truncated_normal: normal,
                    tf.random.uniform: uniform, tf.random.shuffle: shuffle, tf.nn.dropout: nn_dropout,
                    tf.compat.v1.random_normal: normal, tf.compat.v1.random_uniform: uniform,
                    tf.compat.v1.truncated_normal: normal}, ("tensorflow", "tf_keras"))


def fixed(backend: str) -> contextlib.ExitStack[Any]:
    """The patch for this worker: Keras 3's random functions, and in the tensorflow worker (which also computes the
    tf_keras reference) TensorFlow's and tf_keras's as well."""
    stack = contextlib.ExitStack()
    stack.enter_context(keras3_fixed())
    if backend == "tensorflow":
        stack.enter_context(tf_fixed())
    return stack
