"""The weight shapes a Keras 2 layer's config implies, checked against the shapes the HDF5 file declares before
any weight is read (docs/security.md). Computed from the config alone, without allocating: a dimension that
depends on the layer's input (a Dense kernel's first) is unknown (None) and not checked, so only layers and
weights whose shape the config fixes are checked, and only in the dimensions it fixes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from k2to3.errors import InputError

Pattern = tuple[int | None, ...]
_CONV = {"Conv1D": 1, "Conv2D": 2, "Conv3D": 3, "Convolution1D": 1, "Convolution2D": 2, "Convolution3D": 3}
_CONV_T = {"Conv1DTranspose": 1, "Conv2DTranspose": 2, "Conv3DTranspose": 3, "Deconvolution2D": 2,
           "Deconvolution3D": 3}
_DEPTHWISE = {"DepthwiseConv1D": 1, "DepthwiseConv2D": 2}
_SEPARABLE = {"SeparableConv1D": 1, "SeparableConv2D": 2, "SeparableConvolution2D": 2}
_GATES = {"SimpleRNN": 1, "LSTM": 4, "GRU": 3, "CuDNNLSTM": 4, "CuDNNGRU": 3}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _ints(v: Any, n: int) -> tuple[int, ...] | None:
    if _int(v) is not None:
        return (v,) * n
    if isinstance(v, (list, tuple)) and len(v) == n and all(_int(x) is not None for x in v):
        return tuple(v)
    return None


def expected_shapes(class_name: str, cfg: dict[str, Any]) -> dict[str, Pattern]:
    """Weight base name (kernel, bias, ...) -> its shape with None for what the input decides; {} when the
    config does not fix any (unknown layer class, or a config value that is not what Keras 2 writes)."""
    if class_name == "Dense" and _int(cfg.get("units")):
        return {"kernel": (None, cfg["units"]), "bias": (cfg["units"],)}
    if class_name == "Embedding" and _int(cfg.get("input_dim")) and _int(cfg.get("output_dim")):
        return {"embeddings": (cfg["input_dim"], cfg["output_dim"])}
    n = _CONV.get(class_name) or _CONV_T.get(class_name) or _SEPARABLE.get(class_name)
    if n and _int(cfg.get("filters")) and (ks := _ints(cfg.get("kernel_size"), n)):
        f = cfg["filters"]
        if class_name in _CONV:
            return {"kernel": (*ks, None, f), "bias": (f,)}
        if class_name in _CONV_T:
            return {"kernel": (*ks, f, None), "bias": (f,)}
        dm = _int(cfg.get("depth_multiplier", 1))
        out: dict[str, Pattern] = {"pointwise_kernel": (*(1,) * n, None, f), "bias": (f,)}
        if dm:
            out["depthwise_kernel"] = (*ks, None, dm)
        return out
    n = _DEPTHWISE.get(class_name)
    if n and (ks := _ints(cfg.get("kernel_size"), n)) and (dm := _int(cfg.get("depth_multiplier", 1))):
        return {"depthwise_kernel": (*ks, None, dm), "bias": (None,)}
    gates = _GATES.get(class_name)
    if gates and (u := _int(cfg.get("units"))):
        out = {"kernel": (None, gates * u), "recurrent_kernel": (u, gates * u)}
        if class_name == "GRU":
            if isinstance(cfg.get("reset_after"), bool):
                out["bias"] = (2, 3 * u) if cfg["reset_after"] else (3 * u,)
        elif class_name != "CuDNNLSTM" and class_name != "CuDNNGRU":  # cuDNN biases are doubled
            out["bias"] = (gates * u,)
        return out
    if class_name == "BatchNormalization" and cfg.get("virtual_batch_size") is None:  # ghost BN: (1, 1, C)
        axis = cfg.get("axis", -1)
        if isinstance(axis, int) or (isinstance(axis, list) and len(axis) == 1):
            return {k: (None,) for k in ("gamma", "beta", "moving_mean", "moving_variance")}
    return {}


def _top_layers(model_config: Any) -> list[dict[str, Any]]:
    cfg = model_config.get("config") if isinstance(model_config, dict) else None
    layers = cfg.get("layers") if isinstance(cfg, dict) else cfg
    return [x for x in layers if isinstance(x, dict)] if isinstance(layers, list) else []


def _show(pattern: Pattern) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in pattern) + ("," if len(pattern) == 1 else "") + ")"


def check_declared_shapes(path: Path, model_config: Any, weights: dict[str, list[Any]]) -> None:
    """Raise InputError (exit 2) at the first weight dataset whose declared shape differs from what its layer's
    config implies. `weights` maps a layer group to its entries (name, shape, h5path: artifact.WeightEntry)."""
    for layer in _top_layers(model_config):
        cfg = layer.get("config")
        if not isinstance(cfg, dict) or not isinstance(layer.get("class_name"), str):
            continue
        name = cfg.get("name", layer.get("name"))
        entries = weights.get(name) if isinstance(name, str) else None
        expected = expected_shapes(layer["class_name"], cfg) if entries else {}
        for e in entries or []:
            pattern = expected.get(e.name.rsplit("/", 1)[-1].split(":", 1)[0])
            if pattern is None:
                continue
            if len(e.shape) != len(pattern) or any(p is not None and p != d for p, d in zip(pattern, e.shape)):
                raise InputError(
                    f"{path}: layer '{name}' ({layer['class_name']}): weight dataset {e.h5path} declares shape "
                    f"{tuple(e.shape)}, but the layer's config implies {_show(pattern)} ('?' = set by the input); "
                    "refused before reading it",
                    hint="the weights do not belong to this config; re-save the model with model.save('x.h5'); "
                         "see docs/security.md")
