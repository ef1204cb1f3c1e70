"""The fixed, seeded verification input built from the model's input specs (numpy only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from k2to3.errors import InputError

SEED = 20240229
BATCH = 2
FREE_DIM = 32  # size used for None dimensions other than the batch, unless the model needs more (free_sizes)
MAX_FREE_DIM = 1024
_DOWNSAMPLING = ("Conv", "Pooling", "SeparableConv", "DepthwiseConv")


def _spatial(value: Any, rank: int) -> list[int]:
    if isinstance(value, int):
        return [value] * rank
    return [int(v) for v in value] if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value) \
        else [1] * rank


def free_sizes(plan_model: dict[str, Any], batch_shape: list[Any]) -> dict[int, tuple[int, str]]:
    """A size for each free (None) axis of an input: 32, or more when the model's strided convolutions and poolings
    of that rank shrink the axis (an audio CNN over (None, 40, None, 1) with six stride-2 poolings leaves nothing of
    32 columns, and both sides then return NaN): twice the product of the downsampling along it, at least the
    largest kernel or pool window. Axis -> (size, why)."""
    rank = len(batch_shape) - 2  # spatial axes of a channels_last image/sequence input
    out: dict[int, tuple[int, str]] = {}
    for axis, d in enumerate(batch_shape[1:], start=1):
        if d is not None:
            continue
        j = axis - 1
        factor, window, count = 1, 1, 0
        for layer in plan_model.get("layers", []):
            cls, cfg = str(layer.get("class_name", "")), layer.get("config") or {}
            if rank < 1 or j >= rank or not any(k in cls for k in _DOWNSAMPLING) or not cls.endswith(f"{rank}D") \
                    or cfg.get("data_format") == "channels_first":
                continue
            strides = _spatial(cfg.get("strides") or cfg.get("pool_size") or 1, rank)
            sizes = _spatial(cfg.get("kernel_size") or cfg.get("pool_size") or 1, rank)
            if strides[j] > 1:
                factor, count = factor * strides[j], count + 1
            window = max(window, sizes[j])
        need = min(MAX_FREE_DIM, max(FREE_DIM, 2 * factor, window))
        out[axis] = (need, f"{count} strided layer(s) shrink it {factor}x" if need > FREE_DIM else "")
    return out


def input_specs(plan_model: dict[str, Any]) -> list[dict[str, Any]]:
    layers = {s["name"]: s for s in plan_model["layers"]}
    if plan_model["kind"] == "sequential":
        return [plan_model["layers"][0]] if plan_model["layers"] and \
            plan_model["layers"][0]["class_name"] == "InputLayer" else []
    return [layers[r[0]] for r in plan_model["inputs"]]


def _embedding_dim(plan_model: dict[str, Any], input_name: str) -> int | None:
    """input_dim of an Embedding fed directly by this input (so indices stay in range)."""
    layers = plan_model["layers"]
    if plan_model["kind"] == "sequential":
        nxt = layers[1] if len(layers) > 1 else None
        return nxt["config"].get("input_dim") if nxt and nxt["class_name"] == "Embedding" else None
    for s in layers:
        if s["class_name"] == "Embedding" and any(
            isinstance(r, list) and r and r[0] == input_name for node in s["inbound_nodes"] for r in node
        ):
            return s["config"].get("input_dim")
    return None


def make_inputs(plan_model: dict[str, Any], batch: int = BATCH) -> list[np.ndarray]:
    rng = np.random.default_rng(SEED)
    arrays = []
    for spec in input_specs(plan_model):
        free = free_sizes(plan_model, spec["config"]["batch_shape"])
        shape = [batch] + [free[i][0] if d is None else int(d)
                           for i, d in enumerate(spec["config"]["batch_shape"][1:], start=1)]
        dtype = np.dtype(spec["config"].get("dtype") or "float32")
        vocab = _embedding_dim(plan_model, spec["name"])
        if vocab:
            arrays.append(rng.integers(0, vocab, size=shape).astype(dtype if dtype.kind in "iuf" else "int32"))
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 10, size=shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, size=shape).astype(bool))
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


def load_inputs(path: Path, plan_model: dict[str, Any]) -> list[np.ndarray]:
    specs = input_specs(plan_model)
    try:
        with np.load(path) as z:
            keys = list(z.files)
            arrays = [z[k] for k in sorted(keys, key=lambda k: (len(k), k))] if all(
                k.startswith("in") or k.startswith("arr_") for k in keys) else [z[s["orig_name"]] for s in specs]
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{path}: cannot read inputs ({exc})",
                         hint="pass an .npz with arrays named in0, in1, ... or by input layer name") from None
    if len(arrays) != len(specs):
        raise InputError(f"{path}: {len(arrays)} arrays for a model with {len(specs)} inputs")
    for a, s in zip(arrays, specs):
        want = s["config"]["batch_shape"][1:]
        if len(a.shape) != len(want) + 1 or any(w is not None and w != g for w, g in zip(want, a.shape[1:])):
            raise InputError(f"{path}: input '{s['orig_name']}' has shape {a.shape}, model expects "
                             f"{tuple(['batch', *want])}")
    return arrays
