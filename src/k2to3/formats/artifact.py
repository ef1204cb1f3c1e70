"""Read legacy Keras 2 artifacts with h5py and json only: nothing in the file is executed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.core.h5safe import hdf5_reason, open_checked, read_dataset
from k2to3.core.text import clip
from k2to3.core.validate import check_model_config
from k2to3.core.weight_shapes import check_declared_shapes
from k2to3.errors import InputError, NotPortable

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
# HDF5 allows a user block before the superblock at 0, 512, 1024, 2048, ... bytes.
_MAGIC_OFFSETS = (0, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class WeightEntry:
    layer: str  # top-level layer group in model_weights
    name: str  # weight name as saved (e.g. "dense/kernel:0")
    shape: tuple[int, ...]
    dtype: str
    h5path: str  # dataset path inside the file


@dataclass
class LegacyArtifact:
    path: Path
    keras_version: str | None
    backend: str | None
    model_config: dict[str, Any] | None  # None for a weights-only file (save_weights)
    training_config: dict[str, Any] | None
    layer_names: list[str]  # model_weights layer order as Keras 2 saved it
    weights: dict[str, list[WeightEntry]]  # layer group -> entries in weight_names order
    optimizer_weight_count: int = 0
    extra_root_attrs: list[str] = field(default_factory=list)

    @property
    def n_tensors(self) -> int:
        return sum(len(v) for v in self.weights.values())

    @property
    def n_params(self) -> int:
        return sum(int(np.prod(e.shape)) for v in self.weights.values() for e in v)

    def read(self, entry: WeightEntry) -> np.ndarray:
        f = open_checked(self.path)
        try:
            return read_dataset(f, entry.h5path)
        finally:
            f.close()


def file_sha256(path: Path) -> str:
    """sha256 of a file; of a directory (SavedModel), over its files' relative paths and contents."""
    h = hashlib.sha256()
    files = sorted(q for q in Path(path).rglob("*") if q.is_file()) if Path(path).is_dir() else [Path(path)]
    for f in files:
        if Path(path).is_dir():
            h.update(str(f.relative_to(path)).encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _protobuf_fields(buf: bytes | memoryview):
    """(field number, value) of a serialized protobuf message (keras_metadata.pb, saved_model.pb), enough to read
    them without the protobuf package: a length-delimited value is a slice of `buf` (a memoryview stays one, no
    copy), a varint an int; a length past the end of `buf` is refused (ValueError), not cut short."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire in (1, 2, 5):
            if wire == 2:
                n, i = _varint(buf, i)
            else:
                n = 8 if wire == 1 else 4
            if i + n > len(buf):
                raise ValueError(f"a protobuf field of {n} bytes at byte {i} runs past the end ({len(buf)} bytes)")
            value, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield key >> 3, value


def _first_field(buf: bytes | memoryview, number: int) -> Any:
    """The first value of field `number` in a message (the first element of a repeated field), or None."""
    return next((value for n, value in _protobuf_fields(buf) if n == number), None)


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, i


def read_keras_config(path: Path) -> tuple[dict[str, Any], str | None, str]:
    """(model config, keras version, format) of a tf.keras `.keras` archive or a Keras SavedModel directory,
    read as data: config.json from the zip, the root object's metadata from keras_metadata.pb (TF >= 2.5) or from
    saved_model.pb's object graph (TF 2.0-2.4)."""
    kind = sniff(path)
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as z:
                _check_zip(path, z)
                config = json.loads(z.read("config.json"))
                meta = json.loads(z.read("metadata.json")) if "metadata.json" in z.namelist() else {}
            check_model_config(config, f"{path}: config.json")
            return config, meta.get("keras_version") if isinstance(meta, dict) else None, "keras archive"
        if kind == "savedmodel":
            return _savedmodel_config(path)
    except (KeyError, ValueError, IndexError, TypeError, AttributeError, zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"{path}: unreadable Keras {kind} ({type(exc).__name__}: {clip(str(exc), 80)})",
                         hint="copy it again from its source") from None
    raise InputError(f"{path}: not a Keras archive or SavedModel")


def _savedmodel_config(path: Path) -> tuple[dict[str, Any], str | None, str]:
    meta_path = path / "keras_metadata.pb"
    if meta_path.is_file():  # TF >= 2.5: one SavedMetadata node per Keras object, the model's at node_path root
        _check_savedmodel(path, meta_path, MAX_METADATA_BYTES)
        for field_no, node in _protobuf_fields(meta_path.read_bytes()):
            obj = dict(_protobuf_fields(node)) if field_no == 1 else {}
            if obj.get(3) == b"root":
                return _root_config(obj[5], f"{meta_path}: root object")
        raise InputError(f"{path}: keras_metadata.pb has no root object", hint="re-save the model")
    pb = path / "saved_model.pb"
    _check_savedmodel(path, pb, MAX_SAVED_MODEL_BYTES)
    identifier, metadata = _legacy_root(memoryview(pb.read_bytes()))
    if not identifier.startswith("_tf_keras_") or not metadata:
        what = f"Keras' model.save; its root object, a {identifier}, carries no config" \
            if identifier.startswith("_tf_keras_") else \
            f"Keras; its root object is {'a ' + identifier if identifier else 'not a user object'}"
        raise NotPortable(f"{path}: a SavedModel without keras_metadata.pb (written by tf.saved_model.save, not "
                          f"{what}): it has no layers to rebuild",
                          hint="re-save the model from Keras 2 with model.save('model.h5')")
    if len(metadata) > MAX_METADATA_BYTES:
        raise InputError(f"{pb}: the root object's Keras metadata is {len(metadata)} bytes, over the "
                         f"{MAX_METADATA_BYTES}-byte limit; refused", hint="docs/security.md")
    return _root_config(bytes(metadata), f"{pb}: root object")


def _legacy_root(saved_model: bytes | memoryview) -> tuple[str, bytes | memoryview]:
    """(identifier, metadata) of the root object's SavedUserObject in a serialized SavedModel, as TF 2.0-2.4's
    Keras wrote it (the model's JSON config in the object graph; TF >= 2.5 moved it to keras_metadata.pb):
    SavedModel.meta_graphs[0] (2) .object_graph_def (7) .nodes[0] (1) .user_object (4) .identifier (1),
    .metadata (3). ("", b"") when the root is not a user object."""
    graph = _first_field(saved_model, 2)
    objects = _first_field(graph, 7) if graph is not None else None
    root = _first_field(objects, 1) if objects is not None else None
    user = _first_field(root, 4) if root is not None else None
    if user is None:
        return "", b""
    fields = dict(_protobuf_fields(user))  # one of each: the last would win, as in protobuf
    identifier, metadata = fields.get(1, b""), fields.get(3, b"")
    if not isinstance(identifier, bytes | memoryview) or not isinstance(metadata, bytes | memoryview):
        raise ValueError("the root object's identifier or metadata is not a string")
    return bytes(identifier).decode("utf-8"), metadata


def _root_config(metadata: bytes, where: str) -> tuple[dict[str, Any], str | None, str]:
    meta = json.loads(metadata)
    config = meta.get("model_config") or {"class_name": meta["class_name"], "config": meta["config"]}
    check_model_config(config, where)
    return config, meta.get("keras_version"), "SavedModel"


# Limits on the metadata read from archives and SavedModels (docs/security.md); real ones are a few MB at most.
MAX_METADATA_BYTES = 64 << 20
# saved_model.pb holds the traced graphs too (a TF 2.0-2.4 Keras SavedModel's config is read from it): protobuf's
# own limit is 2 GiB; real ones are a few MB.
MAX_SAVED_MODEL_BYTES = 1 << 30
MAX_ZIP_RATIO = 200


def _check_zip(path: Path, z: zipfile.ZipFile) -> None:
    """Refuse traversal names and bombs from the directory alone; nothing is ever extracted to disk."""
    for info in z.infolist():
        name = info.filename
        if name.startswith(("/", "\\")) or ".." in name.replace("\\", "/").split("/") or ":" in name:
            raise InputError(f"{path}: archive member {name!r} has an absolute or parent-directory path; refused",
                             hint="a Keras archive holds only relative names; see docs/security.md")
        if name in ("config.json", "metadata.json"):
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > MAX_METADATA_BYTES or (info.file_size > 1 << 20 and ratio > MAX_ZIP_RATIO):
                raise InputError(f"{path}: archive member {name} declares {info.file_size} bytes "
                                 f"(compressed {info.compress_size}), over the {MAX_METADATA_BYTES}-byte / "
                                 f"{MAX_ZIP_RATIO}x limit; refused as a zip bomb",
                                 hint="re-save the model from Keras; see docs/security.md")


def _check_savedmodel(path: Path, meta_path: Path, limit: int) -> None:
    root = path.resolve()
    for q in [path, *path.rglob("*")]:
        if q.is_symlink() and not q.resolve().is_relative_to(root):
            raise InputError(f"{path}: {q.relative_to(path)} is a symlink to {q.resolve()}, outside the SavedModel; "
                             "refused", hint="copy the real files into the directory; see docs/security.md")
    size = meta_path.stat().st_size
    if size > limit:
        raise InputError(f"{meta_path}: {size} bytes, over the {limit}-byte limit for Keras metadata; refused",
                         hint="docs/security.md")


def sniff(path: Path) -> str:
    """Classify a path by content, not extension: 'hdf5', 'zip', 'savedmodel', 'dir' or 'other'."""
    if path.is_dir():
        return "savedmodel" if (path / "saved_model.pb").exists() else "dir"
    with open(path, "rb") as fh:
        head = fh.read(4096 + 8)
    if any(head[o : o + 8] == HDF5_MAGIC for o in _MAGIC_OFFSETS):
        return "hdf5"
    if head[:4] == b"PK\x03\x04" and zipfile.is_zipfile(path):
        return "zip"
    return "other"


def _attr_text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def names_attr(group: Any, key: str) -> list[str]:
    """Read a list-of-names attribute, including Keras' chunked form (key0, key1, ...)."""
    if key in group.attrs:
        return [_attr_text(n) for n in group.attrs[key]]
    names: list[str] = []
    i = 0
    while f"{key}{i}" in group.attrs:
        names.extend(_attr_text(n) for n in group.attrs[f"{key}{i}"])
        i += 1
    return names


def _weights(f: Any) -> tuple[list[str], dict[str, list[WeightEntry]]]:
    wroot = f["model_weights"] if "model_weights" in f else f
    layer_names = names_attr(wroot, "layer_names")
    weights: dict[str, list[WeightEntry]] = {}
    for lname in layer_names:
        g = wroot[lname]
        weights[lname] = [WeightEntry(lname, wname, tuple(int(s) for s in g[wname].shape), str(g[wname].dtype),
                                      g[wname].name) for wname in names_attr(g, "weight_names")]
    return layer_names, weights


_MEMO = threading.local()  # per thread: `convert STORE/ --jobs N` converts N artifacts at once


@contextlib.contextmanager
def memo_reads() -> Iterator[None]:
    """Within the block, read_artifact returns the same object for the same unchanged file: detecting a format asks
    for one file's config from several places (pairs, multi-GPU detection, the config itself), each an HDF5 open
    and a walk of every weight group. Callers in the block must not change what they get."""
    if getattr(_MEMO, "reads", None) is not None:  # nested: the outer block's memo serves
        yield
        return
    _MEMO.reads = {}
    try:
        yield
    finally:
        _MEMO.reads = None


def read_artifact(path: str | Path, weights_only_ok: bool = False) -> LegacyArtifact:
    memo = getattr(_MEMO, "reads", None)
    if memo is not None:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None:
            key = (str(path), weights_only_ok, st.st_size, st.st_mtime_ns)
            if key not in memo:
                memo[key] = _read_artifact(path, weights_only_ok)
            return memo[key]
    return _read_artifact(path, weights_only_ok)


def _read_artifact(path: str | Path, weights_only_ok: bool = False) -> LegacyArtifact:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file", hint="check the path")
    kind = sniff(p)
    if kind == "zip":
        raise NotPortable(
            f"{p}: a zip archive (.keras format); k2to3 convert reads Keras 2 HDF5 files",
            hint="load it with keras.saving.load_model directly, or re-save it from Keras 2 as .h5",
        )
    if kind == "savedmodel":
        raise NotPortable(
            f"{p}: a TensorFlow SavedModel directory; k2to3 convert reads Keras 2 HDF5 files",
            hint="re-save the model from Keras 2 with model.save('model.h5')",
        )
    if kind != "hdf5":
        raise InputError(
            f"{p}: not an HDF5 file (no HDF5 signature)",
            hint="pass a Keras 2 model saved with model.save('x.h5')",
        )
    f = open_checked(p)  # refuses links out of the file, external storage, shape bombs (docs/security.md)
    try:
        return _read_open(p, f, weights_only_ok)
    except (OSError, KeyError, RuntimeError) as exc:
        raise InputError(
            f"{p}: HDF5 file is truncated or corrupt: {hdf5_reason(exc)}",
            hint="copy the file again from its source",
        ) from None
    finally:
        f.close()


def _read_open(p: Path, f: Any, weights_only_ok: bool = False) -> LegacyArtifact:
    if "model_config" not in f.attrs:
        weights_only = "layer_names" in f.attrs or "layer_names0" in f.attrs
        if weights_only and weights_only_ok:
            return LegacyArtifact(p, _attr_text(f.attrs["keras_version"]) if "keras_version" in f.attrs else None,
                                  _attr_text(f.attrs.get("backend", b"")) or None, None, None,
                                  *_weights(f))
        if weights_only:
            raise NotPortable(
                f"{p}: a weights-only HDF5 file (saved with save_weights); it has no model config",
                hint="convert needs the model's source: k2to3 convert FILE --src module.py:build_fn",
            )
        raise InputError(
            f"{p}: HDF5 file is not a Keras model (no model_config attribute)",
            hint="pass a file written by Keras 2 model.save('x.h5')",
        )
    try:
        model_config = json.loads(_attr_text(f.attrs["model_config"]))
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: model_config is not valid JSON ({exc.msg})") from None
    check_model_config(model_config, f"{p}: model_config")
    training_config = None
    if "training_config" in f.attrs:
        try:
            training_config = json.loads(_attr_text(f.attrs["training_config"]))
        except json.JSONDecodeError:
            training_config = None
        if training_config is not None and not isinstance(training_config, dict):
            raise InputError(f"{p}: training_config is a JSON {type(training_config).__name__}, not an object",
                             hint="the file was not written by Keras; re-save it with model.save('x.h5')")
    known = {"model_config", "training_config", "keras_version", "backend"}
    extra = sorted(k for k in f.attrs if k not in known)
    if "model_weights" in f:  # what an application stored beside the model: reported, never read
        extra += [f"/{k} (not read)" for k in sorted(f) if k not in ("model_weights", "optimizer_weights")]
    # Keras 2 writes weights under model_weights; very old files put layer groups at the root.
    wroot = f["model_weights"] if "model_weights" in f else f
    layer_names, weights = _weights(f)
    check_declared_shapes(p, model_config, weights)  # before any weight is read (docs/security.md)
    n_opt = 0
    if "optimizer_weights" in f:
        n_opt = len(names_attr(f["optimizer_weights"], "weight_names"))
    return LegacyArtifact(
        path=p,
        keras_version=_attr_text(f.attrs["keras_version"]) if "keras_version" in f.attrs else None,
        backend=_attr_text(wroot.attrs.get("backend", f.attrs.get("backend", b""))) or None,
        model_config=model_config,
        training_config=training_config,
        layer_names=layer_names,
        weights=weights,
        optimizer_weight_count=n_opt,
        extra_root_attrs=extra,
    )
