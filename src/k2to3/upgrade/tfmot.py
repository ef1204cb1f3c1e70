"""tensorflow-model-optimization QAT configs (rules K2T458-K2T459, K2T945): QuantizeLayer's quantizer and
QuantizeWrapperV2's QuantizeConfig of the default 8-bit scheme (`quantize_model`), saved by class name, become the
plain quantizer specs k2to3.portable.tfmot computes with (what each default_8bit class builds, read from tfmot
0.8's default_8bit_quantize_registry.py and default_8bit_quantizers.py); the wrapped layer's
QuantizeAwareActivation becomes the activation it wraps. A QuantizeConfig whose behaviour lives only in a team's
own code, or a wrapped layer the portable wrapper does not compute, is an error naming it (K2T945). Pure data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState

CLASSES = ("QuantizeLayer", "QuantizeWrapperV2", "QuantizeWrapper")
_KINDS = {"LastValueQuantizer": "last_value", "MovingAverageQuantizer": "moving_average",
          "AllValuesQuantizer": "all_values"}
_WEIGHTS = {"symmetric": True, "narrow_range": True, "num_bits": 8}
WEIGHTS = {"kind": "last_value", "per_axis": False, **_WEIGHTS}  # Default8BitQuantizeConfig's weight quantizer
CONV_WEIGHTS = {"kind": "last_value", "per_axis": True, **_WEIGHTS}  # Default8BitConvWeightsQuantizer
ACTIVATIONS = {"kind": "moving_average", "per_axis": False, "symmetric": False, "narrow_range": False, "num_bits": 8}
# Default8BitActivationQuantizeConfig: which Activation layers get an output quantizer
_OUTPUT_ACTIVATIONS, _PLAIN_ACTIVATIONS = {"relu", "swish", "gelu", "relu6"}, {"linear", "softmax", "sigmoid", "tanh"}
WEIGHTED = {"Dense": ("kernel",), "Conv1D": ("kernel",), "Conv2D": ("kernel",), "Conv3D": ("kernel",),
            "DepthwiseConv2D": ("depthwise_kernel",)}


def _quantizer(value: Any) -> dict[str, Any] | str:
    """A saved tfmot Quantizer as a portable spec, or why it is not one."""
    if not isinstance(value, dict) or value.get("class_name") not in _KINDS:
        return f"quantizer {value.get('class_name') if isinstance(value, dict) else value!r} is not one of " \
               f"{', '.join(_KINDS)}"
    cfg = value.get("config") or {}
    return {"kind": _KINDS[value["class_name"]], "num_bits": int(cfg.get("num_bits", 8)),
            "per_axis": bool(cfg.get("per_axis")), "symmetric": bool(cfg.get("symmetric")),
            "narrow_range": bool(cfg.get("narrow_range"))}


def _activation_name(value: Any) -> Any:
    """The activation a QuantizeAwareActivation wraps; "linear" for tfmot's NoOpActivation (an activation the
    layout transforms moved out of the layer: it is neither applied nor quantized here)."""
    if isinstance(value, dict) and value.get("class_name") == "QuantizeAwareActivation":
        value = (value.get("config") or {}).get("activation")
    if isinstance(value, dict) and value.get("class_name") == "NoOpActivation":
        return "linear"
    return value


def _no_op_activation(inner: dict[str, Any]) -> bool:
    act = (inner.get("config") or {}).get("activation")
    if isinstance(act, dict) and act.get("class_name") == "QuantizeAwareActivation":
        act = (act.get("config") or {}).get("activation")
    return isinstance(act, dict) and act.get("class_name") == "NoOpActivation"


def _wrapper(cfg: dict[str, Any]) -> dict[str, Any] | str:
    """QuantizeWrapperV2's quantizers from its quantize_config, or why they cannot be computed."""
    inner = cfg.get("layer") or {}
    cls = str(inner.get("class_name"))
    qc = cfg.get("quantize_config") or {}
    qname, qcfg = qc.get("class_name"), qc.get("config") or {}
    if qname == "NoOpQuantizeConfig":
        return {}
    if qname == "Default8BitOutputQuantizeConfig":
        return {"output_quantizer": dict(ACTIVATIONS)}
    if qname == "Default8BitActivationQuantizeConfig":
        act = _activation_name((inner.get("config") or {}).get("activation"))
        if cls != "Activation" or act not in _OUTPUT_ACTIVATIONS | _PLAIN_ACTIVATIONS:
            return f"Default8BitActivationQuantizeConfig on {cls}(activation={act!r}) is not what tfmot builds"
        quantize_output = qcfg.get("quantize_output", True)
        return {"output_quantizer": dict(ACTIVATIONS)} if quantize_output and act in _OUTPUT_ACTIVATIONS else {}
    if qname not in ("Default8BitQuantizeConfig", "Default8BitConvQuantizeConfig"):
        return f"quantize_config {qname} (a custom QuantizeConfig: its quantizers live in code) is not supported"
    weights, acts = list(qcfg.get("weight_attrs") or []), list(qcfg.get("activation_attrs") or [])
    if weights and (cls not in WEIGHTED or weights != list(WEIGHTED[cls])):
        return f"{qname} quantizing {weights} of {cls} is not supported (Dense, Conv and DepthwiseConv2D kernels)"
    if acts not in ([], ["activation"]) or (acts and not weights):
        return f"{qname} quantizing activations {acts} of {cls} is not supported"
    out: dict[str, Any] = {}
    if weights:
        out["weight_quantizer"] = dict(CONV_WEIGHTS if qname == "Default8BitConvQuantizeConfig" else WEIGHTS)
    if acts and not _no_op_activation(inner):  # quantize_aware_activation: NoOpActivation is not quantized
        out["activation_quantizer"] = dict(ACTIVATIONS)
    if qcfg.get("quantize_output"):
        out["output_quantizer"] = dict(ACTIVATIONS)
    return out


def upgrade_config(up: UpgradeState, cls: str, cfg: dict[str, Any], layer: str) -> dict[str, Any]:
    """Called by layer_config before the rename rules and the inner layer's own upgrade."""
    out = dict(cfg)
    if cls == "QuantizeLayer":
        q = out.get("quantizer")
        spec = None if q is None else _quantizer(q)
        if isinstance(spec, str):
            up.note(up.code("tfmot_config"), "error", f"QuantizeLayer: {spec}", layer,
                    "keep the model on tfmot, or strip QAT in Keras 2 and convert the float model")
            spec = None
        out["quantizer"] = spec
        return out
    got = _wrapper(out)
    if isinstance(got, str):
        up.note(up.code("tfmot_config"), "error", f"{cls}: {got}", layer,
                "keep the model on tfmot, or strip QAT in Keras 2 and convert the float model")
        got = {}
    out.pop("quantize_config", None)
    inner = dict(out.get("layer") or {})
    if inner:
        inner_cfg = dict(inner.get("config") or {})
        if "activation" in inner_cfg:
            inner_cfg["activation"] = _activation_name(inner_cfg["activation"])
        inner["config"] = inner_cfg
        out["layer"] = inner
    out.update({"weight_quantizer": None, "activation_quantizer": None, "output_quantizer": None, **got})
    return out
