"""Keras 2 model_config -> a rebuild plan for Keras 3 (pure data: no keras import).

The plan is JSON: the tensorflow worker rebuilds the model from it by calling Keras 3 layers on
KerasTensors (see rebuild.py). Every change is driven by rules/layers.toml and leaves a Finding.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from . import ops as ops_mod
from . import rules as rules_mod
from .findings import Finding

KERAS3_ACTIVATIONS = frozenset(
    "celu elu exponential gelu glu hard_shrink hard_sigmoid hard_silu hard_swish hard_tanh leaky_relu "
    "linear log_sigmoid log_softmax mish relu relu6 selu sigmoid silu soft_shrink softmax softplus "
    "softsign sparse_plus sparse_sigmoid sparsemax squareplus swish tanh tanh_shrink threshold".split()
)
MODEL_CLASSES = frozenset({"Functional", "Model", "Sequential"})
INNER_LAYER_KEYS = ("layer", "backward_layer", "cell")
RNN_CLASSES = frozenset({"LSTM", "GRU", "SimpleRNN", "RNN", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"})
OP_LAYER_CLASSES = frozenset({"TFOpLambda", "SlicingOpLambda", "TensorFlowOpLayer"})
SHAPE_KEYS = ("batch_input_shape", "input_shape", "batch_size")
PORTABLE_PACKAGE = "k2to3"


def portable_function(name: str) -> dict[str, Any]:
    """How Keras 3 serializes a registered function (k2to3.portable)."""
    return {
        "module": "builtins",
        "class_name": "function",
        "config": f"{PORTABLE_PACKAGE}>{name}",
        "registered_name": "function",
    }


@dataclass
class Plan:
    model: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)
    compile: dict[str, Any] | None = None
    dtype_policies: set[str] = field(default_factory=set)
    needs_portable: bool = False
    tf_only: list[dict[str, str]] = field(default_factory=list)  # ops kept as TensorFlow calls (layer, op, why)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "renames": self.renames,
            "compile": self.compile,
            "dtype_policies": sorted(self.dtype_policies),
            "needs_portable": self.needs_portable,
            "tf_only": self.tf_only,
        }


def function_name(value: Any) -> str | None:
    """The name an activation/loss config holds: a string, a serialized function's name, or "<lambda>" for a
    tf_keras-serialized lambda ({"value": [bytecode, ...]})."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value.get("class_name") == "function" and isinstance(value.get("config"), str):
        return value["config"]
    if isinstance(value, dict) and (isinstance(value.get("value"), list) or value.get("class_name") == "__lambda__"):
        return "<lambda>"
    return None


def _is_ref(x: Any) -> bool:
    """[layer, node, tensor(, kwargs)], or Keras 2's [_CONSTANT_VALUE, -1, value(, kwargs)]."""
    return (
        isinstance(x, list)
        and len(x) in (3, 4)
        and isinstance(x[0], str)
        and isinstance(x[1], int)
        and (isinstance(x[2], int) or x[0] == "_CONSTANT_VALUE")
    )


def op_node_kwargs(node: Any) -> dict[str, Any]:
    """An op layer's call kwargs: stored on every element of its first argument."""
    if _is_ref(node):
        return node[3] if len(node) == 4 else {}
    if isinstance(node, list):
        for x in node:
            kw = op_node_kwargs(x)
            if kw:
                return kw
    return {}


