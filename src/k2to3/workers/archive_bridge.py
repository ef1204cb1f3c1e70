"""The `bridge` op: a tf.keras `.keras` archive or SavedModel loaded by tf_keras (safe_mode=True) and re-saved as a
Keras 2 HDF5 for the rest of the pipeline (pipeline/bridge.py is the parent side); an archive tf_keras's own loader
refuses is read as data, and a subclassed Model saved as the root is re-saved as the functional model of one layer."""

from __future__ import annotations

import json
import zipfile
from typing import Any

import numpy as np

from k2to3.errors import K2to3Error
from k2to3.workers.protocol import BridgeRequest
from k2to3.workers.runtime import import_module
from k2to3.workers.tf_keras_outputs import tf_keras_objects


def op_bridge(req: BridgeRequest) -> dict[str, Any]:
    """Load a tf.keras `.keras` archive or SavedModel with tf_keras (safe_mode=True: no Lambda bytecode) and
    re-save it as HDF5. The parent checked the config first: no Lambda, custom objects only from --src."""
    import tf_keras

    objects = tf_keras_objects()
    if req.k2_module:
        objects.update(import_module(req.k2_module).K2TO3_OBJECTS)
    compiled, how = True, "loaded"
    try:
        model = tf_keras.models.load_model(req.src, custom_objects=objects, safe_mode=True)
    except Exception:  # the compile state is optional (custom losses may be missing): load without it
        compiled = False
        try:
            model = tf_keras.models.load_model(req.src, compile=False, custom_objects=objects, safe_mode=True)
        except Exception as exc:
            if not zipfile.is_zipfile(req.src):
                raise
            model, how = archive_as_data(tf_keras, req.src, objects, exc), "read as data"
    wrapped = as_layer_graph(tf_keras, model)
    wrapped.save(req.out, save_format="h5")
    return {"keras_version": tf_keras.__version__, "compiled": compiled, "how": how,
            "wrapped": type(model).__name__ if wrapped is not model else None}


def as_layer_graph(tf_keras: Any, model: Any) -> Any:
    """A subclassed Model whose layers are connected only in call() (`class Tower(keras.Model)` saved to a
    SavedModel or archive, its class from --src): the functional model of one layer, that model, on the inputs it
    was saved with (its save spec). HDF5 and the rest of the pipeline hold a layer graph; a Model subclass used as a
    layer converts like any custom layer (source/class_adapters.py)."""
    import tensorflow as tf

    if getattr(model, "_is_graph_network", False) or isinstance(model, tf_keras.Sequential):
        return model
    spec = model.save_spec() if hasattr(model, "save_spec") else None
    tensors = [a for a in tf.nest.flatten(spec) if isinstance(a, tf.TensorSpec)] if spec else []
    if spec and len(spec[0]) == 1 and not any(isinstance(v, tf.TensorSpec) for v in tf.nest.flatten(spec[1])):
        inputs = tf.nest.map_structure(lambda s: tf_keras.Input(shape=s.shape[1:], dtype=s.dtype), spec[0][0])
    elif not tensors and getattr(model, "_build_input_shape", None) is not None:  # built from a build_config
        shape = tf.TensorShape(model._build_input_shape)
        inputs = tf_keras.Input(shape=shape[1:])
    else:
        raise K2to3Error(f"{type(model).__name__} is a subclassed keras Model with no recorded input (never called "
                         "or built before it was saved, or called with several tensors): its inputs are not in the "
                         "file", hint="build the same layers as a functional model (keras.Model(inputs, outputs)) in "
                         "the source, save_weights, and convert that file with --src FILE:FUNCTION")
    return tf_keras.Model(inputs, model(inputs), name=model.name)


def archive_as_data(tf_keras: Any, src: str, objects: dict[str, Any], why: Exception) -> Any:
    """A `.keras` archive tf_keras's own loader refuses (tf.keras 2.13/2.14 keyed a functional model's weights by the
    layers' creation names): the model from config.json (checked as data by the parent: no Lambda), each layer's
    variables from model.weights.h5 by formats/keras_archive.py's matching, shapes checked before any is set."""
    import io

    import h5py

    from k2to3.formats.keras_archive import CHECKPOINT_GROUP, layer_keys

    with zipfile.ZipFile(src) as z:
        if "model.weights.h5" not in z.namelist():
            raise why
        config = json.loads(z.read("config.json"))
        data = z.read("model.weights.h5")
    model = tf_keras.models.model_from_config(config, custom_objects=objects)
    with h5py.File(io.BytesIO(data), "r") as f:
        group = f["layers"] if "layers" in f else f[CHECKPOINT_GROUP] if CHECKPOINT_GROUP in f else None
        if group is None:
            raise why
        keys = layer_keys(list(group), [(lay.name, type(lay).__name__) for lay in model.layers])
        for lay in model.layers:
            stored = group[keys[lay.name]]
            values = [np.asarray(stored["vars"][str(i)]) for i in range(len(stored["vars"]))] \
                if "vars" in stored else []
            if [v.shape for v in values] != [tuple(w.shape) for w in lay.weights] or set(stored) - {"vars"}:
                raise K2to3Error(f"layer '{lay.name}': the archive holds {[v.shape for v in values]} under "
                                 f"{keys[lay.name]!r}, the layer has {[tuple(w.shape) for w in lay.weights]}")
            if values:
                lay.set_weights(values)
    return model
