"""Worker op `fit_noise` (checks/trainingnoise.py, docs/optimizers.md#float32-training-noise): tf_keras's own
sensitivity of the `--fit-steps` steps to float32 rounding. The original file loaded once, as the reference is
(workers/fit.py), then the same steps on the same batch from the file's state with every trainable weight moved by a
few float32 ulps (nudge_weights), once per seed, the model and the optimizer put back between the runs. Asked for
only after a training mismatch."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from k2to3.workers.fit import layer_weights, load_batch, load_reference, optimizer_variables, save_weights, train_steps


def _state(model: Any, inner: Any) -> list[Any]:
    """Every variable a step changes, once: the model's (BatchNormalization's moving statistics too), the
    optimizer's and a loss scale's, and tf_keras >= 2.11 Nadam's momentum product (an untracked tf.Variable)."""
    seen: dict[int, Any] = {}
    extra = [getattr(inner, "_u_product", None)]
    for v in [*model.variables, *optimizer_variables(model.optimizer), *optimizer_variables(inner), *extra]:
        if v is not None:
            seen.setdefault(id(v), v)
    return list(seen.values())


def nudge_weights(model: Any, eps: float, rng: np.random.Generator) -> None:
    """Every trainable weight element scaled by (1 ± eps), its sign drawn from rng: with eps = 1e-6 (about 8 float32
    ulps) every rounding of the step changes, downstream of a BatchNormalization too (a uniform scale of the inputs
    is normalised away there, and integer inputs cannot move at all)."""
    for v in model.trainable_weights:
        a = np.asarray(v)
        if np.issubdtype(a.dtype, np.floating):
            v.assign(a * (1 + eps * rng.choice(np.array([-1.0, 1.0], a.dtype), a.shape)))


def op_fit_noise(req: dict[str, Any]) -> dict[str, Any]:
    ref = load_reference(req)
    if isinstance(ref, dict):
        return ref
    model, inner = ref.model, ref.inner
    x, y = load_batch(req)
    state = _state(model, inner)
    saved = [np.array(v) for v in state]
    runs, names, t0 = [], [], time.perf_counter()
    for i, out in enumerate(req["weights_out"]):
        for v, a in zip(state, saved):
            v.assign(a)
        nudge_weights(model, float(req["eps"]), np.random.default_rng(int(req["seed"]) + i))
        losses = train_steps(model, x, y, int(req["steps"]))
        names, arrays = layer_weights(model, np.asarray)
        save_weights(out, names, arrays)
        runs.append({"losses": losses, "iterations_after": int(np.asarray(inner.iterations))})
    return {"available": True, "runs": runs, "weight_names": names, "state_source": ref.source,
            "seconds": time.perf_counter() - t0}


OPS = {"fit_noise": op_fit_noise}
