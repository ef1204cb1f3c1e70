"""Run in a subprocess (KERAS_BACKEND set by the caller): every quantizer configuration of a grid computed by
qkeras itself (under tf_keras) and by k2to3.portable.qkeras on the same float32 values, which include exact
rounding ties (k / 2^(bits+1)) and values on the clipping bounds; prints one JSON line with, per configuration,
the number of elements that differ and the max abs difference. Not a test module: test_qkeras.py runs it."""

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
from qkeras.quantizers import get_quantizer  # noqa: E402

from k2to3.portable.qkeras import quantize  # noqa: E402

CASES = [
    ("quantized_bits", {"bits": 6, "integer": 0, "alpha": 1}),
    ("quantized_bits", {"bits": 8, "integer": 3}),
    ("quantized_bits", {"bits": 4, "integer": 0, "symmetric": 1}),
    ("quantized_bits", {"bits": 6, "integer": 2, "keep_negative": False}),
    ("quantized_bits", {"bits": 1, "integer": 0}),
    ("quantized_bits", {"bits": 3, "integer": 0, "alpha": 0.5}),
    ("quantized_bits", {"bits": 4, "integer": 0, "alpha": "auto"}),
    ("quantized_bits", {"bits": 4, "integer": 0, "alpha": "auto_po2"}),
    ("quantized_bits", {"bits": 5, "integer": 1, "alpha": "auto"}),
    ("quantized_relu", {"bits": 6, "integer": 0}),
    ("quantized_relu", {"bits": 4, "integer": 2}),
    ("quantized_relu", {"bits": 6, "integer": 1, "negative_slope": 0.25}),
    ("binary", {"alpha": 1}),
    ("binary", {}),
    ("binary", {"use_01": True}),
    ("binary", {"alpha": "auto"}),
    ("binary", {"alpha": "auto_po2"}),
    ("ternary", {"alpha": 1}),
    ("ternary", {"threshold": 0.2}),
    ("ternary", {}),
    ("ternary", {"alpha": "auto"}),
    ("ternary", {"alpha": "auto_po2"}),
]


def values() -> dict[str, np.ndarray]:
    """A 1-D grid with every multiple of 1/256 in [-10, 10] (all ties of the quantizers above) and a kernel-shaped
    (channels last) random tensor for the per-channel scales."""
    rng = np.random.default_rng(0)
    grid = (np.arange(-2560, 2561) / 256.0).astype("float32")
    kernel = (rng.normal(size=(3, 3, 4, 6)) * rng.uniform(0.1, 2.0, size=6)).astype("float32")
    return {"grid": grid, "kernel": kernel}


def main() -> None:
    rows = {}
    for name, cfg in CASES:
        for kind, x in values().items():
            want = np.asarray(get_quantizer({"class_name": name, "config": cfg})(x))
            got = keras.ops.convert_to_numpy(quantize(keras.ops.convert_to_tensor(x),
                                                      {"quantizer": name, "config": cfg}))
            rows[f"{name}({cfg}) {kind}"] = [int((want != got).sum()), float(np.abs(want - got).max())]
    print(json.dumps({"backend": keras.backend.backend(), "rows": rows}))


if __name__ == "__main__":
    sys.exit(main())
