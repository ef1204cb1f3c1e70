"""Restore Keras 2 weights onto a rebuilt Keras 3 model by original layer name, with a ledger.

Keras 2 saved each layer's weights as trainable + non-trainable (`_legacy_weights`); the same
order is used here, per layer, with shape checks. Nested models are split per inner layer by the
saved weight names ("dense1/kernel:0" belongs to inner layer "dense1"). Only numpy is imported;
layers and variables are used through their Keras 3 attributes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from k2to3.errors import K2to3Error
from k2to3.formats.artifact import LegacyArtifact, WeightEntry
from k2to3.workers.chunked_arrays import SLICED_BYTES, nonfinite


@dataclass
class Ledger:
    tensors_expected: int = 0
    tensors_restored: int = 0
    params_expected: int = 0
    params_restored: int = 0
    unassigned_file_tensors: list[str] = field(default_factory=list)
    unrestored_variables: list[str] = field(default_factory=list)
    name_mismatches: list[str] = field(default_factory=list)
    reshaped: list[str] = field(default_factory=list)
    nonfinite: list[str] = field(default_factory=list)  # weights holding NaN or Inf (restored as stored)
    converted: list[str] = field(default_factory=list)  # weight layouts converted (e.g. cuDNN RNNs, K2T450)
    sliced: int = 0  # tensors read and assigned by slices (large ones: Restorer.assign_in_slices)

    @property
    def complete(self) -> bool:
        return (
            not self.unassigned_file_tensors
            and not self.unrestored_variables
            and self.tensors_restored == self.tensors_expected
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}


def _base(name: str) -> str:
    return name.split("/")[-1].split(":")[0]


def legacy_weights(layer: Any) -> list[Any]:
    return list(layer.trainable_weights) + list(layer.non_trainable_weights)


def _is_model(layer: Any) -> bool:
    return hasattr(layer, "layers") and hasattr(layer, "inputs")








class _FileValues(dict):
    """dataset path -> array: what was put in (converted layouts) or else read from the open file on each
    access (never kept)."""

    def __init__(self, f: Any):
        super().__init__()
        self.f = f

    def __missing__(self, key: str) -> np.ndarray:
        from k2to3.core.h5safe import read_dataset

        return read_dataset(self.f, key)


class Restorer:
    def __init__(self, artifact: LegacyArtifact, renames: dict[str, str], transforms: dict[str, str] | None = None):
        self.artifact = artifact
        self.renames = renames
        self.transforms = transforms or {}
        self.ledger = Ledger()
        self.assigned: set[int] = set()
        from k2to3.upgrade.keras1.translate import is_keras1

        # Layouts older than Keras 2 (upgrade/keras1/layouts.py): Keras 1 files, Theano-trained convolution kernels.
        self.keras1 = artifact.model_config is not None and is_keras1(artifact.model_config)
        self.theano = (artifact.backend or "").lower() == "theano"
        self.pairs: dict[str, Any] = {}  # dataset path in the file -> the Keras 3 variable it was restored into

    def k3_name(self, orig: str) -> str:
        return self.renames.get(orig, orig)

    def assign(self, var: Any, entry: WeightEntry, value: np.ndarray, where: str) -> None:
        if tuple(var.shape) != tuple(value.shape) and value.size == int(np.prod(var.shape)) and \
                np.squeeze(value).shape == tuple(d for d in var.shape if d != 1):
            # e.g. BatchNormalization(virtual_batch_size) saved gamma as (1, 1, C): same values.
            self.ledger.reshaped.append(f"{entry.name} {value.shape} -> {tuple(var.shape)}")
            value = value.reshape(tuple(var.shape))
        if tuple(var.shape) != tuple(value.shape):
            raise K2to3Error(
                f"layer '{where}': weight {entry.name} has shape {value.shape} in the file but the Keras 3 "
                f"layer expects {tuple(var.shape)}",
                hint="the layer config and the saved weights disagree; report it with the file",
            )
        var.assign(value.astype(var.dtype) if str(value.dtype) != str(var.dtype) else value)
        self._record(var, entry, int(value.size))

    def _record(self, var: Any, entry: WeightEntry, size: int) -> None:
        self.assigned.add(id(var))
        self.pairs[entry.h5path] = var
        self.ledger.tensors_restored += 1
        self.ledger.params_restored += size
        if _base(entry.name) != _base(var.path if hasattr(var, "path") else var.name):
            self.ledger.name_mismatches.append(f"{entry.name} -> {getattr(var, 'path', var.name)}")

    def assign_in_slices(self, var: Any, entry: WeightEntry, f: Any) -> bool:
        """A large dataset of the variable's own shape and dtype, assigned slice by slice of its first axis into
        a TensorFlow variable (the build worker's): the whole array read from the file, the tensor made from it
        and the variable are never alive at once (a large kernel would be, three times over). False, and
        nothing assigned, for anything else."""
        ds = f[entry.h5path]
        target = getattr(var, "_value", None)  # the tf.Variable itself (var.value may be an autocast copy)
        if ds.nbytes < SLICED_BYTES or ds.ndim == 0 or tuple(ds.shape) != tuple(var.shape) \
                or str(ds.dtype) != str(var.dtype) or not type(target).__module__.startswith("tensorflow") \
                or not hasattr(target, "handle"):
            return False
        from k2to3.workers.large_weights import Big, tf_fill  # only a tensorflow worker gets here

        tf_fill(target, Big(ds).slices())
        self._record(var, entry, int(np.prod(ds.shape)))
        self.ledger.sliced += 1
        return True

    def legacy_layout(self, layer: Any, entries: list[WeightEntry], values: dict[str, np.ndarray],
                      where: str) -> list[WeightEntry]:
        """Keras 1 / Theano tensors converted to Keras 2's layout (upgrade/keras1/layouts.py), added to `values` under
        new keys; the entries to restore from."""
        from k2to3.upgrade.keras1 import layouts as weights_legacy
        cls, arrays, out = type(layer).__name__, [values[e.h5path] for e in entries], None
        if self.keras1:
            out = self._keras1_layout(layer, arrays, [e.name for e in entries])
        if self.theano:
            out = weights_legacy.theano(cls, out or arrays) or out
        if out is None:
            return entries
        names = [_base(getattr(t, "path", t.name)) for t in legacy_weights(layer)]
        if len(names) != len(out):
            names = [_base(e.name) for e in entries][: len(out)]
        new = []
        for i, (arr, nm) in enumerate(zip(out, names)):
            key = f"{entries[0].h5path}#legacy{i}"
            values[key] = arr
            new.append(WeightEntry(entries[0].layer, f"{where}/{nm}:0", tuple(arr.shape), str(arr.dtype), key))
        # Every file tensor went into one restored tensor (LSTM: 12 per-gate tensors -> 3).
        self.ledger.tensors_restored += len(entries) - len(out)
        why = " + ".join(w for w, on in (("Keras 1", self.keras1), ("Theano", self.theano)) if on)
        self.ledger.reshaped.append(f"{where}: {len(entries)} {why} tensors -> Keras 2 layout "
                                    f"{[tuple(a.shape) for a in out]}")
        return new

    def _keras1_layout(self, layer: Any, arrays: list[np.ndarray], names: list[str]) -> list[np.ndarray] | None:
        """weights_legacy.keras1 for one layer; a Bidirectional converts each half with its direction's layer and
        a TimeDistributed with its inner layer, as Keras 2.0's preprocess_weights_for_loading recursed."""
        from k2to3.upgrade.keras1 import layouts as weights_legacy
        cls = type(layer).__name__
        if cls == "Bidirectional" and arrays and len(arrays) % 2 == 0:
            half = len(arrays) // 2
            parts = [(layer.forward_layer, arrays[:half], names[:half]), (layer.backward_layer, arrays[half:],
                                                                           names[half:])]
            done = [self._keras1_layout(sub, a, n) for sub, a, n in parts]
            if all(d is None for d in done):
                return None
            return [*(done[0] if done[0] is not None else arrays[:half]),
                    *(done[1] if done[1] is not None else arrays[half:])]
        if cls == "TimeDistributed" and hasattr(layer, "layer"):
            return self._keras1_layout(layer.layer, arrays, names)
        kernel = getattr(layer, "kernel", None)
        if kernel is None and hasattr(layer, "cell"):  # Keras 3 RNN layers keep the kernel on the cell
            kernel = getattr(layer.cell, "kernel", None)
        return weights_legacy.keras1(cls, getattr(layer, "data_format", None),
                                     len(kernel.shape) if kernel is not None else None, arrays, names)

    def leaf(self, layer: Any, entries: list[WeightEntry], values: dict[str, np.ndarray], where: str) -> None:
        if self.keras1 or self.theano:
            entries = self.legacy_layout(layer, entries, values, where)
        targets = legacy_weights(layer)
        if len(targets) != len(entries):
            raise K2to3Error(
                f"layer '{where}': the file has {len(entries)} weight tensors, the Keras 3 layer has "
                f"{len(targets)}", hint="report it to k2to3 with the file",
            )
        # Pair by weight base name when both sides agree on the multiset of names (robust to frozen
        # layers' ordering); otherwise by Keras 2's positional order.
        ebases = [_base(e.name) for e in entries]
        tbases = [_base(getattr(t, "path", t.name)) for t in targets]
        if sorted(ebases) == sorted(tbases) and ebases != tbases:
            pool = {b: [t for t in targets if _base(getattr(t, "path", t.name)) == b] for b in set(tbases)}
            targets = [pool[b].pop(0) for b in ebases]
        for var, entry in zip(targets, entries):
            f = getattr(values, "f", None)  # the open file behind _FileValues; none for converted layouts
            if f is None or entry.h5path in values or not self.assign_in_slices(var, entry, f):
                self.assign(var, entry, values[entry.h5path], where)

    def nested(self, model: Any, entries: list[WeightEntry], values: dict[str, np.ndarray], where: str) -> None:
        inner = {}
        for sub in model.layers:
            inner[sub.name] = sub
        by_layer: dict[str, list[WeightEntry]] = {}
        orphans: list[WeightEntry] = []
        inner_orig = {}
        for orig, new in self.renames.items():
            if new in inner:
                inner_orig[orig] = new
        for e in entries:
            parts = e.name.split("/")
            owner = None
            for p in parts[:-1]:
                cand = inner_orig.get(p, p)
                if cand in inner:
                    owner = cand
                    break
            if owner is None:
                orphans.append(e)
            else:
                by_layer.setdefault(owner, []).append(e)
        if orphans:
            # Names do not identify inner layers (very old files): fall back to Keras 2's order.
            self.leaf(model, entries, values, where)
            return
        for owner, es in by_layer.items():
            sub = inner[owner]
            if _is_model(sub):
                self.nested(sub, [WeightEntry(e.layer, e.name.split(owner + "/", 1)[-1], e.shape, e.dtype,
                                              e.h5path) for e in es], values, f"{where}/{owner}")
            else:
                self.leaf(sub, es, values, f"{where}/{owner}")

    def run(self, model: Any) -> Ledger:
        from k2to3.core.h5safe import open_checked

        f = open_checked(self.artifact.path)  # the file is re-checked: it may have changed since it was read
        try:
            return self._run(model, f)
        finally:
            f.close()

    def _run(self, model: Any, f: Any) -> Ledger:
        # Each tensor is read from the open file when its variable is assigned, and dropped after: holding all
        # of them until the end would keep a second copy of the weights beside the variables. This first pass
        # reads each one only to check it for NaN/Inf, in file order (the ledger's order).
        values = _FileValues(f)
        for entries in self.artifact.weights.values():
            for e in entries:
                if nonfinite(f[e.h5path]):
                    self.ledger.nonfinite.append(e.h5path)
        self.ledger.tensors_expected = self.artifact.n_tensors
        self.ledger.params_expected = self.artifact.n_params
        for orig, target in self.transforms.items():  # layouts Keras 2's loader converted (upgrade/cudnn.py)
            from k2to3.upgrade.cudnn import convert_weights

            entries = self.artifact.weights.get(orig, [])
            new, notes = convert_weights(target, [values[e.h5path] for e in entries])
            for e, v in zip(entries, new):
                self.ledger.params_expected += int(v.size) - int(values[e.h5path].size)
                values[e.h5path] = v
            self.ledger.converted.extend(f"{orig}: {n}" for n in notes)
        by_name = {layer.name: layer for layer in model.layers}
        for orig, entries in self.artifact.weights.items():
            if not entries:
                continue
            layer = by_name.get(self.k3_name(orig))
            if layer is None:
                self.ledger.unassigned_file_tensors.extend(e.name for e in entries)
                continue
            if _is_model(layer):
                self.nested(layer, entries, values, orig)
            else:
                self.leaf(layer, entries, values, orig)
        for var in model.weights:
            if id(var) not in self.assigned and "seed_generator" not in getattr(var, "path", ""):
                self.ledger.unrestored_variables.append(getattr(var, "path", var.name))
        return self.ledger


def restore(model: Any, artifact: LegacyArtifact, renames: dict[str, str],
            transforms: dict[str, str] | None = None, pairs: dict[str, Any] | None = None) -> Ledger:
    r = Restorer(artifact, renames, transforms)
    ledger = r.run(model)
    if pairs is not None:
        pairs.update(r.pairs)
    return ledger




