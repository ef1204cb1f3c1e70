"""larq layer configs (rules K2T455-K2T457, K2T946): each quantizer, saved by larq as a serialized object
(`{"class_name": "SteSign", "config": {"clip_value": 1.0, ...}}`, older releases `{"class_name": "ste_sign"}`) or
as an alias string (`"ste_sign"`), becomes the plain `{"quantizer": NAME, "config": {...}}` that
k2to3.portable.larq computes with; larq's `weight_clip` constraint becomes k2to3>QClip(-c, c). A quantizer whose
arithmetic the portable layer does not reproduce is an error naming it (K2T946). Pure data, no keras."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState

# class -> the config keys holding a quantizer (larq's layers_base: input_quantizer on every layer)
QUANTIZER_KEYS = {"QuantDense": ("input_quantizer", "kernel_quantizer"),
                  "QuantConv1D": ("input_quantizer", "kernel_quantizer"),
                  "QuantConv2D": ("input_quantizer", "kernel_quantizer"),
                  "QuantDepthwiseConv2D": ("input_quantizer", "depthwise_quantizer")}
# larq's class names and aliases (larq/quantizers.py register_alias) -> the portable name, with the config keys
# that change its arithmetic
QUANTIZERS = {"ste_sign": "ste_sign", "SteSign": "ste_sign", "approx_sign": "approx_sign",
              "ApproxSign": "approx_sign", "swish_sign": "swish_sign", "SwishSign": "swish_sign",
              "ste_heaviside": "ste_heaviside", "SteHeaviside": "ste_heaviside",
              "magnitude_aware_sign": "magnitude_aware_sign", "MagnitudeAwareSign": "magnitude_aware_sign",
              "ste_tern": "ste_tern", "SteTern": "ste_tern", "dorefa_quantizer": "dorefa_quantizer",
              "DoReFa": "dorefa_quantizer", "DoReFaQuantizer": "dorefa_quantizer", "NoOp": "no_op",
              "NoOpQuantizer": "no_op"}
KEYS = {"ste_sign": ("clip_value",), "approx_sign": (), "swish_sign": ("beta",), "ste_heaviside": ("clip_value",),
        "magnitude_aware_sign": ("clip_value",), "ste_tern": ("threshold_value", "ternary_weight_networks",
                                                             "clip_value"),
        "dorefa_quantizer": ("k_bit", "mode"), "no_op": ()}
# A Keras layer's and larq's bookkeeping: name, dtype, the flip-ratio metrics, the precision tag of NoOp
_IGNORED = {"name", "trainable", "dtype", "metrics", "precision", "build_config"}


def is_larq(class_name: str, cfg: dict[str, Any]) -> bool:
    """larq's get_config always writes `input_quantizer`; a class of that name without it is someone else's."""
    return class_name in QUANTIZER_KEYS and "input_quantizer" in cfg


def parse(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(larq name, config) of a saved quantizer, or None when larq could not have written it."""
    if isinstance(value, str):
        return value, {}
    if isinstance(value, dict) and isinstance(value.get("class_name"), str):
        return value["class_name"], dict(value.get("config") or {})
    return None


def unsupported(name: str, cfg: dict[str, Any]) -> str | None:
    """Why the portable quantizers cannot compute larq's `name(**cfg)`, or None."""
    canonical = QUANTIZERS.get(name)
    if canonical is None:
        return f"quantizer {name} has no portable equivalent (supported: {', '.join(sorted(set(QUANTIZERS.values())))})"
    unknown = sorted(set(cfg) - set(KEYS[canonical]) - _IGNORED)
    if unknown:
        return f"{name} option(s) {', '.join(unknown)} not supported"
    if canonical == "dorefa_quantizer" and cfg.get("mode", "activations") not in ("activations", "weights"):
        return f"DoReFa(mode={cfg['mode']!r}) is not one larq computes"
    return None


def quantizer(up: UpgradeState, cls: str, key: str, value: Any, layer: str) -> dict[str, Any] | None:
    """The portable form of one larq quantizer value, or None (with an error finding when it cannot be)."""
    if value is None:
        return None
    parsed = parse(value)
    why = "not a larq quantizer" if parsed is None else unsupported(*parsed)
    if why is not None:
        up.note(up.code("larq_quantizer"), "error", f"{cls} {key}: {why}", layer,
                "re-train with one of the supported larq quantizers, or keep the model on larq")
        return None
    name, cfg = parsed  # type: ignore[misc]
    canonical = QUANTIZERS[name]
    return {"quantizer": canonical, "config": {k: v for k, v in cfg.items() if k in KEYS[canonical]}}


def _constraint(value: Any) -> Any:
    """larq's weight_clip (weights clipped to [-clip_value, clip_value] after each update) as k2to3>QClip."""
    if isinstance(value, str) and value == "weight_clip":
        value = {"class_name": "weight_clip", "config": {}}
    if not (isinstance(value, dict) and value.get("class_name") in ("weight_clip", "WeightClip")):
        return value
    c = float((value.get("config") or {}).get("clip_value", 1.0))
    return {"module": None, "class_name": "QClip", "registered_name": "k2to3>QClip",
            "config": {"min_value": -c, "max_value": c}}


def upgrade_config(up: UpgradeState, cls: str, cfg: dict[str, Any], layer: str) -> dict[str, Any]:
    """Called by layer_config before the rename rules: quantizers normalized, weight_clip made portable."""
    out = dict(cfg)
    for key in ("kernel_constraint", "depthwise_constraint", "bias_constraint"):
        if key in out:
            out[key] = _constraint(out[key])
    for key in QUANTIZER_KEYS[cls]:
        out[key] = quantizer(up, cls, key, out.get(key), layer)
    if "pad_values" in out:
        out["pad_values"] = float(out["pad_values"] or 0.0)
    return out
