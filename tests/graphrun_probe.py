"""Probe for tests/test_memory.py: in one backend's process (KERAS_BACKEND set by the test), Keras 3 functional
models run eagerly with Keras's own executor and with k2to3's freeing one; prints JSON: whether the outputs are
bit for bit equal per model, and the peak RSS of a forward pass that holds 24 activations of 32 MB each."""

from __future__ import annotations

import json
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
import keras

from k2to3.workers import memory
from k2to3.workers.graphrun import freeing_intermediates


def models() -> dict[str, tuple[keras.Model, list[np.ndarray]]]:
    rng = np.random.default_rng(0)
    keras.utils.set_random_seed(0)
    a = keras.Input((8,), name="a")
    b = keras.Input((8,), name="b")
    shared = keras.layers.Dense(8, activation="tanh", name="shared")
    inner_in = keras.Input((8,))
    inner = keras.Model(inner_in, keras.layers.Dense(8, name="inner_dense")(inner_in), name="inner")
    h1, h2 = shared(a), shared(b)  # one layer, two nodes
    s = keras.layers.Add()([h1, h1])  # one tensor consumed twice by one node
    t = inner(keras.layers.Concatenate()([s, h2])[:, :8])  # nested model, an op layer
    skip = keras.layers.Add()([t, a])  # an input used again at the end
    multi = keras.Model([a, b], {"y": keras.layers.Dense(3, name="y")(skip), "h2": h2})
    xs = [rng.standard_normal((4, 8)).astype("float32") for _ in range(2)]
    c = keras.Input((16, 16, 3))
    y = keras.layers.Conv2D(4, 3, padding="same")(c)
    z = keras.layers.BatchNormalization()(y)
    conv = keras.Model(c, keras.layers.GlobalAveragePooling2D()(keras.layers.Add()([y, z])))
    return {"multi": (multi, xs), "conv": (conv, [rng.standard_normal((2, 16, 16, 3)).astype("float32")])}


def run(model: keras.Model, xs: list[np.ndarray]) -> list[np.ndarray]:
    out = model(xs if len(xs) > 1 else xs[0], training=False)
    return [np.asarray(keras.ops.convert_to_numpy(o)) for o in keras.tree.flatten(out)]


def deep() -> tuple[keras.Model, np.ndarray]:
    x = inp = keras.Input((2048,))
    for _ in range(24):
        x = keras.layers.Dense(2048, use_bias=False, kernel_initializer="zeros")(x)
    return keras.Model(inp, x), np.ones((4096, 2048), "float32")  # 32 MB per activation


def peak(fn) -> float:
    memory.release_freed()
    base = memory.rss_bytes()
    memory.reset_peak()
    out = fn()
    grown = (memory.peak_rss_bytes() - base) / memory.MB
    del out
    memory.release_freed()
    return grown


def main() -> None:
    result: dict[str, object] = {}
    for name, (model, xs) in models().items():
        own = run(model, xs)
        with freeing_intermediates() as active:
            freed = run(model, xs)
        result[name] = {"active": active, "equal": len(own) == len(freed) and all(
            o.dtype == f.dtype and o.shape == f.shape and np.array_equal(o, f) for o, f in zip(own, freed))}
    model, x = deep()
    run(model, [x[:8]])  # warm-up: kernels, caches
    if keras.backend.backend() == "torch":
        import torch

        grad = torch.no_grad
    else:
        from contextlib import nullcontext as grad
    with grad():
        result["keras_peak_mb"] = peak(lambda: run(model, [x]))
        with freeing_intermediates():
            result["freeing_peak_mb"] = peak(lambda: run(model, [x]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
