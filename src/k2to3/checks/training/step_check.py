"""The training-step check (`--fit-steps N`, report section `training`, docs/optimizers.md): the same N
train_on_batch steps on the same batch by tf_keras on the original file and by every backend on the converted
`.keras`; the weights after the steps and the per-step losses compared (weights_compare.py), and whether each backend
loaded the file's optimizer slots bit for bit; a mismatch float32 rounding may explain gets the noise probe
(noise_probe.py). Parent side, numpy only (the steps run in workers/training/fit_ops.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from k2to3.checks.base import Check, Done, Jobs, Run
from k2to3.checks.number_format import fmt
from k2to3.checks.pool_round import longest_first
from k2to3.checks.training import noise_probe, noise_verdict
from k2to3.checks.training.batch import Targets, read_targets
from k2to3.checks.training.reference_worker import hold_models, on_reference, release_held
from k2to3.checks.training.schedule import carries_gradients, stage_for
from k2to3.checks.training.step_replies import EarlyCompare, fit_future, reference_future
from k2to3.checks.training.weights_compare import FIT_ATOL, FIT_RTOL, compare_row
from k2to3.core.policies import REDUCED, REDUCED_FIT_TOLERANCE
from k2to3.workers.process import reply_or_error
from k2to3.workers.protocol import FitGoldenRequest, FitRequest


def applies(run: Run) -> bool:
    return bool(run.options.fit_steps)


def jobs(run: Run) -> Jobs:
    """The tf_keras reference first on the tensorflow worker, every backend's steps side by side as the pool
    allows. When the steps carry the gradient check, every side also saves its first step's gradients, and tf_keras
    holds them for the noise probe's runs, which measure the gradients' float32 floor as well."""
    opts, steps, step_grads = run.options, run.options.fit_steps, carries_gradients(run)
    targets = Targets(run)
    if run.outputs is not None or run.given is not None:
        targets.ensure("tensorflow")  # a bad --targets file stops the run here, before any step
    elif opts.targets:  # joined to the verification: what can be checked before the outputs exist, now
        with np.load(run.npz("inputs")) as z:
            read_targets(opts.targets, int(z[z.files[0]].shape[0]))
    common = {"inputs": run.npz("inputs"), "targets": targets.path, "steps": steps, "loss": opts.loss}
    # a mismatch's noise probe runs the same steps, on the reference held in its worker (noise_probe.py)
    # with the gradients: the probe's runs measure their first step's gradients too (the gradients' floor)
    run.state["training"] = {"common": common, "held": hold_models(run), "targets": targets,
                             "step_grads": step_grads}
    rtol, atol = REDUCED_FIT_TOLERANCE if set(run.report.get("dtype_policies") or ()) & REDUCED \
        else (FIT_RTOL, FIT_ATOL)
    run.report["training"] = {"steps": steps, "rtol": rtol, "atol": atol,
                              "targets": str(opts.targets) if opts.targets else "seeded",
                              "loss": opts.loss or "training_config",
                              "randomness": "dropout and noise rates set to 0 on both sides", "backends": {}}
    probe = {"grads_out": run.arrays("grads-golden")} if step_grads else {}

    early = run.state["training"]["early"] = EarlyCompare(run)

    @on_reference
    def golden(w: Any) -> Any:
        with early.reference() as got:
            targets.ensure("tensorflow")
            got.append(w.call(FitGoldenRequest(h5=str(run.reference_h5), weights_out=run.arrays("fit-ref"), **common,
                                               **run.golden_args, **probe, hold=run.state["training"]["held"])))
            noise_probe.start_first_round(run, got[0])  # a model training BatchNormalization: now
        return got[0]

    def k3(b: str) -> Any:
        def job(w: Any) -> Any:
            targets.ensure(b)
            reply = w.call(FitRequest(keras=str(run.keras), weights_out=run.arrays(f"fit-{b}"),
                                      modules=run.modules, **common,
                                      grads_out=run.arrays(f"grads-{b}") if step_grads else None))
            early.backend(b, reply)
            return reply

        return job

    run.progress(f"--fit-steps {steps}{' (and --grads, from its first step)' if step_grads else ''}: tf_keras and "
                 + ", ".join(run.backends))
    tf_jobs = [golden, *([k3("tensorflow")] if "tensorflow" in run.backends else [])]
    return longest_first({"tensorflow": tf_jobs, **{b: [k3(b)] for b in run.backends if b != "tensorflow"}})


def collect(run: Run, done: dict[str, Done]) -> None:
    """Fill report["training"] from the replies of the training jobs; the reference held for a noise probe is
    dropped whatever happens."""
    early = run.state["training"]["early"]
    try:
        _collect(run, done, early)
    finally:
        early.close()
        release_held(run)


def _collect(run: Run, done: dict[str, Done], early: EarlyCompare) -> None:
    if run.state["training"]["targets"].error is not None:  # --targets did not fit the outputs: the user's to fix
        raise run.state["training"]["targets"].error
    mine, report = done["training"], run.report
    section = report["training"]
    ref = reply_or_error(reference_future(mine))
    if "error" in ref:
        section.update(status="unavailable", reason=f"tf_keras reference: {ref['error']}")
        return
    if not ref.get("available"):
        # the worker cannot tell a --src build from a translated Keras 1 config; the run knows what it loaded
        why = str(ref.get("reason", "")).replace("{origin}", f"the Keras 2 reference is {run.reference_origin}")
        section.update(status="unavailable", reason=why)
        return
    section["reference"] = {"losses": ref["losses"], "optimizer_class": ref["optimizer_class"],
                            "state_loaded": ref["state_loaded"], "state_source": ref.get("state_source"),
                            "iterations_after": ref["iterations_after"], "noise_disabled": ref["noise_disabled"],
                            "batchnorm_unfused": ref.get("batchnorm_unfused", [])}
    if not ref["state_loaded"] and (report.get("optimizer") or {}).get("status") == "restored":
        section.update(status="unavailable", reason="the tf_keras reference could not load the file's optimizer "
                       "state, so its steps start from a fresh optimizer and are not a reference")
        return
    ref_w = early.reference_weights()
    assert ref_w is not None

    def one(b: str) -> dict[str, Any]:
        got = reply_or_error(fit_future(mine, b))
        if "error" in got:
            return {"status": "error", "error": got["error"]}
        if not got.get("available"):
            return {"status": "unavailable", "reason": got.get("reason")}
        return early.row(b) or compare_row(run, b, ref, got, ref_w, early.saved)

    # the rows were computed as the replies came (EarlyCompare): what is left is waiting for them
    section["backends"].update({b: one(b) for b in run.backends})
    noise_probe.measure(run, section, ref, ref_w, run.state["training"].get("ahead"))
    states = {v.get("status") for v in section["backends"].values()}
    section["status"] = "parity" if states == {"parity"} else noise_verdict.WITHIN \
        if states <= {"parity", noise_verdict.WITHIN} else "mismatch"


def outcome(report: dict[str, Any]) -> str | None:
    return "mismatch" if (report.get("training") or {}).get("status") == "mismatch" else None


def markdown(report: dict[str, Any]) -> list[str]:
    t = report.get("training")
    if not t:
        return []
    ref = t.get("reference") or {}
    lines = [f"{t['steps']} train_on_batch step(s) on {t['targets']} targets, loss {t['loss']}, {t['randomness']}; "
             f"rtol={t['rtol']:g}, atol={t['atol']:g}. Status: **{t.get('status')}**"
             + (f" ({t['reason']})" if t.get("reason") else "")
             + (f"; numerically: {t['numeric_verdict']}" if t.get("numeric_verdict") else "") + "."]
    if ref:
        lines.append(f"\nReference: tf_keras, {ref.get('optimizer_class')}, optimizer state "
                     f"{'loaded from the file' if ref.get('state_loaded') else 'not loaded'}"
                     + (f" ({ref['state_source']})" if ref.get("state_source") else "")
                     + f", losses {', '.join(fmt(x) for x in ref.get('losses') or [])}, iterations after "
                     f"{ref.get('iterations_after')}."
                     + (f" {len(ref['batchnorm_unfused'])} BatchNormalization layer(s) on tf_keras's unfused path, "
                        "whose moving variance follows the biased batch variance as Keras 3's does (K2T611)."
                        if ref.get("batchnorm_unfused") else ""))
    if t.get("backends"):
        lines += ["", "| backend | status | losses | loss max abs | weights max abs | weights max rel | min atol | "
                  "first divergent weight | optimizer slots as loaded | float32 training noise |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for b, v in t["backends"].items():
            if v["status"] in ("error", "unavailable"):
                lines.append(f"| {b} | {v['status']}: {v.get('error') or v.get('reason')} | | | | | | | | |")
                continue
            first = (v.get("first_divergent_weight") or {}).get("weight", "")
            sal = v.get("state_as_loaded")
            slots = f"{sal['equal']}/{sal['slots']} equal" if sal else ""
            lines.append(f"| {b} | {v['status']} | {', '.join(fmt(x) for x in v.get('losses') or [])} | "
                         f"{fmt(v.get('loss_max_abs'))} | {fmt(v.get('weights_max_abs'))} | "
                         f"{fmt(v.get('weights_max_rel'))} | {fmt(v.get('min_atol'))} | {first} | {slots} | "
                         f"{noise_verdict.cell(v.get('noise'))} |")
    if t.get("status") == noise_verdict.WITHIN:
        lines.append(f"\nEvery difference outside rtol={t['rtol']:g}, atol={t['atol']:g} is within float32 training "
                     f"noise: in L2 norm at most k={noise_verdict.NOISE_K:g} times the change tf_keras's own steps "
                     "make to that weight when its own weights move by a relative 1e-6 (1e-5 in the wide tier, when "
                     "the 1e-6 runs leave a weight unexplained), largest over its runs (its floor), and in its "
                     f"largest element at most {noise_verdict.ABS_K:g} times; the strict figures stay above.")
        for b, v in t["backends"].items():
            n = v.get("noise") or {}
            if n.get("runs"):
                lines.append(f"- {b}: judged after {n['runs']} run(s), the last at ±{n['weights_moved_by']:g}")
            for w in n.get("weights") or []:
                lines.append(f"- {b} `{w['weight']}`: L2 {fmt(w['l2'])}, floor {fmt(w['l2_floor'])}, k={w['k']:.2g}; "
                             f"max abs {fmt(w['max_abs'])}, floor {fmt(w['floor'])}, k_abs={w['k_abs']:.2g}")
    if t.get("note"):
        lines.append(f"\nNote: {t['note']}")
    return lines


def console(report: dict[str, Any]) -> list[str]:
    t = report.get("training")
    if not t:
        return []
    if not t.get("backends"):
        return [f"training ({t['steps']} steps): {t.get('status')}" + (f": {t['reason']}" if t.get("reason") else "")]
    return [f"training {b} ({t['steps']} steps): {v['status'].replace('_', ' ')}" + (
        f": {v.get('error') or v.get('reason')}" if v["status"] in ("error", "unavailable") else
        f", weights max abs {fmt(v['weights_max_abs'])}, losses max abs {fmt(v['loss_max_abs'])}"
        + (f", first divergent {v['first_divergent_weight']['weight']}" if v.get("first_divergent_weight") else "")
        + (f"; float32 training noise: {noise_verdict.cell(v['noise'])}" if v.get("noise") else ""))
        for b, v in t["backends"].items()]


CHECK = Check(key="training", title="Training steps", stage=3, stage_for=stage_for, role_order=longest_first,
              applies=applies, jobs=jobs, collect=collect,
              markdown=markdown, console=console, outcome=outcome, retry_without_onednn=True)
