"""Weight layouts older than Keras 2 -> the layouts Keras 2 (and Keras 3) use, numpy only.

The specification is Keras 2's `preprocess_weights_for_loading` and `_need_convert_kernel`
(keras/engine/saving.py, Keras 2.2.4; tf_keras/src/saving/legacy/hdf5_format.py keeps the Keras 1 part):
* Keras 1 (rule K2T479): LSTM per-gate tensors (W_i, U_i, b_i, W_c, U_c, b_c, W_f, U_f, b_f, W_o, U_o, b_o)
  -> kernel, recurrent_kernel, bias in gate order i, f, c, o; GRU (z, r, h) likewise; `dim_ordering="th"`
  Conv2D/Conv3D kernels (filters, channels, k...) -> (k..., channels, filters); Conv1D kernels of Keras 1.0
  (filters, channels, length, 1) and 1.1+ (length, 1, channels, filters) -> (length, channels, filters);
  Conv2DTranspose (rows, cols, channels, filters) -> (rows, cols, filters, channels).
* Theano-trained files (`backend: theano`, rule K2T480): Theano's convolution flips the kernel, TensorFlow's
  (and Keras 3's on every backend) does not, so Conv1D/2D/3D, Conv2DTranspose and ConvLSTM2D kernels are
  flipped along their spatial axes (Keras 2's `convert_kernel`), as Keras 2 did when it loaded such a file on
  TensorFlow or CNTK.
"""

from __future__ import annotations

import numpy as np

THEANO_FLIPPED = ("Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "ConvLSTM2D")


def convert_kernel(kernel: np.ndarray) -> np.ndarray:
    """Keras 2 `conv_utils.convert_kernel`: reverse every axis but the last two (channels in, filters)."""
    return np.copy(kernel[(slice(None, None, -1),) * (kernel.ndim - 2) + (slice(None), slice(None))])


def _gates(arrays: list[np.ndarray], order: list[int], per_gate: int = 3) -> list[np.ndarray]:
    """Concatenate the per-gate (W, U, b) triples in `order` along the last axis."""
    return [np.concatenate([arrays[g * per_gate + k] for g in order], axis=-1) for k in range(per_gate)]


def keras1(cls: str, data_format: str | None, kernel_rank: int | None,
           arrays: list[np.ndarray], names: list[str] | None = None) -> list[np.ndarray] | None:
    """A Keras 1 layer's saved tensors in Keras 2's layout, or None when they need no change. `names`: the saved
    weight names ("highway_1_W_carry:0"), which order a Highway's tensors."""
    if cls == "Highway" and names and len(names) == len(arrays):
        order = ("_W", "_W_carry", "_b", "_b_carry")  # k2to3.portable.Highway's weights
        by = {next((s for s in sorted(order, key=len, reverse=True) if n.split(":")[0].endswith(s)), n): a
              for n, a in zip(names, arrays)}
        return [by[s] for s in order if s in by] if set(by) <= set(order) else None
    if cls == "LSTM" and len(arrays) == 12:
        return _gates(arrays, [0, 2, 1, 3])  # saved i, c, f, o; Keras 2 wants i, f, c, o
    if cls == "GRU" and len(arrays) == 9:
        return _gates(arrays, [0, 1, 2])  # z, r, h in both
    if not arrays:
        return None
    kernel, rest = arrays[0], list(arrays[1:])
    if cls == "Conv1D" and kernel.ndim == 4:
        if kernel.shape[1] != 1:  # Keras 1.0: (filters, channels, length, 1)
            kernel = np.transpose(kernel, (2, 3, 1, 0))
        return [kernel[:, 0, :, :], *rest]
    if cls in ("Conv2D", "Conv3D") and data_format == "channels_first" and kernel.ndim == (kernel_rank or 0):
        return [np.transpose(kernel, (2, 3, 1, 0) if kernel.ndim == 4 else (2, 3, 4, 1, 0)), *rest]
    if cls == "Conv2DTranspose":
        perm = (0, 1, 3, 2) if data_format != "channels_first" else (2, 3, 0, 1)
        return [np.transpose(kernel, perm), *rest]
    return None


def theano(cls: str, arrays: list[np.ndarray]) -> list[np.ndarray] | None:
    """A Theano-trained layer's tensors for a cross-correlating backend, or None when they need no change."""
    if cls not in THEANO_FLIPPED or not arrays:
        return None
    out = list(arrays)
    out[0] = convert_kernel(out[0])
    if cls == "ConvLSTM2D" and len(out) > 1:
        out[1] = convert_kernel(out[1])
    return out
