"""Worker ops for `--fit-steps N` (training parity, docs/optimizers.md): the same N `train_on_batch` steps on the
same batch, by tf_keras on the original file (`fit_golden`, optimizer state loaded by tf_keras itself) and by
Keras 3 on the converted `.keras` (`fit`, loaded with safe_mode=True). Both save the per-layer weights after the
steps and the optimizer variables before them, and reply with the per-step losses.

Training-time randomness is switched off on both sides before the first step: every dropout / noise rate is set
to 0 (Dropout family, GaussianNoise, GaussianDropout, AlphaDropout, RNN dropout and recurrent_dropout), so both
sides compute the deterministic training graph (BatchNormalization still uses batch statistics)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from k2to3.workers import lean
from k2to3.workers.noise import noise_off


def disabled_noise(model: Any) -> list[str]:
    """Training-time noise off (workers/noise.py); the report's `noise_disabled`: layer.attribute, sorted."""
    return sorted({f"{layer}.{attr}" for layer, attr in noise_off(model)})


def layer_weights(model: Any, to_numpy: Any) -> tuple[list[str], list[np.ndarray]]:
    """Weights per top-level layer in Keras 2's saved order (trainable, then non-trainable)."""
    names, arrays = [], []
    for layer in model.layers:
        ws = list(layer.trainable_weights) + list(layer.non_trainable_weights)
        for i, w in enumerate(ws):
            names.append(f"{layer.name}[{i}]")
            arrays.append(np.asarray(to_numpy(w)))
    return names, arrays


def load_batch(req: dict[str, Any]) -> tuple[Any, Any]:
    with np.load(req["inputs"]) as z:
        xs = [z[f"in{i}"] for i in range(len(z.files))]
    with np.load(req["targets"]) as z:
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


def _save_step_grads(path: str, grads: list[np.ndarray | None], variables: list[Any], names: list[str],
                     loss: float, seconds: float, extra: dict[str, Any]) -> dict[str, Any]:
    """Save the first step's gradients as workers/grads.py saves its own, and the reply's `grads` entry."""
    from k2to3.workers.runtime import save_arrays

    arrays = [np.zeros(tuple(v.shape), np.float32) if g is None else g for v, g in zip(variables, grads)]
    save_arrays(path, arrays, prefix="g")
    return {"names": names, "shapes": [list(a.shape) for a in arrays],
            "none": [n for n, g in zip(names, grads) if g is None], "loss": loss, "grad_seconds": seconds,
            "from": "training step", **extra}


def save_weights(path: str, names: list[str], arrays: list[np.ndarray]) -> None:
    np.savez(path, **{f"w{i}": a for i, a in enumerate(arrays)})


def op_fit(req: dict[str, Any]) -> dict[str, Any]:
    from k2to3.workers.runtime import load_keras

    keras, model, _ = load_keras(req)  # as verify loads it (placeholder initializers: every value is restored)
    if not getattr(model, "compiled", False) or model.optimizer is None:
        return {"available": False, "reason": "the converted model has no compile config (no training_config)"}
    if req.get("loss"):
        model.compile(optimizer=model.optimizer, loss=req["loss"])
    noise = disabled_noise(model)
    if keras.backend.backend() == "tensorflow":
        # Eagerly, as the tf_keras reference: the same kernels without the graph trace (ResNet50: one step in 2-3 s
        # against 10-15 s) and without grappler's rewrites. verify's predict still runs the traced function.
        model.run_eagerly = True
    opt = model.optimizer
    np.savez(req["state_out"], **{f"v{i}": np.asarray(keras.ops.convert_to_numpy(v))
                                  for i, v in enumerate(opt.variables)})
    x, y = load_batch(req)
    step_grads, spy = {}, None
    if req.get("grads_out"):
        from k2to3.workers.grads import gradient_notes
        from k2to3.workers.stepgrads import StepGrads

        spy = StepGrads(keras, model)
        policy = getattr(getattr(model, "dtype_policy", None), "name", None)
        layers = list(model._flatten_layers(include_self=False))

        def after_first(seconds: float) -> None:
            step_grads["seconds"] = seconds
            step_grads["grads"] = spy.take(keras.ops.convert_to_numpy)

    losses = train_steps(model, x, y, int(req["steps"]), after_first if spy else None)
    names, arrays = layer_weights(model, keras.ops.convert_to_numpy)
    save_weights(req["weights_out"], names, arrays)
    inner = getattr(opt, "inner_optimizer", opt)
    reply = {"available": True, "losses": losses, "weight_names": names, "noise_disabled": noise,
             "optimizer_class": type(opt).__name__, "iterations_after": int(np.asarray(
                 keras.ops.convert_to_numpy(inner.iterations)))}
    if spy is not None:
        reply["grads"] = _save_step_grads(req["grads_out"], step_grads["grads"], spy.variables,
                                          [v.path for v in spy.variables], losses[0], step_grads["seconds"],
                                          {"derandomized": noise, "notes": gradient_notes(layers, policy, True)})
    return reply


