"""Run in a subprocess: import a model module, build its model, set deterministic weights, and print the
outputs, the custom loss and metric on a fixed batch as JSON. With TF_USE_LEGACY_KERAS=1 the original
source runs on tf_keras (Keras 2); the fixed source runs on Keras 3 with KERAS_BACKEND set by the caller."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    spec = importlib.util.spec_from_file_location("model_under_test", sys.argv[1])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.build_model()
    model.set_weights(mod.weights_for(model))
    x = np.random.default_rng(1).standard_normal((4, 6)).astype("float32")
    y = np.eye(3, dtype="float32")[[0, 1, 2, 1]]
    p = model(x)
    keras3 = "keras" in sys.modules and not os.environ.get("TF_USE_LEGACY_KERAS")
    if keras3:  # losses receive backend tensors during training; do the same here
        y = sys.modules["keras"].ops.convert_to_tensor(y)
    as_np = (lambda t: np.asarray(sys.modules["keras"].ops.convert_to_numpy(t))) if keras3 else np.asarray
    out = {"out": as_np(p).tolist(), "loss": as_np(mod.k_loss(y, p)).tolist(),
           "metric": as_np(mod.k_metric(y, p)).tolist(), "n_weights": len(model.get_weights()),
           "imported": sorted(m for m in ("tensorflow", "torch", "jax") if m in sys.modules)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
