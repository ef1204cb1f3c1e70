"""What a Keras 2 model config needs from the code that built it (pure data): Lambda functions, custom classes,
functions stored by name as activations, losses or metrics; and the config walk the source pass, the audit and the
workers share."""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from k2to3.core import rules as rules_mod
from k2to3.upgrade.activations import KERAS3_ACTIVATIONS, function_name
from k2to3.upgrade.larq import QUANTIZER_KEYS as LARQ_KEYS
from k2to3.upgrade.larq import is_larq
from k2to3.upgrade.plan import MODEL_CLASSES
from k2to3.upgrade.qkeras import is_qkeras
from k2to3.upgrade.training import KERAS3_LOSSES, LOSS_ALIASES, METRIC_NAMES

PORTABLE_LOSS_NAMES = KERAS3_LOSSES | set(LOSS_ALIASES) | METRIC_NAMES | {"acc", "accuracy", "loss"}


@dataclass
class Need:
    kind: str  # lambda | activation_lambda | class | function | build_fn
    layer: str | None
    key: str | None = None  # activation config key
    class_name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    has_output_shape: bool = False
    closure: list[Any] | None = None
    fn_name: str | None = None  # a function stored by name
    optional: bool = False  # a class a k2to3 rule also handles: the source's own definition wins if present
    defaults: list[Any] | None = None  # the lambda's default argument values as the file stores them (func_dump)


ACTIVATION_KEYS = ("activation", "recurrent_activation")


def walk_layers(model_config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every layer dict of a model config, nested models included, in config order."""
    cfg = model_config.get("config")
    layers = cfg if isinstance(cfg, list) else (cfg or {}).get("layers", [])
    for layer in layers:
        yield layer
        if layer.get("class_name") in MODEL_CLASSES:
            yield from walk_layers(layer)
        for inner_key in ("layer", "backward_layer", "cell"):
            inner = layer.get("config", {}).get(inner_key)
            if isinstance(inner, dict) and "class_name" in inner:
                yield inner


def _is_lambda_activation(value: Any) -> bool:
    return function_name(value) == "<lambda>"


def _known_classes() -> frozenset[str]:
    return rules_mod.keras3_layers() | MODEL_CLASSES | {"TFOpLambda", "SlicingOpLambda", "InputLayer"}


def _rule_classes() -> frozenset[str]:
    """Classes a rename rule maps (library layers, Keras 2 aliases)."""
    return frozenset(c for r in rules_mod.layer_rules() if r.action == "rename_class" for c in r.classes)


BASE_KEYS = frozenset({"name", "trainable", "dtype", "batch_input_shape", "input_shape", "batch_size", "input_dim",
                       "input_length", "activity_regularizer", "autocast", "dynamic", "input_dtype"})


FOREIGN = "foreign"  # Need.key of a class named like a Keras 3 layer but configured like another class


def foreign_keys(cls: str, config: Any) -> list[str]:
    """A layer config named like a Keras 3 layer but without what that layer requires, and with keys neither its
    constructor nor a k2to3 rule knows (keras-multi-head's MultiHeadAttention saves head_num, not num_heads and
    key_dim): someone's own class of that name; returns those keys ([] for Keras's own, Keras 2 legacy keys and
    all). A Keras 1 config is translated before this is asked."""
    params = rules_mod.keras3_layer_params().get(cls)
    required = rules_mod.keras3_layer_required().get(cls, frozenset())
    if params is None or not isinstance(config, dict) or not required or required <= set(config):
        return []
    ruled = {k for r in rules_mod.layer_rules() if cls in r.classes and r.action in ("drop_keys", "keep_keys")
             for k in (r.keys or ())}
    if any(cls in r.classes and r.action == "keep_keys" for r in rules_mod.layer_rules()):
        return []
    return sorted(k for k in config if k not in params and k not in BASE_KEYS and k not in ruled)


def foreign_needs(model_config: dict[str, Any] | None) -> list[Need]:
    """A class for each layer named like a Keras 3 layer but configured like another class (foreign_keys): taken
    from the sources when they define one of that name. For a Keras 2 config (a Keras 1 one is translated first)."""
    return [Need("class", layer.get("config", {}).get("name") or layer.get("name"), class_name=str(cls),
                 optional=True, key=FOREIGN)
            for layer in walk_layers(model_config or {})
            if isinstance(cls := layer.get("class_name"), str) and foreign_keys(cls, layer.get("config"))]


def collect_needs(model_config: dict[str, Any] | None, training_config: dict[str, Any] | None) -> list[Need]:
    needs: list[Need] = []
    known, by_rule = _known_classes(), _rule_classes()
    for layer in walk_layers(model_config or {}):
        cls, lc = layer.get("class_name"), layer.get("config", {})
        name = lc.get("name") or layer.get("name")
        if cls == "Lambda":
            fn = lc.get("function")
            if lc.get("function_type") == "function" and isinstance(fn, str):  # stored by name (Keras 2.0-2.1)
                needs.append(Need("lambda_named", name, fn_name=fn, key="function",
                                  arguments=dict(lc.get("arguments") or {})))
                continue
            needs.append(Need("lambda", name, arguments=dict(lc.get("arguments") or {}),
                              has_output_shape=lc.get("output_shape") is not None,
                              closure=fn[2] if isinstance(fn, list) and len(fn) == 3 else None,
                              defaults=fn[1] if isinstance(fn, list) and len(fn) == 3 and isinstance(fn[1], list)
                              else None))
        elif cls not in known:
            needs.append(Need("class", name, class_name=str(cls).split(">")[-1],
                              optional=cls in by_rule and is_qkeras(str(cls), lc)
                              and (cls not in LARQ_KEYS or is_larq(str(cls), lc))))
        for key in ACTIVATION_KEYS:
            value = lc.get(key)
            if _is_lambda_activation(value):
                closure = value["value"][2] if isinstance(value, dict) and isinstance(value.get("value"), list) \
                    and len(value["value"]) == 3 else None
                needs.append(Need("activation_lambda", name, key=key, class_name=cls, closure=closure))
            else:
                fname = function_name(value)
                if fname and fname not in KERAS3_ACTIVATIONS and not re.fullmatch(r"[\w.]+>[\w.]+", fname) \
                        and fname not in (
                        "softmax_v2", "hard_sigmoid", "swish", "gelu", "linear"):
                    needs.append(Need("function", name, key=key, fn_name=fname))
    tc = training_config or {}
    for what in ("loss", "metrics", "weighted_metrics"):
        for fname in _names_in(tc.get(what)):
            if fname not in PORTABLE_LOSS_NAMES:  # optional: the compile config is kept without it, with a warning
                needs.append(Need("function", None, key=what, fn_name=fname, optional=True))
    return needs


def _names_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) and value.get("class_name") == "MeanMetricWrapper":  # tf.keras >= 2.4 metrics
        fn = value.get("config", {}).get("fn")
        return [fn] if isinstance(fn, str) else []
    if isinstance(value, list):
        return [n for v in value for n in _names_in(v)]
    if isinstance(value, dict) and "class_name" not in value:
        return [n for v in value.values() for n in _names_in(v)]
    return []


def _snake(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


def auto_named(layer: dict[str, Any]) -> bool:
    """A name Keras made up (dense_3, input_1): no evidence of which source function built the model."""
    name = str(layer.get("config", {}).get("name") or layer.get("name") or "")
    return bool(re.fullmatch(rf"{_snake(str(layer.get('class_name', '')))}(_\d+)?|input_\d+", name))


def module_name_for(stem: str) -> str:
    name = re.sub(r"\W", "_", stem) + "_k3"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = "m_" + name
    return name
