"""Worker ops for `--fit-steps N` (training parity, docs/optimizers.md): the same N `train_on_batch` steps on the
same batch, by tf_keras on the original file (`fit_golden`, optimizer state loaded by tf_keras itself) and by
Keras 3 on the converted `.keras` (`fit`, loaded with safe_mode=True). Both save the per-layer weights after the
steps, and reply with the per-step losses (and Keras 3 the digests of its optimizer variables before them).

Training-time randomness is switched off on both sides before the first step: every dropout / noise rate is set
to 0 (Dropout family, GaussianNoise, GaussianDropout, AlphaDropout, RNN dropout and recurrent_dropout), so both
sides compute the deterministic training graph (BatchNormalization still uses batch statistics)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from k2to3.core import arrayfile
from k2to3.core.compare import value_digest
from k2to3.workers import held
from k2to3.workers.deferred import dynamo_scope
from k2to3.workers.protocol import FitGoldenRequest, FitRequest, TrainingBatch
from k2to3.workers.reference import disabled_noise, load_reference, model_key, reference_key, step_state


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


def _save_step_grads(path: str, grads: list[np.ndarray | None], variables: list[Any], names: list[str],
                     loss: float, seconds: float, extra: dict[str, Any]) -> dict[str, Any]:
    """Save the first step's gradients as workers/grads.py saves its own, and the reply's `grads` entry."""
    arrays = dense(grads, variables)
    arrayfile.write(path, arrays)
    return {"names": names, "shapes": [list(a.shape) for a in arrays],
            "none": [n for n, g in zip(names, grads) if g is None], "loss": loss, "grad_seconds": seconds,
            "from": "training step", **extra}


def save_weights(path: str, names: list[str], arrays: list[np.ndarray]) -> None:
    arrayfile.write(path, arrays)


def op_fit(req: FitRequest) -> dict[str, Any]:
    from k2to3.workers.runtime import load_keras

    # the model op verify loaded and held for these steps, else loaded as verify loads it (placeholder
    # initializers: every value is restored)
    got = held.take("keras3", held.keras3_key(req))
    keras, model, _ = got if got is not None else load_keras(req)
    if not getattr(model, "compiled", False) or model.optimizer is None:
        return {"available": False, "reason": "the converted model has no compile config (no training_config)"}
    if req.loss:
        model.compile(optimizer=model.optimizer, loss=req.loss)
    noise = disabled_noise(model)
    if keras.backend.backend() == "tensorflow":
        # Eagerly, as the tf_keras reference: the same kernels without the cost of tracing the graph first, and
        # without grappler's rewrites. verify's predict still runs the traced function.
        model.run_eagerly = True
    opt = model.optimizer
    # the state as loaded, before the steps, bit for bit: digests, not a large model's slots through a file
    state = [value_digest(np.asarray(keras.ops.convert_to_numpy(v))) for v in opt.variables]
    x, y = load_batch(req)
    step_grads, spy = {}, None
    if req.grads_out:
        from k2to3.workers.grads import gradient_notes
        from k2to3.workers.stepgrads import StepGrads

        spy = StepGrads(keras, model)
        policy = getattr(getattr(model, "dtype_policy", None), "name", None)
        layers = list(model._flatten_layers(include_self=False))

        def after_first(seconds: float) -> None:
            step_grads["seconds"] = seconds
            step_grads["grads"] = spy.take(keras.ops.convert_to_numpy)

    with dynamo_scope(keras):
        losses = train_steps(model, x, y, int(req.steps), after_first if spy else None)
    names, arrays = layer_weights(model, keras.ops.convert_to_numpy)
    save_weights(req.weights_out, names, arrays)
    inner = getattr(opt, "inner_optimizer", opt)
    reply = {"available": True, "losses": losses, "weight_names": names, "noise_disabled": noise,
             "optimizer_class": type(opt).__name__, "iterations_after": int(np.asarray(
                 keras.ops.convert_to_numpy(inner.iterations))), "state_digests": state}
    if spy is not None:
        reply["grads"] = _save_step_grads(req.grads_out, step_grads["grads"], spy.variables,
                                          [v.path for v in spy.variables], losses[0], step_grads["seconds"],
                                          {"derandomized": noise, "notes": gradient_notes(layers, policy, True)})
    return reply


def op_fit_golden(req: FitGoldenRequest) -> dict[str, Any]:
    """The tf_keras reference of the steps: the original file, as load_reference loads it."""
    import tf_keras

    ref = held.take("golden", model_key(req)) or load_reference(req)  # held: op golden_reference loaded it
    if isinstance(ref, dict):
        return ref
    model, inner, noise, source = ref.model, ref.inner, ref.noise, ref.source
    opt = model.optimizer
    x, y = load_batch(req)
    spy, step_seconds = None, []
    if req.hold:  # the state before the steps, for a noise probe on this same model (workers/fitnoise.py)
        state = step_state(model, inner)
        held.hold("reference", reference_key(req), (ref, state, [np.array(v) for v in state]))
    if req.grads_out:
        from k2to3.workers.stepgrads import GoldenStepGrads

        spy = GoldenStepGrads(model)
    losses = train_steps(model, x, y, int(req.steps), step_seconds.append if spy else None)
    names, arrays = layer_weights(model, np.asarray)
    save_weights(req.weights_out, names, arrays)
    if req.hold:  # what the noise probe's runs are measured against, in this worker (workers/fitnoise.py)
        held.hold("reference_after", reference_key(req), arrays)
    reply = {"available": True, "losses": losses, "weight_names": names, "noise_disabled": noise,
             "optimizer_class": type(opt).__name__, "state_loaded": source is not None, "state_source": source,
             "iterations_after": int(np.asarray(inner.iterations)), "batchnorm_unfused": ref.unfused}
    if spy is not None:
        spy.remove()
        grads = spy.take()
        reply["grads"] = _save_step_grads(req.grads_out, grads, spy.variables,
                                          [v.name.split(":")[0] for v in spy.variables], losses[0], step_seconds[0],
                                          {"derandomized": noise, "keras_version": tf_keras.__version__})
        if req.hold:  # the noise probe's runs measure their gradients against these (workers/fitnoise.py)
            held.hold("reference_grads", reference_key(req), dense(grads, spy.variables))
    return reply
