"""Run in a subprocess (KERAS_BACKEND set by the caller): build each Keras 2 (tf_keras) LocallyConnected1D/2D
configuration of a grid and k2to3's portable layer with the same config, give both the same random weights
(set_weights: the Keras 2 layout, unchanged) and print one JSON line of max abs errors per configuration.
Not a test module: test_removed_layers.py runs it."""

from __future__ import annotations

import itertools
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

from k2to3.portable.removed import LocallyConnected1D, LocallyConnected2D  # noqa: E402

CASES = {1: ((9, 3), [3, 2], [1, 2]), 2: ((6, 5, 3), [(3, 2), 2], [(2, 1), 1])}


def main() -> None:
    rng = np.random.default_rng(0)
    rows = {}
    for rank, (shape, kernels, strides) in CASES.items():
        k2_cls = k2.layers.LocallyConnected1D if rank == 1 else k2.layers.LocallyConnected2D
        k3_cls = LocallyConnected1D if rank == 1 else LocallyConnected2D
        grid = itertools.product((1, 2, 3), ("channels_last", "channels_first"), ("valid", "same"),
                                 zip(kernels, strides))
        for i, (impl, df, pad, (kernel, stride)) in enumerate(grid):
            if impl == 1 and pad == "same":
                continue  # Keras 2 refuses it
            bias = i % 3 != 0
            kw = dict(filters=3, kernel_size=kernel, strides=stride, padding=pad, data_format=df,
                      implementation=impl, use_bias=bias, activation="tanh")
            x = rng.normal(size=(2, *shape)).astype("float32")
            ref = k2_cls(**kw)
            ref(x)
            weights = [rng.normal(size=w.shape).astype("float32") for w in ref.get_weights()]
            ref.set_weights(weights)
            got = k3_cls(**kw)
            got.build((None, *shape))
            got.set_weights(weights)  # raises on any shape difference from the Keras 2 layout
            err = float(np.abs(ref(x).numpy() - keras.ops.convert_to_numpy(got(x))).max())
            rows[f"{rank}d impl{impl} {df} {pad} k={kernel} s={stride} bias={bias}"] = err
    print(json.dumps({"backend": keras.backend.backend(), "errors": rows}))


if __name__ == "__main__":
    sys.exit(main())
