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
from k2to3.workers.protocol import CkptBridgeRequest, CkptGroupsRequest
from k2to3.workers.runtime import import_module

LAYER = re.compile(r"^layer_with_weights-(\d+)/([^/]+)/\.ATTRIBUTES/VARIABLE_VALUE$")
LEGACY_SLOT = re.compile(r"^layer_with_weights-(\d+)/([^/]+)/\.OPTIMIZER_SLOT/optimizer/([^/]+)/\.ATTRIBUTES/"
                         r"VARIABLE_VALUE$")


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
            "optimizer_values": sum(n.startswith("optimizer/") or bool(LEGACY_SLOT.match(n)) for n in shapes),
            "optimizer_layout": "optimizer_v2" if any(LEGACY_SLOT.match(n) for n in shapes) else
            "tf.keras>=2.11" if any(n.startswith("optimizer/_variables/") for n in shapes) else None,
            "declared_bytes": total,
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


def _restored_legacy_slots(prefix: str, model: Any, optimizer: Any) -> int:
    """optimizer_v2 (tf_keras.optimizers.legacy, the TF <= 2.10 default) attaches each slot to its variable
    (layer_with_weights-N/kernel/.OPTIMIZER_SLOT/optimizer/m) and restores it when the slot is created: every slot
    of the checkpoint is found on the live optimizer and compared value by value, and one that cannot be mapped
    stops the conversion with its key (a model converted without part of its optimizer state would resume
    differently)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    layers = [layer for layer in model.layers if layer.weights]
    # The restore itself creates any slot the checkpoint names (Adam's m on an RMSprop): the class's own slots are
    # those a fresh copy creates
    fresh = type(optimizer).from_config(optimizer.get_config())
    fresh._create_all_weights(model.trainable_variables)
    own = set(fresh.get_slot_names())
    same = 0
    for name in sorted(reader.get_variable_to_shape_map()):
        m = LEGACY_SLOT.match(name)
        if not m:
            continue
        i, attr, slot = int(m[1]), m[2], m[3]
        var = next((w for w in layers[i].weights if w.name.split("/")[-1].split(":")[0] == attr), None) \
            if i < len(layers) else None
        live = None
        if var is not None and slot in own:
            live = optimizer.get_slot(var, slot)
        if live is None or not np.array_equal(reader.get_tensor(name), live.numpy()):
            why = ("no model variable of that layer and attribute" if var is None else
                   f"{type(optimizer).__name__} keeps no slot '{slot}' (its slots: {', '.join(sorted(own))}) for "
                   f"{var.name}" if live is None else
                   f"the restored slot of {var.name} differs from the checkpoint's value")
            raise K2to3Error(f"{prefix}: optimizer slot {name.removesuffix('/.ATTRIBUTES/VARIABLE_VALUE')} cannot "
                             f"be mapped ({why})", hint="pass the build function and optimizer it was trained with, "
                             "or convert the weights alone: save_weights without the optimizer")
        same += 1
    if "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE" in reader.get_variable_to_shape_map():
        same += int(reader.get_tensor("optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE") == optimizer.iterations.numpy())
    return same


def op_ckpt_groups(req: CkptGroupsRequest) -> dict[str, Any]:
    return read_index(req.prefix)


def op_ckpt_bridge(req: CkptBridgeRequest) -> dict[str, Any]:
    import tf_keras

    from k2to3.workers.build_probe import call_build, target

    index = read_index(req.prefix)  # checked again here: the files could have changed since
    module = import_module(req.k2_module)
    model = call_build(target(module.K2TO3_OBJECTS, req.fn), req.fn, req.build_args, tf_keras.Model)
    status = model.load_weights(req.prefix)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as exc:
        raise K2to3Error(f"{req.prefix}: the checkpoint does not hold every weight of the model the build "
                         f"function makes ({str(exc).splitlines()[0][:160]})",
                         hint="pass the build function and --build-args it was trained with") from None
    slots = 0
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and index["optimizer_values"]:
        if hasattr(optimizer, "build"):  # the slots are created now, and restored as they are
            optimizer.build(model.trainable_variables)
            slots = _restored_slots(req.prefix, optimizer)
        else:  # optimizer_v2: its slots and step counter are created (and restored) on demand
            optimizer._create_all_weights(model.trainable_variables)
            slots = _restored_legacy_slots(req.prefix, model, optimizer)
    model.save(req.out, save_format="h5", include_optimizer=True)
    return {"keras_version": tf_keras.__version__, "optimizer_values": index["optimizer_values"],
            "optimizer_restored": slots, "compiled": optimizer is not None,
            "optimizer_layout": index["optimizer_layout"],
            "iterations": int(optimizer.iterations.numpy()) if optimizer is not None else None,
            "optimizer": type(optimizer).__name__ if optimizer is not None else None}
