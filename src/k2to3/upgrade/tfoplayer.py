"""TensorFlowOpLayer (TF 2.0-2.3: a raw TF op on Keras tensors, stored as its NodeDef) -> the TFOpLambda node that
calls the same TensorFlow function, through the reviewed raw-op map rules/raw_ops.toml. The result then goes the
TFOpLambda way (specs.op_spec): keras.ops by the op table, or kept as a TF call. Pure data, no TensorFlow.

TF 2.3's `TensorFlowOpLayer.get_config` wrote `node_def` (json_format.MessageToDict of the NodeDef: `op`,
`input`, `attr`) and `constants` ({input index: value} for inputs that were not Keras tensors); the layer's
inbound node lists the Keras-tensor inputs in order, the constants go back in at their indices."""

from __future__ import annotations

import base64
from functools import cache
from typing import Any

import tomllib

from k2to3.core.rules import rules_dir

# tensorflow DataType enum names (AttrValue.type) -> dtype names
_DTYPES = {"DT_FLOAT": "float32", "DT_DOUBLE": "float64", "DT_HALF": "float16", "DT_BFLOAT16": "bfloat16",
           "DT_INT32": "int32", "DT_INT64": "int64", "DT_INT16": "int16", "DT_INT8": "int8", "DT_UINT8": "uint8",
           "DT_BOOL": "bool"}


@cache
def raw_ops() -> dict[str, dict[str, Any]]:
    with open(rules_dir() / "raw_ops.toml", "rb") as fh:
        entries = tomllib.load(fh)["raw_op"]
    table = {e["op"]: e for e in entries}
    if len(table) != len(entries):
        raise ValueError("rules/raw_ops.toml: duplicate raw op")
    return table


class Untranslated(ValueError):
    """Why a TensorFlowOpLayer cannot become a TFOpLambda node (the finding's message)."""


def _attr(value: Any) -> Any:
    """A MessageToDict AttrValue -> a Python value."""
    if not isinstance(value, dict) or len(value) != 1:
        raise Untranslated(f"attr {value!r} is not a single AttrValue")
    kind, v = next(iter(value.items()))
    if kind == "b":
        return bool(v)
    if kind == "i":
        return int(v)  # int64 is a JSON string in MessageToDict
    if kind == "f":
        return float(v)
    if kind == "type":
        if v not in _DTYPES:
            raise Untranslated(f"dtype {v} has no Keras equivalent")
        return _DTYPES[v]
    if kind == "s":
        return base64.b64decode(v).decode("utf-8", errors="replace")
    if kind == "list":
        if not set(v) <= {"i"}:
            raise Untranslated(f"list attr {sorted(v)} is not translated")
        return [int(i) for i in v.get("i", [])]
    raise Untranslated(f"attr kind {kind!r} is not translated")


def _refs(node: Any) -> list[list[Any]]:
    """The Keras-tensor inputs of one inbound node: [[layer, node, tensor], ...] (kwargs dropped)."""
    if isinstance(node, list) and node and isinstance(node[0], str):
        node = [node]
    if not isinstance(node, list):
        raise Untranslated("inbound node is not a list of [layer, node, tensor] references")
    return [list(r[:3]) for r in node]


def as_tfoplambda(layer: dict[str, Any]) -> dict[str, Any]:
    """The TFOpLambda layer dict equivalent to a TensorFlowOpLayer layer dict; Untranslated says why not."""
    cfg = layer.get("config") or {}
    node_def = cfg.get("node_def") or {}
    op = node_def.get("op")
    entry = raw_ops().get(op)
    if entry is None:
        raise Untranslated(f"raw op '{op}' has no entry in rules/raw_ops.toml")
    constants = {int(k): v for k, v in (cfg.get("constants") or {}).items()}
    attrs = node_def.get("attr") or {}
    n_inputs = len(node_def.get("input") or [])
    params: list[str] = entry["inputs"]
    variadic = params[0].startswith("*")
    n_values = _attr(attrs["N"]) if variadic and "N" in attrs else 1
    if n_inputs != n_values + len(params) - 1:
        raise Untranslated(f"raw op '{op}' has {n_inputs} inputs, rules/raw_ops.toml expects {len(params)}")
    nodes = []
    for node in layer.get("inbound_nodes") or []:
        tensors = iter(_refs(node))
        args: list[Any] = []
        for i in range(n_inputs):
            if i in constants:
                args.append(("const", constants[i]))
            else:
                ref = next(tensors, None)
                if ref is None:
                    raise Untranslated(f"raw op '{op}': fewer Keras inputs than the NodeDef needs")
                args.append(("ref", ref))
        kwargs: dict[str, Any] = {}
        if variadic:
            values, rest = args[:n_values], args[n_values:]
            if any(kind == "const" for kind, _ in values):
                raise Untranslated(f"raw op '{op}': a constant among its list input")
            first: Any = [[*ref, {}] for _, ref in values]
            names = params[1:]
        else:
            (kind, v), rest = args[0], args[1:]
            first = [*v, {}] if kind == "ref" else ["_CONSTANT_VALUE", -1, v, {}]
            names = params[1:]
        for name, (_kind, v) in zip(names, rest):
            kwargs[name] = v
        for attr_name, kw in (entry.get("attrs") or {}).items():
            if attr_name in attrs:
                kwargs[kw] = _attr(attrs[attr_name])
        # TFOpLambda stores the call kwargs on every element of its first argument
        if variadic:
            first = [[*r[:3], kwargs] for r in first]
        else:
            first = [*first[:3], kwargs]
        nodes.append(first)
    name = layer.get("name") or cfg.get("name")
    return {"class_name": "TFOpLambda", "name": name, "inbound_nodes": nodes,
            "config": {"name": name, "trainable": cfg.get("trainable", True), "dtype": cfg.get("dtype", "float32"),
                       "function": entry["tf"]}}


def translate(up: Any, layer: dict[str, Any]) -> dict[str, Any]:
    """layer_spec's entry: the TFOpLambda equivalent (noted), or the layer unchanged with an error finding."""
    name = layer.get("name") or (layer.get("config") or {}).get("name")
    op = ((layer.get("config") or {}).get("node_def") or {}).get("op")
    try:
        out = as_tfoplambda(layer)
    except (Untranslated, KeyError, TypeError, ValueError) as exc:
        up.note(up.code("tf_op_layer"), "error", f"TensorFlowOpLayer '{op}' (a TF 2.0-2.3 raw op node) is not "
                f"translated: {exc}", name, "re-save the model from TF >= 2.4, or rebuild it with --src model.py")
        return layer
    up.note(up.code("tf_op_layer"), "info", f"tf.{out['config']['function']} <- raw op {op} (TensorFlowOpLayer, "
            "rules/raw_ops.toml)", name)
    return out
