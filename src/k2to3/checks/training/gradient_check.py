"""The gradient check (`--grads`, report section `gradients`): the loss gradient w.r.t. every trainable variable on
each backend, compared with tf_keras's on the same seeded batch. Parent side, numpy only; the differentiation runs
in the per-backend workers (workers/grads.py). With `--fit-steps`, and a tf_keras reference that trains, the first
training step's own gradients are compared instead (schedule.carries_gradients: one backward pass per backend,
one XLA compile on jax); a mismatch then gets tf_keras's own float32 sensitivity of that step, from its runs on
nudged weights (_probe). A side that ran no training step gets the standalone check instead."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

import numpy as np

from k2to3.checks.base import Check, Done, Jobs, Run
from k2to3.checks.number_format import fmt
from k2to3.checks.pool_round import longest_first, one_round
from k2to3.checks.training import noise_probe, schedule, step_replies
from k2to3.checks.training.batch import compile_losses
from k2to3.checks.training.gradient_compare import add_sensitivity, backend_row, build_section, load_grads
from k2to3.checks.training.reference_worker import on_reference
from k2to3.core.compare import single_threaded_blas
from k2to3.core.seeds import make_targets
from k2to3.workers.process import reply_or_error
from k2to3.workers.protocol import GoldenGradsRequest, GradsRequest

GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-6  # defaults (docs/report.md#gradients); --grad-rtol / --grad-atol
DEFAULT_LOSS = "mean_squared_error"


def _clean(spec: Any) -> Any:
    """A loss both tf_keras and Keras 3 deserialize: a name, or class_name + the config keys both share."""
    if isinstance(spec, dict) and "class_name" in spec:
        cfg = {k: v for k, v in (spec.get("config") or {}).items()
               if k in ("from_logits", "label_smoothing", "axis", "delta")}
        return {"class_name": spec["class_name"], "config": cfg}
    return spec


def loss_specs(training_config: dict[str, Any] | None, override: str | None,
               n_outputs: int) -> tuple[list[Any], str]:
    """One loss per model output, and where it came from."""
    if override:
        return [override] * n_outputs, "--loss"
    loss = (training_config or {}).get("loss")
    if isinstance(loss, str) or (isinstance(loss, dict) and "class_name" in loss):
        return [_clean(loss)] * n_outputs, "training_config"
    if isinstance(loss, list) and len(loss) == n_outputs and all(isinstance(x, str | dict) for x in loss):
        return [_clean(x) for x in loss], "training_config"
    return [DEFAULT_LOSS] * n_outputs, f"default ({DEFAULT_LOSS}: no single loss in the file's training_config)"


def applies(run: Run) -> bool:
    return bool(run.options.grads)


def stage_for(run: Run) -> int:
    """With the training steps that carry it: their round (joined to the verification's when they are), else its
    own round after the outputs (it needs them for its targets)."""
    return schedule.stage_for(run) if schedule.carries_gradients(run) else 3


def _tolerance(run: Run) -> dict[str, Any]:
    o = run.options
    return {"rt": GRAD_RTOL if o.grad_rtol is None else o.grad_rtol, "at": GRAD_ATOL if o.grad_atol is None
            else o.grad_atol, "tol_source": "default" if o.grad_rtol is None and o.grad_atol is None else "user"}


def standalone_jobs(run: Run) -> Jobs:
    """The worker jobs of a standalone differentiation (tf_keras's gradients first on the tensorflow worker); what
    collecting their replies needs goes to run.state["gradients"]."""
    assert run.outputs is not None
    o = run.options
    t0 = time.perf_counter()
    losses, source = loss_specs(run.training_config, o.loss, len(run.outputs))
    ys = make_targets(losses, run.outputs)
    np.savez(run.npz("grad-targets"), **{f"y{i}": y for i, y in enumerate(ys)})
    golden = run.tf_keras_reference
    common = {"inputs": run.npz("inputs"), "targets": run.npz("grad-targets"), "losses": losses,
              "training": o.grads_training}
    run.progress("--grads: differentiating the loss on " + ", ".join(run.backends) + (" and tf_keras" if golden
                                                                                       else ""))

    def k3(b: str) -> Any:
        return lambda w: w.call(GradsRequest(keras=str(run.keras), out=run.arrays(f"grads-{b}"), modules=run.modules,
                                             **common))

    @on_reference
    def k2(w: Any) -> Any:
        return w.call(GoldenGradsRequest(h5=str(run.reference_h5), out=run.arrays("grads-golden"), **common,
                                         **run.golden_args))

    jobs = {"tensorflow": [*([k2] if golden else []), *([k3("tensorflow")] if "tensorflow" in run.backends else [])],
            **{b: [k3(b)] for b in run.backends if b != "tensorflow"}}
    run.state["gradients"] = {"t0": t0, "verify": run.backends, "golden": golden, "losses": losses,
                              "source": source, "training": o.grads_training, **_tolerance(run)}
    return longest_first({r: js for r, js in jobs.items() if js})


def jobs(run: Run) -> Jobs:
    if schedule.carries_gradients(run):  # the training steps save their first step's gradients
        run.state["gradients"] = {"t0": time.perf_counter(), "early": EarlyRows(run)}
        return {}
    return standalone_jobs(run)


class EarlyRows:
    """Each backend's gradient row compared with tf_keras's as soon as both training steps have replied, while the
    other backends still train (one thread, in the order the replies come; step_replies.EarlyCompare calls `backend`).
    What build_section is left with after the last backend is that backend's row, not every backend's gradients
    compared at the end of the run on the cores the workers have left."""

    def __init__(self, run: Run):
        from concurrent.futures import ThreadPoolExecutor

        self.run = run
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="k2to3-gradients-compare")
        self._rows: dict[str, Future] = {}
        self.ref_arrays: list[np.ndarray] | None = None
        step_replies.listen(run, self.backend)

    def backend(self, b: str, reply: dict[str, Any]) -> None:
        self._rows[b] = self._pool.submit(self._row, b, reply)

    def _reference(self) -> dict[str, Any] | None:
        ref = step_replies.reference_reply(self.run)
        if ref is None or "error" in ref or "grads" not in ref:
            return None
        if self.ref_arrays is None:
            self.ref_arrays = load_grads(self.run.arrays("grads-golden"), len(ref["grads"]["names"]))
        return ref

    def _row(self, b: str, reply: dict[str, Any]) -> dict[str, Any] | None:
        ref = self._reference()
        if ref is None or "error" in reply or "grads" not in reply:
            return None  # build_section decides what the reference is, and says why
        ref_g, ctx = ref["grads"], _tolerance(self.run)
        assert self.ref_arrays is not None
        with single_threaded_blas():
            return backend_row(self.run, b, reply["grads"], ref_g, self.ref_arrays, ctx["rt"], ctx["at"])

    def result(self) -> dict[str, Any]:
        """build_section's `early`: the rows computed so far (None where not), and the arrays they used."""
        rows = {b: f.result() for b, f in self._rows.items()}
        return {"rows": rows, "ref_arrays": self.ref_arrays}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _standalone_section(run: Run, mine: Done) -> None:
    ctx = run.state["gradients"]
    replies = {b: reply_or_error(mine[b][-1]) for b in ctx["verify"]}
    build_section(run, replies, reply_or_error(mine["tensorflow"][0]) if ctx["golden"] else None, ctx)


def _step_context(run: Run, t0: float) -> dict[str, Any]:
    """build_section's context for the gradients a training step computed (workers/training/step_gradients.py):
    the compiled loss of the fit steps on the fit steps' batch."""
    o, losses = run.options, compile_losses(run)
    # expected, not yet read from the report: prepare() runs before the outputs check's collect records the
    # reference, and a step that gave tf_keras's gradients had tf_keras load the file
    return {"t0": t0, "verify": run.backends, "golden": schedule.expects_tf_keras(run),
            "losses": [o.loss] * len(losses) if o.loss else losses,
            "source": "--loss, as the training step minimises it" if o.loss else
            "the training step's compiled loss (training_config; loss weights and regularisation losses included)",
            "training": True, "targets": str(o.targets) if o.targets else "seeded", "from": "training step",
            **_tolerance(run)}


def _step_replies(run: Run, done: dict[str, Done]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
    """tf_keras's and each backend's training replies when every one carries its first step's gradients."""
    if done.get("gradients") or "training" not in done:
        return None
    fit = done["training"]
    fits = {b: reply_or_error(step_replies.fit_future(fit, b)) for b in run.backends}
    ref = reply_or_error(step_replies.reference_future(fit))
    return (ref, fits) if all("grads" in r for r in (ref, *fits.values())) else None


def prepare(run: Run, done: dict[str, Done]) -> None:
    """The comparison of the training step's gradients starts now, in the background: the training check's
    collect (its float32 noise probe on a mismatch: seconds of tf_keras steps) runs meanwhile."""
    import threading

    got = _step_replies(run, done)
    if got is None:
        return
    ref, fits = got
    fut: Future = Future()
    t0 = run.state["gradients"]["t0"]

    early = run.state["gradients"].get("early")

    def compare() -> None:
        try:
            with single_threaded_blas():
                fut.set_result(build_section(run, {b: r["grads"] for b, r in fits.items()}, ref["grads"],
                                             _step_context(run, t0), early.result() if early else None))
        except BaseException as exc:  # raised again in collect()
            fut.set_exception(exc)

    run.state["gradients"]["section"] = fut
    threading.Thread(target=compare, name="k2to3-gradients-compare", daemon=True).start()


def collect(run: Run, done: dict[str, Done]) -> None:
    try:
        _collect(run, done)
    finally:
        early = run.state.get("gradients", {}).pop("early", None)
        if early is not None:
            early.close()


def _collect(run: Run, done: dict[str, Done]) -> None:
    if done.get("gradients"):
        _standalone_section(run, done["gradients"])
        return
    t0 = run.state["gradients"]["t0"]
    got = _step_replies(run, done)
    if got is not None:
        ref, fits = got
        pending = run.state["gradients"].pop("section", None)  # started by prepare()
        early = run.state["gradients"].get("early")
        section = pending.result() if pending is not None else \
            build_section(run, {b: r["grads"] for b, r in fits.items()}, ref["grads"], _step_context(run, t0),
                          early.result() if early else None)
        if section["verdict"] == "mismatch":
            _probe(run, ref, t0)
            explain_training(run.report)
        return
    # a side ran no training step: the standalone check now
    _standalone_section(run, one_round(run, [(CHECK, standalone_jobs(run))])["gradients"])
    run.report["gradients"]["from"] = "standalone differentiation (a side ran no training step)"


def _probe(run: Run, ref: dict[str, Any], t0: float) -> None:
    """A mismatch of the step's gradients: is it float32 rounding the model amplifies? tf_keras's own first step from
    the file's weights each moved by ±1e-6 relative (the training noise probe's runs, workers/training/noise_fit.py:
    taken with them when they ran, else one run now, stopped at the gradients); how far its gradients move is the
    reference sensitivity, and the section is rebuilt with it (numeric_verdict `within_reference_sensitivity`, the
    ill-conditioned note). Weights, not inputs: BatchNormalization normalises a uniform input change away, and the
    training noise probe's runs give these figures at no extra cost when it ran."""
    runs = noise_probe.gradient_runs(run)
    if not runs:
        return
    sens = [max(c[i] for c in runs) for i in range(len(ref["grads"]["names"]))]
    add_sensitivity(run.report["gradients"], ref["grads"]["names"], sens,
                    {"weights_moved_by": noise_probe.NUDGE_EPS, "runs": len(runs)})
    run.report["gradients"]["seconds"] = round(time.perf_counter() - t0, 3)


def explain_training(report: dict[str, Any]) -> None:
    """Weights after the step differ as the step's gradients do: when those are within tf_keras's own float32
    sensitivity, say so beside the training verdict (information only, like every numeric_verdict)."""
    training, grads = report.get("training") or {}, report.get("gradients") or {}
    if training.get("status") == "mismatch" and grads.get("numeric_verdict") == "within_reference_sensitivity":
        training["numeric_verdict"] = "within_reference_sensitivity"
        training["note"] = ("this step's gradients differ from tf_keras's no more than tf_keras's own do under a 1e-6 "
                            "relative change of its weights (gradients.numeric_verdict): the weights after the step "
                            "differ as the gradients do; an ill-conditioned step, not a conversion error")


def outcome(report: dict[str, Any]) -> str | None:
    """With everything else at parity, a gradient mismatch fails the run like an output mismatch (exit code 1), a
    backend that could not differentiate the model like a backend that could not load it (4). A mismatch that
    tf_keras's own sensitivity explains on every variable (numeric_verdict `within_reference_sensitivity`:
    BatchNormalization over two values per channel, a conv bias in front of it whose true gradient is 0) is not a
    conversion error, as training within float32 noise is not: the strict figures stay in the section."""
    g = report.get("gradients") or {}
    if g.get("verdict") == "mismatch" and g.get("numeric_verdict") == "within_reference_sensitivity":
        return None
    verdict = g.get("verdict")
    return "mismatch" if verdict == "mismatch" else "error" if verdict in ("error", "unavailable") else None


def markdown(report: dict[str, Any]) -> list[str]:
    """report.md's Gradients section: a row per backend, then its most divergent variables."""
    g, f = report.get("gradients"), fmt
    if not g:
        return []
    ref = g.get("reference", {})
    lines = [f"Loss {', '.join(map(str, g['loss']))} ({g['loss_source']}) on {g.get('targets', 'seeded')} targets, "
             f"training={g['training']}, from the {g.get('from', 'standalone differentiation')}"
             + (f", dropout/noise off in {', '.join(g['derandomized'])}" if g.get("derandomized") else "")
             + f"; reference {ref.get('kind')} (loss {f(ref.get('loss'))}); rtol={g['tolerance']['rtol']:g}, "
             f"atol={g['tolerance']['atol']:g}. Verdict: **{g['verdict']}**"
             + (f" (numerically: {g['numeric_verdict']})" if g.get("numeric_verdict") not in (None, "parity") else "")
             + ".", "",
             "| backend | status | loss | max abs | max rel | max rel L2 | min cosine | first divergent variable |",
             "|---|---|---|---|---|---|---|---|"]
    for b, v in g.get("backends", {}).items():
        if v["status"] == "error":
            lines.append(f"| {b} | error: {v.get('error')} | | | | | | |")
            continue
        lines.append(f"| {b} | {v['status']} | {f(v['loss'])} | {f(v['max_abs'])} | {f(v['max_rel'])} | "
                     f"{f(v['max_rel_l2'])} | {f(v['min_cosine'])} | {v['first_divergent_variable'] or ''} |")
    for b, v in g.get("backends", {}).items():
        if v.get("top_divergent"):
            lines.append(f"\nMost divergent on {b}: " + ", ".join(
                f"`{t['variable']}` (rel L2 {f(t['rel_l2'])}, cosine {f(t['cosine'])})" for t in v["top_divergent"]))
    lines += [f"\nNote: {n}" for n in g.get("notes", [])]
    return lines


def console(report: dict[str, Any]) -> list[str]:
    g = report.get("gradients") or {}
    what = "input" if "input_change" in (g.get("reference") or {}).get("sensitivity", {}) else "weight"
    return [f"gradients {b}: {v['status']}" + (f": {v.get('error')}" if v["status"] == "error" else
            f", max rel L2 {v['max_rel_l2']:.3g}, min cosine {v['min_cosine']:.6f}, first divergent "
            f"{v['first_divergent_variable'] or 'none'}"
            + (f" (within tf_keras's own sensitivity to a 1e-6 {what} change: not a conversion error)"
               if v["status"] == "mismatch" and v.get("numeric_verdict") == "within_reference_sensitivity" else ""))
            for b, v in g.get("backends", {}).items()]


CHECK = Check(key="gradients", title="Gradients", stage=3, stage_for=stage_for, applies=applies, jobs=jobs,
              prepare=prepare,
              collect=collect, markdown=markdown, console=console, outcome=outcome, after_parity=True,
              retry_without_onednn=True)