class Upgrader:
    def __init__(self, source: Any = None) -> None:
        self.rules = rules_mod.layer_rules()
        self.source = source  # a source.hoist.Resolution when --src was given
        self.plan = Plan(model={})
        self._used_names: set[str] = set()
        self._rename_seen: dict[str, str] = {}

    # -- findings -------------------------------------------------------------------------------
    def note(self, code: str, severity: str, message: str, layer: str | None = None, fix: str | None = None):
        f = Finding(code, severity, message, layer, fix)  # type: ignore[arg-type]
        if f not in self.plan.findings:
            self.plan.findings.append(f)

    def code(self, builtin: str) -> str:
        return rules_mod.builtin_code(builtin)

    # -- names ----------------------------------------------------------------------------------
    def name(self, orig: str) -> str:
        if orig in self._rename_seen:
            return self._rename_seen[orig]
        new = orig
        if "/" in orig:
            new = re.sub(r"/+", "_", orig)
            base, i = new, 1
            while new in self._used_names:
                new = f"{base}_{i}"
                i += 1
            self.plan.renames[orig] = new
            self.note(self.code("names"), "info", f"renamed to '{new}' ('/' is not allowed in Keras 3)", orig)
        self._rename_seen[orig] = new
        self._used_names.add(new)
        return new

    def refs(self, data: Any) -> Any:
        """Rename layer references anywhere in node data or kwargs."""
        if _is_ref(data):
            out = [self.name(data[0]), *data[1:3]]
            if len(data) == 4:
                out.append(self.refs(data[3]))
            return out
        if isinstance(data, list):
            return [self.refs(x) for x in data]
        if isinstance(data, dict):
            return {k: self.refs(v) for k, v in data.items()}
        return data

    # -- generic value fixes ----------------------------------------------------------------------
    def tensorshape(self, obj: Any) -> Any:
        if isinstance(obj, dict):
            if obj.get("class_name") == "TensorShape" and "items" in obj:
                self.note(self.code("tensorshape"), "info", "decoded a TensorShape value to a list")
                return list(obj["items"]) if obj["items"] is not None else None
            return {k: self.tensorshape(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.tensorshape(v) for v in obj]
        return obj

    def dtype(self, value: Any, layer: str) -> Any:
        if isinstance(value, dict) and value.get("class_name") in ("Policy", "DTypePolicy"):
            policy = value.get("config", {}).get("name", "float32")
            self.plan.dtype_policies.add(policy)
            self.note(self.code("dtype_policy"), "info", f"dtype policy '{policy}' kept as DTypePolicy", layer)
            return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": policy},
                    "registered_name": None}
        if isinstance(value, str):
            self.plan.dtype_policies.add(value)
        return value

    def nested_objects(self, obj: Any, layer: str) -> Any:
        """Initializer/regularizer/constraint dicts: drop TF1 `dtype`/`partition_info` keys."""
        if isinstance(obj, dict):
            cfg = obj.get("config")
            if "class_name" in obj and isinstance(cfg, dict) and ("dtype" in cfg or "partition_info" in cfg) \
                    and obj["class_name"] not in ("Policy", "DTypePolicy"):
                cfg = {k: v for k, v in cfg.items() if k not in ("dtype", "partition_info")}
                self.note(self.code("initializer_dtype"), "info",
                          f"dropped dtype from {obj['class_name']} config", layer)
                obj = {**obj, "config": cfg}
            return {k: self.nested_objects(v, layer) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.nested_objects(v, layer) for v in obj]
        return obj

    def activation(self, value: Any, key: str, layer: str) -> Any:
        src = self.source
        if src is not None:
            name = src.activations.get((layer, key))
            if name is None:
                name = src.functions.get(function_name(value) or "")
            if name is not None:
                self.note(self.code("from_source"), "info", f"{key} rebuilt from the source as "
                          f"{src.registered(name)}", layer)
                return src.function_config(name)
        for r in self.rules:
            if r.action == "map_value" and key in r.keys and value == r.from_:
                if r.to_portable:
                    self.plan.needs_portable = True
                    self.note(r.code, "info", f"{key}='{value}' keeps Keras 2 semantics via "
                              f"k2to3>{r.to_portable}", layer)
                    return portable_function(r.to_portable)
                self.note(r.code, "info", f"{key}='{value}' renamed to '{r.to}'", layer)
                return r.to
        stored = function_name(value)
        registered = isinstance(stored, str) and re.fullmatch(r"[\w.]+>[\w.]+", stored)
        if isinstance(stored, str) and stored not in KERAS3_ACTIVATIONS and not registered:
            self.note(self.code("activation_lambda"), "error",
                      f"{key}='{stored}' is a custom or lambda function whose code is not in the file", layer,
                      "pass the source that defines it with --src model.py")
        return value

    # -- one layer config -------------------------------------------------------------------------
    def layer_config(
        self, class_name: str, config: dict[str, Any], layer: str, renames: bool = True
    ) -> tuple[dict[str, Any], str, str | None]:
        """Returns (config, class_name, registered_name). `renames=False`: the class comes from --src, so
        rename rules (library layers) do not apply to it."""
        cfg = copy.deepcopy(config)
        registered = None
        if class_name == "BatchNormalization" and cfg.get("virtual_batch_size") and isinstance(cfg.get("axis"), list):
            # K2T405: tf_keras's build() inserts a virtual-batch dimension at index 1 and shifts every axis
            # by +1 in place, so get_config saved the shifted axes.
            cfg["axis"] = [a - 1 if a > 1 else a for a in cfg["axis"]]
        for r in self.rules:
            if r.action == "builtin" or class_name not in r.classes:
                continue
            if r.action == "drop_keys":
                for key in r.keys:
                    if key not in cfg:
                        continue
                    if key in r.require and cfg[key] != r.require[key]:
                        self.note(r.code, "error", f"{class_name} has {key}={cfg[key]!r}; only "
                                  f"{r.require[key]!r} has a Keras 3 equivalent", layer,
                                  "re-save the model without it in Keras 2")
                        continue
                    value = cfg.pop(key)
                    sev = "warning" if r.safety == "training-only" and value not in (None, False) else "info"
                    self.note(r.code, sev, f"dropped {key}={value!r} ({r.title})", layer)
            elif r.action == "keep_keys":
                dropped = sorted(k for k in cfg if k not in r.keys)
                if dropped:
                    cfg = {k: v for k, v in cfg.items() if k in r.keys}
                    self.note(r.code, "info", f"dropped {', '.join(dropped)} ({r.title})", layer)
            elif r.action == "rename_class" and renames:
                self.note(r.code, "info", f"{class_name} -> {'k2to3>' if r.portable else ''}{r.to}", layer)
                class_name = r.to or class_name
                cfg.update(r.set)
                if r.portable:
                    registered = f"{PORTABLE_PACKAGE}>{class_name}"
                    self.plan.needs_portable = True
        for key in ("activation", "recurrent_activation"):
            if key in cfg:
                cfg[key] = self.activation(cfg[key], key, layer)
        if "axis" in cfg and isinstance(cfg["axis"], list):
            if len(cfg["axis"]) == 1:
                cfg["axis"] = cfg["axis"][0]
            else:
                self.note(self.code("axis"), "info", f"kept axis={cfg['axis']} (the legacy loader drops it)", layer)
        if "dtype" in cfg:
            cfg["dtype"] = self.dtype(cfg["dtype"], layer)
        cfg = self.nested_objects(cfg, layer)
        for key in INNER_LAYER_KEYS:
            inner = cfg.get(key)
            if isinstance(inner, dict) and "class_name" in inner:
                cfg[key] = self.inner_layer(inner, layer)
        if class_name == "StackedRNNCells" and isinstance(cfg.get("cells"), list):
            cfg["cells"] = [self.inner_layer(c, layer) for c in cfg["cells"]]
        if class_name in RNN_CLASSES and cfg.get("time_major") is True:
            pass  # reported by K2T401's require
        return cfg, class_name, registered

    def inner_layer(self, inner: dict[str, Any], outer: str) -> dict[str, Any]:
        cls = inner["class_name"]
        cfg, cls, registered = self.layer_config(cls, inner.get("config", {}), outer)
        if registered is None and cls not in rules_mod.keras3_layers():
            self.note(self.code("unknown_class"), "error", f"unknown inner layer class '{cls}'", outer,
                      "pass the source that defines it with --src model.py")
        for k in SHAPE_KEYS:
            cfg.pop(k, None)
        if "module" not in inner:
            self.note(self.code("inner_layer_configs"), "info", f"inner {cls} config upgraded", outer)
        return {
            "module": None if registered else "keras.layers",
            "class_name": cls,
            "config": cfg,
            "registered_name": registered,
        }

    # -- graphs -----------------------------------------------------------------------------------
    def model(self, class_name: str, config: Any, orig_name: str | None = None) -> dict[str, Any]:
        if class_name == "Sequential":
            return self.sequential(config)
        return self.functional(config)

    def sequential(self, config: Any) -> dict[str, Any]:
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
                self.note(self.code("sequential_input"), "error",
                          "Sequential model has no input shape (never built before saving)", orig,
                          "build the model on an input in Keras 2 and save again")
            else:
                dtype = first.get("dtype", "float32")
                specs.append(self.input_spec(f"{self.name(orig)}_input", [*shape], dtype if isinstance(dtype, str)
                                             else "float32"))
                self.note(self.code("sequential_input"), "info",
                          f"added the implicit Input of batch shape {tuple(shape)}", orig)
        for layer in layers:
            specs.append(self.layer_spec(layer, sequential=True))
        return {"kind": "sequential", "name": self.name(orig), "orig_name": orig, "layers": specs}

    def functional(self, config: dict[str, Any]) -> dict[str, Any]:
        orig = config.get("name", "model")
        specs = [self.layer_spec(layer) for layer in config["layers"]]
        offsets = {s["name"]: s["node_offset"] for s in specs}
        # Keras 2 numbers a nested model's first call 1 when the model has an internal node 0.
        # Data check: any reference past the layer's node count means the numbering starts at 1.
        counts = {s["name"]: len(s["inbound_nodes"]) for s in specs}
        for ref in _all_refs([s["inbound_nodes"] for s in specs] + [config.get("output_layers")]):
            nm, idx = self.name(ref[0]), ref[1]
            if nm in counts and specs and idx >= counts[nm] and counts[nm] > 0 and offsets.get(nm) == 0:
                offsets[nm] = 1
        for s in specs:
            for node in s["inbound_nodes"]:
                refs = node if isinstance(node, list) else []
                kw_refs = [r for r in refs if _is_ref(r) and len(r) == 4 and any(_all_refs(r[3]))]
                if kw_refs or (s["class_name"] in RNN_CLASSES | {"Bidirectional"} and len(refs) > 1):
                    self.note(self.code("call_arguments"), "info", "tensor call arguments resolved in the "
                              "rebuilt graph", s["orig_name"])
            if s["nested"] is not None and offsets[s["name"]]:
                self.note(self.code("nested_node_index"), "info",
                          "nested model calls renumbered from Keras 2's node 1", s["orig_name"])
            s["node_offset"] = offsets[s["name"]]
        return {
            "kind": "functional",
            "name": self.name(orig),
            "orig_name": orig,
            "layers": specs,
            "inputs": self.refs(_as_ref_list(config["input_layers"])),
            "outputs": self.refs(config["output_layers"]),
        }

    def input_spec(self, name: str, batch_shape: list[Any], dtype: str, sparse: bool = False,
                   ragged: bool = False, orig: str | None = None) -> dict[str, Any]:
        return {"name": name, "orig_name": orig or name, "class_name": "InputLayer", "registered_name": None,
                "config": {"batch_shape": batch_shape, "dtype": dtype, "sparse": sparse, "ragged": ragged},
                "inbound_nodes": [], "nested": None, "node_offset": 0}

    def layer_spec(self, layer: dict[str, Any], sequential: bool = False) -> dict[str, Any]:
        cls = layer["class_name"]
        raw_cfg = self.tensorshape(layer.get("config", {}))
        orig = raw_cfg.get("name") or layer.get("name")
        name = self.name(orig)
        inbound = self.refs(self.tensorshape(layer.get("inbound_nodes", [])))
        spec: dict[str, Any] = {"name": name, "orig_name": orig, "class_name": cls, "registered_name": None,
                                "config": {}, "inbound_nodes": inbound, "nested": None, "node_offset": 0}
        if cls == "InputLayer":
            shape = raw_cfg.get("batch_input_shape", raw_cfg.get("batch_shape"))
            dtype = raw_cfg.get("dtype", "float32")
            if isinstance(dtype, dict):
                dtype = dtype.get("config", {}).get("name", "float32")
            out = self.input_spec(name, list(shape), dtype, bool(raw_cfg.get("sparse")),
                                  bool(raw_cfg.get("ragged")), orig)
            out["inbound_nodes"] = inbound
            return out
        if cls in MODEL_CLASSES:
            nested = self.model(cls, raw_cfg, orig)
            spec["nested"] = nested
            first = nested["layers"][0] if nested["layers"] else None
            # Keras 2 `_should_skip_first_node`: models built on an InputLayer own node 0.
            spec["node_offset"] = int(cls != "Sequential" or bool(
                layer.get("config", {}).get("layers") and first and first["class_name"] == "InputLayer"
                and isinstance(raw_cfg, dict) and raw_cfg["layers"][0]["class_name"] == "InputLayer"))
            return spec
        if cls == "Lambda" and self.source is not None and orig in self.source.lambdas:
            lam = self.source.lambdas[orig]
            spec["config"] = {"name": name, "trainable": raw_cfg.get("trainable", True),
                              "dtype": self.dtype(raw_cfg.get("dtype", "float32"), orig),
                              "function": self.source.function_config(lam["function"]),
                              "arguments": lam["arguments"]}
            recorded = raw_cfg.get("output_shape")
            if raw_cfg.get("output_shape_type") == "raw" and isinstance(recorded, list) and recorded \
                    and all(isinstance(d, int) or d is None for d in recorded):
                spec["expect_output_shape"] = recorded  # checked against the rebuilt layer (workers/child.py)
            self.note(self.code("from_source"), "info", f"Lambda rebuilt from the source ({lam['source']}, matched "
                      f"by {lam.get('matched_by') or 'function name'}) as "
                      f"{self.source.registered(lam['function'])}" + (f" with arguments {lam['arguments']}"
                                                                        if lam["arguments"] else ""), orig)
            return spec
        if cls == "Lambda":
            ftype = raw_cfg.get("function_type", "lambda")
            spec["config"] = raw_cfg
            if self.source is not None and self.source.errors:
                return spec  # the --src resolution already said why this Lambda is not rebuilt
            self.note(self.code("lambda"), "error",
                      f"Lambda layer stores its function as {'bytecode' if ftype == 'lambda' else 'a name'};"
                      " k2to3 never runs bytecode from a file", orig,
                      "pass the model source with --src model.py")
            spec["config"] = raw_cfg
            return spec
        if cls in OP_LAYER_CLASSES:
            spec["config"] = raw_cfg
            fn = raw_cfg.get("function")
            spec["op"] = fn or raw_cfg.get("node_def", {}).get("op")
            code = self.code("tf_op_layer")
            if cls == "TensorFlowOpLayer" or not fn:
                self.note(code, "error", f"{cls} '{spec['op']}' (a TF 2.0-2.3 raw op node) is not translated", orig,
                          "re-save the model from TF >= 2.4, or rebuild it with --src model.py")
                return spec
            for node in inbound:
                reason = ops_mod.check(fn, op_node_kwargs(node))
                if reason:
                    # Kept as a TensorFlow call (k2to3>TFOpLayer): the rest converts, and the model runs on the
                    # tensorflow backend only.
                    self.note(code, "warning", f"{reason}; kept as tf.{fn} (k2to3>TFOpLayer): the model is "
                              "TensorFlow-only", orig, "replace the op with a keras.ops call in the source and "
                              "re-save")
                    spec["tf_only"] = True
                    self.plan.tf_only.append({"layer": orig, "op": f"tf.{fn}", "reason": reason})
                    self.plan.needs_portable = True
                    break
            else:
                entry = None if fn == ops_mod.GETITEM else ops_mod.lookup(fn)
                self.note(code, "info", f"tf.{fn} -> keras.ops.{entry.keras if entry else '__getitem__'}"
                          + (f" ({entry.safety})" if entry and entry.safety != "safe" else ""), orig)
            return spec
        src_cls = self.source.classes.get(cls.split(">")[-1]) if self.source is not None else None
        cfg, cls, registered = self.layer_config(cls, raw_cfg, orig, renames=src_cls is None)
        if registered is None and src_cls is not None:
            registered = self.source.registered(src_cls)
            self.note(self.code("from_source"), "info", f"class {cls} rebuilt from the source as {registered}", orig)
        if registered is None and cls not in rules_mod.keras3_layers():
            self.note(self.code("unknown_class"), "error", f"unknown layer class '{cls}' (not a Keras 3 layer, "
                      "no k2to3 rule)", orig, "pass the source that defines it with --src model.py, or port it "
                      "and register it with keras.saving.register_keras_serializable")
        cfg["name"] = name
        for k in SHAPE_KEYS:
            if k in cfg:
                cfg.pop(k)
        spec.update(class_name=cls, config=cfg, registered_name=registered)
        return spec


