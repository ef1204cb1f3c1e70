"""Parse a Keras 2 file's `optimizer_weights` into slots keyed by model weight: h5py + json only, no backend.

Three layouts exist (docs/optimizers.md):
- tf.keras optimizer_v2 (`tf_keras.optimizers.legacy.*`, TF 2.0-2.10 default): `Adam/iter:0`,
  `Adam/dense/kernel/m:0` (optimizer name / model weight / slot);
- tf.keras >= 2.11 optimizers: `iteration:0`, `Adam/m/dense/kernel:0` (optimizer name / slot / model weight; under a
  LossScaleOptimizer the optimizer name is missing: `m/dense/kernel:0`);
- standalone Keras 2.x: `Adam/iterations:0` then unnamed `training/Adam/Variable_N:0`, in the order of Keras 2's
  `optimizer.weights` ([iterations] + ms + vs + vhats for Adam), each list in the model's collected trainable
  weights order. Only the order is known, so every slot is shape-checked against the weight it is paired with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from k2to3.core.h5safe import open_checked
from k2to3.errors import K2to3Error, NotPortable
from k2to3.formats.artifact import LegacyArtifact, names_attr

# Keras 2 slot name -> Keras 3 optimizer attribute holding the list of that slot (one per trainable variable).
SLOTS: dict[str, dict[str, str]] = {
    "Adam": {"m": "_momentums", "v": "_velocities", "vhat": "_velocity_hats"},
    "AdamW": {"m": "_momentums", "v": "_velocities", "vhat": "_velocity_hats"},
    "SGD": {"momentum": "momentums", "m": "momentums"},
    "RMSprop": {"rms": "_velocities", "velocity": "_velocities", "momentum": "_momentums",
                "mg": "_average_gradients", "average_gradient": "_average_gradients"},
    "Adagrad": {"accumulator": "_accumulators"},
    "Adadelta": {"accum_grad": "_accumulated_grads", "accum_var": "_accumulated_delta_vars",
                 "accumulated_grad": "_accumulated_grads", "accumulated_delta_var": "_accumulated_delta_vars"},
    "Adamax": {"m": "_m", "v": "_u", "u": "_u"},
    "Nadam": {"m": "_momentums", "v": "_velocities"},
    "Ftrl": {"accumulator": "_accumulators", "linear": "_linears"},
}
ITERATION_NAMES = ("iter", "iteration", "iterations")
# Optimizer-level state of optimizer_v2 beside the iteration: Nadam's momentum product (K2T605)
SCALAR_STATE = {"Nadam": ("momentum_cache",)}
Version = tuple[int, int, int]
# Standalone Keras 2 `optimizer.weights` (what get_weights() returns and save_model stores, in order), read from
# `self.weights = ...` in keras/optimizers.py at every tag 2.0.0 .. 2.3.1 (keras-team/keras):
# (first version with it, leading scalars, per-weight lists), e.g. Adam 2.1.3+: [iterations] + ms + vs + vhats.
# RMSprop, Adagrad and Adadelta saved no iteration counter before 2.3.0; Nadam added m_schedule in 2.3.0.
STANDALONE_LAYOUTS: dict[str, list[tuple[Version, tuple[str, ...], tuple[str, ...]]]] = {
    "SGD": [((2, 0, 0), ("iterations",), ("momentum",))],
    "RMSprop": [((2, 0, 0), (), ("rms",)), ((2, 3, 0), ("iterations",), ("rms",))],
    "Adagrad": [((2, 0, 0), (), ("accumulator",)), ((2, 3, 0), ("iterations",), ("accumulator",))],
    "Adadelta": [((2, 0, 0), (), ("accum_grad", "accum_var")),
                 ((2, 3, 0), ("iterations",), ("accum_grad", "accum_var"))],
    "Adam": [((2, 0, 0), ("iterations",), ("m", "v")), ((2, 1, 3), ("iterations",), ("m", "v", "vhat"))],
    "Adamax": [((2, 0, 0), ("iterations",), ("m", "u"))],
    "Nadam": [((2, 0, 0), ("iterations",), ("m", "v")), ((2, 3, 0), ("iterations", "m_schedule"), ("m", "v"))],
}
# Keras 2.3 names each slot `<prefix>_<i>` (i: the weight's position); before, they are TF's `Variable_N`.
STANDALONE_NAMES = {"momentum": "moment", "rms": "accumulator", "accumulator": "accumulator",
                    "accum_grad": "accumulator", "accum_var": "delta_accumulator", "m": "m", "v": "v", "vhat": "vhat",
                    "u": "u"}
# Keras 2.0.0-2.0.5 `compile` sorted the collected trainable weights by variable name (engine/training.py), so
# the slots follow name order there, not layer order (2.0.6 dropped the sort).
SORTED_BY_NAME_UNTIL: Version = (2, 0, 5)
_NAMED_SLOT = re.compile(r"^(moment|accumulator|delta_accumulator|m|v|vhat|u)_(\d+)$")
DROP_HINT = "the model is converted without its optimizer state (report: optimizer.status = dropped)"


@dataclass(frozen=True)
class Slot:
    saved_name: str  # as in optimizer_weights/weight_names
    h5path: str
    shape: tuple[int, ...]
    slot: str  # Keras 2 slot name ("m"), or "iterations"
    weight: str | None  # model weight name as in model_weights ("d1/kernel"), None for the iteration counter


@dataclass
class OptimizerState:
    class_name: str
    layout: str  # "optimizer_v2" | "tf.keras>=2.11" | "keras2-standalone"
    slots: list[Slot]
    iteration: int | None = None  # the saved step counter (read with the names: one open of the file)

    @property
    def iteration_slot(self) -> Slot | None:
        return next((s for s in self.slots if s.slot == "iterations"), None)

    def to_dict(self) -> dict[str, Any]:
        return {"class_name": self.class_name, "layout": self.layout, "n_saved": len(self.slots)}


def optimizer_class(training_config: dict[str, Any] | None) -> tuple[str | None, bool]:
    """(inner optimizer class, wrapped in a LossScaleOptimizer) from a training_config."""
    opt = (training_config or {}).get("optimizer_config")
    if not isinstance(opt, dict):
        return None, False
    cls, cfg = opt.get("class_name"), opt.get("config") or {}
    if cls in ("LossScaleOptimizer", "LossScaleOptimizerV3"):
        inner = cfg.get("inner_optimizer") or cfg.get("optimizer") or {}
        return (inner.get("class_name") if isinstance(inner, dict) else None), True
    return (cls.removeprefix("Custom>") if isinstance(cls, str) else None), False


def _strip(name: str) -> str:
    return name[:-2] if name.endswith(":0") else name


def _parse_named(path: Any, cls: str, names: list[str], weights: set[str]) -> tuple[str, list[tuple[str, str | None]]]:
    slots = SLOTS[cls]
    out: list[tuple[str, str | None]] = []
    layouts = set()
    for raw in names:
        n = _strip(raw)
        parts = n.split("/")
        if parts[-1] in ITERATION_NAMES:
            out.append(("iterations", None))
            layouts.add("tf.keras>=2.11" if parts[-1] == "iteration" else "optimizer_v2")
            continue
        if len(parts) == 2 and parts[-1] in SCALAR_STATE.get(cls, ()):
            out.append((parts[-1], None))
            layouts.add("optimizer_v2")
            continue
        # optimizer_v2: OPT/<weight>/<slot>, or <weight>/<slot> when the slots were made outside apply_gradients'
        # name scope (eagerly: a checkpoint's slots restored before any step)
        if parts[-1] in slots and "/".join(parts[1:-1]) in weights:
            out.append((parts[-1], "/".join(parts[1:-1])))
            continue
        if parts[-1] in slots and "/".join(parts[:-1]) in weights:
            out.append((parts[-1], "/".join(parts[:-1])))
            continue
        # >=2.11: [OPT/]<slot>/<weight>
        for start in (0, 1):
            if len(parts) > start + 1 and parts[start] in slots and "/".join(parts[start + 1:]) in weights:
                out.append((parts[start], "/".join(parts[start + 1:])))
                break
        else:
            raise NotPortable(f"{path}: optimizer weight '{raw}' names no {cls} slot of a model weight",
                              hint=DROP_HINT)
    layout = "tf.keras>=2.11" if "tf.keras>=2.11" in layouts or not layouts else "optimizer_v2"
    return layout, out


Trainable = tuple[list[str], list[tuple[int, ...]]]  # weight names and shapes in Keras 2's collected order


def read_state(artifact: LegacyArtifact, trainable: Trainable | None = None) -> OptimizerState | None:
    """The optimizer state of the file, or None when it has none. `trainable`: the model's trainable weight names
    in Keras 2's collected order (needed only by the standalone layout, whose slots are unnamed)."""
    cls, _ = optimizer_class(artifact.training_config)
    f = open_checked(artifact.path)
    try:
        if "optimizer_weights" not in f:
            return None
        g = f["optimizer_weights"]
        names = names_attr(g, "weight_names")
        shapes = [tuple(int(d) for d in g[n].shape) for n in names]
        paths = [f"optimizer_weights/{n}" for n in names]
        its = [p for n, p in zip(names, paths) if _scalar_kind(n) in ITERATION_NAMES and g[n].size == 1]
        iteration = int(np.asarray(f[its[0]]).reshape(-1)[0]) if its else None
    finally:
        f.close()
    if not names:
        return None
    if cls not in SLOTS:
        raise NotPortable(f"{artifact.path}: optimizer {cls!r} has no Keras 3 state mapping",
                          hint=DROP_HINT)
    weights = {_strip(e.name) for es in artifact.weights.values() for e in es}
    if any(_strip(n).split("/")[-1].startswith("Variable") or (_strip(n).startswith("training") and _NAMED_SLOT.match(
            _strip(n).split("/")[-1])) for n in names):
        layout, parsed = "keras2-standalone", _parse_standalone(artifact.path, cls, names, shapes, trainable,
                                                                artifact.keras_version)
    else:
        layout, parsed = _parse_named(artifact.path, cls, names, weights)
    return OptimizerState(cls, layout, [Slot(n, p, s, slot, w) for n, p, s, (slot, w) in
                                        zip(names, paths, shapes, parsed)], iteration)


