"""Which deployment targets an artifact reaches (audit's `targets`, docs/audit.md#deployment-targets): the lowest
Keras 3 release its converted config can be written for, by the same dialect rules `convert --target-keras` applies
(core/keras_versions.py), and the export formats a recorded stop (rules/keras_versions.toml `[[export_stop]]`) rules
out. Statically from the upgrade plan; after `--verify` from the converted .keras itself and its backends' results.
Pure data: no backend import."""

from __future__ import annotations

import io
import json
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import h5py

from k2to3.checks.exported_file import EXPORTER_BACKEND, FORMATS
from k2to3.core.keras_versions import (
    Version,
    candidate_targets,
    check_weight_paths,
    current_version,
    downgrade_config,
    export_stops,
    show,
    version_rules,
)
from k2to3.errors import NotPortable
from k2to3.upgrade import Plan


def _now() -> Version:
    try:
        return current_version()
    except metadata.PackageNotFoundError:  # the light install (lint, static audit) has no keras
        return max(r.added for r in version_rules())


def lowest_keras(config: Any, weight_paths: list[str] | None = None) -> dict[str, Any]:
    """The lowest release `config` (a plan's model or a .keras config.json) can be written for, and the stop of the
    release below it (None when 3.0 takes it)."""
    limit = None
    for v in candidate_targets(_now()):
        try:
            downgrade_config(config, v)
            if weight_paths is not None:
                check_weight_paths(weight_paths, v)
        except NotPortable as exc:
            limit = exc.line()
            continue
        return {"lowest": show(v), "limit": limit}
    return {"lowest": None, "limit": limit}


def _walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _variable_length(model: Any) -> bool:
    """An input whose sequence axis (axis 1 of a batch-first shape of rank 3 or more) has no fixed length."""
    for d in _walk(model):
        shape = d.get("batch_shape") or d.get("batch_input_shape")
        if isinstance(shape, list) and len(shape) >= 3 and shape[1] is None:
            return True
    return False


def _stop(stop: Any, plan: Plan, ops: set[str], classes: set[str]) -> str | None:
    if stop.when == "op":
        hit = sorted(ops & set(stop.values))
        return f"TFOpLambda {hit[0]}" if hit else None
    if stop.when == "dtype_policy":
        hit = sorted(plan.dtype_policies & set(stop.values))
        return f"dtype policy {hit[0]}" if hit else None
    if stop.when == "variable_length_rnn":
        hit = sorted(classes & set(stop.values))
        return f"{hit[0]} over a variable-length input" if hit and _variable_length(plan.model) else None
    raise ValueError(f"rules/keras_versions.toml: export_stop {stop.code}: unknown when={stop.when!r}")


def static_targets(plan: Plan, ops: set[str], verdict: str) -> dict[str, Any]:
    """Predicted from the plan: `ops` are the TF ops of its TFOpLambda layers, `verdict` the static verdict."""
    classes = {str(d["class_name"]) for d in _walk(plan.model) if isinstance(d.get("class_name"), str)}
    formats: dict[str, dict[str, Any]] = {}
    for fmt in FORMATS:
        stop = next(((s, why) for s in export_stops() if s.format == fmt
                     for why in [_stop(s, plan, ops, classes)] if why), None)
        if stop:
            s, why = stop
            formats[fmt] = {"reach": "stop", "code": s.code, "reason": f"{why}: {s.title} ({s.code})"}
        elif verdict == "tf-only" and EXPORTER_BACKEND[fmt] != "tensorflow":
            formats[fmt] = {"reach": "stop", "code": "K2T904",
                            "reason": f"a TF op is kept as a TensorFlow call; {fmt} exports on "
                                      f"{EXPORTER_BACKEND[fmt]}"}
        else:
            formats[fmt] = {"reach": "predicted", "reason": "no recorded stop applies (docs/export.md#stops)"}
    return {"keras": {**lowest_keras(plan.model), "basis": "plan"}, "formats": formats}


