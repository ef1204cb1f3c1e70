"""Run in a subprocess (KERAS_BACKEND set by the caller): every quantizer configuration of a grid computed by
qkeras itself (under tf_keras) and by k2to3.portable.qkeras on the same float32 values, which include exact
rounding ties (k / 2^(bits+1)) and values on the clipping bounds; prints one JSON line with, per configuration,
the number of elements that differ, the max abs difference and the number of differing elements that are not
next to a power-of-two quantizer's log2 rounding boundary. Not a test module: test_qkeras.py runs it."""

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
    # power-of-two: qkeras QBatchNormalization's defaults first
    ("quantized_po2", {"bits": 5}),
    ("quantized_relu_po2", {"bits": 6, "max_value": 2048}),
    ("quantized_relu_po2", {"bits": 6, "quadratic_approximation": True}),
    ("quantized_po2", {}),
    ("quantized_po2", {"bits": 4, "max_value": 1}),
    ("quantized_po2", {"bits": 5, "max_value": 8, "quadratic_approximation": True}),
    ("quantized_po2", {"bits": 6, "log2_rounding": "floor"}),
    ("quantized_relu_po2", {"bits": 4}),
    ("quantized_relu_po2", {"bits": 4, "max_value": 0.5}),
    ("quantized_relu_po2", {"bits": 5, "negative_slope": 0.25}),
    ("quantized_relu_po2", {"bits": 5, "max_value": 16, "negative_slope": 0.5, "log2_rounding": "floor"}),
]


def values(name: str) -> dict[str, np.ndarray]:
    """A 1-D grid with every multiple of 1/256 in [-10, 10] (all ties of the quantizers above) and a kernel-shaped
    (channels last) random tensor for the per-channel scales; for the power-of-two quantizers also every power of
    two 2^-40..2^40 of either sign with its float32 neighbours and 2^(k+1/2) (the log2 rounding boundary), values
    below epsilon (1e-7), zero, -0.0 and values far above max_value (1e6, 1e30)."""
    rng = np.random.default_rng(0)
    grid = (np.arange(-2560, 2561) / 256.0).astype("float32")
    kernel = (rng.normal(size=(3, 3, 4, 6)) * rng.uniform(0.1, 2.0, size=6)).astype("float32")
    if "po2" not in name:
        return {"grid": grid, "kernel": kernel}
    p = np.float32(2.0) ** np.arange(-40, 41).astype("float32")
    mid = (np.float32(2.0) ** (np.arange(-40, 41) + 0.5)).astype("float32")
    edges = np.concatenate([p, np.nextafter(p, np.float32(0)), np.nextafter(p, np.float32(np.inf)), mid,
                            np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf)),
                            np.asarray([0.0, 1e-8, 5e-8, 1e-7, 1.5e-7, 2047, 2048, 2049, 3000, 1e6, 1e30],
                                       dtype="float32")])
    wide = np.concatenate([edges, -edges, np.asarray([-0.0], dtype="float32")]).astype("float32")
    return {"grid": grid, "kernel": kernel, "edges": wide}


def near_log2_boundary(x: np.ndarray, name: str, cfg: dict) -> np.ndarray:
    """Elements whose po2 exponent input (|x|, times negative_slope for relu_po2's negative side, clipped to
    [epsilon, max_value], square-rooted under quadratic_approximation) lies within 1e-5 (in log2 units, ~60 ulp)
    of a rounding boundary: k + 1/2 for log2_rounding='rnd', k for 'floor'. There float32 log differs by an ulp
    between backends (tf uses Eigen's, torch and jax their own), so the exponent may go either way."""
    v = np.abs(x.astype("float64"))
    if name == "quantized_relu_po2":
        v = np.where(x >= 0, v, v * float(cfg.get("negative_slope", 0) or 0))
    v = np.maximum(v, 1e-7)
    if cfg.get("max_value") is not None:
        v = np.minimum(v, float(cfg["max_value"]))
    t = np.log2(v) / (2.0 if cfg.get("quadratic_approximation") else 1.0)
    frac = t - np.floor(t)
    if cfg.get("log2_rounding", "rnd") == "floor":
        return np.minimum(frac, 1 - frac) < 1e-5
    return np.abs(frac - 0.5) < 1e-5