def keras2_version(text: str | None) -> Version | None:
    """(2, 2, 4) from a standalone Keras 2 file's keras_version; None for tf.keras ("2.1.6-tf") or anything else."""
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m and m.group(1) == "2" else None


def _scalar_kind(name: str) -> str:
    """`iterations` from `Adam/iterations:0` or `iterations_1:0` (TF uniquified a second graph's name)."""
    return re.sub(r"_\d+$", "", _strip(name).split("/")[-1])


def _parse_standalone(path: Any, cls: str, names: list[str], shapes: list[tuple[int, ...]],
                      trainable: Trainable | None, keras_version: str | None) -> list[tuple[str, str | None]]:
    """Pair unnamed slots with weights by the order of the file's Keras 2 version, then prove it with shapes."""
    version = keras2_version(keras_version)
    layouts = STANDALONE_LAYOUTS.get(cls)
    if layouts is None or trainable is None or version is None:
        why = f"keras_version {keras_version!r} is not a standalone Keras 2 release" if layouts and trainable \
            else "no known variable order"
        raise NotPortable(f"{path}: standalone Keras 2 {cls} state (unnamed slots): {why}", hint=DROP_HINT)
    _, head, order = [lay for lay in layouts if lay[0] <= version][-1]
    wnames, wshapes = trainable
    if version <= SORTED_BY_NAME_UNTIL:
        wnames, wshapes = (list(x) for x in zip(*sorted(zip(wnames, wshapes)))) if wnames else ([], [])
    expected = len(head) + len(order) * len(wnames)
    got_head = [_scalar_kind(n) for n in names[:len(head)]]
    if len(names) != expected or got_head != list(head):
        lists = " + ".join([f"[{', '.join(head)}]"] * bool(head) + [f"{k}s" for k in order])
        raise NotPortable(f"{path}: {len(names)} optimizer weights; Keras {keras_version} {cls} over "
                          f"{len(wnames)} trainable weights saves {lists} = {expected}", hint=DROP_HINT)
    out: list[tuple[str, str | None]] = [(k, None) for k in head]
    i = len(head)
    for slot in order:
        for j, (w, ws) in enumerate(zip(wnames, wshapes)):
            got = shapes[i]
            # Keras 2.1.3+ Adam without amsgrad keeps a (1,) placeholder vhat per weight.
            ok = got == tuple(ws) or (slot == "vhat" and got == (1,))
            named = _NAMED_SLOT.match(_strip(names[i]).split("/")[-1])
            if named and (named.group(1) != STANDALONE_NAMES[slot] or int(named.group(2)) != j):
                ok = False  # Keras 2.3 names the slot: it must be this list's, at this weight's position
            if not ok:
                raise NotPortable(f"{path}: optimizer weight '{names[i]}' has shape {got}; in Keras "
                                  f"{keras_version}'s order it is the {slot} of '{w}' with shape {tuple(ws)}",
                                  hint=DROP_HINT)
            out.append((slot, w))
            i += 1
    return out

