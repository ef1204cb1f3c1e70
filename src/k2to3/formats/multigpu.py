"""Models saved after Keras 2's `multi_gpu_model` (keras/utils/multi_gpu_utils.py): the template model's inputs,
one batch-slicing `Lambda(get_slice, arguments={'i': i, 'parts': n})` per replica and input, the template nested
once and called once per replica, and per output a `Concatenate(axis=0)` named like the template's output.

The pattern is recognised from the config alone (the slicing Lambda's bytecode is never read), and the template,
the model users deploy, is extracted as data into a Keras 2 HDF5 of its own in the job directory: its config as
`model_config`, its weight group split into one group per inner layer, as `model.save()` of the template would
have written it. Rule K2T451."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from k2to3.core.findings import Finding
from k2to3.core.h5safe import open_checked
from k2to3.errors import NotPortable
from k2to3.formats.artifact import read_artifact
from k2to3.upgrade.plan import MODEL_CLASSES

_SLICE_ARGS = ({"i", "parts"}, {"idx", "parts"})  # Keras 2.2 multi_gpu_model; kuza55's make_parallel


def _refs(node: Any) -> list[list[Any]]:
    if isinstance(node, list) and node and isinstance(node[0], str):
        return [node]
    return [r for r in node if isinstance(r, list) and r and isinstance(r[0], str)] if isinstance(node, list) else []


def detect(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """{template, replicas, slices, merges} when `config` is a multi_gpu_model wrapper, else None."""
    if not isinstance(config, dict) or config.get("class_name") not in ("Model", "Functional"):
        return None
    cfg = config.get("config")
    layers = cfg.get("layers") if isinstance(cfg, dict) else None
    if not isinstance(layers, list):
        return None
    kinds: dict[str, list[dict[str, Any]]] = {}
    for layer in layers:
        if not isinstance(layer, dict):
            return None
        cls = layer.get("class_name")
        kind = "model" if cls in MODEL_CLASSES else cls
        kinds.setdefault(kind, []).append(layer)
    models, slices, merges = kinds.get("model", []), kinds.get("Lambda", []), kinds.get("Concatenate", [])
    inputs = {lay.get("name") for lay in kinds.get("InputLayer", [])}
    if len(models) != 1 or not slices or not merges or set(kinds) - {"model", "Lambda", "Concatenate", "InputLayer"}:
        return None
    template = models[0]
    parts = set()
    for lam in slices:
        args = (lam.get("config") or {}).get("arguments") or {}
        if set(args) not in _SLICE_ARGS or not all(isinstance(v, int) for v in args.values()):
            return None
        parts.add(args["parts"])
        nodes = lam.get("inbound_nodes") or []
        if len(nodes) != 1 or [r[0] for r in _refs(nodes[0])] not in ([n] for n in inputs):
            return None
    if len(parts) != 1 or (n := parts.pop()) < 2:
        return None
    slice_names = {lam.get("name") for lam in slices}
    nodes = template.get("inbound_nodes") or []
    if len(nodes) != n or any(not {r[0] for r in _refs(node)} <= slice_names for node in nodes):
        return None
    for merge in merges:
        refs = _refs((merge.get("inbound_nodes") or [[]])[0])
        if (merge.get("config") or {}).get("axis") != 0 or len(refs) != n or any(r[0] != template.get("name")
                                                                                   for r in refs):
            return None
    return {"template": template.get("name") or (template.get("config") or {}).get("name"), "replicas": n,
            "template_config": {"class_name": template["class_name"], "config": template["config"]},
            "removed_layers": sorted(slice_names) + sorted(m.get("name") for m in merges)}


def _inner_names(config: dict[str, Any]) -> list[str]:
    cfg = config["config"]
    layers = cfg if isinstance(cfg, list) else cfg.get("layers", [])
    return [(lay.get("config") or {}).get("name") or lay.get("name") for lay in layers]


def write_template(src: Path, found: dict[str, Any], out: Path) -> None:
    """The template as its own Keras 2 HDF5: its weight group split per inner layer by the weight names."""
    import h5py

    inner = _inner_names(found["template_config"])
    f = open_checked(src)
    try:
        root = f["model_weights"] if "model_weights" in f else f
        group = root[found["template"]]
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in group.attrs.get("weight_names", [])]
        per_layer: dict[str, list[str]] = {name: [] for name in inner}
        for w in names:
            owner = w.split("/")[0]
            if owner not in per_layer:
                raise NotPortable(f"{src}: multi_gpu_model template weight {w} names no layer of "
                                  f"'{found['template']}'", hint="report it to k2to3 with the file")
            per_layer[owner].append(w)
        with h5py.File(out, "w") as dst:
            dst.attrs["model_config"] = json.dumps(found["template_config"])
            for key in ("keras_version", "backend"):
                if key in f.attrs:
                    dst.attrs[key] = f.attrs[key]
            mw = dst.create_group("model_weights")
            for key in ("keras_version", "backend"):
                if key in root.attrs:
                    mw.attrs[key] = root.attrs[key]
            mw.attrs["layer_names"] = [n.encode() for n in inner]
            for name in inner:
                g = mw.create_group(name)
                g.attrs["weight_names"] = [w.encode() for w in per_layer[name]]
                for w in per_layer[name]:
                    g.create_dataset(w, data=group[w][()])
    finally:
        f.close()


def bridge(src: Path, work: Path) -> tuple[Path, dict[str, Any]] | None:
    """convert's entry: (template HDF5, report input section) for a multi_gpu_model save, else None."""
    art = read_artifact(src, weights_only_ok=True)
    found = detect(art.model_config)
    if found is None:
        return None
    out = work / "template.h5"
    write_template(src, found, out)
    return out, {"format": "HDF5 (multi_gpu_model save)", "multi_gpu": {
        "template": found["template"], "replicas": found["replicas"], "removed_layers": found["removed_layers"]}}


def finding(info: dict[str, Any], code: str) -> Finding:
    return Finding(code, "info", f"multi_gpu_model wrapper removed: {info['replicas']} replicas of "  # type: ignore[arg-type]
                   f"'{info['template']}' with their batch-slicing Lambdas and output concatenation "
                   f"({', '.join(info['removed_layers'])}); the template model is converted", info["template"])
