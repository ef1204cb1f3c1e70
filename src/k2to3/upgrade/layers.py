"""One layer's config: the rules of rules/layers.toml (drop/keep keys, class renames, value maps) and the
built-in fixes (axis lists, dtype policies, nested objects, inner layers of wrappers and RNNs)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from k2to3.core import rules as rules_mod
from k2to3.upgrade import values
from k2to3.upgrade.activations import activation
from k2to3.upgrade.bidirectional import backward_half
from k2to3.upgrade.cudnn import CUDNN
from k2to3.upgrade.cudnn import upgrade_config as upgrade_cudnn
from k2to3.upgrade.larq import QUANTIZER_KEYS as LARQ_KEYS
from k2to3.upgrade.larq import is_larq
from k2to3.upgrade.larq import upgrade_config as upgrade_larq
from k2to3.upgrade.plan import INNER_LAYER_KEYS, PORTABLE_PACKAGE, SHAPE_KEYS
from k2to3.upgrade.qkeras import QUANTIZER_KEYS, is_qkeras
from k2to3.upgrade.qkeras import upgrade_config as upgrade_qkeras
from k2to3.upgrade.tfmot import CLASSES as TFMOT_CLASSES
from k2to3.upgrade.tfmot import upgrade_config as upgrade_tfmot

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState


def _gru_reset_after(up: Any, class_name: str, cfg: dict[str, Any], layer: str) -> None:
    """K2T492: Keras 2.0-2.1.2 had no reset_after (its GRU is reset_after=False, bias (3 * units,)); Keras 3's
    default is True (bias (2, 3 * units)): a config without the key is the old formula."""
    if class_name in ("GRU", "GRUCell") and "reset_after" not in cfg:
        cfg["reset_after"] = False
        up.note(up.code("gru_reset_after"), "info", "reset_after=False written (Keras 2.0-2.1 GRU had no such key "
                "and computed the reset_after=False formula)", layer)


def _initializers_not_stored(up: Any, cfg: dict[str, Any], layer: str) -> None:
    """K2T491: Keras 1's init=lambda shape, name: normal(shape, scale=1e-4, name=name) is stored as "<lambda>",
    never the code; the weights come from the file, so only a fresh build would use the default written."""
    for key, value in list(cfg.items()):
        if key.endswith("_initializer") and isinstance(value, str) and value not in KERAS3_INITIALIZERS:
            default = "zeros" if key.startswith("bias") or key in ("beta_initializer", "moving_mean_initializer") \
                else "ones" if key in ("gamma_initializer", "moving_variance_initializer") else "glorot_uniform"
            cfg[key] = default
            up.note(up.code("initializer_not_stored"), "warning", f"{key} '{value}' is code the file does not "
                    f"store; Keras's default '{default}' is written (the weights are restored from the file; only "
                    "a model built fresh from the config would use it)", layer)


# Keras 3's string initializer identifiers (keras.initializers.get accepts them; Keras 1's zero/one are renamed
# by upgrade/keras1)
KERAS3_INITIALIZERS = frozenset(
    "glorot_normal glorot_uniform he_normal he_uniform identity lecun_normal lecun_uniform ones orthogonal "
    "random_normal random_uniform stft truncated_normal variance_scaling zeros GlorotNormal GlorotUniform HeNormal "
    "HeUniform Identity IdentityInitializer LecunNormal LecunUniform Ones Orthogonal OrthogonalInitializer "
    "RandomNormal RandomUniform STFT STFTInitializer TruncatedNormal VarianceScaling Zeros "
    "zero one constant Constant uniform normal".split())


def layer_config(
    up: UpgradeState, class_name: str, config: dict[str, Any], layer: str, renames: bool = True
) -> tuple[dict[str, Any], str, str | None]:
    """Returns (config, class_name, registered_name). `renames=False`: the class comes from --src, so
    rename rules (library layers) do not apply to it."""
    cfg = copy.deepcopy(config)
    registered = None
    if class_name in CUDNN:  # K2T450: before the LSTM/GRU rules, which then apply to the result
        class_name, cfg = upgrade_cudnn(up, class_name, cfg, layer)
    if class_name in QUANTIZER_KEYS and not is_qkeras(class_name, cfg):
        renames = False  # named like a qkeras layer, configured like none: someone's own class (K2T902 or --src)
    if class_name in QUANTIZER_KEYS and renames:  # K2T440-K2T443: quantizers as plain data, before the renames
        cfg = upgrade_qkeras(up, class_name, cfg, layer)
    if class_name in TFMOT_CLASSES and renames:  # K2T458-K2T459: QuantizeConfigs as quantizer specs
        cfg = upgrade_tfmot(up, class_name, cfg, layer)
    if class_name in LARQ_KEYS:  # K2T455-K2T457, as for qkeras: someone's own QuantDense is left to --src
        if not is_larq(class_name, cfg):
            renames = False
        elif renames:
            cfg = upgrade_larq(up, class_name, cfg, layer)
    if class_name == "BatchNormalization" and cfg.get("virtual_batch_size") and isinstance(cfg.get("axis"), list):
        # K2T405: tf_keras's build() inserts a virtual-batch dimension at index 1 and shifts every axis
        # by +1 in place, so get_config saved the shifted axes.
        cfg["axis"] = [a - 1 if a > 1 else a for a in cfg["axis"]]
    for r in up.rules:
        if r.action == "builtin" or class_name not in r.classes:
            continue
        if r.action == "drop_keys":
            for key in r.keys:
                if key not in cfg:
                    continue
                if key in r.require and cfg[key] != r.require[key]:
                    up.note(r.code, "error", f"{class_name} has {key}={cfg[key]!r}; only "
                            f"{r.require[key]!r} has a Keras 3 equivalent", layer,
                            "re-save the model without it in Keras 2")
                    continue
                value = cfg.pop(key)
                sev = "warning" if r.safety == "training-only" and value not in (None, False) else "info"
                up.note(r.code, sev, f"dropped {key}={value!r} ({r.title})", layer)
        elif r.action == "keep_keys":
            dropped = sorted(k for k in cfg if k not in r.keys)
            if dropped:
                cfg = {k: v for k, v in cfg.items() if k in r.keys}
                up.note(r.code, "info", f"dropped {', '.join(dropped)} ({r.title})", layer)
        elif r.action == "rename_class" and renames:
            up.note(r.code, "warning" if r.warning else "info",
                    r.warning or f"{class_name} -> {'k2to3>' if r.portable else ''}{r.to or class_name}", layer)
            class_name = r.to or class_name
            cfg.update(r.set)
            if r.portable:
                registered = f"{PORTABLE_PACKAGE}>{class_name}"
                up.plan.needs_portable = True
    for key in ("activation", "recurrent_activation"):
        if key in cfg:
            cfg[key] = activation(up, cfg[key], key, layer)
    _gru_reset_after(up, class_name, cfg, layer)
    _initializers_not_stored(up, cfg, layer)
    if "axis" in cfg and isinstance(cfg["axis"], list):
        if len(cfg["axis"]) == 1:
            cfg["axis"] = cfg["axis"][0]
        else:
            up.note(up.code("axis"), "info", f"kept axis={cfg['axis']} (the legacy loader drops it)", layer)
    if "dtype" in cfg:
        cfg["dtype"] = values.dtype(up, cfg["dtype"], layer)
    cfg = values.nested_objects(up, cfg, layer)
    for key in INNER_LAYER_KEYS:
        inner = cfg.get(key)
        if isinstance(inner, dict) and "class_name" in inner:
            cfg[key] = inner_layer(up, inner, layer)
    if class_name == "StackedRNNCells" and isinstance(cfg.get("cells"), list):
        cfg["cells"] = [inner_layer(up, c, layer) for c in cfg["cells"]]
    if class_name == "Bidirectional":  # K2T435, on the upgraded inner configs
        cfg = backward_half(up, cfg, layer)
    return cfg, class_name, registered


def inner_layer(up: UpgradeState, inner: dict[str, Any], outer: str) -> dict[str, Any]:
    """The layer inside a wrapper (TimeDistributed, Bidirectional) or an RNN (cell, StackedRNNCells)."""
    cls = inner["class_name"]
    cfg, cls, registered = layer_config(up, cls, inner.get("config", {}), outer)
    if registered is None and cls not in rules_mod.keras3_layers():
        up.note(up.code("unknown_class"), "error", f"unknown inner layer class '{cls}'", outer,
                "pass the source that defines it with --src model.py")
    for k in SHAPE_KEYS:
        cfg.pop(k, None)
    if isinstance(cfg.get("name"), str):  # its variables' paths contain it: 'bidirectional/forward_lstm.1/...'
        cfg["name"] = up.names.name(cfg["name"])
    if "module" not in inner:
        up.note(up.code("inner_layer_configs"), "info", f"inner {cls} config upgraded", outer)
    return {
        "module": None if registered else "keras.layers",
        "class_name": cls,
        "config": cfg,
        "registered_name": registered,
    }