# BatchNormalization's moving statistics: the non-trainable weights a static read can tell by name.
_NON_TRAINABLE = ("moving_mean", "moving_variance")


def static_status(artifact: LegacyArtifact) -> dict[str, Any]:
    """Whether the file's optimizer state would travel, read as data (audit; no keras): `status` `restored`
    (every saved slot names, or by Keras 2's order and shape pairs with, a model weight), `none`, or `dropped` with
    the `reason` convert would give. A prediction: convert's ledger against the rebuilt Keras 3 optimizer is the
    proof (BatchNormalization's moving statistics are the only non-trainable weights told apart here)."""
    cls, lso = optimizer_class(artifact.training_config)
    if not artifact.optimizer_weight_count:  # counted when the artifact was read: no second open
        return {"status": "none", "reason": "the file stores no optimizer state", "class_name": cls}
    ws = [e for es in artifact.weights.values() for e in es
          if _strip(e.name).split("/")[-1] not in _NON_TRAINABLE]
    try:
        state = read_state(artifact, ([_strip(e.name) for e in ws], [tuple(e.shape) for e in ws]))
    except K2to3Error as exc:  # unmappable state (NotPortable), or a slot the checked reader refuses
        return {"status": "dropped", "reason": exc.message, "class_name": cls}
    if state is None:
        return {"status": "none", "reason": "the file stores no optimizer state", "class_name": cls}
    return {"status": "restored", **state.to_dict(), "loss_scale": lso, "iteration": state.iteration}
