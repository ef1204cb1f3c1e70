"""The verify op: a .keras loaded with safe_mode=True on this backend, its parameter counts and weight hashes, and its
outputs on the seeded inputs (every layer's too, for the first divergent layer)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from k2to3.workers import large_weights, nhwc
from k2to3.workers.chunked_arrays import weight_hash
from k2to3.workers.protocol import VerifyRequest
from k2to3.workers.runtime import (
    flat_numpy,
    forward,
    layer_outputs,
    library_version,
    load_inputs,
    load_keras,
    save_arrays,
)


def op_verify(req: VerifyRequest) -> dict[str, Any]:
    keras, model, t_load = load_keras(req)
    # Generators: one variable's numpy copy at a time, not a second copy of the whole model.
    total = weight_hash(large_weights.hashable(keras, w) for w in model.weights)
    per_layer = {}
    for layer in model.layers:
        if layer.weights:
            per_layer[layer.name] = weight_hash(large_weights.hashable(keras, w) for w in layer.weights)
    xs = load_inputs(req.inputs)
    nhwc.refuse_keras3_tf_cpu(keras, model)
    t1 = time.perf_counter()
    outs = flat_numpy(keras, forward(keras, model, xs))
    t_pred = time.perf_counter() - t1
    save_arrays(req.out, outs)
    reply: dict[str, Any] = {
        "backend": keras.backend.backend(),
        "keras_version": keras.__version__,
        "params_trainable": int(sum(int(np.prod(w.shape)) for w in model.trainable_weights)),
        "params_non_trainable": int(sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)),
        "weight_hash": total,
        "layer_hashes": per_layer,
        "n_outputs": len(outs),
        "load_seconds": t_load,
        "predict_seconds": t_pred,
        "compiled": bool(getattr(model, "compiled", False)),
        "library_version": library_version(keras.backend.backend()),
    }
    if req.layers:
        reply["layer_names"] = layer_outputs(keras, model, xs, req.layers_out, keras.layers.InputLayer)
    if req.hold:  # op fit trains this model next (--fit-steps): no second load (workers/training/held_models.py)
        from k2to3.workers.training import held_models

        held_models.hold("keras3", held_models.keras3_key(req), (keras, model, t_load))
    return reply
