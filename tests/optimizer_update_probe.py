"""Differential probe (run as a subprocess by tests/test_optimizer.py): the same variable, the same
gradients (dense, and for the *_sparse cases as repeated rows of a tf.IndexedSlices, an Embedding's gradient), the same
hyper-parameters, 3 `apply` steps from a fresh optimizer, by Keras 2 (tf_keras optimizer_v2
`legacy.*` and tf_keras >= 2.11 optimizers) and by Keras 3 (TensorFlow backend). Prints one JSON object:
{case: {"legacy": {max_abs, max_rel}, "new": {...}}}."""

from __future__ import annotations

import json
import os
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"

import keras
import numpy as np
import tensorflow as tf
import tf_keras

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
# name -> (class, kwargs shared by Keras 2 and Keras 3)
CASES = {
    "sgd": ("SGD", {"learning_rate": 0.1}),
    "sgd_momentum": ("SGD", {"learning_rate": 0.1, "momentum": 0.9}),
    "sgd_nesterov": ("SGD", {"learning_rate": 0.1, "momentum": 0.9, "nesterov": True}),
    "rmsprop": ("RMSprop", {"learning_rate": 0.01}),
    "rmsprop_centered": ("RMSprop", {"learning_rate": 0.01, "centered": True}),
    "rmsprop_momentum": ("RMSprop", {"learning_rate": 0.01, "momentum": 0.5}),
    "adam": ("Adam", {"learning_rate": 0.01}),
    "adam_amsgrad": ("Adam", {"learning_rate": 0.01, "amsgrad": True}),
    "adamw": ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.004}),
    "adamax": ("Adamax", {"learning_rate": 0.01}),
    "nadam": ("Nadam", {"learning_rate": 0.01}),
    "adagrad": ("Adagrad", {"learning_rate": 0.1}),
    # standalone Keras 2 starts its accumulators at 0 (and a migrated one can be near 0): where epsilon sits shows
    "adagrad_zero": ("Adagrad", {"learning_rate": 0.1, "initial_accumulator_value": 0.0}),
    "adadelta": ("Adadelta", {"learning_rate": 1.0}),
    "ftrl": ("Ftrl", {"learning_rate": 0.1}),
}
# the same, on a gradient with repeated rows (an Embedding's, a tf.IndexedSlices on TensorFlow): K2T612
SPARSE = {f"{name}_sparse": CASES[name] for name in
          ("sgd_momentum", "rmsprop", "rmsprop_momentum", "adam", "adamw", "adamax", "nadam", "adagrad", "adadelta",
           "ftrl")}
ROWS = np.array([1, 1, 4, 1, 2, 4], "int64")  # row 1 three times, row 4 twice, row 2 once
STEPS = 3


def grads() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    # small gradients: where epsilon sits (inside or outside a square root) then shows
    return [(rng.standard_normal(6) * 10.0 ** rng.integers(-6, 0, 6)).astype("float32") for _ in range(STEPS)]


W0 = np.linspace(-1.0, 1.0, 6).astype("float32")


def gradient(g: np.ndarray, sparse: bool) -> object:
    """A dense gradient, or the same values as rows ROWS of W0 (repeated rows summed by a dense conversion)."""
    return tf.IndexedSlices(tf.constant(g), tf.constant(ROWS), tf.constant([W0.size], "int64")) if sparse \
        else tf.constant(g)


def run_k2(opt, sparse: bool = False) -> np.ndarray:
    v = tf.Variable(W0)
    for g in grads():
        opt.apply_gradients([(gradient(g, sparse), v)])
    return v.numpy()


def run_k3(opt, sparse: bool = False) -> np.ndarray:
    v = keras.Variable(W0)
    opt.build([v])
    for g in grads():
        opt.apply([gradient(g, sparse)], [v])
    return keras.ops.convert_to_numpy(v)


def diff(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    d = np.abs(a.astype(np.float64) - b)
    return {"max_abs": float(d.max()), "max_rel": float((d / np.maximum(np.abs(b), 1e-12)).max())}


def keras3_optimizer(cls: str, kwargs: dict, flavour: str, sparse: bool = False):
    """The Keras 3 optimizer k2to3 writes for a Keras 2 `cls(**kwargs)` (flavour "legacy": tf.keras optimizer_v2,
    "new": tf.keras >= 2.11; `sparse`: the model trains an Embedding), deserialized as load_model does."""
    import k2to3.portable  # noqa: F401  registers k2to3>Keras2RMSprop, k2to3>Keras2Adagrad, ...
    from k2to3.upgrade.optimizers import SPARSE_ROWS, SUMMED_ROWS, serialized

    cfg = {**kwargs, "is_legacy_optimizer": flavour == "legacy", SPARSE_ROWS: sparse and cls in SUMMED_ROWS}
    return keras.optimizers.deserialize(serialized(cls, cfg))


def main() -> None:
    out = {}
    for name, (cls, kw) in {**CASES, **SPARSE}.items():
        row, sparse = {}, name in SPARSE
        for flavour, ns in (("legacy", tf_keras.optimizers.legacy), ("new", tf_keras.optimizers)):
            if not hasattr(ns, cls):
                continue
            k2 = run_k2(getattr(ns, cls)(**kw), sparse)
            k3_plain = run_k3(getattr(keras.optimizers, cls)(**kw), sparse)
            k3_k2to3 = run_k3(keras3_optimizer(cls, kw, flavour, sparse), sparse)
            row[flavour] = {"plain": diff(k3_plain, k2), "k2to3": diff(k3_k2to3, k2)}
        out[name] = row
    print(json.dumps(out))


if __name__ == "__main__":
    main()
