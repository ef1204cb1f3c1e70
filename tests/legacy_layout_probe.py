"""Run in a subprocess with KERAS_BACKEND=tensorflow: (1) k2to3's weights_legacy conversions against tf_keras's own
`preprocess_weights_for_loading` on random Keras 1 tensors (th Conv2D/Conv3D, Keras 1.0 and 1.1 Conv1D,
Conv2DTranspose, per-gate LSTM and GRU); (2) what plain Keras 3 does with the Keras 1 and Theano fixtures: the
Keras 1 files fail to load, the Theano file loads and drifts from the model with its kernels flipped as Keras 2
flipped them. Prints one JSON line. Not a test module: test_keras1.py runs it."""

from __future__ import annotations

import json
import os
import sys
import warnings

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
warnings.filterwarnings("ignore")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tf_keras as k2  # noqa: E402
from tf_keras.src.saving.legacy.hdf5_format import preprocess_weights_for_loading  # noqa: E402

from k2to3.upgrade.keras1 import layouts as weights_legacy  # noqa: E402

L = k2.layers
CASES = {
    "Conv2D th": (L.Conv2D(4, (3, 2), data_format="channels_first"), (None, 3, 8, 8), [(4, 3, 3, 2), (4,)]),
    "Conv3D th": (L.Conv3D(2, (3, 2, 2), data_format="channels_first"), (None, 3, 6, 6, 6), [(2, 3, 3, 2, 2), (2,)]),
    "Conv1D keras 1.1": (L.Conv1D(4, 3), (None, 9, 5), [(3, 1, 5, 4), (4,)]),
    "Conv1D keras 1.0": (L.Conv1D(4, 3), (None, 9, 5), [(4, 5, 3, 1), (4,)]),
    "Conv2DTranspose tf": (L.Conv2DTranspose(4, 3), (None, 6, 6, 3), [(3, 3, 3, 4), (4,)]),
    # Keras 1 Deconvolution2D dim_ordering="th": (filters, channels, rows, cols)
    "Conv2DTranspose th": (L.Conv2DTranspose(4, (3, 2), data_format="channels_first"), (None, 5, 6, 6),
                           [(4, 5, 3, 2), (4,)]),
    "BatchNormalization": (L.BatchNormalization(), (None, 7, 6), [(6,)] * 4),  # running_std is the variance
    "LSTM": (L.LSTM(6), (None, 5, 4), [s for _ in range(4) for s in ((4, 6), (6, 6), (6,))]),
    "GRU": (L.GRU(5, reset_after=False), (None, 5, 4), [s for _ in range(3) for s in ((4, 5), (5, 5), (5,))]),
}


def layouts() -> dict[str, float]:
    rng = np.random.default_rng(0)
    out = {}
    for name, (layer, shape, saved) in CASES.items():
        layer.build(shape)
        arrays = [rng.normal(size=s).astype("float32") for s in saved]
        ref = preprocess_weights_for_loading(layer, [a.copy() for a in arrays], original_keras_version="1")
        kernel_rank = len(layer.weights[0].shape)
        got = weights_legacy.keras1(type(layer).__name__, getattr(layer, "data_format", None), kernel_rank, arrays)
        got = arrays if got is None else got
        assert [a.shape for a in got] == [tuple(w.shape) for w in layer.weights], name
        out[name] = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(ref, got))
    return out


def plain(paths: list[str]) -> dict[str, str]:
    res = {}
    for p in paths:
        base = os.path.basename(p)
        try:
            m3 = keras.saving.load_model(p, compile=False)
        except Exception as exc:
            res[base] = "fails: " + (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
            continue
        m2 = k2.models.load_model(p, compile=False)
        for layer in m2.layers:  # the model as trained: Keras 2.2 flipped Theano kernels on load
            if type(layer).__name__ in weights_legacy.THEANO_FLIPPED:
                w = layer.get_weights()
                w[0] = np.flip(w[0], axis=tuple(range(w[0].ndim - 2)))
                layer.set_weights(w)
        x = np.random.default_rng(0).normal(size=(2, *m2.input_shape[1:])).astype("float32")
        drift = float(np.abs(np.asarray(m2(x)) - keras.ops.convert_to_numpy(m3(x))).max())
        res[base] = f"drifts: max abs {drift:.3g}" if drift > 1e-4 else f"loads: max abs {drift:.3g}"
    return res


if __name__ == "__main__":
    print(json.dumps({"layouts": layouts(), "plain": plain(sys.argv[1:])}))
