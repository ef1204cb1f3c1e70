"""Worker ops for `--fit-steps N` (training parity, docs/optimizers.md): the same N `train_on_batch` steps on the
same batch, by tf_keras on the original file (`fit_golden`, optimizer state loaded by tf_keras itself) and by
Keras 3 on the converted `.keras` (`fit`, loaded with safe_mode=True). Both save the per-layer weights after the
steps, and reply with the per-step losses (and Keras 3 the digests of its optimizer variables before them).

Training-time randomness is switched off on both sides before the first step: every dropout / noise rate is set
to 0 (Dropout family, GaussianNoise, GaussianDropout, AlphaDropout, RNN dropout and recurrent_dropout), so both
sides compute the deterministic training graph (BatchNormalization still uses batch statistics)."""

from __future__ import annotations

from typing import Any

import numpy as np

from k2to3.core import arrayfile
from k2to3.core.compare import value_digest
from k2to3.workers.deferred_imports import dynamo_scope
from k2to3.workers.protocol import FitGoldenRequest, FitRequest
from k2to3.workers.training import held_models
from k2to3.workers.training.reference_model import disabled_noise, load_reference, model_key, reference_key, step_state
from k2to3.workers.training.train_steps import dense, layer_weights, load_batch, save_weights, train_steps


def _save_step_grads(path: str, grads: list[np.ndarray | None], variables: list[Any], names: list[str],
                     loss: float, seconds: float, extra: dict[str, Any]) -> dict[str, Any]:
    """Save the first step's gradients as workers/grads.py saves its own, and the reply's `grads` entry."""
    arrays = dense(grads, variables)
    arrayfile.write(path, arrays)
    return {"names": names, "shapes": [list(a.shape) for a in arrays],
            "none": [n for n, g in zip(names, grads) if g is None], "loss": loss, "grad_seconds": seconds,
            "from": "training step", **extra}


def op_fit(req: FitRequest) -> dict[str, Any]:
    from k2to3.workers.runtime import load_keras

    # the model op verify loaded and held for these steps, else loaded as verify loads it (placeholder
    # initializers: every value is restored)
    got = held_models.take("keras3", held_models.keras3_key(req))
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
        from k2to3.workers.training.step_gradients import StepGrads

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

    ref = held_models.take("golden", model_key(req)) or load_reference(req)  # held: op golden_reference loaded it
    if isinstance(ref, dict):
        return ref
    model, inner, noise, source = ref.model, ref.inner, ref.noise, ref.source
    opt = model.optimizer
    x, y = load_batch(req)
    spy, step_seconds = None, []
    if req.hold:  # the state before the steps, for a noise probe on this same model (workers/training/noise_fit.py)
        state = step_state(model, inner)
        held_models.hold("reference", reference_key(req), (ref, state, [np.array(v) for v in state]))
    if req.grads_out:
        from k2to3.workers.training.step_gradients import GoldenStepGrads

        spy = GoldenStepGrads(model)
    losses = train_steps(model, x, y, int(req.steps), step_seconds.append if spy else None)
    names, arrays = layer_weights(model, np.asarray)
    save_weights(req.weights_out, names, arrays)
    if req.hold:  # what the noise probe's runs are measured against, in this worker (workers/training/noise_fit.py)
        held_models.hold("reference_after", reference_key(req), arrays)
    reply = {"available": True, "losses": losses, "weight_names": names, "noise_disabled": noise,
             "optimizer_class": type(opt).__name__, "state_loaded": source is not None, "state_source": source,
             "iterations_after": int(np.asarray(inner.iterations)), "batchnorm_unfused": ref.unfused}
    if spy is not None:
        spy.remove()
        grads = spy.take()
        reply["grads"] = _save_step_grads(req.grads_out, grads, spy.variables,
                                          [v.name.split(":")[0] for v in spy.variables], losses[0], step_seconds[0],
                                          {"derandomized": noise, "keras_version": tf_keras.__version__})
        if req.hold:  # the noise probe's runs measure their gradients against these (workers/training/noise_fit.py)
            held_models.hold("reference_grads", reference_key(req), dense(grads, spy.variables))
    return reply
