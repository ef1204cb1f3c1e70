"""Keras 1.x model configs -> Keras 2 configs (pure data, no keras import), before the Keras 3 upgrade.

The specification is Keras 2.0's own converter (keras/legacy/interfaces.py, keras/legacy/layers.py): the
argument renames are reviewed data in rules/keras1.toml; the value conversions that are not renames live
here. Every translated layer leaves a finding with its rule code.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .. import rules as rules_mod

if TYPE_CHECKING:
    from .core import Upgrader

CLASS_TO = {
    "Convolution1D": "Conv1D", "Convolution2D": "Conv2D", "Convolution3D": "Conv3D",
    "AtrousConvolution1D": "Conv1D", "AtrousConvolution2D": "Conv2D",
}
MERGE_MODES = {"sum": "Add", "mul": "Multiply", "concat": "Concatenate", "ave": "Average", "max": "Maximum",
               "dot": "Dot", "cos": "Dot"}
# Keras 1-only keys: a config holding any of them (or a Keras 1 class) is read as Keras 1.
KERAS1_KEYS = frozenset({"output_dim", "nb_filter", "nb_row", "nb_col", "border_mode", "subsample", "init",
                         "inner_init", "inner_activation", "W_regularizer", "b_regularizer", "W_constraint",
                         "b_constraint", "dim_ordering", "consume_less", "input_dtype", "dropout_W", "dropout_U",
                         "filter_length", "pool_length", "subsample_length"})
KERAS1_CLASSES = frozenset({*CLASS_TO, "Merge", "MaxoutDense", "Highway", "TimeDistributedDense",
                            "Deconvolution2D"})
_BASE_KEYS = ("name", "trainable", "batch_input_shape", "dtype")
PORTABLE_KEYS = {"MaxoutDense": (*_BASE_KEYS, "output_dim", "nb_feature", "bias"),
                 "Highway": (*_BASE_KEYS, "activation", "transform_bias", "bias")}
DATA_FORMAT = {"tf": "channels_last", "th": "channels_first", "default": None}
INITIALIZERS = {"zero": "zeros", "one": "ones"}


def _layers(cfg: Any) -> list[dict[str, Any]]:
    inner = cfg.get("config") if isinstance(cfg, dict) else None
    if isinstance(inner, list):
        return [x for x in inner if isinstance(x, dict)]
    if isinstance(inner, dict) and isinstance(inner.get("layers"), list):
        return [x for x in inner["layers"] if isinstance(x, dict)]
    return []


def is_keras1(model_config: Any) -> bool:
    """A Keras 1 config by content: a Keras 1 class, or a layer with Keras 1-only keys."""
    for layer in _layers(model_config):
        cfg = layer.get("config")
        if not isinstance(layer.get("class_name"), str):
            continue  # validate.py reports it
        if layer["class_name"] in KERAS1_CLASSES:
            return True
        keys = set(cfg) - {"output_dim"} if layer.get("class_name") == "Embedding" and isinstance(cfg, dict) \
            else set(cfg) if isinstance(cfg, dict) else set()  # Keras 2's Embedding still has output_dim
        if keys & KERAS1_KEYS or (isinstance(cfg, dict) and is_keras1(layer)):
            return True
    return False


def _rule_for(cls: str) -> rules_mod.Rule | None:
    for r in rules_mod.keras1_rules():
        if cls in r.classes and r.code != "K2T478":
            return r
    return None


def _regularizer(value: Any) -> Any:
    """Keras 1 {"name": "WeightRegularizer", "l1": a, "l2": b} -> Keras 2 L1L2."""
    if isinstance(value, dict) and value.get("name") in ("WeightRegularizer", "ActivityRegularizer"):
        return {"class_name": "L1L2", "config": {"l1": float(value.get("l1", 0.0)), "l2": float(value.get("l2", 0.0))}}
    return value


def _shape(cfg: dict[str, Any], cls: str) -> None:
    """input_dim / input_length -> batch_input_shape, as Keras 1 layers built their input."""
    if "batch_input_shape" in cfg or cfg.get("input_dim") is None:
        return
    if cls in ("Embedding",):
        cfg["batch_input_shape"] = [None, cfg.get("input_length")]
    elif "input_length" in cfg:
        cfg["batch_input_shape"] = [None, cfg.get("input_length"), cfg["input_dim"]]
    else:
        cfg["batch_input_shape"] = [None, cfg["input_dim"]]


def layer(up: Upgrader, layer: dict[str, Any]) -> dict[str, Any]:
    """One Keras 1 layer entry {class_name, config(, inbound_nodes, name)} -> its Keras 2 entry."""
    out = copy.deepcopy(layer)
    cls, cfg = out.get("class_name"), out.get("config")
    if not isinstance(cfg, dict) or not isinstance(cls, str):
        return out
    name = cfg.get("name")
    if cls in ("Sequential", "Model"):
        out["config"] = translate_model(up, out)["config"]
        return out
    if cls == "Merge":
        return _merge(up, out)
    if cls in PORTABLE_KEYS:  # Keras 1 layers k2to3 ships (k2to3.portable; layers.toml K2T464 registers them)
        _shape(cfg, cls)
        dropped = sorted(k for k in cfg if k not in PORTABLE_KEYS[cls] and k not in ("input_dim", "input_dtype"))
        out["config"] = {k: v for k, v in cfg.items() if k in PORTABLE_KEYS[cls]}
        up.note("K2T464", "info", f"Keras 1 {cls} kept as k2to3>{cls}" + (f"; dropped {', '.join(dropped)} "
                "(initializers, regularizers and constraints: training only)" if dropped else ""), name)
        return out
    if cls in rules_mod.rule("K2T478").classes:
        up.note("K2T478", "error", f"Keras 1 layer {cls} has no Keras 2/3 equivalent in k2to3 yet", name,
                rules_mod.rule("K2T478").fix)
        return out
    if cls == "Embedding" and cfg.get("dropout"):
        up.note("K2T475", "warning", f"dropped the training-time embedding dropout={cfg['dropout']}", name)
    _shape(cfg, cls)
    if "input_dtype" in cfg and cls != "InputLayer":  # the dtype of the Input Keras 1 made, not of the layer
        cfg.pop("input_dtype")
    r = _rule_for(cls)
    if r is not None:
        if "nb_row" in cfg:
            cfg["kernel_size"] = [cfg.pop("nb_row"), cfg.pop("nb_col")]
        if "kernel_dim1" in cfg:
            cfg["kernel_size"] = [cfg.pop(f"kernel_dim{i}") for i in (1, 2, 3)]
        for old, new in r.rename.items():
            if old in cfg:
                cfg[new] = cfg.pop(old)
        up.note(r.code, "info", f"Keras 1 {cls} -> Keras 2 {CLASS_TO.get(cls, cls)}", name)
    for key in ("consume_less", "dropout") if cls == "Embedding" else ("consume_less", "input_dim", "input_length"):
        cfg.pop(key, None)
    if "data_format" in cfg:
        cfg["data_format"] = DATA_FORMAT.get(cfg["data_format"], cfg["data_format"])
    if "unit_forget_bias" in cfg:
        cfg["unit_forget_bias"] = cfg["unit_forget_bias"] in ("one", "ones", True)
    if cls == "GRU":
        cfg["reset_after"] = False  # Keras 1's GRU: the reset gate applied before the recurrent matmul
    for key, value in list(cfg.items()):
        if key.endswith("_regularizer"):
            cfg[key] = _regularizer(value)
        elif key.endswith("_initializer") and isinstance(value, str):
            cfg[key] = INITIALIZERS.get(value, value)
    if isinstance(cfg.get("strides"), int) and cls in ("Conv1D", "Convolution1D", "AtrousConvolution1D"):
        cfg["strides"] = [cfg["strides"]]
    if cls in ("AtrousConvolution1D", "AtrousConvolution2D") and "dilation_rate" not in cfg:
        cfg["dilation_rate"] = 1
    out["class_name"] = CLASS_TO.get(cls, cls)
    return out


def _merge(up: Upgrader, out: dict[str, Any]) -> dict[str, Any]:
    cfg = out["config"]
    name, mode = cfg.get("name"), cfg.get("mode")
    if cfg.get("mode_type", "raw") != "raw" or mode not in MERGE_MODES or cfg.get("layers"):
        up.note("K2T478", "error", f"Keras 1 Merge with mode {mode!r} (mode_type {cfg.get('mode_type')!r}) has no "
                "Keras 2/3 equivalent in k2to3 yet", name, rules_mod.rule("K2T478").fix)
        return out
    new: dict[str, Any] = {"name": name, "trainable": cfg.get("trainable", True)}
    if mode == "concat":
        new["axis"] = cfg.get("concat_axis", -1)
    elif mode in ("dot", "cos"):
        new["axes"] = cfg.get("dot_axes", -1)
        new["normalize"] = mode == "cos"
    up.note("K2T477", "info", f"Keras 1 Merge(mode={mode!r}) -> {MERGE_MODES[mode]}", name)
    out["class_name"], out["config"] = MERGE_MODES[mode], new
    return out


def translate_model(up: Upgrader, model_config: dict[str, Any]) -> dict[str, Any]:
    """A Keras 1 model config -> Keras 2 (Sequential list configs stay lists; node refs keep their 3 elements,
    which Keras 2 reads as [layer, node, tensor] with no call kwargs)."""
    out = copy.deepcopy(model_config)
    inner = out.get("config")
    if isinstance(inner, list):
        out["config"] = [layer(up, x) for x in inner]
    elif isinstance(inner, dict) and isinstance(inner.get("layers"), list):
        inner["layers"] = [layer(up, x) for x in inner["layers"]]
    return out


def translate(up: Upgrader, model_config: dict[str, Any]) -> dict[str, Any]:
    """The entry point: note K2T470 once and translate."""
    up.note("K2T470", "info", "Keras 1.x model config translated to Keras 2 (rules/keras1.toml)", None)
    return translate_model(up, model_config)


def to_keras2(model_config: dict[str, Any]) -> dict[str, Any]:
    """The Keras 2 config alone (what tf_keras builds for the golden reference)."""
    from .core import Upgrader

    return translate(Upgrader(), model_config)
