"""Worker op `fit_noise` (checks/training/noise_probe.py, docs/optimizers.md#float32-training-noise): tf_keras's own
sensitivity of the `--fit-steps` steps to float32 rounding. The original file loaded once, as the reference is
(fit_ops.py), then the same steps on the same batch from the file's state with every trainable weight moved by a few
float32 ulps (restore_nudged), once per seed, the model and the optimizer put back between the runs. Each run's
change to each weight (its largest absolute difference from the reference's own steps, and the L2 norm of that
difference) is measured here and replied;
the weights go through a file only when the reference's are not at hand. Asked for only after a training mismatch.

With `grads` each run also keeps its first step's gradients and replies how far each moved from the reference's
(`grad_changes`, relative L2): the float32 sensitivity of the step's gradients that a gradient mismatch is judged
against (checks/training/gradient_check.py). `grads_only` takes that first step's gradients alone, nothing applied."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from k2to3.core import arrayfile
from k2to3.core.compare import rel_l2, weight_changes
from k2to3.workers.protocol import FitNoiseRequest
from k2to3.workers.training import held_models
from k2to3.workers.training.reference_model import load_reference, reference_key, step_state
from k2to3.workers.training.train_steps import dense, layer_weights, load_batch, save_weights, train_steps


def restore_nudged(model: Any, state: list[Any], saved: list[np.ndarray], eps: float, rng: np.random.Generator
                   ) -> None:
    """The state before the steps put back (`state` and its `saved` values, reference.step_state), every trainable
    weight element scaled by (1 ± eps) on the way, its sign drawn from rng in the model's trainable_weights order:
    with eps = 1e-6 (about 8 float32 ulps) every rounding of the step changes, downstream of a BatchNormalization
    too (a uniform scale of the inputs is normalised away there, and integer inputs cannot move at all). One
    assignment per variable: the nudged value is computed from the saved one, not read back after the restore."""
    at = {id(v): i for i, v in enumerate(state)}
    nudged = set()
    for v in model.trainable_weights:
        i = at.get(id(v))
        a = saved[i] if i is not None else np.asarray(v)
        if np.issubdtype(a.dtype, np.floating):
            # a sign per element from one uniform draw (rng.choice is slow on tens of millions of weights)
            up = rng.random(a.shape, dtype=np.float32) < 0.5
            v.assign(np.where(up, a * a.dtype.type(1 + eps), a * a.dtype.type(1 - eps)))
            nudged.add(id(v))
    for v, a in zip(state, saved):
        if id(v) not in nudged:
            v.assign(a)


def reference_after(req: FitNoiseRequest) -> list[np.ndarray] | None:
    """The reference's weights after its own steps (fit_golden), which every run is measured against: held when
    fit_golden ran in this worker with `hold`, else read from `ref_weights` when the request names it."""
    got = held_models.take("reference_after", reference_key(req), keep=True)
    if got is None and req.ref_weights:
        got = arrayfile.read(req.ref_weights)
    return got


def reference_grads(req: FitNoiseRequest) -> list[np.ndarray] | None:
    """tf_keras's gradients of its own first step (fit_golden): held when it ran here with `hold`, else read."""
    got = held_models.take("reference_grads", reference_key(req), keep=True)
    if got is None and req.ref_grads:
        got = arrayfile.read(req.ref_grads)
    return got


def _grad_changes(spy: Any, ref: list[np.ndarray] | None) -> list[float] | None:
    """Per trainable variable, the relative L2 change of the run's first-step gradient from the reference's."""
    if ref is None:
        return None
    return [rel_l2(g, r) for g, r in zip(dense(spy.take(), spy.variables), ref)]


def op_fit_noise(req: FitNoiseRequest) -> dict[str, Any]:
    """One run per seed of `seeds`; the reference held by fit_golden (`hold`) when it is this run's, else loaded
    again (unless `held_only`). `keep` holds it for a next call (more runs); without it the held model is
    released."""
    t0 = time.perf_counter()
    key = reference_key(req)
    got = held_models.take("reference", key)
    if got is None and req.held_only:  # started beside the steps (noise_probe.start_first_round): no load
        return {"available": False, "reason": "no held reference"}
    if got is None:
        ref = load_reference(req)
        if isinstance(ref, dict):
            return ref
        state = step_state(ref.model, ref.inner)
        got = (ref, state, [np.array(v) for v in state])
    ref, state, saved = got
    model, inner = ref.model, ref.inner
    x, y = load_batch(req)
    only = bool(req.grads_only)
    after = None if only else reference_after(req)
    ref_grads = reference_grads(req) if req.grads or only else None
    runs, names, loaded = [], [], time.perf_counter() - t0
    for seed, out in zip(req.seeds, req.weights_out):
        restore_nudged(model, state, saved, float(req.eps), np.random.default_rng(int(seed)))
        spy = None
        if ref_grads is not None:
            from k2to3.workers.training.step_gradients import GoldenStepGrads

            spy = GoldenStepGrads(model, apply=not only)
        try:
            losses = train_steps(model, x, y, 1 if only else int(req.steps))
        finally:
            if spy is not None:
                spy.remove()
        run = {"seed": int(seed), "losses": losses, "iterations_after": int(np.asarray(inner.iterations))}
        if spy is not None:
            run["grad_changes"] = _grad_changes(spy, ref_grads)
        if only:
            runs.append(run)
            continue
        names, arrays = layer_weights(model, np.asarray)
        if after is not None and len(after) == len(arrays):
            # the run's change to each weight, measured here: no copy of every weight through a file per run
            run["changes"], run["l2_changes"] = weight_changes(arrays, after)
        else:
            save_weights(out, names, arrays)
        runs.append(run)
    if req.keep:
        held_models.hold("reference", key, got)
    else:
        held_models.take("reference_after", key)  # released with the reference
        held_models.take("reference_grads", key)
    return {"available": True, "runs": runs, "weight_names": names, "state_source": ref.source,
            "load_seconds": loaded, "seconds": time.perf_counter() - t0}
