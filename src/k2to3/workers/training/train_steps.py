"""What every training op of a worker shares (workers/training/fit_ops.py, noise_fit.py): the batch read from
the job's files, N `train_on_batch` steps with their losses, the weights after them per top-level layer in Keras 2's
saved order, and a step's gradients made dense."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from k2to3.core import arrayfile
from k2to3.workers.protocol import TrainingBatch


def layer_weights(model: Any, to_numpy: Any) -> tuple[list[str], list[np.ndarray]]:
    """Weights per top-level layer in Keras 2's saved order (trainable, then non-trainable)."""
    names, arrays = [], []
    for layer in model.layers:
        ws = list(layer.trainable_weights) + list(layer.non_trainable_weights)
        for i, w in enumerate(ws):
            names.append(f"{layer.name}[{i}]")
            arrays.append(np.asarray(to_numpy(w)))
    return names, arrays


def load_batch(req: TrainingBatch[Any]) -> tuple[Any, Any]:
    with np.load(req.inputs) as z:
        xs = [z[f"in{i}"] for i in range(len(z.files))]
    with np.load(req.targets) as z:
        ys = [z[f"y{i}"] for i in range(len(z.files))]
    return (xs[0] if len(xs) == 1 else xs), (ys[0] if len(ys) == 1 else ys)


def train_steps(model: Any, x: Any, y: Any, n: int, after_first: Any = None) -> list[float]:
    losses = []
    for i in range(n):
        model.reset_metrics()
        t0 = time.perf_counter()
        logs = model.train_on_batch(x, y, return_dict=True)
        losses.append(float(np.asarray(logs["loss"])))
        if i == 0 and after_first is not None:
            after_first(time.perf_counter() - t0)
    return losses


def dense(grads: list[np.ndarray | None], variables: list[Any]) -> list[np.ndarray]:
    """A step's gradients with zeros where a variable is not connected to the loss (None)."""
    return [np.zeros(tuple(v.shape), np.float32) if g is None else g for v, g in zip(variables, grads)]


def save_weights(path: str, names: list[str], arrays: list[np.ndarray]) -> None:
    arrayfile.write(path, arrays)
