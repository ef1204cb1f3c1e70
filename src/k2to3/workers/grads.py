"""Loss gradients w.r.t. every trainable variable, on one backend (`--grads`; parent side: gradients.py).

Keras 3: tensorflow with GradientTape, torch with autograd, jax with jax.grad through model.stateless_call;
Keras 2: tf_keras with GradientTape on the golden model. Forward passes run with training=True by default
(BatchNormalization uses the batch statistics, as a training step does; `training: false` freezes them), and
every source of training-time randomness made the identity (dropout rates and noise levels set to 0), so both
sides differentiate the same function."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from k2to3.core import arrayfile
from k2to3.core.compare import rel_l2
from k2to3.core.seeds import SENSITIVITY_EPS
from k2to3.core.seeds import WORKER_SEED as SEED
from k2to3.workers.deferred_imports import dynamo_scope
from k2to3.workers.derandomize import noise_off
from k2to3.workers.protocol import GoldenGradsRequest, GradsRequest
from k2to3.workers.runtime import load_inputs, load_keras, model_input
from k2to3.workers.tf_keras_outputs import golden_model


def _noise_off(model: Any) -> list[str]:
    """Training-time noise off (workers/derandomize.py); the report's `derandomized`: the layers changed."""
    return list(dict.fromkeys(layer for layer, _ in noise_off(model)))


def nudge(x: Any, eps: float) -> Any:
    """The float inputs (an array or a list of them) scaled by (1 + eps), a few float32 ulps for eps = 1e-6."""
    def one(a: np.ndarray) -> np.ndarray:
        return a * np.asarray(1 + eps, a.dtype) if np.issubdtype(a.dtype, np.floating) else a

    return [one(a) for a in x] if isinstance(x, list) else one(x)


def _loss(module: Any, spec: Any) -> Any:
    return module.losses.get(spec)


def _targets(req: GradsRequest | GoldenGradsRequest) -> list[np.ndarray]:
    with np.load(req.targets) as z:
        return [z[f"y{i}"] for i in range(len(z.files))]


def gradient_notes(layers: list[Any], policy: str | None, training: bool) -> list[str]:
    """Known sources of gradient divergence between backends in this model (docs/report.md#gradients)."""
    notes = set()
    for layer in layers:
        name = type(layer).__name__
        if "BatchNormalization" in name and training:
            notes.add("BatchNormalization in training mode: batch mean/variance reductions differ in accumulation "
                      "order between backends")
        kernel = getattr(layer, "kernel", None)
        shape = tuple(getattr(kernel, "shape", ()) or ())
        if len(shape) >= 2 and int(np.prod(shape[:-1])) >= 4096:
            notes.add(f"reductions over large axes (layer '{layer.name}': fan-in {int(np.prod(shape[:-1]))}): "
                      "float32 sums in another order")
        if "LSTM" in name or "GRU" in name or "SimpleRNN" in name:
            notes.add("recurrent layers: gradients accumulate over every time step (backpropagation through time)")
    if policy and ("float16" in policy):
        notes.add(f"dtype policy {policy}: float16/bfloat16 compute")
    return sorted(notes)


def _summed_loss(ops: Any, loss_fns: list[Any], ys: list[Any], outs: list[Any]) -> Any:
    total = None
    for fn, y, o in zip(loss_fns, ys, outs):
        v = ops.mean(fn(y, o))
        total = v if total is None else total + v
    return total


