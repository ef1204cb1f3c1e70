"""One pool round for the jobs of several checks: merged per worker role, run side by side as the pool allows (one
backend per core, within the memory budget), and split back to each check in the order it queued them."""

from __future__ import annotations

from k2to3.checks.base import Check, Done, Jobs, Run
from k2to3.checks.training import reference_worker
from k2to3.workers.process import crashed, with_switches


def longest_first(jobs: Jobs) -> Jobs:
    """A training check's jobs in the order the pool should admit them: tensorflow (the tf_keras reference and its
    own step), then jax (its first step of a model is one XLA compile of the backward pass, long on a large
    model), then the others."""
    return dict(sorted(jobs.items(), key=lambda kv: (kv[0] != "tensorflow", kv[0] != "jax")))


def switched(run: Run, jobs: Jobs) -> Jobs:
    """The jobs with the run's per-job worker switches (protocol.Request, child._job_switches): `fixed_random` for a
    model that draws random numbers."""
    if not run.fixed_random:
        return jobs
    return {role: [with_switches(j, fixed_random=True) for j in js] for role, js in jobs.items()}


def one_round(run: Run, queued: list[tuple[Check, Jobs]], release_finished: bool = False) -> dict[str, Done]:
    """Run every queued job; returns each check's futures by its key."""
    merged: Jobs = {}
    for _, jobs in queued:
        for role, js in jobs.items():
            merged.setdefault(role, []).extend(js)
    order = next((c.role_order for c, _ in queued if c.role_order is not None), None)
    if order is not None:
        merged = order(merged)
    done: Done = {}
    if merged:  # the pool admits roles in the order they first appear
        routed, where = reference_worker.route(run, switched(run, merged))
        ran = run.pool.run(routed, run.weight_bytes, release_finished=release_finished)
        done = {r: [ran[at][i] for at, i in where[r]] for r in merged}  # each job's future where it was queued
        if any(c.retry_without_onednn for c, _ in queued) and any(crashed(f) for f in done.get("torch", [])):
            _torch_without_onednn(run, merged["torch"], done)
    offset = dict.fromkeys(merged, 0)
    out: dict[str, Done] = {}
    for check, jobs in queued:
        mine: Done = {}
        for role, js in jobs.items():
            mine[role] = done[role][offset[role]:offset[role] + len(js)]
            offset[role] += len(js)
        out[check.key] = mine
    return out


def _torch_without_onednn(run: Run, jobs: list, done: Done) -> None:
    """The torch worker died in its backward pass: oneDNN's CPU convolution backward corrupts the heap on some
    shapes (torch 2.13: a strided 1x1 convolution on a 60x60 channels-last input, reproduced without Keras;
    TensorFlow's oneDNN does the same, and k2to3's TensorFlow workers run without it). The same jobs run again
    with oneDNN off; when they pass, their replies stand and `workarounds` tells the user what their own torch
    training of this model needs."""
    run.progress("torch crashed in its backward pass; running its jobs again with oneDNN off")
    again = run.pool.run(switched(run, {"torch": [with_switches(j, onednn=False) for j in jobs]}), run.weight_bytes)
    if any(crashed(f) for f in again["torch"]):
        return
    done["torch"] = again["torch"]
    run.report.setdefault("workarounds", []).append({
        "backend": "torch", "jobs": "gradients and training steps", "what": "oneDNN (mkldnn) off",
        "why": "the torch worker crashed in the backward pass with oneDNN on, and ran with it off",
        "fix": "train this model on torch with torch.backends.mkldnn.enabled = False (or a torch whose oneDNN "
               "does not crash on its convolutions)"})
