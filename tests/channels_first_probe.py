"""Measure which channels_first layers run on CPU: tf_keras (the golden) and Keras 3 on tensorflow, torch and jax.

    python tests/channels_first_probe.py > /tmp/cf.md   (docs/channels-first.md holds its output)

Each backend runs in its own subprocess (the backend is fixed at import). A layer "runs" when calling it on a
(2, 3, 8, 8) (or (2, 3, 8) for 1-D) float32 channels_first batch returns; otherwise the first line of the error
is kept. Not a test module: a manual measurement, rerun when TensorFlow, torch or jax change."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CASES = {
    "Conv1D": "L.Conv1D(4, 3, data_format='channels_first')",
    "Conv2D": "L.Conv2D(4, 3, data_format='channels_first')",
    "Conv2D strides=2 same": "L.Conv2D(4, 3, strides=2, padding='same', data_format='channels_first')",
    "DepthwiseConv2D": "L.DepthwiseConv2D(3, data_format='channels_first')",
    "SeparableConv2D": "L.SeparableConv2D(4, 3, data_format='channels_first')",
    "Conv2DTranspose": "L.Conv2DTranspose(4, 3, strides=2, data_format='channels_first')",
    "Conv3D": "L.Conv3D(2, 2, data_format='channels_first')",
    "MaxPooling1D": "L.MaxPooling1D(2, data_format='channels_first')",
    "MaxPooling2D": "L.MaxPooling2D(2, data_format='channels_first')",
    "AveragePooling2D": "L.AveragePooling2D(2, data_format='channels_first')",
    "GlobalAveragePooling2D": "L.GlobalAveragePooling2D(data_format='channels_first')",
    "UpSampling2D": "L.UpSampling2D(2, data_format='channels_first')",
    "ZeroPadding2D": "L.ZeroPadding2D(1, data_format='channels_first')",
    "BatchNormalization(axis=1)": "L.BatchNormalization(axis=1)",
    "LocallyConnected2D (k2to3)": "P.LocallyConnected2D(2, 3, data_format='channels_first', implementation=1)",
}
RUNNERS = {"tf_keras": {"TF_USE_LEGACY_KERAS": "1"}, "tensorflow": {"KERAS_BACKEND": "tensorflow"},
           "torch": {"KERAS_BACKEND": "torch"}, "jax": {"KERAS_BACKEND": "jax"}}

CHILD = r'''
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
kind = sys.argv[1]
if kind == "tf_keras":
    import tf_keras as K
    to_np = np.asarray
    P = None
else:
    import keras as K
    import k2to3.portable as P
    to_np = K.ops.convert_to_numpy
L = K.layers
out = {}
for name, expr in json.loads(sys.argv[2]).items():
    if expr.startswith("P.") and P is None:
        out[name] = "n/a"
        continue
    shape = (2, 3, 8) if "1D" in name else (2, 3, 4, 4, 4) if "3D" in name else (2, 3, 8, 8)
    x = np.random.default_rng(0).normal(size=shape).astype("float32")
    try:
        to_np(eval(expr)(x))
        out[name] = "runs"
    except Exception as exc:
        import re
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
        msg = [ln.split("}}", 1)[-1] for ln in text.splitlines() if ln.strip() and "Exception encountered" not in ln]
        out[name] = "fails: " + (msg[0].strip() if msg else type(exc).__name__)[:70]
print(json.dumps(out))
'''


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    results = {}
    for kind, env in RUNNERS.items():
        e = {**os.environ, **env, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "",
             "PYTHONPATH": os.path.join(os.path.dirname(here), "src")}
        p = subprocess.run([sys.executable, "-c", CHILD, kind, json.dumps(CASES)], capture_output=True, text=True,
                           env=e, timeout=600)
        results[kind] = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else \
            {c: f"probe failed: {p.stderr.strip().splitlines()[-1][:80]}" for c in CASES}
    print("| layer (channels_first, CPU) | " + " | ".join(RUNNERS) + " |")
    print("|---|" + "---|" * len(RUNNERS))
    for case in CASES:
        print(f"| {case} | " + " | ".join(results[k][case].replace("|", "/") for k in RUNNERS) + " |")


if __name__ == "__main__":
    main()