def _as_ref_list(x: Any) -> list[Any]:
    return [x] if _is_ref(x) else list(x)


def _all_refs(data: Any):
    if _is_ref(data):
        yield data
        if len(data) == 4:
            yield from _all_refs(data[3])
    elif isinstance(data, list):
        for x in data:
            yield from _all_refs(x)
    elif isinstance(data, dict):
        for x in data.values():
            yield from _all_refs(x)


# -- training_config (FM-2) ------------------------------------------------------------------------
LOSS_ALIASES = {
    "mse": "mean_squared_error", "mae": "mean_absolute_error", "mape": "mean_absolute_percentage_error",
    "msle": "mean_squared_logarithmic_error", "kld": "kl_divergence", "kullback_leibler_divergence":
    "kl_divergence", "logcosh": "log_cosh", "bce": "binary_crossentropy", "cosine_proximity": "cosine_similarity",
}
KERAS3_LOSSES = frozenset(
    "mean_squared_error mean_absolute_error mean_absolute_percentage_error mean_squared_logarithmic_error "
    "kl_divergence log_cosh binary_crossentropy categorical_crossentropy sparse_categorical_crossentropy "
    "hinge squared_hinge categorical_hinge poisson huber cosine_similarity binary_focal_crossentropy "
    "categorical_focal_crossentropy ctc dice tversky".split()
)
KERAS3_LOSS_CLASSES = frozenset(
    "MeanSquaredError MeanAbsoluteError MeanAbsolutePercentageError MeanSquaredLogarithmicError KLDivergence "
    "LogCosh BinaryCrossentropy CategoricalCrossentropy SparseCategoricalCrossentropy Hinge SquaredHinge "
    "CategoricalHinge Poisson Huber CosineSimilarity BinaryFocalCrossentropy CategoricalFocalCrossentropy".split()
)
METRIC_NAMES = frozenset(
    "accuracy acc binary_accuracy categorical_accuracy sparse_categorical_accuracy top_k_categorical_accuracy "
    "sparse_top_k_categorical_accuracy mean_squared_error mean_absolute_error mean_absolute_percentage_error "
    "mean_squared_logarithmic_error binary_crossentropy categorical_crossentropy "
    "sparse_categorical_crossentropy kl_divergence poisson hinge squared_hinge categorical_hinge "
    "cosine_similarity log_cosh auc precision recall".split()
)
OPTIMIZERS = frozenset("SGD RMSprop Adam AdamW Adadelta Adagrad Adamax Adafactor Nadam Ftrl Lion Lamb".split())
OPTIMIZER_DROP = ("jit_compile", "is_legacy_optimizer", "decay", "schedule_decay")


