"""Run in a subprocess: what plain Keras 3 does with each long-tail input, against tf_keras on the same input.
A pair (config, weights) is loaded as a user would: `keras.models.model_from_json` (Keras 3 has no
model_from_yaml) + `model.load_weights`; any other file with `keras.saving.load_model`. Prints one JSON object:
path -> {"result": "fails" | "drifts" | "loads", "error": ...}. Not a test module: test_longtail1.py runs it."""

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


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _keras3(spec: str):
    if "::" in spec:
        config, weights = spec.split("::")
        if not config.endswith(".json"):
            raise RuntimeError("Keras 3 has no model_from_yaml")
        with open(config) as fh:
            model = keras.models.model_from_json(fh.read())
        model.load_weights(weights)
        return model
    return keras.saving.load_model(spec)


def probe(spec: str, reference: str | None) -> dict:
    try:
        model = _keras3(spec)
    except Exception as exc:
        return {"result": "fails", "error": _first_line(exc)}
    if reference is None:
        return {"result": "loads"}
    ref = tf_keras.models.load_model(reference, compile=False)
    rng = np.random.default_rng(0)
    xs = [(rng.standard_normal([2] + [d or 8 for d in t.shape[1:]])).astype("float32") for t in ref.inputs]
    try:
        a = np.asarray(ref(xs if len(xs) > 1 else xs[0], training=False))
        b = keras.ops.convert_to_numpy(model(xs if len(xs) > 1 else xs[0], training=False))
    except Exception as exc:
        return {"result": "fails", "error": f"loads, but cannot run: {_first_line(exc)}"}
    if a.shape != b.shape or not np.allclose(b, a, rtol=1e-5, atol=1e-6):
        err = float(np.max(np.abs(a - b))) if a.shape == b.shape else float("inf")
        return {"result": "drifts", "error": f"max abs error {err:.3g}"}
    return {"result": "loads"}


if __name__ == "__main__":
    # argv: SPEC=REFERENCE_H5 pairs (REFERENCE_H5 may be empty: then only loading is checked)
    out = {}
    for arg in sys.argv[1:]:
        spec, _, ref = arg.partition("=")
        out[spec] = probe(spec, ref or None)
    print(json.dumps(out))