# QDenseBatchnorm is not in qkeras 0.9: its reference is qkeras's QConv2DBatchnorm with a 1x1 kernel on a 1x1
# image, whose folding (qkeras/qconv2d_batchnorm.py) is the same arithmetic per output unit.
FOLDED = [
    {"kernel_quantizer": ("quantized_bits", {"bits": 6, "integer": 0, "alpha": 1}),
     "bias_quantizer": ("quantized_bits", {"bits": 6, "integer": 0, "alpha": 1})},
    {"kernel_quantizer": ("quantized_bits", {"bits": 4, "integer": 0, "alpha": "auto_po2"}),
     "bias_quantizer": ("quantized_bits", {"bits": 8, "integer": 3}), "use_bias": False,
     "folding_mode": "batch_stats_folding", "ema_freeze_delay": 2},
    {"kernel_quantizer": ("quantized_po2", {"bits": 4, "max_value": 1}),
     "bias_quantizer": ("quantized_bits", {"bits": 8, "integer": 2, "alpha": "auto"})},
]


def folded_dense() -> dict[str, list[float]]:
    """Per FOLDED case: [max |portable QDenseBatchnorm - qkeras|, max |qkeras - the unfolded computation| (folding
    changes the outputs, so the first is not trivially 0), max |training-mode - inference outputs|, iteration
    after that one training call]."""
    from qkeras import QConv2DBatchnorm

    from k2to3.portable.qkeras_folded import QDenseBatchnorm

    rng = np.random.default_rng(1)
    out = {}
    for i, case in enumerate(FOLDED):
        spec = {k: ({"class_name": v[0], "config": v[1]} if isinstance(v, tuple) else v) for k, v in case.items()}
        ref = QConv2DBatchnorm(5, 1, **{k: get_quantizer(v) if k.endswith("quantizer") else v
                                        for k, v in spec.items()})
        x = rng.normal(size=(32, 7)).astype("float32")
        ref(x.reshape(32, 1, 1, 7), training=False)  # built eagerly (a symbolic call would trace with autograph)
        values = {"kernel": rng.normal(size=(7, 5)) * 0.4, "bias": rng.normal(size=5) * 0.1,
                  "gamma": rng.uniform(0.5, 1.5, 5), "beta": rng.normal(size=5) * 0.1,
                  "moving_mean": rng.normal(size=5) * 0.2, "moving_variance": rng.uniform(0.3, 2.0, 5)}
        for w in ref.weights:
            base = w.name.split("/")[-1].split(":")[0]
            if base in values:
                w.assign(values[base].reshape(w.shape).astype("float32"))
        want = np.asarray(ref(x.reshape(32, 1, 1, 7), training=False)).reshape(32, 5)
        port = QDenseBatchnorm(5, **{k: ({"quantizer": v[0], "config": v[1]} if isinstance(v, tuple) else v)
                                     for k, v in case.items()})
        port.build((None, 7))
        for w in port.weights:
            if w.name in values:
                w.assign(values[w.name].astype("float32"))
        got = keras.ops.convert_to_numpy(port(keras.ops.convert_to_tensor(x)))
        inv = values["gamma"] / np.sqrt(values["moving_variance"] + 1e-3)
        bias = values["bias"] if spec.get("use_bias", True) else 0.0
        unfolded = (x @ np.asarray(get_quantizer(spec["kernel_quantizer"])(values["kernel"].astype("float32")))
                    + bias - values["moving_mean"]) * inv + values["beta"]
        # a training step computes qkeras's frozen-BN pass: the same outputs, iteration counted from -1
        trained = keras.ops.convert_to_numpy(port(keras.ops.convert_to_tensor(x), training=True))
        out[f"QDenseBatchnorm case {i}"] = [float(np.abs(got - want).max()), float(np.abs(want - unfolded).max()),
                                            float(np.abs(trained - got).max()),
                                            int(keras.ops.convert_to_numpy(port.iteration))]
    return out


def main() -> None:
    rows = {}
    for name, cfg in CASES:
        for kind, x in values(name).items():
            want = np.asarray(get_quantizer({"class_name": name, "config": cfg})(x))
            got = keras.ops.convert_to_numpy(quantize(keras.ops.convert_to_tensor(x),
                                                      {"quantizer": name, "config": cfg}))
            diff = want != got
            off = int((diff & ~near_log2_boundary(x, name, cfg)).sum()) if "po2" in name else int(diff.sum())
            rows[f"{name}({cfg}) {kind}"] = [int(diff.sum()), float(np.abs(want - got).max()), off]
    print(json.dumps({"backend": keras.backend.backend(), "rows": rows, "folded": folded_dense()}))


if __name__ == "__main__":
    sys.exit(main())
