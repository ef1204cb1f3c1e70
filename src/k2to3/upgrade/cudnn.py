"""CuDNNLSTM / CuDNNGRU (Keras 2, tf.compat.v1.keras) -> LSTM / GRU with the settings cuDNN computes with, and
the cuDNN weight layout converted as Keras 2 itself did when it loaded such a file into LSTM/GRU
(tf_keras/src/saving/legacy/hdf5_format.py `_convert_rnn_weights`, the specification): per gate, input kernels
change between cuDNN's Fortran-order layout and Keras' C-order one, recurrent kernels are transposed; the 2x biases
(input and recurrent) are summed for LSTM and become GRU(reset_after=True)'s (2, 3 * units) bias.
Pure numpy; rule K2T450 (rules/layers.toml)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState

# CuDNN class -> (Keras 3 class, gates)
CUDNN = {"CuDNNLSTM": ("LSTM", 4), "CuDNNGRU": ("GRU", 3)}
# What cuDNN computes: tanh / sigmoid, biases always, no dropout; GRU applies the reset gate after the matmul.
_FIXED = {"activation": "tanh", "recurrent_activation": "sigmoid", "use_bias": True, "dropout": 0.0,
          "recurrent_dropout": 0.0, "unroll": False}


def equivalent(class_name: str, cfg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The LSTM/GRU config that computes what a CuDNN layer with `cfg` computed (Keras 2 and 3 keys alike)."""
    target, _ = CUDNN[class_name]
    out = {**copy.deepcopy(cfg), **_FIXED}
    if target == "GRU":
        out["reset_after"] = True
        out.pop("unit_forget_bias", None)
    return target, out


def upgrade_config(up: UpgradeState, class_name: str, cfg: dict[str, Any], layer: str) -> tuple[str, dict[str, Any]]:
    """Called by layer_config before the other rules (K2T401 then drops time_major from the LSTM/GRU)."""
    target, out = equivalent(class_name, cfg)
    up.plan.weight_transforms[layer] = target  # a CuDNN layer inside Bidirectional: under the wrapper's name
    extra = ", reset_after=True" if target == "GRU" else ""
    up.note(up.code("cudnn_rnn"), "info", f"{class_name} -> {target}(activation='tanh', recurrent_activation="
            f"'sigmoid'{extra}); cuDNN weight layout converted", layer)
    return target, out


RNNS = {"LSTM": "LSTM", "GRU": "GRU", "CuDNNLSTM": "LSTM", "CuDNNGRU": "GRU"}


def file_layout(built_class: str | None, file_shapes: list[list[int]], built_shapes: list[list[int]]) -> str | None:
    """A weights-only file's group holds a cuDNN layer's weights where the build made an LSTM/GRU (textgenrnn's
    file, saved by CuDNNLSTM on a GPU, loaded into LSTM on a CPU): 'LSTM' or 'GRU' when the shapes are those of
    the cuDNN layout of the built layer (same kernels, the 2x bias), else None. `built_class`: the layer's class,
    or its Bidirectional wrapper's inner layer's."""
    target = RNNS.get(built_class or "")
    if target is None or len(file_shapes) != len(built_shapes) or len(file_shapes) % 3 or file_shapes == built_shapes:
        return None
    n = 4 if target == "LSTM" else 3
    for i in range(0, len(file_shapes), 3):
        fk, fr, fb = file_shapes[i:i + 3]
        bk, br, bb = built_shapes[i:i + 3]
        units = br[0]
        if fk != bk or fr != br or fb != [2 * n * units] or int(np.prod(bb)) not in (n * units, 2 * n * units):
            return None
    return target


def _gates(kernel: np.ndarray, fn: Any, n: int) -> np.ndarray:
    return np.hstack([fn(k) for k in np.hsplit(kernel, n)])


def convert_weights(target: str, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], list[str]]:
    """cuDNN-layout (kernel, recurrent_kernel, bias) triples (two for Bidirectional) -> the LSTM/GRU ones, and
    one note per converted triple. A triple whose bias is already in the plain layout is left as it is."""
    n = 4 if target == "LSTM" else 3
    out: list[np.ndarray] = []
    notes: list[str] = []
    for i in range(0, len(arrays) - len(arrays) % 3, 3):
        kernel, recurrent, bias = arrays[i : i + 3]
        units = recurrent.shape[0]
        if bias.shape != (2 * n * units,):
            out += [kernel, recurrent, bias]
            continue
        kernel = _gates(kernel, lambda k: k.T.reshape(k.shape, order="F"), n)
        recurrent = _gates(recurrent, lambda k: k.T, n)
        new_bias = np.sum(np.split(bias, 2), axis=0) if target == "LSTM" else bias.reshape(2, -1)
        out += [kernel, recurrent, new_bias]
        notes.append(f"cuDNN {target} weights: per-gate kernels relaid out, bias {bias.shape} -> {new_bias.shape}")
    return out + list(arrays[len(out):]), notes


def convert_slot(target: str, weight: str, value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """An optimizer slot (Adam's m or v, momentum, ...) of a cuDNN weight, in the layout convert_weights gives that
    weight; None when `value` is not in the cuDNN layout of a weight of `shape`. The kernels are relaid out like the
    weights (a slot is elementwise state). The LSTM bias is one parameter where cuDNN had two (input + recurrent)
    whose gradients are the same, so their slots are the same: the merged bias takes their mean, not their sum."""
    n = 4 if target == "LSTM" else 3
    leaf = weight.rsplit("/", 1)[-1].removesuffix(":0")
    if leaf == "bias" and value.ndim == 1 and value.size == 2 * int(np.prod(shape)) and target == "LSTM":
        return np.mean(np.split(value, 2), axis=0)
    if leaf == "bias" and value.ndim == 1 and tuple(shape) == (2, value.size // 2):
        return value.reshape(2, -1)  # GRU (reset_after): the two biases as two rows, as for the weight
    if value.shape != tuple(shape) or value.ndim != 2:
        return None
    if leaf == "kernel":
        return _gates(value, lambda k: k.T.reshape(k.shape, order="F"), n)
    if leaf == "recurrent_kernel":
        return _gates(value, lambda k: k.T, n)
    return None


def _translate(obj: Any) -> Any:
    if isinstance(obj, dict):
        if obj.get("class_name") in CUDNN and isinstance(obj.get("config"), dict):
            cls, cfg = equivalent(obj["class_name"], obj["config"])
            return {**obj, "class_name": cls, "config": cfg}
        return {k: _translate(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_translate(v) for v in obj]
    return obj


def golden_config(work: Path, golden_args: dict[str, Any], model_config: dict[str, Any]) -> None:
    """tf_keras cannot run CuDNN layers without a GPU: the reference is tf_keras with the config translated to
    LSTM/GRU, loading the file's weights through its own converter (`preprocess_weights_for_loading`)."""
    path = Path(golden_args["golden_config"]) if golden_args.get("golden_config") else work / "golden_config.json"
    config = json.loads(path.read_text()) if golden_args.get("golden_config") else model_config
    path.write_text(json.dumps(_translate(config)))
    golden_args["golden_config"] = str(path)
