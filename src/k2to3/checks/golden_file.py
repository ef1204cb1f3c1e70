"""Golden files (`MODEL.golden.npz`): the verification inputs, the reference outputs, the tolerances and the
versions that produced them, so `k2to3 verify MODEL.keras --golden MODEL.golden.npz` can re-check a migrated
model after upgrading keras, torch or jax. Reading treats the file as untrusted: no pickles, declared sizes and
dtypes checked from the zip directory and the .npy headers before anything is allocated. No backend import."""

from __future__ import annotations

import json
import os
import re
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.checks.base import Check, Done, Run
from k2to3.core.text import clip
from k2to3.errors import InputError
from k2to3.formats.artifact import file_sha256
from k2to3.version import __version__

SCHEMA = "k2to3.golden/1"
MAX_BYTES = 2 << 30  # all arrays together, as declared; a golden file is a small batch, not a dataset
MAX_ENTRIES = 1024
MAX_META = 1 << 20
_NAME = re.compile(r"^(in|out)(\d{1,4})\.npy$")
_KINDS = "biuf"  # bool, ints, floats: never object, string or void arrays (except the meta string)


def golden_path(keras: Path) -> Path:
    """model.keras -> model.golden.npz, beside it."""
    return keras.with_name(keras.stem + ".golden.npz")


def applies(run: Run) -> bool:
    return run.golden_path is not None  # convert --save-golden


def collect(run: Run, done: dict[str, Done]) -> None:
    """Write the golden file beside the .keras (atomically, once the .keras is in place): report.json's `golden`."""
    path, report, out = run.golden_path, run.report, run.output_path
    assert path is not None and out is not None and run.outputs is not None
    reference, rtol, atol = run.outputs, run.rtol, run.atol
    with np.load(run.npz("inputs")) as z:
        xs = [z[f"in{i}"] for i in range(len(z.files))]
    backends = report.get("backends", {})
    meta = {
        "schema": SCHEMA,
        "k2to3_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rtol": rtol,
        "atol": atol,
        "reference": {k: v for k, v in report.get("reference", {}).items() if isinstance(v, str | None)},
        "weight_hash": report.get("build", {}).get("weight_hash"),
        "model_sha256": file_sha256(out) if out.exists() else None,
        "input": {k: report["input"].get(k) for k in ("path", "sha256", "keras_version", "n_params",
                                                         "n_weight_tensors")},
        "inputs": report.get("inputs", []),
        "versions": {b: {"keras": v.get("keras_version"), "library": v.get("library_version")}
                     for b, v in backends.items() if "weight_hash" in v},
    }
    tmp = path.with_name(f".{path.name}.k2to3-partial-{os.getpid()}.npz")
    try:
        np.savez(tmp, meta=np.array(json.dumps(meta)), **{f"in{i}": x for i, x in enumerate(xs)},
                 **{f"out{i}": y for i, y in enumerate(reference)})
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    report["golden"] = {"path": str(path), "sha256": file_sha256(path), "n_inputs": len(xs),
                        "n_outputs": len(reference)}


def markdown(report: dict[str, Any]) -> list[str]:
    g = report.get("golden")
    if not g:
        return []
    return [f"`{g['path']}` (sha256 `{g['sha256'][:16]}…`): {g['n_inputs']} input and {g['n_outputs']} output "
            "arrays with the tolerances and versions; re-check the model after an upgrade with "
            f"`k2to3 verify MODEL.keras --golden {g['path']}`."]


@dataclass
class Golden:
    path: Path
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    meta: dict[str, Any]

    @property
    def rtol(self) -> float:
        return float(self.meta["rtol"])

    @property
    def atol(self) -> float:
        return float(self.meta["atol"])


def _bad(path: Path, what: str) -> InputError:
    return InputError(f"{path}: not a usable k2to3 golden file: {what}",
                      hint="regenerate it with `k2to3 convert ... --save-golden`")


def _header(path: Path, z: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], np.dtype]:
    with z.open(info) as fh:
        try:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                raise ValueError(f"npy version {version}")
        except ValueError as exc:
            raise _bad(path, f"{info.filename}: {clip(str(exc), 120)}") from None
    return tuple(int(d) for d in shape), dtype


def read_golden(path: Path) -> Golden:
    """Read and check a golden file; one-line InputError on anything unexpected."""
    if not path.is_file():
        raise InputError(f"{path}: no such file", hint="pass the .golden.npz written by convert --save-golden")
    if path.stat().st_size > MAX_BYTES + MAX_META + (1 << 20):
        raise _bad(path, f"{path.stat().st_size} bytes, over the {MAX_BYTES >> 20} MB cap")
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        raise _bad(path, "not an .npz (zip) file") from None
    with z:
        infos = z.infolist()
        if len(infos) > MAX_ENTRIES:
            raise _bad(path, f"{len(infos)} entries")
        names = {i.filename: i for i in infos}
        if "meta.npy" not in names:
            raise _bad(path, "no meta entry")
        total = 0
        counts = {"in": set(), "out": set()}
        for name, info in names.items():
            m = _NAME.match(name)
            if name != "meta.npy" and not m:
                raise _bad(path, f"unexpected entry '{name[:80]}'")
            shape, dtype = _header(path, z, info)
            if name == "meta.npy":
                if shape != () or dtype.kind != "U" or dtype.itemsize > MAX_META:
                    raise _bad(path, "meta is not a JSON string")
                continue
            if dtype.kind not in _KINDS or dtype.hasobject:
                raise _bad(path, f"{name}: dtype {dtype} (numbers only)")
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if shape else dtype.itemsize
            total += nbytes
            if nbytes > info.file_size or total > MAX_BYTES:
                raise _bad(path, f"{name}: declared shape {list(shape)} does not fit the file or the size cap")
            assert m is not None
            counts[m.group(1)].add(int(m.group(2)))
        for kind, idx in counts.items():
            if idx != set(range(len(idx))) or not idx:
                raise _bad(path, f"{kind}0..N entries missing or out of order")
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            xs = [data[f"in{i}"] for i in range(len(counts["in"]))]
            ys = [data[f"out{i}"] for i in range(len(counts["out"]))]
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise _bad(path, clip(str(exc), 120)) from None
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
        raise _bad(path, f"schema is not {SCHEMA}")
    for key in ("rtol", "atol"):
        if not isinstance(meta.get(key), int | float) or not np.isfinite(meta[key]) or meta[key] < 0:
            raise _bad(path, f"{key} is not a non-negative number")
    if any(x.shape[:1] != xs[0].shape[:1] for x in xs + ys):
        raise _bad(path, "inputs and outputs disagree on the batch size")
    return Golden(path, xs, ys, meta)


CHECK = Check(key="golden", title="Golden file", stage=4, applies=applies, collect=collect, markdown=markdown)
