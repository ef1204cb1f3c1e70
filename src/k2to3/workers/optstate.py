"""Worker side of optimizer state migration: put a Keras 2 file's optimizer slots into the Keras 3 optimizer of
the rebuilt model, with a ledger (restored / expected). Runs in the TensorFlow rebuild worker before model.save;
the `.keras` then stores the variables and `load_model` restores them on every backend (the optimizer is built on
`model.trainable_variables` in both places, so the variable order is the same)."""

from __future__ import annotations

from typing import Any

import numpy as np

from k2to3.core.h5safe import open_checked, read_dataset
from k2to3.errors import Exit, K2to3Error
from k2to3.formats.artifact import LegacyArtifact
from k2to3.formats.optimizer_state import SLOTS, read_state


def _strip(name: str) -> str:
    return name[:-2] if name.endswith(":0") else name


def _keras2_trainable(artifact: LegacyArtifact, pairs: dict[str, Any]) -> tuple[list[str], list[tuple]]:
    """Model weights Keras 2's optimizer was built on: per layer in file order, trainable first (what Keras 2's
    collected trainable weights are for a model whose `trainable` flags did not change after compile)."""
    names, shapes = [], []
    for entries in artifact.weights.values():
        for e in entries:
            var = pairs.get(e.h5path)
            if var is not None and var.trainable:
                names.append(_strip(e.name))
                shapes.append(tuple(e.shape))
    return names, shapes


def inner_optimizer(keras: Any, opt: Any) -> Any:
    return opt.inner_optimizer if isinstance(opt, keras.optimizers.LossScaleOptimizer) else opt


def slot_variables(inner: Any, cls: str) -> dict[str, list[Any]]:
    return {attr: list(getattr(inner, attr, None) or []) for attr in sorted(set(SLOTS[cls].values()))}


def _assign_slots(keras: Any, opt: Any, inner: Any, state: Any, artifact: LegacyArtifact, by_weight: dict[str, Any],
                  lists: dict[str, list[Any]]) -> tuple[set[int], list[str], int | None, list[str], dict[str, int]]:
    """Every saved slot assigned to its Keras 3 variable, read one at a time from the file: (the variables assigned,
    the saved slots ignored, the iteration, notes, saved name -> index in optimizer.variables)."""
    done: set[int] = set()
    ignored, iteration, notes = [], None, []
    # saved slot name -> index in optimizer.variables (the saved and loaded order; paths change on load)
    mapping: dict[str, int] = {}
    index = {id(v): i for i, v in enumerate(opt.variables)}
    f = open_checked(artifact.path)
    try:
        for slot in state.slots:
            value = read_dataset(f, slot.h5path)
            if slot.slot == "iterations":
                iteration = int(np.asarray(value).reshape(-1)[0])
                inner.iterations.assign(iteration)
                mapping[slot.saved_name] = index[id(inner.iterations)]
                continue
            if slot.slot in ("m_schedule", "momentum_cache"):  # Keras 2 Nadam's momentum product (K2T605)
                product = getattr(inner, "_u_product", None)
                if product is None or type(inner).__name__ != "Keras2Nadam":
                    ignored.append(slot.saved_name)
                    notes.append(f"Nadam {slot.slot} not carried: the Keras 3 optimizer is not k2to3>Keras2Nadam")
                    continue
                product.assign(np.asarray(value, np.float32).reshape(()))
                mapping[slot.saved_name] = index[id(product)]
                continue
            target_list = lists.get(SLOTS[state.class_name][slot.slot]) or []
            if not target_list and slot.slot == "vhat" and value.shape == (1,):
                ignored.append(slot.saved_name)  # standalone Keras 2 Adam's placeholder when amsgrad=False
                continue
            if not target_list and slot.slot in ("momentum", "m") and state.class_name == "SGD":
                # standalone Keras 2 SGD (`momentum`) and tf_keras >= 2.11's SGD (`m`, e.g. compile("sgd")) keep
                # moments even at momentum=0; they never enter an update there (m = -lr*g + 0*m), and Keras 3's
                # SGD creates none
                ignored.append(slot.saved_name)
                continue
            var = by_weight.get(slot.weight or "")
            if var is None or not target_list:
                raise K2to3Error(f"optimizer slot '{slot.saved_name}' has no Keras 3 {state.class_name} variable "
                                 f"(weight '{slot.weight}', slot '{slot.slot}')", Exit.INTERNAL,
                                 hint="report it to k2to3 with the file")
            target = target_list[inner._get_variable_index(var)]
            value = _cudnn_slot(artifact, slot.weight or "", value, tuple(target.shape))
            if tuple(target.shape) != tuple(value.shape):
                raise K2to3Error(f"optimizer slot '{slot.saved_name}' has shape {value.shape}, the Keras 3 "
                                 f"variable {target.path} {tuple(target.shape)}", Exit.INTERNAL,
                                 hint="report it with the file")
            target.assign(value.astype(keras.backend.standardize_dtype(target.dtype)))
            done.add(id(target))
            mapping[slot.saved_name] = index[id(target)]
    finally:
        f.close()
    return done, ignored, iteration, notes, mapping


