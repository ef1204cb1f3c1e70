"""`--grads` and `--fit-steps` in one round of worker jobs: the gradient and the training jobs of every backend
are queued together, so the backends run them side by side as the pool allows (one backend per core, within
the memory budget) instead of the training steps waiting, one backend after another, for the gradients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def run_training_checks(job: Any, report: dict[str, Any], keras: Path, verify: tuple[str, ...],
                        outputs: list[np.ndarray], training_config: dict[str, Any] | None, weight_bytes: int,
                        losses: list[Any]) -> None:
    """Fill report["gradients"] (opts.grads) and report["training"] (opts.fit_steps) from one pool round."""
    from .gradients import gradient_jobs, gradient_section
    from .optimizer.parity import fit_jobs, fit_section

    opts = job.opts
    halves: list[tuple[dict[str, list[Any]], Any]] = []
    if opts.grads:
        jobs, ctx = gradient_jobs(job, report, keras, verify, outputs, training_config, opts.loss, opts.grad_rtol,
                                  opts.grad_atol, opts.grads_training)
        halves.append((jobs, lambda done, ctx=ctx: gradient_section(job, report, done, ctx)))
    if opts.fit_steps:
        jobs, ctx = fit_jobs(job, report, verify, outputs, keras, opts.fit_steps, opts.targets, opts.loss, losses)
        halves.append((jobs, lambda done, ctx=ctx: fit_section(job, report, done, ctx)))
    if not halves:
        return
    merged: dict[str, list[Any]] = {}
    for jobs, _ in halves:  # tensorflow's list first: it is the longest (tf_keras reference + its own)
        for role, js in jobs.items():
            merged.setdefault(role, []).extend(js)
    done = job.pool.run(merged, weight_bytes)
    offset = {role: 0 for role in merged}
    for jobs, collect in halves:  # each half reads back its own futures, in the order it queued them
        mine = {}
        for role, js in jobs.items():
            mine[role] = done[role][offset[role]:offset[role] + len(js)]
            offset[role] += len(js)
        collect(mine)