def op_grads(req: GradsRequest) -> dict[str, Any]:
    """Keras 3: load the .keras (safe_mode=True), differentiate the loss on this backend."""
    t0 = time.perf_counter()
    keras, model, _ = load_keras(req)
    layers = list(model._flatten_layers(include_self=False))
    changed = _noise_off(model)
    x = model_input(load_inputs(req.inputs))
    ys = _targets(req)
    fns = [_loss(keras, s) for s in req.losses]
    tv = model.trainable_variables
    backend = keras.backend.backend()
    training = req.training
    t1 = time.perf_counter()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            outs = keras.tree.flatten(model(x, training=training))
            loss = _summed_loss(keras.ops, fns, ys, outs)
        grads = [None if g is None else tf.convert_to_tensor(g)  # Embedding: IndexedSlices -> dense
                 for g in tape.gradient(loss, [v.value for v in tv])]
    elif backend == "torch":
        import torch

        with dynamo_scope(keras):
            outs = keras.tree.flatten(model(x, training=training))
            loss = _summed_loss(keras.ops, fns, [torch.as_tensor(y) for y in ys], outs)
            grads = torch.autograd.grad(loss, [v.value for v in tv], allow_unused=True)
    else:
        import jax

        ntv = [v.value for v in model.non_trainable_variables]

        def f(tvals: list[Any]) -> Any:
            out, _ = model.stateless_call(tvals, ntv, x, training=training)
            return _summed_loss(keras.ops, fns, ys, keras.tree.flatten(out))

        # one compiled program, as for the forward pass (child.forward): eager jax compiles every primitive
        loss, grads = jax.jit(jax.value_and_grad(f))([v.value for v in tv])
    arrays = [np.zeros(tuple(v.shape), np.float32) if g is None else np.asarray(keras.ops.convert_to_numpy(g))
              for v, g in zip(tv, grads)]
    arrayfile.write(req.out, arrays)
    policy = getattr(getattr(model, "dtype_policy", None), "name", None)
    return {"names": [v.path for v in tv], "shapes": [list(a.shape) for a in arrays],
            "none": [v.path for v, g in zip(tv, grads) if g is None],
            "loss": float(keras.ops.convert_to_numpy(loss)), "derandomized": changed,
            "notes": gradient_notes(layers, policy, training), "load_seconds": t1 - t0,
            "grad_seconds": time.perf_counter() - t1}


def op_golden_grads(req: GoldenGradsRequest) -> dict[str, Any]:
    """Keras 2: tf_keras loads the original (as for the golden outputs) and differentiates with GradientTape."""
    import tensorflow as tf
    import tf_keras

    tf_keras.utils.set_random_seed(SEED)
    t0 = time.perf_counter()
    model = golden_model(tf_keras, req)
    changed = _noise_off(model)
    x = model_input(load_inputs(req.inputs))
    ys = [tf.constant(y) for y in _targets(req)]
    fns = [_loss(tf_keras, s) for s in req.losses]
    tv = model.trainable_weights
    training = req.training
    t1 = time.perf_counter()

    def differentiate(inputs: Any) -> tuple[list[np.ndarray], float]:
        with tf.GradientTape() as tape:
            outs = tf.nest.flatten(model(inputs, training=training))
            total = None
            for fn, y, o in zip(fns, ys, outs):
                v = tf.reduce_mean(fn(y, o))
                total = v if total is None else total + v
        grads = tape.gradient(total, tv)
        return [np.zeros(tuple(v.shape), np.float32) if g is None else np.asarray(tf.convert_to_tensor(g))
                for v, g in zip(tv, grads)], float(total)

    arrays, loss = differentiate(x)
    t2 = time.perf_counter()
    # Conditioning: the same gradients after a relative change of SENSITIVITY_EPS in the float inputs (a few float32
    # ulps). Where tf_keras's own gradients move that much, backends that round differently cannot agree either.
    nudged, _ = differentiate(model_input(nudge(load_inputs(req.inputs), SENSITIVITY_EPS)))
    arrayfile.write(req.out, arrays)
    return {"names": [v.name.split(":")[0] for v in tv], "shapes": [list(a.shape) for a in arrays],
            "loss": loss, "derandomized": changed, "keras_version": tf_keras.__version__,
            "sensitivity": [rel_l2(b, a) for a, b in zip(arrays, nudged)],
            "load_seconds": t1 - t0, "grad_seconds": t2 - t1}