def converted_targets(keras_path: Path, report: dict[str, Any]) -> dict[str, Any]:
    """After a verify conversion: the lowest release from the .keras as written (config.json and the weights'
    paths, what --target-keras rewrites) and each backend's verdict on it, the one an exporter runs on."""
    paths: list[str] = []
    with zipfile.ZipFile(keras_path) as z:
        config = json.loads(z.read("config.json"))
        if "model.weights.h5" in z.namelist():
            with h5py.File(io.BytesIO(z.read("model.weights.h5")), "r") as f:
                f.visit(paths.append)
    backends = {b: v.get("status") for b, v in (report.get("backends") or {}).items()}
    return {"keras": {**lowest_keras(config, paths), "basis": "converted"}, "keras_version": show(_now()),
            "backends": backends}


def merged(a: dict[str, Any]) -> dict[str, Any] | None:
    """The audit row's `targets`: each target verified or predicted. Keras: the release the backends loaded the
    converted file with is verified by their parity; the lowest release is computed (from the converted file after
    --verify), not loaded. Formats: predicted unless a stop applies or the exporter's backend failed on the .keras
    (a plain --verify exports nothing)."""
    static = a.get("targets")
    if not static:
        return None
    v = (a.get("verify") or {}).get("targets")
    keras = dict(v["keras"] if v else static["keras"])
    keras["evidence"] = "predicted"
    if v:
        statuses = set(v["backends"].values())
        keras["verified"] = {"keras": v["keras_version"], "status": "parity" if statuses == {"parity"} else
                             "mismatch", "backends": v["backends"]}
    formats = {}
    for fmt, f in static["formats"].items():
        row = {**f, "evidence": "predicted"}
        status = (v["backends"] if v else {}).get(EXPORTER_BACKEND[fmt])
        if status and status != "parity":
            row.update(reach="no", evidence="verified", reason=f"the .keras itself is {status} on "
                       f"{EXPORTER_BACKEND[fmt]}, the backend {fmt} exports on")
        elif status:
            row["reason"] += f"; the .keras has parity on {EXPORTER_BACKEND[fmt]} (not exported)"
        formats[fmt] = row
    _ran(a.get("verify") or {}, keras, formats)
    return {"keras": keras, "formats": formats}


def _ran(v: dict[str, Any], keras: dict[str, Any], formats: dict[str, Any]) -> None:
    """A conversion that ran --target-keras or --export (convert STORE/ with them) verified that target."""
    t, e = v.get("target"), v.get("export")
    if t:
        keras["target"] = {"keras": t.get("keras"), "status": t.get("status"), "evidence": "verified"}
        if t.get("status") == "parity" and keras.get("lowest") == t.get("keras"):
            keras["evidence"] = "verified"
    if e and e.get("format") in formats:
        ok = e.get("status") == "parity"
        formats[e["format"]] = {"reach": "yes" if ok else "stop" if e.get("status") == "not_portable" else "no",
                                "evidence": "verified", "reason": f"exported and run against the Keras 2 reference: "
                                f"{e.get('status')}" + (f" ({e['error']})" if e.get("error") else "")}


def summary(t: dict[str, Any] | None) -> str:
    """One cell: `Keras >= 3.4 (predicted; 3.15 verified) · onnx stop (K2T711), litert, savedmodel, torch`."""
    if not t:
        return ""
    k = t["keras"]
    ver = k.get("verified")
    ran = k.get("target")
    head = f"Keras >= {k['lowest']} ({k['evidence']}" + (f"; {ver['keras']} {ver['status']}" if ver else "") \
        + (f"; --target-keras {ran['keras']} {ran['status']}" if ran else "") + ")" \
        if k.get("lowest") else "no Keras 3 release"
    cells = [fmt if f["reach"] == "predicted" else f"{fmt} {f['reach']}" + (f" ({f['code']})" if f.get("code") else "")
             + (" (verified)" if f["evidence"] == "verified" and f["reach"] == "yes" else "")
             for fmt, f in t["formats"].items()]
    return head + " · " + ", ".join(cells)
