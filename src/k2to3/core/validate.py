"""Structure check of an untrusted model config at the boundary, before upgrade/rebuild trust its shape.

Schema-light: the types of the keys k2to3 reads (class_name, config, layers, name, inbound_nodes,
input_layers, output_layers), that every referenced layer exists, no duplicate layer names in one model and no
cycle in the graph of nodes: a node is one call of a layer, (layer, node_index), so a layer shared at several
depths (called again on a tensor computed from its own first output) is a graph Keras 2 built, not a cycle.
problems() lists one precise line per problem; check_model_config raises the first.
"""

from __future__ import annotations

from typing import Any

from k2to3.errors import InputError

_MODELS = {"Functional", "Model", "Sequential"}
_HINT = "the config was not written by Keras 2; re-save the model with model.save('x.h5'); see docs/security.md"
MAX_DEPTH = 64  # nested models deeper than this are refused rather than recursed into


def _type(v: Any) -> str:
    return "null" if v is None else {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(v), "number" if isinstance(v, (int, float)) else type(v).__name__)


def _history_names(node: Any) -> list[Any]:
    """Layer names a Keras 2 inbound node refers to: [[name, node_index, tensor_index, kwargs], ...]."""
    if isinstance(node, dict):  # Keras 3 style node ({"args": ..., "kwargs": ...}): its own schema
        return []
    if not isinstance(node, list):
        return [node]
    if node and isinstance(node[0], str):  # TFOpLambda writes a single call as [name, node_index, tensor_index, kw]
        return [node[0]]
    return [ref[0] if isinstance(ref, list) and ref else ref for ref in node]


def _node_refs(data: Any) -> list[tuple[str, int]]:
    """(layer, node_index) of every [name, node_index, tensor_index(, kwargs)] in a node, call kwargs included
    (tensors passed as initial_state or mask are inputs of the call too)."""
    if isinstance(data, list) and len(data) in (3, 4) and isinstance(data[0], str) and type(data[1]) is int:
        return [(data[0], data[1]), *(_node_refs(data[3]) if len(data) == 4 else [])]
    if isinstance(data, list):
        return [r for x in data for r in _node_refs(x)]
    if isinstance(data, dict):
        return [r for x in data.values() for r in _node_refs(x)]
    return []


def _node_graph(inbound: dict[str, list[Any]], nested: set[str]) -> dict[tuple[str, int], list[tuple[str, int]]]:
    """Node (layer, k) -> the nodes its k-th call reads. Keras 2 numbers a nested model's calls from 1 when it
    has an internal node 0: a reference past such a layer's node count says so (as upgrade/graph.py reads it)."""
    calls = {name: [[] if isinstance(n, dict) else _node_refs(n) for n in nodes] for name, nodes in inbound.items()}
    offset = {name: 0 for name in calls}
    for refs in calls.values():
        for name, idx in (r for node in refs for r in node):
            if name in nested and 0 < len(calls[name]) <= idx:
                offset[name] = 1
    return {(name, k): [(r, i - offset[r]) for r, i in node if r in calls]
            for name, refs in calls.items() for k, node in enumerate(refs)}


def _refs(where: str, value: Any) -> tuple[list[str], list[str]]:
    """Layer names in input_layers/output_layers ([name, i, j] or [[name, i, j], ...])."""
    if isinstance(value, list) and value and isinstance(value[0], str):
        value = [value]
    if not isinstance(value, list):
        return [], [f"{where} is a {_type(value)}, not an array"]
    names, bad = [], []
    for ref in value:
        if isinstance(ref, list) and ref and isinstance(ref[0], str):
            names.append(ref[0])
        else:
            bad.append(f"{where} entry {str(ref)[:40]!r} is not [layer_name, node_index, tensor_index]")
    return names, bad


def _is_shape(shape: Any, nullable: bool) -> bool:
    if isinstance(shape, dict) and shape.get("class_name") in ("TensorShape", "__tuple__"):  # SavedModel JSON
        shape = shape.get("items")
    if shape is None:
        return nullable
    if nullable and isinstance(shape, list) and shape and all(isinstance(s, (list, dict)) for s in shape):
        return all(_is_shape(s, True) for s in shape)  # build_input_shape of a multi-input model
    return isinstance(shape, list) and all(d is None or type(d) is int for d in shape)


def _layer(where: str, layer: Any, depth: int, out: list[str]) -> None:
    if not isinstance(layer, dict):
        out.append(f"{where} is a {_type(layer)}, not an object")
        return
    cls = layer.get("class_name")
    if not isinstance(cls, str) or not cls:
        out.append(f"{where}.class_name is {'missing' if 'class_name' not in layer else _type(cls)}, not a name")
        return
    cfg = layer.get("config")
    if cls == "Sequential" and isinstance(cfg, list):  # Keras <= 2.2.4 wrote the layer list directly
        cfg = {"layers": cfg}
    if not isinstance(cfg, dict):
        out.append(f"{where} ({cls}).config is {'missing' if 'config' not in layer else _type(cfg)}, not an object")
        return
    if "name" in cfg and not isinstance(cfg["name"], str):
        out.append(f"{where} ({cls}).config.name is {_type(cfg['name'])}, not a string")
        return
    for key in ("batch_input_shape", "batch_shape", "build_input_shape"):
        if key in cfg or (cls == "InputLayer" and key == "batch_input_shape" and "batch_shape" not in cfg):
            if not _is_shape(cfg.get(key), nullable=key == "build_input_shape"):
                out.append(f"{where} ({cls}).config.{key} is {_type(cfg.get(key))}, not a list of sizes")
                return
    if cls in _MODELS or ("layers" in cfg and "input_layers" in cfg):
        if depth > MAX_DEPTH:
            out.append(f"{where}: models nested deeper than {MAX_DEPTH}")
            return
        _model(f"{where} ({cls})", cls, cfg, depth + 1, out)
    for key in ("layer", "forward_layer", "backward_layer", "cell"):  # wrappers and RNNs hold one layer
        if isinstance(cfg.get(key), dict) and "class_name" in cfg[key]:
            _layer(f"{where}.{key}", cfg[key], depth + 1, out)


