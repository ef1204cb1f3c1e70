"""Run in a subprocess: load each file with plain Keras 3 (compile=True, the default) and say what
happens: 'fails' (with the first error line), 'drifts' (loads, but its output differs from tf_keras's
on the same input) or 'loads'. Not a test module: test_plain_keras3.py runs it."""

from __future__ import annotations

import json
import os
import sys
import warnings

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
warnings.filterwarnings("ignore")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tf_keras  # noqa: E402
from tf_keras.src.applications import convnext  # noqa: E402


def inputs_for(model) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    xs = []
    for t in model.inputs:
        shape = [2] + [d or 8 for d in t.shape[1:]]
        if "int" in str(t.dtype):
            xs.append(rng.integers(0, 5, size=shape).astype("int32"))
        else:
            xs.append((rng.standard_normal(shape) * 3).astype("float32"))
    return xs


def probe(path: str) -> dict:
    try:
        model = keras.saving.load_model(path)
    except Exception as exc:
        return {"result": "fails", "error": (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]}
    try:
        ref = tf_keras.models.load_model(path, compile=False, custom_objects={
            "LayerScale": convnext.LayerScale, "StochasticDepth": convnext.StochasticDepth})
        xs = inputs_for(ref)
        a = np.asarray(ref(xs if len(xs) > 1 else xs[0], training=False))
        b = keras.ops.convert_to_numpy(model(xs if len(xs) > 1 else xs[0], training=False))
    except Exception as exc:
        return {"result": "fails", "error": f"loads, but cannot run: {str(exc).strip().splitlines()[0][:160]}"}
    if a.shape != b.shape or not np.allclose(b, a, rtol=1e-5, atol=1e-6):
        err = float(np.max(np.abs(a - b))) if a.shape == b.shape else float("inf")
        return {"result": "drifts", "error": f"max abs error {err:.3g}"}
    return {"result": "loads"}


if __name__ == "__main__":
    print(json.dumps({p: probe(p) for p in sys.argv[1:]}))