@dataclass
class Reference:
    """The tf_keras model of the original file, its optimizer state loaded, training noise off, before any step."""

    model: Any
    inner: Any  # the optimizer that holds the slots (a LossScaleOptimizer's inner one)
    noise: list[str]  # the noise rates set to 0
    source: str | None  # who loaded the optimizer state (None: nobody, a fresh optimizer)
    unfused: list[str]  # the BatchNormalization layers set to tf_keras's unfused path (unfuse_batchnorm)


def unfuse_batchnorm(model: Any) -> list[str]:
    """tf_keras's fused BatchNormalization kernel (4D inputs) moves the moving variance toward the unbiased batch
    variance (x n/(n-1)); its unfused path and Keras 3 toward the biased one (rule K2T611). The reference takes the
    unfused path, so that both sides compute one update: the outputs and the gradients are the same either way
    (both normalise with the biased variance). Returns the layers changed."""
    from k2to3.workers.noise import layers

    changed = []
    for layer in layers(model):
        if "BatchNormalization" in type(layer).__name__ and getattr(layer, "fused", False):
            layer.fused = False
            changed.append(layer.name)
    return sorted(changed)


def load_reference(req: dict[str, Any]) -> Reference | dict[str, Any]:
    """tf_keras loads the original file with its compile state and optimizer weights (its own loader: an
    independent check of k2to3's slot mapping); a reply saying why not when it cannot be a reference."""
    import tf_keras

    from k2to3.core.h5safe import check_file
    from k2to3.core.seeds import WORKER_SEED as SEED
    from k2to3.workers.golden import refuse_bytecode, tf_keras_objects

    tf_keras.utils.set_random_seed(SEED)
    if req.get("golden_config") or req.get("build_fn"):
        return {"available": False, "reason": "with --src the Keras 2 reference is rebuilt from the source and "
                "tf_keras does not load the file's optimizer state; no independent training reference"}
    check_file(req["h5"])
    if not req.get("trust_bytecode"):
        refuse_bytecode(req["h5"])
    kwargs = {"custom_objects": tf_keras_objects(), "safe_mode": not req.get("trust_bytecode")}
    with lean.tf_keras_loading():  # large arrays by slices, as the golden load
        try:
            model = tf_keras.models.load_model(req["h5"], compile=True, **kwargs)
        except ValueError:
            if not req.get("loss"):
                raise  # e.g. a custom loss tf_keras cannot find: --loss NAME replaces it
            model = _load_with_loss(tf_keras, req["h5"], req["loss"], kwargs)
    if getattr(model, "optimizer", None) is None:
        return {"available": False, "reason": "tf_keras loaded the file without a compile config"}
    if req.get("loss"):
        model.compile(optimizer=model.optimizer, loss=req["loss"])
    noise, unfused = disabled_noise(model), unfuse_batchnorm(model)
    # The reference runs eagerly: the same kernels without the graph trace (ResNet50: 1.7 s against 5.8 s for
    # one step; weights after it equal to 1.2e-7) and without grappler's CPU rewrites of the graph. Except an
    # optimizer whose update depends on Python state fixed when the step is traced (tf_keras >= 2.11 Nadam's
    # u_product counter, K2T606): its eager and compiled steps differ, and model.fit runs the compiled one.
    model.run_eagerly = not hasattr(getattr(model.optimizer, "inner_optimizer", model.optimizer),
                                    "_u_product_counter")
    opt = model.optimizer
    inner = getattr(opt, "inner_optimizer", opt)
    variables = optimizer_variables(inner)
    # a fresh optimizer holds zeros and step 0 (Nadam's momentum product starts at 1: not state)
    loaded = any(np.any(np.asarray(v) != 0) for v in variables[1:] if not v.name.startswith("momentum_cache")) \
        or int(np.asarray(inner.iterations)) > 0
    source = "tf_keras" if loaded else None
    if not loaded and _restore_standalone_nadam(req["h5"], inner):
        source = ("k2to3, in standalone Keras 2.0-2.2 Nadam's order with its momentum product at 1.0, as Keras 2 "
                  "resumed (it saved none; tf_keras's loader gave up on this file)")
    elif not loaded and _restore_by_name(req["h5"], variables):
        source = "k2to3, by saved variable name (tf_keras's own loader gave up on this file)"
    return Reference(model, inner, noise, source, unfused)


