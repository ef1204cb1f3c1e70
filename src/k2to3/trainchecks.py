"""`--grads` and `--fit-steps` in one round of worker jobs: the gradient and the training jobs of every backend
are queued together, so the backends run them side by side as the pool allows (one backend per core, within
the memory budget) instead of the training steps waiting, one backend after another, for the gradients.

With both, and a tf_keras reference that trains, the gradient check reads the first training step's own
gradients (workers/stepgrads.py) instead of differentiating the model a second time: one backward pass per
backend, one XLA compile on jax. tf_keras's job also takes the input-sensitivity probe of that step (the step on
nudged inputs, stopped at the gradients: workers/fit.py) while it holds the model; a mismatch gets its figures. A
side that ran no training step gets the standalone check instead."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.checks.training import MIXED
from k2to3.workers.pool import crashed, reply_or_error, with_args


def step_grads_apply(job: Any, report: dict[str, Any], training_config: dict[str, Any] | None) -> bool:
    """Can the training steps stand in for the gradient check? Same mode (training), a file compiled with an
    optimizer, a Keras 2 reference that trains from the file itself (not rebuilt from --src), and no loss scaling
    (its gradients are scaled)."""
    opts = job.opts
    return bool(opts.grads and opts.fit_steps and opts.grads_training
                and (training_config or {}).get("optimizer_config")
                and report.get("reference", {}).get("kind") == "keras2-tf_keras"
                and not ({"golden_config", "build_fn"} & set(job.golden_args))
                and not (set(report.get("dtype_policies") or ()) & MIXED))


def run_training_checks(job: Any, report: dict[str, Any], keras: Path, verify: tuple[str, ...],
                        outputs: list[np.ndarray], training_config: dict[str, Any] | None, weight_bytes: int,
                        losses: list[Any]) -> None:
    """Fill report["gradients"] (opts.grads) and report["training"] (opts.fit_steps) from one pool round."""
    from k2to3.checks.training import fit_jobs, fit_section
    from k2to3.gradients import build_section, gradient_jobs, gradient_section, step_context

    opts = job.opts
    shared = step_grads_apply(job, report, training_config)
    halves: list[tuple[dict[str, list[Any]], Any]] = []

    def standalone() -> tuple[dict[str, list[Any]], Any]:
        jobs, ctx = gradient_jobs(job, report, keras, verify, outputs, training_config, opts.loss, opts.grad_rtol,
                                  opts.grad_atol, opts.grads_training)
        return jobs, lambda done, ctx=ctx: gradient_section(job, report, done, ctx)

    if opts.grads and not shared:
        halves.append(standalone())
    if opts.fit_steps:
        jobs, ctx = fit_jobs(job, report, verify, outputs, keras, opts.fit_steps, opts.targets, opts.loss, losses,
                             step_grads=shared)
        halves.append((jobs, lambda done, ctx=ctx: fit_section(job, report, done, ctx)))
    if not halves:
        return
    t0 = time.perf_counter()
    done = _run(job, report, halves, weight_bytes)
    if not shared:
        return
    fits = {b: reply_or_error(done[b][-1]) for b in verify}
    ref = reply_or_error(done["tensorflow"][0])
    if all("grads" in r for r in (ref, *fits.values())):
        section = build_section(job, report, {b: r["grads"] for b, r in fits.items()}, ref["grads"],
                                step_context(t0, report, verify, losses, opts.loss, opts.targets, opts.grad_rtol,
                                             opts.grad_atol))
        if section["verdict"] == "mismatch":
            _probe(job, report, opts, ref, weight_bytes, t0)
            _explain_training(report)
        return
    _run(job, report, [standalone()], weight_bytes)
    report["gradients"]["from"] = "standalone differentiation (a side ran no training step)"


def _explain_training(report: dict[str, Any]) -> None:
    """Weights after the step differ as the step's gradients do: when those are within tf_keras's own input
    sensitivity, say so beside the training verdict (information only, like every numeric_verdict)."""
    training, grads = report.get("training") or {}, report.get("gradients") or {}
    if training.get("status") == "mismatch" and grads.get("numeric_verdict") == "within_reference_sensitivity":
        training["numeric_verdict"] = "within_reference_sensitivity"
        training["note"] = ("this step's gradients differ from tf_keras's no more than tf_keras's own do under a 1e-6 "
                            "input change (gradients.numeric_verdict): the weights after the step differ as the "
                            "gradients do; an ill-conditioned step, not a conversion error")


def _probe(job: Any, report: dict[str, Any], opts: Any, ref: dict[str, Any], weight_bytes: int, t0: float
           ) -> None:
    """A mismatch of the step's gradients: is it the model's own conditioning? tf_keras takes the same step on
    inputs changed by SENSITIVITY_EPS (relative); how far its gradients move is the reference sensitivity, and the
    section is rebuilt with it (numeric_verdict `within_reference_sensitivity`, the ill-conditioned note)."""
    from k2to3.gradients import add_sensitivity
    from k2to3.workers.grads import SENSITIVITY_EPS, _rel_l2

    def nudged(w: Any) -> Any:
        return w.call("fit_golden", h5=str(job.h5), inputs=job.npz("inputs"), targets=job.npz("fit-targets"),
                      steps=1, loss=opts.loss, nudge=SENSITIVITY_EPS, weights_out=job.npz("fit-ref-nudged"),
                      grads_out=job.npz("grads-golden-nudged"), **job.golden_args)

    if "nudged_grads" not in ref:  # not taken with the steps (a large non-trainable state): its own job now
        job.progress("--grads: the gradients differ; probing tf_keras's own sensitivity to a 1e-6 input change")
        got = reply_or_error(job.pool.run({"tensorflow": [nudged]}, weight_bytes)["tensorflow"][0])
        if "grads" not in got:
            return
    n = len(ref["grads"]["names"])
    with np.load(job.npz("grads-golden")) as a, np.load(job.npz("grads-golden-nudged")) as b:
        sens = [_rel_l2(b[f"g{i}"], a[f"g{i}"]) for i in range(n)]
    add_sensitivity(report["gradients"], ref["grads"]["names"], sens)
    report["gradients"]["seconds"] = round(time.perf_counter() - t0, 3)


def _run(job: Any, report: dict[str, Any], halves: list[tuple[dict[str, list[Any]], Any]], weight_bytes: int
         ) -> dict[str, list[Any]]:
    """One pool round for every half's jobs; each half then reads back its own futures, in the order it queued."""
    merged: dict[str, list[Any]] = {}
    for jobs, _ in halves:
        for role, js in jobs.items():
            merged.setdefault(role, []).extend(js)
    # Longest first, as the pool admits roles in order: tensorflow (the tf_keras reference and its own step), then
    # jax (its step is one XLA compile of the backward pass: ResNet50 about 18 s on a core), then the others.
    merged = dict(sorted(merged.items(), key=lambda kv: (kv[0] != "tensorflow", kv[0] != "jax")))
    done = job.pool.run(merged, weight_bytes)
    if any(crashed(f) for f in done.get("torch", [])):
        _torch_without_onednn(job, report, merged["torch"], done, weight_bytes)
    offset = {role: 0 for role in merged}
    for jobs, collect in halves:
        mine = {}
        for role, js in jobs.items():
            mine[role] = done[role][offset[role]:offset[role] + len(js)]
            offset[role] += len(js)
        collect(mine)
    return done


def _torch_without_onednn(job: Any, report: dict[str, Any], jobs: list[Any], done: dict[str, list[Any]],
                          weight_bytes: int) -> None:
    """The torch worker died in its backward pass: oneDNN's CPU convolution backward corrupts the heap on some
    shapes (torch 2.13: a strided 1x1 convolution on a 60x60 channels-last input, reproduced without Keras;
    TensorFlow's oneDNN does the same, and k2to3's TensorFlow workers run without it). The same jobs run again
    with oneDNN off; when they pass, their replies stand and `workarounds` tells the user what their own torch
    training of this model needs."""
    job.progress("torch crashed in its backward pass; running its jobs again with oneDNN off")
    again = job.pool.run({"torch": [with_args(j, onednn=False) for j in jobs]}, weight_bytes)
    if any(crashed(f) for f in again["torch"]):
        return
    done["torch"] = again["torch"]
    report.setdefault("workarounds", []).append({
        "backend": "torch", "jobs": "gradients and training steps", "what": "oneDNN (mkldnn) off",
        "why": "the torch worker crashed in the backward pass with oneDNN on, and ran with it off",
        "fix": "train this model on torch with torch.backends.mkldnn.enabled = False (or a torch whose oneDNN "
               "does not crash on its convolutions)"})
