"""Reruns in another dtype (only on a mismatch, or for a mixed-precision model): float64 for the float32 noise floor,
float32 for the shadow of a mixed-precision model (docs/convert.md#mixed-precision)."""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np

from k2to3.core.policies import REDUCED
from k2to3.core.seeds import WORKER_SEED as SEED
from k2to3.workers.protocol import Float64Request
from k2to3.workers.runtime import (
    constant_initializers,
    flat_numpy,
    forward,
    import_modules,
    keras3,
    load_inputs,
    model_input,
    save_arrays,
    tf_flatten,
)
from k2to3.workers.tf_keras_outputs import flip_theano_kernels, golden_model, tf_keras_objects

# -- reruns in another dtype: float64 (the float32 noise floor, only on a mismatch) and float32 (the shadow of a
# mixed-precision model, docs/convert.md#mixed-precision) ----------------------------------------------------


class Float64Unavailable(Exception):
    """The model cannot be rerun in the requested dtype here; the message says why."""


def _renamed(v: Any, name: str) -> Any:
    return name if isinstance(v, str) else {**v, "config": {**v["config"], "name": name}}


def _as_float64(v: Any, target: str = "float64") -> Any:
    name = v if isinstance(v, str) else (v.get("config") or {}).get("name") if isinstance(v, dict) else None
    if name in REDUCED:
        if target == "float64":
            raise Float64Unavailable(f"dtype policy {name}: the error is not float32 noise")
        return _renamed(v, "float32")  # the float32 shadow: the same layer at full precision
    if name != "float32" or target == "float32":
        return v  # integer inputs, None; float32 stays float32 in the shadow
    return _renamed(v, "float64")


def _float64_config(obj: Any, target: str = "float64") -> Any:
    if isinstance(obj, dict):
        return {k: _as_float64(v, target) if k == "dtype" else _float64_config(v, target) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_float64_config(v, target) for v in obj]
    return obj


def _clone_float64(model: Any, clone_model: Any, lambda_cls: type, target: str = "float64") -> Any:
    """The same graph with `target` (float64, or float32 for a mixed-precision shadow) layers and the same weights
    cast (exactly: float32 widens, a mixed model's variables are float32 already). Lambdas are rebuilt around
    their function object: their config would carry bytecode."""

    def clone(layer: Any) -> Any:
        if isinstance(layer, lambda_cls):
            return type(layer)(layer.function, output_shape=layer._output_shape, mask=layer.mask,
                               arguments=layer.arguments, name=layer.name, dtype=target)
        return layer.__class__.from_config(_float64_config(layer.get_config(), target))

    m64 = clone_model(model, clone_function=clone)
    m64.set_weights([np.asarray(w, dtype=target) for w in model.get_weights()])
    layers = m64._flatten_layers(include_self=False)  # nested models' layers too (tf_keras and Keras 3)
    low = sorted({getattr(getattr(la, "dtype_policy", None), "name", None) or "" for la in layers} & set(REDUCED))
    if low:  # a layer the clone did not reach: the shadow would not be one
        raise Float64Unavailable(f"the {target} clone still has {', '.join(low)} layers")
    return m64


def _float64_inputs(xs: list[np.ndarray]) -> list[np.ndarray]:
    return [x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x for x in xs]


def _checked_float64(outs: list[np.ndarray], target: str = "float64") -> list[np.ndarray]:
    low = sorted({str(o.dtype) for o in outs if o.dtype != np.dtype(target)})
    if low:
        raise Float64Unavailable(f"the {target} rerun returned {', '.join(low)} outputs")
    return outs


@contextmanager
def _float64_mode(keras: Any):
    """floatx float64 for this call only (a warm worker is shared): with floatx float32, Keras 3 on torch
    promotes float64 with float32 to float32 (BatchNormalization then rounds), and jax silently computes
    float64 as float32 unless x64 is on."""
    saved = keras.config.floatx()
    keras.config.set_floatx("float64")
    # keras.backend.result_type demotes float64 to float32 on torch and jax (JAX's default), so
    # BatchNormalization's result_type(x, "float32") would compute in float32: keep float64 for this call.
    demote = keras.src.backend.common.dtypes.BIT64_TO_BIT32_DTYPE
    saved_demote = demote.get("float64")
    demote["float64"] = "float64"
    try:
        if keras.backend.backend() == "jax":
            import jax

            with jax.enable_x64(True):
                yield
        else:
            yield
    finally:
        keras.config.set_floatx(saved)
        demote["float64"] = saved_demote


def op_float64(req: Float64Request) -> dict[str, Any]:
    """Rerun the model in `dtype` (float64 by default; float32: the shadow of a mixed-precision model) on the same
    weights and inputs: the converted .keras on this backend, or (`golden`) the Keras 2 model with tf_keras.
    Writes the outputs to `out`; a model that cannot be rerun gives {"available": False, "reason": ...}, never
    an error."""
    t0 = time.perf_counter()
    target = req.dtype
    xs = load_inputs(req.inputs)
    if target == "float64":
        xs = _float64_inputs(xs)
    try:
        if req.golden:
            import tf_keras

            tf_keras.utils.set_random_seed(SEED)
            model = golden_model(tf_keras, req)
            if req.theano_kernels:
                flip_theano_kernels(model)
            saved = tf_keras.backend.floatx()
            tf_keras.backend.set_floatx(target)
            try:
                with tf_keras.utils.custom_object_scope(tf_keras_objects(req.h5)):
                    m64 = _clone_float64(model, tf_keras.models.clone_model, tf_keras.layers.Lambda, target)
                outs = [np.asarray(t) for t in tf_flatten(m64(model_input(xs), training=False))]
            finally:
                tf_keras.backend.set_floatx(saved)
        else:
            keras = keras3()
            import_modules(req.modules)
            with _float64_mode(keras) if target == "float64" else nullcontext():
                with constant_initializers(keras):
                    model = keras.saving.load_model(req.keras, safe_mode=True)
                    m64 = _clone_float64(model, keras.models.clone_model, keras.layers.Lambda, target)
                outs = flat_numpy(keras, forward(keras, m64, xs))
        save_arrays(req.out, _checked_float64(outs, target))
    except Float64Unavailable as exc:
        return {"available": False, "reason": str(exc), "seconds": time.perf_counter() - t0}
    except Exception as exc:  # an op without a float64 kernel, a layer whose config cannot be rebuilt
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return {"available": False, "reason": f"{target} rerun failed: {type(exc).__name__}: {first}",
                "seconds": time.perf_counter() - t0}
    return {"available": True, "seconds": time.perf_counter() - t0}