def optimizer_variables(opt: Any) -> list[Any]:
    """tf_keras optimizer_v2's variables() is a method, the >= 2.11 optimizers' a property."""
    return list(opt.variables() if callable(opt.variables) else opt.variables)


def op_fit_golden(req: dict[str, Any]) -> dict[str, Any]:
    """The tf_keras reference of the steps: the original file, as load_reference loads it."""
    import tf_keras

    ref = load_reference(req)
    if isinstance(ref, dict):
        return ref
    model, inner, noise, source = ref.model, ref.inner, ref.noise, ref.source
    opt = model.optimizer
    x, y = load_batch(req)
    if req.get("nudge"):  # the input-sensitivity probe of the step's gradients (checks/gradients.py)
        from k2to3.workers.grads import nudge

        x = nudge(x, float(req["nudge"]))
    spy, step_seconds = None, []
    probed = _probe_step(model, x, y, req) if req.get("nudged_grads_out") else None
    if req.get("grads_out"):
        from k2to3.workers.stepgrads import GoldenStepGrads

        spy = GoldenStepGrads(model)
    losses = train_steps(model, x, y, int(req["steps"]), step_seconds.append if spy else None)
    names, arrays = layer_weights(model, np.asarray)
    save_weights(req["weights_out"], names, arrays)
    reply = {"available": True, "losses": losses, "weight_names": names, "noise_disabled": noise,
             "optimizer_class": type(opt).__name__, "state_loaded": source is not None, "state_source": source,
             "iterations_after": int(np.asarray(inner.iterations)), "batchnorm_unfused": ref.unfused}
    if spy is not None:
        reply["grads"] = _save_step_grads(req["grads_out"], spy.take(), spy.variables,
                                          [v.name.split(":")[0] for v in spy.variables], losses[0], step_seconds[0],
                                          {"derandomized": noise, "keras_version": tf_keras.__version__})
    if probed is not None:
        reply["nudged_grads"] = probed
    return reply


# A training forward pass updates the non-trainable state (BatchNormalization's moving statistics): the probe
# keeps a copy to put back, up to this size (a larger frozen part gets the probe as its own job, on a mismatch).
PROBE_STATE_BYTES = 64 << 20


