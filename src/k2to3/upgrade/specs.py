"""One node of the graph: a layer of a model_config -> its rebuild spec (InputLayer, nested model, Lambda,
TF op layer or a plain layer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from k2to3.core import optable as ops_mod
from k2to3.core import rules as rules_mod
from k2to3.upgrade import tfoplayer, values
from k2to3.upgrade.layers import layer_config
from k2to3.upgrade.needed_code import foreign_keys
from k2to3.upgrade.node_refs import op_node_kwargs
from k2to3.upgrade.plan import MODEL_CLASSES, OP_LAYER_CLASSES, RANDOM_LAMBDA, SHAPE_KEYS

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState


def input_spec(name: str, batch_shape: list[Any], dtype: str, sparse: bool = False, ragged: bool = False,
               orig: str | None = None) -> dict[str, Any]:
    return {"name": name, "orig_name": orig or name, "class_name": "InputLayer", "registered_name": None,
            "config": {"batch_shape": batch_shape, "dtype": dtype, "sparse": sparse, "ragged": ragged},
            "inbound_nodes": [], "nested": None, "node_offset": 0}


def layer_spec(up: UpgradeState, layer: dict[str, Any]) -> dict[str, Any]:
    if layer.get("class_name") == "TensorFlowOpLayer":  # TF 2.0-2.3 raw op: as the TFOpLambda it equals
        layer = tfoplayer.translate(up, layer)
    cls = layer["class_name"]
    raw_cfg = values.tensorshape(up, layer.get("config", {}))
    orig = raw_cfg.get("name") or layer.get("name")
    name = up.names.name(orig)
    inbound = up.names.refs(values.tensorshape(up, layer.get("inbound_nodes", [])))
    spec: dict[str, Any] = {"name": name, "orig_name": orig, "class_name": cls, "registered_name": None,
                            "config": {}, "inbound_nodes": inbound, "nested": None, "node_offset": 0}
    if cls == "InputLayer":
        shape = raw_cfg.get("batch_input_shape", raw_cfg.get("batch_shape"))
        dtype = raw_cfg.get("dtype", "float32")
        if isinstance(dtype, dict):
            dtype = dtype.get("config", {}).get("name", "float32")
        out = input_spec(name, list(shape), dtype, bool(raw_cfg.get("sparse")), bool(raw_cfg.get("ragged")), orig)
        out["inbound_nodes"] = inbound
        return out
    if cls in MODEL_CLASSES:
        nested = up.model(cls, raw_cfg)
        spec["nested"] = nested
        first = nested["layers"][0] if nested["layers"] else None
        # Keras 2 `_should_skip_first_node`: models built on an InputLayer own node 0.
        spec["node_offset"] = int(cls != "Sequential" or bool(
            layer.get("config", {}).get("layers") and first and first["class_name"] == "InputLayer"
            and isinstance(raw_cfg, dict) and raw_cfg["layers"][0]["class_name"] == "InputLayer"))
        return spec
    if cls == "Lambda":
        return lambda_spec(up, spec, raw_cfg)
    if cls in OP_LAYER_CLASSES:
        return op_spec(up, spec, raw_cfg)
    src_cls = up.source.classes.get(cls.split(">")[-1]) if up.source is not None else None
    cfg, cls, registered = layer_config(up, cls, raw_cfg, orig, renames=src_cls is None)
    if registered is None and src_cls is not None:
        registered = up.source.registered(src_cls)
        up.note(up.code("from_source"), "info", f"class {cls} rebuilt from the source as {registered}", orig)
    stop = no_port(up, cls) if registered is None else None
    if stop is not None:  # K2T941-K2T943: a known library class with no Keras 3 equivalent
        up.note(stop.code, "error", f"{cls}: no Keras 3 equivalent ({stop.title})", orig, stop.fix)
    elif registered is None and cls not in rules_mod.keras3_layers() and not stopped(up, orig):
        up.note(up.code("unknown_class"), "error", f"unknown layer class '{cls}' (not a Keras 3 layer, "
                "no k2to3 rule)", orig, rules_mod.library_hint(cls) or "pass the source that defines it with --src "
                "model.py, or port it and register it with keras.saving.register_keras_serializable")
    elif registered is None and foreign_keys(cls, raw_cfg) and not stopped(up, orig):
        # named like a Keras 3 layer, saved with keys that layer does not take: another library's class of that name
        keys = ", ".join(foreign_keys(cls, raw_cfg))
        up.note(up.code("unknown_class"), "error", f"layer class '{cls}' is saved with {keys}, which Keras 3's "
                f"{cls} does not take: another library's class of that name", orig,
                rules_mod.library_hint(cls) or "pass the source that defines it with --src")
    cfg["name"] = name
    for k in SHAPE_KEYS:
        if k in cfg:
            cfg.pop(k)
    spec.update(class_name=cls, config=cfg, registered_name=registered)
    return spec


def stopped(up: UpgradeState, layer: str | None) -> bool:
    """Whether an earlier step already stopped on this layer (a Keras 1 Merge it could not translate, K2T909):
    its untranslated class is not also an unknown class (K2T902)."""
    return any(f.layer == layer and f.severity == "error" for f in up.plan.findings)


def no_port(up: UpgradeState, cls: str) -> rules_mod.Rule | None:
    """The rule naming `cls` as a library layer k2to3 cannot convert (rules/layers.toml `no_keras3_port`)."""
    return next((r for r in up.rules if r.builtin == "no_keras3_port" and cls in r.classes), None)


def lambda_spec(up: UpgradeState, spec: dict[str, Any], raw_cfg: dict[str, Any]) -> dict[str, Any]:
    """A Lambda is rebuilt from --src or reported: its bytecode is never run."""
    orig, name = spec["orig_name"], spec["name"]
    if up.source is not None and orig in up.source.lambdas:
        lam = up.source.lambdas[orig]
        spec["config"] = {"name": name, "trainable": raw_cfg.get("trainable", True),
                          "dtype": values.dtype(up, raw_cfg.get("dtype", "float32"), orig),
                          "function": up.source.function_config(lam["function"]),
                          "arguments": lam["arguments"]}
        if lam.get("random"):  # its function draws random numbers: a Lambda that owns their SeedGenerator
            spec["class_name"] = RANDOM_LAMBDA
            spec["registered_name"] = up.source.registered(RANDOM_LAMBDA)
        recorded = raw_cfg.get("output_shape")
        if raw_cfg.get("output_shape_type") == "raw" and isinstance(recorded, list) and recorded \
                and all(isinstance(d, int) or d is None for d in recorded):
            spec["expect_output_shape"] = recorded  # checked against the rebuilt layer (workers/child.py)
        up.note(up.code("from_source"), "info", f"Lambda rebuilt from the source ({lam['source']}, matched "
                f"by {lam.get('matched_by') or 'function name'}) as "
                f"{up.source.registered(lam['function'])}" + (f" with arguments {lam['arguments']}"
                                                                if lam["arguments"] else ""), orig)
        return spec
    ftype = raw_cfg.get("function_type", "lambda")
    spec["config"] = raw_cfg
    if up.source is not None and up.source.errors:
        return spec  # the --src resolution already said why this Lambda is not rebuilt
    up.note(up.code("lambda"), "error",
            f"Lambda layer stores its function as {'bytecode' if ftype == 'lambda' else 'a name'};"
            " k2to3 never runs bytecode from a file", orig, "pass the model source with --src model.py" + (
                ", or --trust-bytecode for a file you trust: a simple Lambda is then decompiled, never run"
                if ftype == "lambda" else ""))
    return spec


def op_spec(up: UpgradeState, spec: dict[str, Any], raw_cfg: dict[str, Any]) -> dict[str, Any]:
    """TFOpLambda / SlicingOpLambda: translated to keras.ops by the op table, or kept as a TF call."""
    cls, orig = spec["class_name"], spec["orig_name"]
    spec["config"] = raw_cfg
    fn = raw_cfg.get("function")
    spec["op"] = fn or raw_cfg.get("node_def", {}).get("op")
    code = up.code("tf_op_layer")
    if cls == "TensorFlowOpLayer":
        return spec  # tfoplayer.translate said why it stays untranslated
    if not fn:
        up.note(code, "error", f"{cls} '{spec['op']}' (a TF 2.0-2.3 raw op node) is not translated", orig,
                "re-save the model from TF >= 2.4, or rebuild it with --src model.py")
        return spec
    for node in spec["inbound_nodes"]:
        reason = ops_mod.check(fn, op_node_kwargs(node))
        if reason:
            # Kept as a TensorFlow call (k2to3>TFOpLayer): the rest converts, and the model runs on the
            # tensorflow backend only.
            up.note(code, "warning", f"{reason}; kept as tf.{fn} (k2to3>TFOpLayer): the model is "
                    "TensorFlow-only", orig, "replace the op with a keras.ops call in the source and re-save")
            spec["tf_only"] = True
            up.plan.tf_only.append({"layer": orig, "op": f"tf.{fn}", "reason": reason})
            up.plan.needs_portable = True
            break
    else:
        entry = None if fn == ops_mod.GETITEM else ops_mod.lookup(fn)
        if entry is not None and entry.keras == ops_mod.SHAPE:
            up.plan.needs_portable = True  # a consumer of a batch-dependent shape becomes a k2to3>ShapeOp layer
        target = entry.keras if entry else "__getitem__"
        up.note(code, "info", f"tf.{fn} -> {target if target.startswith('k2to3.') else 'keras.ops.' + target}"
                + (f" ({entry.safety})" if entry and entry.safety != "safe" else ""), orig)
    return spec
