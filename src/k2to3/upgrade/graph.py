"""Models: Sequential and Functional configs -> rebuild specs (implicit Sequential inputs, Keras 2's node
numbering of nested models, tensor call arguments)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from k2to3.upgrade.masks import keras2_masks
from k2to3.upgrade.node_refs import all_refs, as_ref_list, is_ref
from k2to3.upgrade.plan import RNN_CLASSES
from k2to3.upgrade.specs import input_spec, layer_spec

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState


def model(up: UpgradeState, class_name: str, config: Any) -> dict[str, Any]:
    if class_name == "Sequential":
        return sequential(up, config)
    return functional(up, config)


def sequential(up: UpgradeState, config: Any) -> dict[str, Any]:
    if isinstance(config, list):  # Keras 2.0/2.1 wrote the layers list directly
        config = {"name": "sequential", "layers": config}
    orig = config.get("name", "sequential")
    layers = [copy.deepcopy(x) for x in config.get("layers", [])]
    specs: list[dict[str, Any]] = []
    if not layers or layers[0]["class_name"] != "InputLayer":
        first = layers[0]["config"] if layers else {}
        shape = first.get("batch_input_shape")
        if shape is None and "input_shape" in first:
            shape = [None, *first["input_shape"]]
        if shape is None and first.get("input_dim") is not None:
            shape = [None, first["input_dim"]]
        if shape is None:
            shape = config.get("build_input_shape")
        if shape is None:
            up.note(up.code("sequential_input"), "error",
                    "Sequential model has no input shape (never built before saving)", orig,
                    "build the model on an input in Keras 2 and save again")
        else:
            dtype = first.get("dtype", "float32")
            specs.append(input_spec(up.names.fresh(f"{up.names.name(orig)}_input"), [*shape],
                                    dtype if isinstance(dtype, str) else "float32"))
            up.note(up.code("sequential_input"), "info", f"added the implicit Input of batch shape {tuple(shape)}",
                    orig)
    for layer in layers:
        specs.append(layer_spec(up, layer))
    out = {"kind": "sequential", "name": up.names.name(orig), "orig_name": orig, "layers": specs}
    keras2_masks(up, out)  # K2T436-K2T437
    return out


def functional(up: UpgradeState, config: dict[str, Any]) -> dict[str, Any]:
    orig = config.get("name", "model")
    specs = [layer_spec(up, layer) for layer in config["layers"]]
    offsets = {s["name"]: s["node_offset"] for s in specs}
    # Keras 2 numbers a nested model's first call 1 when the model has an internal node 0.
    # Data check: any reference past the layer's node count means the numbering starts at 1.
    counts = {s["name"]: len(s["inbound_nodes"]) for s in specs}
    for ref in all_refs([s["inbound_nodes"] for s in specs] + [config.get("output_layers")]):
        nm, idx = up.names.name(ref[0]), ref[1]
        if nm in counts and specs and idx >= counts[nm] and counts[nm] > 0 and offsets.get(nm) == 0:
            offsets[nm] = 1
    for s in specs:
        for node in s["inbound_nodes"]:
            refs = node if isinstance(node, list) else []
            kw_refs = [r for r in refs if is_ref(r) and len(r) == 4 and any(all_refs(r[3]))]
            if kw_refs or (s["class_name"] in RNN_CLASSES | {"Bidirectional"} and len(refs) > 1):
                up.note(up.code("call_arguments"), "info", "tensor call arguments resolved in the rebuilt graph",
                        s["orig_name"])
        if s["nested"] is not None and offsets[s["name"]]:
            up.note(up.code("nested_node_index"), "info", "nested model calls renumbered from Keras 2's node 1",
                    s["orig_name"])
        s["node_offset"] = offsets[s["name"]]
    out = {
        "kind": "functional",
        "name": up.names.name(orig),
        "orig_name": orig,
        "layers": specs,
        "inputs": up.names.refs(as_ref_list(config["input_layers"])),
        "outputs": up.names.refs(config["output_layers"]),
    }
    keras2_masks(up, out)  # K2T436-K2T437
    return out
