"""Differential probe of rule K2T611 (run as a subprocess by tests/test_training_noise.py): one training-mode call of
BatchNormalization on the same (2, 3, 3, 4) batch by tf_keras fused (its default for 4D inputs), tf_keras unfused
and Keras 3. Prints one JSON object: each side's moving variance and the biased / unbiased formulas."""

from __future__ import annotations

import json
import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"

import keras
import numpy as np
import tf_keras

x = np.random.default_rng(0).standard_normal((2, 3, 3, 4)).astype("float32") * 3
n = 2 * 3 * 3
var = x.reshape(-1, 4).astype(np.float64).var(0)
out = {"biased": (0.99 + 0.01 * var).tolist(), "unbiased": (0.99 + 0.01 * var * n / (n - 1)).tolist()}
for name, layer in (("fused", tf_keras.layers.BatchNormalization()),
                    ("unfused", tf_keras.layers.BatchNormalization(fused=False)),
                    ("keras3", keras.layers.BatchNormalization())):
    layer(x, training=True)
    out[name] = np.asarray(layer.moving_variance).astype(np.float64).tolist()
print(json.dumps(out))