class TrainingConfig:
    def __init__(self, up: Upgrader):
        self.up = up
        self.code = up.code("training_config")

    def warn(self, msg: str, fix: str | None = None) -> None:
        self.up.note(self.code, "warning", msg, None, fix)

    def loss(self, loss: Any) -> Any:
        if loss is None:
            return None
        if isinstance(loss, str):
            name = LOSS_ALIASES.get(loss, loss)
            if name in KERAS3_LOSSES:
                return name
            src = self.up.source
            if src is not None and loss in src.functions:
                self.up.note(self.up.code("from_source"), "info",
                             f"loss '{loss}' rebuilt from the source as {src.registered(src.functions[loss])}")
                return src.function_config(src.functions[loss])
            self.warn(f"loss '{loss}' is a custom function; compile config saved without it",
                      "recompile after loading, or pass the source with --src model.py")
            return None
        if isinstance(loss, dict) and "class_name" in loss:
            cls = loss["class_name"]
            if cls not in KERAS3_LOSS_CLASSES:
                self.warn(f"loss class '{cls}' is custom; compile config saved without it")
                return None
            cfg = dict(loss.get("config", {}))
            if cfg.get("reduction") in ("auto", None):
                cfg["reduction"] = "sum_over_batch_size"
            cfg.pop("fn", None)
            return {"module": "keras.losses", "class_name": cls, "config": cfg, "registered_name": None}
        if isinstance(loss, dict):
            return {k: self.loss(v) for k, v in loss.items()}
        if isinstance(loss, list):
            return [self.loss(v) for v in loss]
        return None

    def metric(self, m: Any) -> Any:
        src = self.up.source
        if isinstance(m, str) and src is not None and m in src.functions:
            self.up.note(self.up.code("from_source"), "info",
                         f"metric '{m}' rebuilt from the source as {src.registered(src.functions[m])}")
            return src.function_config(src.functions[m])
        if isinstance(m, str):
            name = LOSS_ALIASES.get(m, m)
            return name if name in METRIC_NAMES else None
        if isinstance(m, dict) and m.get("class_name") == "MeanMetricWrapper":
            return self.metric(m.get("config", {}).get("fn") or m.get("config", {}).get("name"))
        if isinstance(m, dict) and "class_name" in m:
            return None
        if isinstance(m, list):
            out = [self.metric(x) for x in m]
            return [x for x in out if x is not None]
        if isinstance(m, dict):
            return {k: self.metric(v) for k, v in m.items()}
        return None

    def optimizer(self, opt: Any) -> dict[str, Any] | None:
        if not isinstance(opt, dict):
            return None
        cls, cfg = opt.get("class_name"), dict(opt.get("config", {}))
        if cls == "LossScaleOptimizer":
            self.warn("LossScaleOptimizer unwrapped to its inner optimizer")
            return self.optimizer(cfg.get("inner_optimizer") or cfg.get("optimizer"))
        cls = {"Custom>Adam": "Adam"}.get(cls, cls)
        if cls not in OPTIMIZERS:
            self.warn(f"optimizer '{cls}' has no Keras 3 equivalent; compile config saved without it")
            return None
        if "lr" in cfg:
            cfg["learning_rate"] = cfg.pop("lr")
        if cfg.get("decay"):
            self.warn(f"optimizer decay={cfg['decay']} dropped; Keras 3 needs a LearningRateSchedule")
        for k in OPTIMIZER_DROP:
            cfg.pop(k, None)
        if isinstance(cfg.get("learning_rate"), dict):
            self.warn("learning-rate schedule dropped; the initial rate is not recoverable from the config")
            cfg.pop("learning_rate")
        return {"module": "keras.optimizers", "class_name": cls, "config": cfg, "registered_name": None}

    def translate(self, tc: dict[str, Any]) -> dict[str, Any]:
        out = {
            "optimizer": self.optimizer(tc.get("optimizer_config")),
            "loss": self.loss(tc.get("loss")),
            "metrics": self.metric(tc.get("metrics")) or None,
            "loss_weights": tc.get("loss_weights"),
        }
        self.up.note(self.code, "info", "training_config translated to a Keras 3 compile config "
                     "(optimizer state is not carried over)")
        return out


def upgrade(model_config: dict[str, Any], training_config: dict[str, Any] | None = None,
            source: Any = None) -> Plan:
    """`source` is the Resolution of --src files (k2to3.source.hoist), or None."""
    up = Upgrader(source)
    cfg = up.tensorshape(model_config)
    cls = cfg.get("class_name")
    if cls not in MODEL_CLASSES:
        up.note("K2T902", "error", f"top-level class '{cls}' is not a Keras model", None)
        return up.plan
    up.plan.model = up.model(cls, cfg["config"])
    if training_config:
        up.plan.compile = TrainingConfig(up).translate(training_config)
    return up.plan