def _model(where: str, cls: str, cfg: dict[str, Any], depth: int, out: list[str]) -> None:
    layers = cfg.get("layers")
    if not isinstance(layers, list):
        out.append(f"{where}.layers is {'missing' if 'layers' not in cfg else _type(layers)}, not an array")
        return
    names: dict[str, int] = {}
    graph: dict[str, list[str]] = {}
    inbound: dict[str, list[Any]] = {}
    nested: set[str] = set()
    functional = cls != "Sequential"
    for i, lay in enumerate(layers):
        n = len(out)
        _layer(f"{where}.layers[{i}]", lay, depth, out)
        if len(out) > n or not isinstance(lay, dict):
            continue
        cfg_i = lay["config"] if isinstance(lay["config"], dict) else {}
        if "name" in lay and not isinstance(lay["name"], str):
            out.append(f"{where}.layers[{i}].name is {_type(lay['name'])}, not a string")
            continue
        if ("name" in cfg_i or "name" not in lay) and not isinstance(cfg_i.get("name"), str):
            out.append(f"{where}.layers[{i}].config.name is {_type(cfg_i.get('name'))}, not a string")
            continue
        name = lay.get("name", cfg_i.get("name"))
        if name in names:
            out.append(f"{where}: duplicate layer name {name!r} (layers[{names[name]}] and layers[{i}])")
            continue
        names[name] = i
        if functional:
            nodes = lay.get("inbound_nodes", [])
            if not isinstance(nodes, list):
                out.append(f"{where}.layers[{i}] ({name}).inbound_nodes is a {_type(nodes)}, not an array")
                continue
            graph[name] = [r for node in nodes for r in _history_names(node)]
            inbound[name] = nodes
            if isinstance(cfg_i.get("layers"), list):
                nested.add(name)
            refs = [r for node in nodes if isinstance(node, list)
                    for r in ([node] if node and isinstance(node[0], str) else node)]
            if any(isinstance(r, list) and len(r) == 4 and not isinstance(r[3], dict) for r in refs):
                out.append(f"{where}.layers[{i}] ({name}).inbound_nodes: call arguments (4th item) are not an object")
    if not functional:
        return
    for name, refs in graph.items():
        for r in refs:
            if not isinstance(r, str):
                out.append(f"{where}: layer {name!r} has an inbound node entry {str(r)[:40]!r}, not [name, ...]")
            elif r not in names and r != "_CONSTANT_VALUE":  # tf_keras' placeholder for a constant argument
                out.append(f"{where}: layer {name!r} takes input from {r!r}, which is not a layer of this model")
    for key in ("input_layers", "output_layers"):
        if key not in cfg:
            out.append(f"{where}.{key} is missing")
            continue
        refs, bad = _refs(f"{where}.{key}", cfg[key])
        out.extend(bad)
        out.extend(f"{where}.{key} names {r!r}, which is not a layer of this model" for r in refs if r not in names)
    cycle = _cycle(_node_graph(inbound, nested))
    if cycle:
        path = " -> ".join(f"{n}[{i}]" for n, i in cycle)
        out.append(f"{where}: the graph of layer calls has a cycle ({path}; layer[node_index] reads the next)")


def _cycle(graph: dict[Any, list[Any]]) -> list[Any] | None:
    """A cycle as a path of nodes, or None (iterative DFS: configs can be deep)."""
    state: dict[Any, int] = {}
    for start in graph:
        if start in state:
            continue
        path: list[Any] = []
        stack: list[tuple[Any, int]] = [(start, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                state[node] = 1
                path.append(node)
            deps = [d for d in graph.get(node, []) if d in graph]
            if i < len(deps):
                stack.append((node, i + 1))
                d = deps[i]
                if state.get(d) == 1:
                    return [*path[path.index(d):], d]
                if d not in state:
                    stack.append((d, 0))
            else:
                state[node] = 2
                path.pop()
    return None


def problems(config: Any) -> list[str]:
    """One line per structural problem of a model_config (empty when k2to3 can read it)."""
    out: list[str] = []
    if not isinstance(config, dict):
        return [f"is a JSON {_type(config)}, not an object"]
    _layer("model", config, 0, out)
    return out


def check_model_config(config: Any, where: str) -> None:
    found = problems(config)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        raise InputError(f"{where} {found[0]}{more}", hint=_HINT)