def _cudnn_slot(artifact: LegacyArtifact, weight: str, value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A slot of a CuDNNLSTM / CuDNNGRU weight in the layout its weight was restored in (upgrade/cudnn.py); any other
    slot as it is. The layer is named by the weight's first path part (a Bidirectional's inner layer under it)."""
    if not artifact.model_config:
        return value
    from k2to3.upgrade.cudnn import convert_slot
    from k2to3.upgrade.needed_code import walk_layers

    parts = weight.split("/")
    for layer in walk_layers(artifact.model_config):
        cls = str(layer.get("class_name"))
        inner = (layer.get("config") or {}).get("layer") or {}
        if (layer.get("config") or {}).get("name") in parts[:2] and "CuDNN" in cls + str(inner.get("class_name")):
            target = "LSTM" if "LSTM" in cls + str(inner.get("class_name")) else "GRU"
            out = convert_slot(target, weight, value, shape)
            return value if out is None else out
    return value


def migrate(keras: Any, model: Any, artifact: LegacyArtifact, pairs: dict[str, Any]) -> dict[str, Any]:
    """Assign every saved slot; returns the report's `optimizer` section. A state that cannot be mapped is
    reported (status "dropped", reason) and the model is saved without it, as plain Keras 3 would; a state that
    is mapped must be complete (every Keras 3 slot restored) or this raises."""
    opt = getattr(model, "optimizer", None)
    try:
        state = read_state(artifact, _keras2_trainable(artifact, pairs))
    except K2to3Error as exc:
        return {"status": "dropped", "reason": exc.message, "class_name": None}
    if state is None:
        return {"status": "none", "reason": "the file stores no optimizer state"}
    if opt is None:
        return {"status": "dropped", "reason": "the model has no Keras 3 optimizer (training_config not compiled)",
                **state.to_dict()}
    inner = inner_optimizer(keras, opt)
    if state.class_name not in {c.__name__ for c in type(inner).__mro__}:  # k2to3>Keras2RMSprop is an RMSprop
        return {"status": "dropped", "reason": f"Keras 3 optimizer is {type(inner).__name__}, the state is "
                f"{state.class_name}'s", **state.to_dict()}
    opt.build(model.trainable_variables)
    by_weight = {_strip(e.name): pairs.get(e.h5path) for es in artifact.weights.values() for e in es}
    lists = slot_variables(inner, state.class_name)
    expected = {id(v): v for vs in lists.values() for v in vs}
    done, ignored, iteration, notes, mapping = _assign_slots(keras, opt, inner, state, artifact, by_weight, lists)
    missing = [v.path for k, v in expected.items() if k not in done]
    if not done and not ignored and all(s.slot == "iterations" for s in state.slots):
        # tf.keras >= 2.11 saves an optimizer that never ran a step as its iteration alone: zero slots are its
        # exact state, and Keras 3 builds them so
        if iteration:
            return {"status": "dropped", "reason": f"the file saves iteration {iteration} but no slot variables",
                    **state.to_dict()}
        return {"status": "restored", **state.to_dict(), "keras3_class": type(opt).__name__, "iteration": 0,
                "note": "never-trained optimizer (iteration 0, no slots saved): fresh slots are its state",
                "ledger": {"slots_expected": 0, "slots_restored": 0, "ignored": 0, "complete": True},
                "slots": mapping}
    if missing:
        raise K2to3Error(f"optimizer state incomplete: {len(done)}/{len(expected)} Keras 3 slot variables restored;"
                         f" not in the file: {missing[:3]}", Exit.INTERNAL, hint="report it to k2to3 with the file")
    if state.iteration_slot is None:
        notes.append(f"the file saves no iteration counter (standalone Keras 2.0-2.2 {state.class_name}): Keras 3 "
                     "starts at 0; the update does not depend on it unless the optimizer has a decay schedule")
    return {"status": "restored", **state.to_dict(), "keras3_class": type(opt).__name__,
            "iteration": iteration, "ledger": {"slots_expected": len(expected), "slots_restored": len(done),
                                                "ignored": len(ignored), "complete": True}, "slots": mapping,
            **({"note": "; ".join(notes)} if notes else {})}


def dump(keras: Any, model: Any) -> dict[str, Any]:
    """Every optimizer variable by path (numpy), for checks and the fit-steps comparison."""
    opt = getattr(model, "optimizer", None)
    if opt is None:
        return {}
    return {v.path: np.asarray(keras.ops.convert_to_numpy(v)) for v in opt.variables}
