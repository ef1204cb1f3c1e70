"""The Keras 2 side of a worker: tf_keras loads the legacy file (never its Lambda bytecode unless trusted) and computes
the golden outputs; a tf.keras .keras archive or SavedModel re-saved as HDF5."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np

from k2to3.core.seeds import WORKER_SEED as SEED
from k2to3.errors import K2to3Error
from k2to3.workers import large_weights, nhwc
from k2to3.workers.protocol import Float64Request, GoldenReferenceRequest, GoldenRequest, TfKerasModel
from k2to3.workers.runtime import import_module, load_inputs, model_input, probe_layers, save_arrays, tf_flatten


# -- Keras 2 golden (tf_keras) ------------------------------------------------------------------------
def tf_keras_objects(h5: str | None = None) -> dict[str, Any]:
    """tf_keras's own layers that live outside its registry (ConvNeXt's LayerScale, StochasticDepth), the
    reference implementations of popular libraries' layers, and qkeras's, larq's and tfmot's objects when
    the file `h5` names them."""
    from tf_keras.src.applications import convnext

    from k2to3.formats.artifact import memo_reads
    from k2to3.workers.k2_library import (
        OBJECTS,  # popular libraries' layers (tensorflow-addons, keras-contrib, efficientnet)
        larq_objects,
        qkeras_objects,
        tfmot_objects,
    )

    with memo_reads():  # one read of the file for the three libraries' questions, not one each: a large file is slow
        return {"LayerScale": convnext.LayerScale, "StochasticDepth": convnext.StochasticDepth, **OBJECTS,
                **(qkeras_objects(h5) if h5 else {}), **(larq_objects(h5) if h5 else {}),
                **(tfmot_objects(h5) if h5 else {})}


def golden_model(tf_keras: Any, req: TfKerasModel[Any] | Float64Request) -> Any:
    with large_weights.tf_keras_loading():  # large arrays by slices: tf_keras reads all of them before assigning any
        return _load_golden(tf_keras, req)


def _load_golden(tf_keras: Any, req: TfKerasModel[Any] | Float64Request) -> Any:
    """The Keras 2 model: tf_keras loads the file; with --src, the objects come from the Keras 2 module (the
    user's code as written) and Lambda layers point at its functions by name (golden_config), so the file's
    bytecode is never unmarshalled. Only `trust_bytecode` lets tf_keras load the Lambdas from the file."""
    from k2to3.core.h5safe import check_file

    check_file(req.h5)  # tf_keras follows links and external storage: it only opens what k2to3 accepted
    objects = tf_keras_objects(req.h5)
    if req.k2_module:
        removed_backend_functions(tf_keras)
        objects.update(import_module(req.k2_module).K2TO3_OBJECTS)

    class K2to3GoldenLambda(tf_keras.layers.Lambda):
        """A Lambda whose config names its function (a Keras 2 module object), never bytecode."""

        @classmethod
        def from_config(cls, config, custom_objects=None):
            config = dict(config)
            fn = config.pop("function")
            return cls(fn if callable(fn) else objects[fn], **config)

    objects["K2to3GoldenLambda"] = K2to3GoldenLambda
    if req.build_fn:
        from k2to3.workers.build_probe import call_build, target

        model = call_build(target(objects, req.build_fn), req.build_fn, req.build_args, tf_keras.Model)
        model.load_weights(req.h5)
        return model
    if req.trust_bytecode:
        # tf_keras runs a Lambda's bytecode with the globals of the module its config names (the training
        # script, "k2_zoo"): give it the Keras 2 module made from that source, as the user's process had.
        from k2to3.formats.artifact import read_artifact
        from k2to3.upgrade.needed_code import walk_layers

        art = read_artifact(req.h5)
        names = {lay.get("config", {}).get("module") for lay in walk_layers(art.model_config or {})} - {None}
        k2 = sys.modules.get(os.path.splitext(os.path.basename(req.k2_module))[0]) if req.k2_module else None
        saved = {n: sys.modules.get(n) for n in names}
        try:
            if k2 is not None:
                sys.modules.update({n: k2 for n in names})
            return tf_keras.models.load_model(req.h5, compile=False, custom_objects=objects, safe_mode=False)
        finally:
            for n, m in saved.items():
                if m is None:
                    sys.modules.pop(n, None)
                else:
                    sys.modules[n] = m
    if req.golden_config:
        import h5py
        from tf_keras.src.saving.legacy import hdf5_format

        with open(req.golden_config) as fh:
            config = json.load(fh)
        model = tf_keras.models.model_from_config(config, custom_objects=objects)
        with h5py.File(req.h5, "r") as f:
            group = f["model_weights"] if "model_weights" in f else f
            # A Keras 1 Sequential-with-Merge became a Functional model whose layer order is not the file's
            # flattened order: Keras 2 loaded it through its legacy Sequential; tf_keras can only go by name.
            (hdf5_format.load_weights_from_hdf5_group_by_name if req.golden_by_name
             else hdf5_format.load_weights_from_hdf5_group)(group, model)
        return model
    refuse_bytecode(req.h5)
    return tf_keras.models.load_model(req.h5, compile=False, custom_objects=objects)


def removed_backend_functions(tf_keras: Any) -> None:
    """Keras 2.2's K functions tf_keras dropped (rules/ops.toml [[k_removed]]: K.slice was tf.slice), back on
    tf_keras.backend for the user's code as written; a name tf_keras has is left alone."""
    import tensorflow as tf

    from k2to3.core.optable import backend_removed

    for name, tf_name in backend_removed().items():
        fn: Any = tf
        for part in tf_name.split("."):
            fn = getattr(fn, part)
        for backend in {id(m): m for m in (tf_keras.backend, getattr(getattr(tf, "keras", None), "backend", None))
                        if m is not None}.values():
            if not hasattr(backend, name):
                setattr(backend, name, fn)


def flip_theano_kernels(model: Any) -> None:
    """Keras 2.2's `_need_convert_kernel`: a Theano-trained file's convolution kernels, flipped along their
    spatial axes for a cross-correlating backend (tf_keras no longer does it)."""
    for layer in model.submodules:
        if type(layer).__name__ in ("Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "ConvLSTM2D"):
            values = layer.get_weights()
            n = 2 if type(layer).__name__ == "ConvLSTM2D" else 1
            values[:n] = [np.flip(v, axis=tuple(range(v.ndim - 2))) for v in values[:n]]
            layer.set_weights(values)


def refuse_bytecode(h5: str) -> None:
    """Last line of defence: tf_keras would unmarshal and run a Lambda's bytecode while loading."""
    from k2to3.formats.artifact import read_artifact
    from k2to3.upgrade.needed_code import collect_needs

    art = read_artifact(h5, weights_only_ok=True)
    lambdas = [n.layer for n in collect_needs(art.model_config, None) if n.kind in ("lambda", "activation_lambda")]
    if lambdas:
        raise K2to3Error(f"refusing to let tf_keras load Lambda bytecode ({', '.join(map(str, lambdas[:3]))}) "
                         "without --trust-bytecode")


def op_golden(req: GoldenRequest | GoldenReferenceRequest) -> dict[str, Any]:
    import tf_keras

    tf_keras.utils.set_random_seed(SEED)
    t0 = time.perf_counter()
    model = golden_model(tf_keras, req)
    if req.theano_kernels:
        flip_theano_kernels(model)
    transposed = nhwc.nhwc_layers(model)
    if transposed:  # channels_first layers tf_keras has no CPU kernel for: run them transposed (nhwc.py)
        model = nhwc.nhwc_copy(tf_keras, model)
    t_load = time.perf_counter() - t0
    xs = load_inputs(req.inputs)
    outs = [np.asarray(t) for t in tf_flatten(model(model_input(xs), training=False))]
    save_arrays(req.out, outs)
    reply: dict[str, Any] = {"keras_version": tf_keras.__version__, "load_seconds": t_load, "n_outputs": len(outs),
                             "nhwc_layers": transposed}
    if req.layers:
        names, tensors = probe_layers(model, tf_keras.layers.InputLayer, tf_flatten)
        arrays: list[np.ndarray] = []
        if tensors:
            probe = tf_keras.Model(model.inputs, tensors)
            arrays = [np.asarray(t) for t in tf_flatten(probe(model_input(xs), training=False))]
        save_arrays(req.layers_out, arrays)
        reply["layer_names"] = names
    return reply
