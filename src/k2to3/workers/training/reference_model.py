"""The tf_keras reference of `--fit-steps` (docs/optimizers.md): the original file loaded by tf_keras with its compile
state and optimizer weights (its own loader: an independent check of k2to3's slot mapping), training noise off and
BatchNormalization on its unfused path, before any step. fit_ops.py runs its steps, noise_fit.py its noise
probe; held_models.py keeps it between the two."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from k2to3.workers import large_weights
from k2to3.workers.derandomize import noise_off
from k2to3.workers.protocol import FitGoldenRequest, FitNoiseRequest, GoldenReferenceRequest

# the requests whose op loads the file compiled, as the training reference
Compiled = GoldenReferenceRequest | FitGoldenRequest | FitNoiseRequest


def disabled_noise(model: Any) -> list[str]:
    """Training-time noise off (workers/derandomize.py); the report's `noise_disabled`: layer.attribute, sorted."""
    return sorted({f"{layer}.{attr}" for layer, attr in noise_off(model)})


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
    from k2to3.workers.derandomize import layers

    changed = []
    for layer in layers(model):
        if "BatchNormalization" in type(layer).__name__ and getattr(layer, "fused", False):
            layer.fused = False
            changed.append(layer.name)
    return sorted(changed)


def model_key(req: GoldenReferenceRequest | FitGoldenRequest) -> tuple[Any, ...]:
    """What makes two requests load the same reference model (held_models.py, slot "golden")."""
    return tuple(map(str, (req.h5, req.loss, req.trust_bytecode, req.golden_config, req.build_fn, req.build_args)))


def op_golden_reference(req: GoldenReferenceRequest) -> dict[str, Any]:
    """The golden outputs (op golden) from the reference `--fit-steps` will train, loaded once for both: tf_keras
    loads the file compiled, computes the outputs in inference mode on the model as loaded, and the prepared
    reference stays in this worker for op fit_golden (`held`). The parent asks for a plain file only (no --src
    build, no bytecode, no golden config); a file tf_keras cannot load compiled gets op golden's own load."""
    import time

    import tf_keras

    from k2to3.workers.runtime import load_inputs, model_input, save_arrays, tf_flatten
    from k2to3.workers.tf_keras_outputs import op_golden
    from k2to3.workers.training import held_models

    t0 = time.perf_counter()
    try:
        model = load_compiled(req)
    except Exception:  # e.g. a custom loss tf_keras cannot find: the golden output does not need it
        return {**op_golden(req), "held": False}
    t_load = time.perf_counter() - t0
    outs = [np.asarray(t) for t in tf_flatten(model(model_input(load_inputs(req.inputs)), training=False))]
    save_arrays(req.out, outs)
    ref = prepare(req, model)
    if isinstance(ref, Reference):
        held_models.hold("golden", model_key(req), ref)
    return {"keras_version": tf_keras.__version__, "load_seconds": t_load, "n_outputs": len(outs),
            "held": isinstance(ref, Reference)}


def load_reference(req: FitGoldenRequest | FitNoiseRequest) -> Reference | dict[str, Any]:
    """tf_keras loads the original file with its compile state and optimizer weights (its own loader: an
    independent check of k2to3's slot mapping); a reply saying why not when it cannot be a reference."""
    if req.golden_config or req.build_fn:
        return {"available": False, "reason": "{origin}: tf_keras builds it from a config or a source instead of "
                "loading the file with its compile state, so the file's optimizer state is not restored; no "
                "independent training reference"}
    return prepare(req, load_compiled(req))


def load_compiled(req: Compiled) -> Any:
    """The file as tf_keras loads it with its compile state (or with --loss in place of a loss it cannot find)."""
    import tf_keras

    from k2to3.core.h5safe import check_file
    from k2to3.core.seeds import WORKER_SEED as SEED
    from k2to3.workers.tf_keras_outputs import refuse_bytecode, tf_keras_objects

    tf_keras.utils.set_random_seed(SEED)
    check_file(req.h5)
    if not req.trust_bytecode:
        refuse_bytecode(req.h5)
    kwargs = {"custom_objects": tf_keras_objects(req.h5), "safe_mode": not req.trust_bytecode}
    with large_weights.tf_keras_loading():  # large arrays by slices, as the golden load
        try:
            model = tf_keras.models.load_model(req.h5, compile=True, **kwargs)
        except ValueError:
            if not req.loss:
                raise  # e.g. a custom loss tf_keras cannot find: --loss NAME replaces it
            model = load_with_loss(tf_keras, req.h5, req.loss, kwargs)
    return model


def prepare(req: Compiled, model: Any) -> Reference | dict[str, Any]:
    """The loaded model made a training reference: --loss, noise off, BatchNormalization unfused, its optimizer
    state found (or restored where tf_keras's loader gave up)."""
    if getattr(model, "optimizer", None) is None:
        return {"available": False, "reason": "tf_keras loaded the file without a compile config"}
    if req.loss:
        model.compile(optimizer=model.optimizer, loss=req.loss)
    noise, unfused = disabled_noise(model), unfuse_batchnorm(model)
    # The reference runs eagerly: the same kernels without the cost of tracing the graph first (the weights after
    # a step equal to float32 rounding) and without grappler's CPU rewrites of the graph. Except an
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
    if not loaded and restore_standalone_nadam(req.h5, inner):
        source = ("k2to3, in standalone Keras 2.0-2.2 Nadam's order with its momentum product at 1.0, as Keras 2 "
                  "resumed (it saved none; tf_keras's loader gave up on this file)")
    elif not loaded and restore_by_name(req.h5, variables):
        source = "k2to3, by saved variable name (tf_keras's own loader gave up on this file)"
    return Reference(model, inner, noise, source, unfused)


def step_state(model: Any, inner: Any) -> list[Any]:
    """Every variable a step changes, once: the model's (BatchNormalization's moving statistics too), the
    optimizer's and a loss scale's, and tf_keras >= 2.11 Nadam's momentum product (an untracked tf.Variable)."""
    seen: dict[int, Any] = {}
    extra = [getattr(inner, "_u_product", None)]
    for v in [*model.variables, *optimizer_variables(model.optimizer), *optimizer_variables(inner), *extra]:
        if v is not None:
            seen.setdefault(id(v), v)
    return list(seen.values())


def reference_key(req: FitGoldenRequest | FitNoiseRequest) -> tuple[Any, ...]:
    """What makes two requests the same reference before the steps (held_models.py)."""
    return tuple(map(str, (req.h5, req.inputs, req.targets, req.steps, req.loss, req.trust_bytecode,
                           req.golden_config, req.build_fn, req.build_args)))


def optimizer_variables(opt: Any) -> list[Any]:
    """tf_keras optimizer_v2's variables() is a method, the >= 2.11 optimizers' a property."""
    return list(opt.variables() if callable(opt.variables) else opt.variables)


def load_with_loss(tf_keras: Any, h5: str, loss: str, kwargs: dict[str, Any]) -> Any:
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


def restore_standalone_nadam(h5: str, opt: Any) -> bool:
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


def restore_by_name(h5: str, variables: list[Any]) -> bool:
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
