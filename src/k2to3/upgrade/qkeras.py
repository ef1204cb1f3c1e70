"""QKeras layer configs (rules K2T440-K2T445, K2T940, K2T944): each quantizer, saved by qkeras as a serialized object
(`{"class_name": "quantized_bits", "config": {...}}`) or as a string (`"quantized_relu(6)"`), becomes the plain
`{"quantizer": NAME, "config": {...}}` that k2to3.portable.qkeras computes with; the rename rules of
rules/layers.toml then map the class to its portable layer. A quantizer or option whose arithmetic the portable
layer does not reproduce is an error naming it (K2T940), never a silent approximation. Pure data, no keras."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState

# class -> the config keys holding a quantizer
QUANTIZER_KEYS = {"QDense": ("kernel_quantizer", "bias_quantizer"), "QConv2D": ("kernel_quantizer", "bias_quantizer"),
                  "QBatchNormalization": ("beta_quantizer", "gamma_quantizer", "mean_quantizer",
                                          "variance_quantizer"), "QActivation": (),
                  "QDenseBatchnorm": ("kernel_quantizer", "bias_quantizer"),
                  "QConv2DBatchnorm": ("kernel_quantizer", "bias_quantizer")}
# A key qkeras's get_config always writes for the class: a layer of that name without it is someone else's
# class (a team's own "QDense"), left to --src or K2T902 rather than guessed to be qkeras's.
SIGNATURE = {"QDense": "kernel_quantizer", "QConv2D": "kernel_quantizer", "QBatchNormalization": "gamma_quantizer",
             "QActivation": "activation", "QDenseBatchnorm": "folding_mode", "QConv2DBatchnorm": "folding_mode"}
FOLDED = ("QDenseBatchnorm", "QConv2DBatchnorm")
# The inner BatchNormalization's options that only change its training step (qkeras's inference folds gamma,
# beta and the moving statistics and never uses the BN's own output): dropped. renorm adds weights: a stop.
_BN_TRAINING_ONLY = ("renorm", "renorm_clipping", "renorm_momentum", "fused", "virtual_batch_size", "adjustment")


def is_qkeras(class_name: str, cfg: dict[str, Any]) -> bool:
    """False for a class named like a qkeras layer whose config lacks what qkeras writes."""
    key = SIGNATURE.get(class_name)
    return key is None or key in cfg


# qkeras's positional parameters, for string quantizers ("quantized_bits(6,0,alpha=1)")
POSITIONAL = {"quantized_bits": ("bits", "integer", "symmetric", "keep_negative", "alpha", "use_stochastic_rounding"),
              "quantized_relu": ("bits", "integer", "use_sigmoid", "negative_slope", "use_stochastic_rounding",
                                 "relu_upper_bound", "is_quantized_clip"),
              "binary": ("use_01", "alpha", "use_stochastic_rounding"),
              "ternary": ("alpha", "threshold", "use_stochastic_rounding", "number_of_unrolls"),
              "quantized_po2": ("bits", "max_value", "use_stochastic_rounding", "quadratic_approximation",
                                "log2_rounding"),
              "quantized_relu_po2": ("bits", "max_value", "negative_slope", "use_stochastic_rounding",
                                     "quadratic_approximation", "log2_rounding")}
# (quantizer, option, value that is supported): anything else changes the arithmetic
_ONLY = [("*", "use_stochastic_rounding", (False, 0, None)), ("quantized_relu", "use_sigmoid", (False, 0, None)),
         ("quantized_bits", "alpha", None), ("binary", "alpha", None), ("ternary", "alpha", None),
         ("quantized_po2", "log2_rounding", ("rnd", "floor")),
         ("quantized_relu_po2", "log2_rounding", ("rnd", "floor"))]
_ALPHA_STRINGS = {"quantized_bits": ("auto", "auto_po2"), "binary": ("auto", "auto_po2"),
                  "ternary": ("auto", "auto_po2")}
# Parameters that only change training (qnoise schedules, variables) or the repr
_IGNORED = {"var_name", "use_variables", "use_ste"}
_RANGE_KEYS = ("kernel_range", "bias_range", "beta_range", "gamma_range")  # qkeras-only, unused in the forward pass
_QUANTIZER_PREFIXES = ("quantized_", "binary", "ternary", "stochastic_", "bernoulli")


def parse(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(name, config) of a saved quantizer, or None when it is not one qkeras could have written."""
    if isinstance(value, dict) and isinstance(value.get("class_name"), str):
        return value["class_name"], dict(value.get("config") or {})
    if isinstance(value, str):
        try:
            call = ast.parse(value.strip(), mode="eval").body
        except SyntaxError:
            return None
        if isinstance(call, ast.Name):
            return call.id, {}
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            return None
        name = call.func.id
        try:
            args = [ast.literal_eval(a) for a in call.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
        except ValueError:
            return None
        names = POSITIONAL.get(name, ())
        if len(args) > len(names):
            return name, {"__unparsed__": value}
        return name, {**dict(zip(names, args, strict=False)), **kwargs}
    return None


def unsupported(name: str, cfg: dict[str, Any]) -> str | None:
    """Why the portable quantizers cannot compute `name(**cfg)` as qkeras does, or None."""
    if name not in POSITIONAL:
        return f"quantizer {name} has no portable equivalent (supported: {', '.join(POSITIONAL)})"
    if "__unparsed__" in cfg:
        return f"cannot read quantizer {cfg['__unparsed__']!r}"
    for q, key, ok in _ONLY:
        if q not in ("*", name) or key not in cfg:
            continue
        value = cfg[key]
        if key == "alpha":
            if isinstance(value, str) and value not in _ALPHA_STRINGS[name]:
                return f"{name}(alpha={value!r}) is not supported"
            if not isinstance(value, (str, int, float, type(None))):
                return f"{name}(alpha=<per-channel array>) is not supported"
        elif value not in ok:  # type: ignore[operator]
            return f"{name}({key}={value!r}) is not supported"
    unknown = sorted(set(cfg) - set(POSITIONAL[name]) - _IGNORED - {"number_of_unrolls", "qnoise_factor", "scale_axis"})
    if cfg.get("scale_axis") is not None:
        unknown.append("scale_axis")
    if unknown:
        return f"{name} option(s) {', '.join(unknown)} not supported"
    if cfg.get("qnoise_factor") not in (None, 1, 1.0):
        return f"{name}(qnoise_factor={cfg['qnoise_factor']!r}) is not supported (only 1.0, full quantization)"
    return None


def quantizer(up: UpgradeState, cls: str, key: str, value: Any, layer: str) -> dict[str, Any] | None:
    """The portable form of one quantizer value, or None (with an error finding when it cannot be)."""
    if value is None:
        return None
    parsed = parse(value)
    why = "not a qkeras quantizer" if parsed is None else unsupported(*parsed)
    if why is not None:
        up.note(up.code("qkeras_quantizer"), "error", f"{cls} {key}: {why}", layer,
                "re-train with quantized_bits / quantized_relu / quantized_po2 / quantized_relu_po2 / binary / "
                "ternary, or keep the model in QKeras")
        return None
    name, cfg = parsed  # type: ignore[misc]
    return {"quantizer": name, "config": {k: v for k, v in cfg.items() if k not in _IGNORED and k != "scale_axis"}}


def _object(value: Any) -> Any:
    """qkeras's initializer and constraint objects: a QInitializer (which only draws initial weights) becomes the
    initializer it wraps; a Clip constraint (qkeras clips weights to the quantizer's range after each training
    update) becomes the portable k2to3>QClip."""
    if not isinstance(value, dict) or value.get("module") not in ("qkeras.qlayers", "qkeras"):
        return value
    if value.get("class_name") == "QInitializer":
        return (value.get("config") or {}).get("initializer")
    if value.get("class_name") == "Clip":
        cfg = value.get("config") or {}
        return {"module": None, "class_name": "QClip", "registered_name": "k2to3>QClip",
                "config": {"min_value": cfg.get("min_value", 0.0), "max_value": cfg.get("max_value", 1.0)}}
    return value


def folded_mode(cls: str, cfg: dict[str, Any]) -> str | None:
    """Why the portable folded layer cannot compute `cls(**cfg)` as qkeras does, or None."""
    axis = cfg.get("axis", -1)
    axis = axis[0] if isinstance(axis, list) and len(axis) == 1 else axis
    if axis not in (-1, 1 if cls == "QDenseBatchnorm" else 3):
        return f"axis={cfg.get('axis')!r} (qkeras folds the BN over the kernel's last axis only)"
    if cfg.get("renorm"):
        return "renorm=True (batch renormalization's extra variables)"
    if cfg.get("data_format", "channels_last") != "channels_last":
        return f"data_format={cfg['data_format']!r}"
    if cfg.get("folding_mode", "ema_stats_folding") not in ("ema_stats_folding", "batch_stats_folding"):
        return f"folding_mode={cfg['folding_mode']!r}"
    return None


def upgrade_config(up: UpgradeState, cls: str, cfg: dict[str, Any], layer: str) -> dict[str, Any]:
    """Called by layer_config before the rename rules: quantizers normalized, qkeras-only keys dropped."""
    out = {k: _object(v) for k, v in cfg.items() if k not in _RANGE_KEYS}
    if cls in FOLDED:
        why = folded_mode(cls, out)
        if why is not None:
            up.note(up.code("qkeras_folded_mode"), "error", f"{cls}({why}) is not supported", layer,
                    "unfold it in QKeras (QConv2D / QDense + QBatchNormalization) and re-save")
        out = {k: v for k, v in out.items() if k not in _BN_TRAINING_ONLY}
    for key in QUANTIZER_KEYS[cls]:
        out[key] = quantizer(up, cls, key, out.get(key), layer)
    act = out.get("activation")
    if cls == "QActivation":
        if not (isinstance(act, str) and "(" not in act and not act.startswith(_QUANTIZER_PREFIXES)):
            out["quantizer"], out["activation"] = quantizer(up, cls, "activation", act, layer), None
    elif isinstance(act, dict) or (isinstance(act, str) and "(" in act):  # QDense(activation=quantized_relu(6))
        out["activation_quantizer"] = quantizer(up, cls, "activation", act, layer)
        out["activation"] = "linear"
    return out