def _probe_step(model: Any, x: Any, y: Any, req: dict[str, Any]) -> dict[str, Any] | None:
    """The input-sensitivity probe of the step's gradients (checks/gradients.py), taken before the steps while the
    model is loaded: the same step on inputs scaled by (1 + nudge), stopped at the gradients (nothing applied),
    and the non-trainable state put back, so the steps that follow start where the file does. On a machine with
    spare cores it runs beside the other backends' steps instead of after them."""
    from k2to3.workers.grads import nudge
    from k2to3.workers.stepgrads import GoldenStepGrads

    state = list(model.non_trainable_weights)
    if sum(int(np.prod(v.shape)) * v.dtype.size for v in state) > PROBE_STATE_BYTES:
        return None
    saved = [np.array(v) for v in state]
    spy = GoldenStepGrads(model, apply=False)
    t0 = time.perf_counter()
    try:
        model.reset_metrics()
        loss = float(np.asarray(model.train_on_batch(nudge(x, float(req["nudge_eps"])), y, return_dict=True)["loss"]))
        grads = spy.take()
    except Exception:  # the probe must never cost the reference: after a mismatch it runs as its own job
        return None
    finally:
        spy.remove()
        for v, a in zip(state, saved):
            v.assign(a)
    model.reset_metrics()
    return _save_step_grads(req["nudged_grads_out"], grads, spy.variables,
                            [v.name.split(":")[0] for v in spy.variables], loss, time.perf_counter() - t0, {})


def _load_with_loss(tf_keras: Any, h5: str, loss: str, kwargs: dict[str, Any]) -> Any:
    """tf_keras's own HDF5 compile path (saving/legacy/hdf5_format.load_model_from_hdf5) with `loss` in place of
    the file's (a custom loss it cannot resolve): the file's optimizer and its saved weights."""
    import json

    import h5py
    from tf_keras.src.saving.legacy import hdf5_format

    model = tf_keras.models.load_model(h5, compile=False, **kwargs)
    with h5py.File(h5, "r") as f:
        tc = json.loads(f.attrs["training_config"])
        model.compile(optimizer=tf_keras.optimizers.deserialize(tc["optimizer_config"]), loss=loss)
        opt = model.optimizer
        if hasattr(opt, "_create_all_weights"):
            opt._create_all_weights(model.trainable_variables)
        else:
            opt.build(model.trainable_variables)
        opt.set_weights(hdf5_format.load_optimizer_weights_from_hdf5_group(f))
    return model


def _restore_standalone_nadam(h5: str, opt: Any) -> bool:
    """Standalone Keras 2.0-2.2 Nadam saved [iterations] + ms + vs (keras/optimizers.py; m_schedule only from 2.3):
    tf_keras's legacy Nadam, which computes the same update, keeps [iterations, momentum_cache] + ms + vs, so its
    loader gives up on the file. Set them in that order with the momentum product at 1.0 (Keras 2 restarted it so)
    when every shape agrees; False (nothing assigned) otherwise."""
    from k2to3.core.h5safe import open_checked, read_dataset
    from k2to3.formats.artifact import names_attr

    if type(opt).__name__ != "Nadam" or not hasattr(opt, "_m_cache"):
        return False
    f = open_checked(h5)
    try:
        names = names_attr(f["optimizer_weights"], "weight_names") if "optimizer_weights" in f else []
        values = [read_dataset(f, f"optimizer_weights/{n}") for n in names]
    finally:
        f.close()
    weights = opt.weights
    if len(values) != len(weights) - 1 or not names or not any("Variable" in n for n in names):
        return False
    values = [values[0], np.asarray(1.0, np.float32), *values[1:]]
    if any(tuple(np.shape(v)) != tuple(w.shape) for v, w in zip(values, weights)):
        return False
    opt.set_weights(values)
    return True


def _restore_by_name(h5: str, variables: list[Any]) -> bool:
    """tf_keras 2.21 cannot reload a LossScaleOptimizer's state from HDF5 ("Error in loading the saved optimizer
    state"): its inner optimizer's variables carry the saved names one to one, so assign them by name. Returns
    False (nothing assigned) unless every variable has a saved value of its shape."""
    from k2to3.core.h5safe import open_checked, read_dataset
    from k2to3.formats.artifact import names_attr

    f = open_checked(h5)
    try:
        if "optimizer_weights" not in f:
            return False
        names = names_attr(f["optimizer_weights"], "weight_names")
        values = {n: read_dataset(f, f"optimizer_weights/{n}") for n in names}
    finally:
        f.close()
    if len(values) != len(variables) or any(values.get(v.name) is None or values[v.name].shape != tuple(v.shape)
                                            for v in variables):
        return False
    for v in variables:
        v.assign(values[v.name])
    return True


OPS = {"fit": op_fit, "fit_golden": op_fit_golden}
