"""TF-format checkpoints in the tensorflow worker. op ckpt_groups reads the index only (tf.train.load_checkpoint:
names, shapes, dtypes), refuses a checkpoint whose declared tensors do not fit its data files, and returns its
layers' weight groups; op ckpt_bridge builds the model with the --src build function under tf_keras, loads the
checkpoint into it (model.load_weights: values only, nothing in the file runs), restores the optimizer slots into
the optimizer the build function compiled, and re-saves the whole model as a Keras 2 HDF5."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.errors import K2to3Error
from k2to3.workers.runtime import import_module

LAYER = re.compile(r"^layer_with_weights-(\d+)/([^/]+)/\.ATTRIBUTES/VARIABLE_VALUE$")


def read_index(prefix: str) -> dict[str, Any]:
    """The checkpoint's tensors as its index declares them, checked against the bytes its data files hold."""
    import tensorflow as tf

    from k2to3.formats.checkpoint import data_bytes

    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    except Exception as exc:  # a damaged or hostile index: TensorFlow's own parser refused it
        raise K2to3Error(f"{prefix}: not a readable TF checkpoint index ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:160] if str(exc) else ''})",
                         hint="pass the PREFIX.index a TF 2 save_weights or ModelCheckpoint wrote") from None
    have = data_bytes(Path(prefix))
    total = 0
    for name, shape in shapes.items():
        dtype = dtypes[name]
        if dtype == tf.string:
            continue  # the object graph: a serialized proto read by TensorFlow's loader, never executed
        size = int(np.prod(shape, dtype=np.float64)) * dtype.size
        total += size
        if size > have or total > have:
            raise K2to3Error(f"{prefix}.index: declares {name} {list(shape)} ({size} bytes; {total} so far) but its "
                             f"data files hold {have} bytes", hint="the checkpoint is truncated or not what its "
                             "index says; pass a complete checkpoint")
    groups: dict[int, list[list[int]]] = {}
    for name, shape in shapes.items():
        m = LAYER.match(name)
        if m:
            groups.setdefault(int(m[1]), []).append([int(d) for d in shape])
    return {"groups": [{"name": f"layer_with_weights-{i}", "shapes": sorted(groups[i])} for i in sorted(groups)],
            "optimizer_values": sum(n.startswith("optimizer/") for n in shapes), "declared_bytes": total,
            "data_bytes": have}


def _restored_slots(prefix: str, optimizer: Any) -> int:
    """Optimizer variables (tf_keras >= 2.11 layout: optimizer/_variables/N) whose value is the checkpoint's: the
    restore is proven value by value, not assumed from the load's status."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    live = list(getattr(optimizer, "_variables", []))
    same = 0
    for name in reader.get_variable_to_shape_map():
        m = re.match(r"^optimizer/_variables/(\d+)/\.ATTRIBUTES/VARIABLE_VALUE$", name)
        if m and int(m[1]) < len(live) and np.array_equal(reader.get_tensor(name), live[int(m[1])].numpy()):
            same += 1
    return same


def op_ckpt_groups(req: dict[str, Any]) -> dict[str, Any]:
    return read_index(req["prefix"])


def op_ckpt_bridge(req: dict[str, Any]) -> dict[str, Any]:
    import tf_keras

    from k2to3.workers.builders import call_build

    index = read_index(req["prefix"])  # checked again here: the files could have changed since
    module = import_module(req["k2_module"])
    model = call_build(module.K2TO3_OBJECTS[req["fn"]], req["fn"], req.get("build_args"), tf_keras.Model)
    status = model.load_weights(req["prefix"])
    try:
        status.assert_existing_objects_matched()
    except AssertionError as exc:
        raise K2to3Error(f"{req['prefix']}: the checkpoint does not hold every weight of the model the build "
                         f"function makes ({str(exc).splitlines()[0][:160]})",
                         hint="pass the build function and --build-args it was trained with") from None
    slots = 0
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and index["optimizer_values"]:
        optimizer.build(model.trainable_variables)  # the slots are created now, and restored as they are
        slots = _restored_slots(req["prefix"], optimizer)
    model.save(req["out"], save_format="h5", include_optimizer=True)
    return {"keras_version": tf_keras.__version__, "optimizer_values": index["optimizer_values"],
            "optimizer_restored": slots, "compiled": optimizer is not None,
            "iterations": int(optimizer.iterations.numpy()) if optimizer is not None else None,
            "optimizer": type(optimizer).__name__ if optimizer is not None else None}
