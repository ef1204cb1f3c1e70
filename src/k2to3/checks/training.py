"""The training check (`--fit-steps N`, report section `training`, docs/optimizers.md): the same N train_on_batch
steps on the same batch by tf_keras on the original file and by every backend on the converted `.keras`; the
weights after the steps and the per-step losses compared, and whether each backend loaded the file's optimizer
slots bit for bit. Parent side, numpy only (the steps run in workers/fit.py)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.checks import reference_lane, trainingnoise
from k2to3.checks.base import Check, Done, Jobs, Run
from k2to3.checks.format import fmt
from k2to3.checks.reference_lane import on_reference
from k2to3.checks.rounds import longest_first
from k2to3.checks.slotstate import state_as_loaded
from k2to3.core import arrayfile
from k2to3.core.compare import compare_arrays, diff_l2, single_threaded_blas
from k2to3.core.policies import REDUCED, REDUCED_FIT_TOLERANCE
from k2to3.core.seeds import make_targets
from k2to3.errors import InputError
from k2to3.upgrade.optimizers import reference_compiles
from k2to3.workers.process import reply_or_error
from k2to3.workers.protocol import FitGoldenRequest, FitRequest

# Training tolerances (docs/optimizers.md): float32 steps. Kernels and accumulation order differ between
# tf_keras and each backend at ~1e-7 relative per op; an adaptive optimizer divides by sqrt(v) + eps, which
# amplifies a 1e-7 gradient difference on small second moments, so the defaults are looser than the forward
# pass's 1e-5 / 1e-6.
FIT_RTOL, FIT_ATOL = 1e-4, 1e-5


def read_targets(path: Path, batch: int) -> list[np.ndarray]:
    """The --targets arrays (y0, y1, ...), each of the inputs' batch: checked before any step runs."""
    try:
        with np.load(path) as z:
            keys = sorted(z.files, key=lambda k: (len(k), k))
            ys = [z[k] for k in keys]
    except (OSError, ValueError) as exc:
        raise InputError(f"--targets {path}: cannot read ({exc})", hint="pass an .npz with arrays y0, y1, ...") \
            from None
    for i, y in enumerate(ys):
        if not y.shape or y.shape[0] != batch:
            raise InputError(f"--targets {path}: target {i} has batch {y.shape[0] if y.shape else 'none'}, the "
                             f"inputs {batch}", hint="targets must match the --input batch (or the seeded batch of 2)")
    return ys


def load_targets(path: Path, outputs: list[np.ndarray]) -> list[np.ndarray]:
    ys = read_targets(path, outputs[0].shape[0] if outputs else 0)
    if len(ys) != len(outputs):
        raise InputError(f"--targets {path}: {len(ys)} arrays for a model with {len(outputs)} outputs",
                         hint="one target array per model output, named y0, y1, ...")
    return ys


# Weights after the steps of more bytes than this are compared on two threads (numpy's arithmetic runs outside the
# GIL): the last backend's row is the end of the run, on cores the workers have left.
PARALLEL_MIN_BYTES = 16 << 20


def _weight_stats(got_w: list[np.ndarray], ref_w: list[np.ndarray], rtol: float, atol: float) -> list[Any]:
    """compare_arrays of each weight after the steps, in order."""
    def one(pair: tuple[np.ndarray, np.ndarray]) -> Any:
        return compare_arrays(pair[0], pair[1], rtol, atol, output=False)

    pairs = list(zip(got_w, ref_w))
    if sum(r.nbytes for r in ref_w) < PARALLEL_MIN_BYTES:
        return [one(p) for p in pairs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="k2to3-training-weights") as ex:
        return list(ex.map(one, pairs))


def compare_training(ref: dict[str, Any], got: dict[str, Any], ref_w: list[np.ndarray], got_w: list[np.ndarray],
                     rtol: float, atol: float) -> dict[str, Any]:
    """One backend's `training` entry: per-step losses, weight errors after the steps, first divergent weight."""
    if len(ref_w) != len(got_w):
        return {"status": "mismatch", "reason": f"{len(got_w)} weights after training, tf_keras {len(ref_w)}"}
    rows, first = [], None
    worst_abs = worst_rel = min_atol = 0.0
    for i, (name, s) in enumerate(zip(got["weight_names"], _weight_stats(got_w, ref_w, rtol, atol))):
        worst_abs, worst_rel, min_atol = max(worst_abs, s.max_abs), max(worst_rel, s.max_rel), max(min_atol,
                                                                                                  s.min_atol)
        if not s.allclose and first is None:
            first = {"weight": name, "max_abs": s.max_abs, "max_rel": s.max_rel}
        rows.append({"weight": name, "max_abs": s.max_abs, "max_rel": s.max_rel, "allclose": s.allclose,
                     # the statistic a float32 training noise verdict judges (checks/trainingnoise.py)
                     **({} if s.allclose else {"l2": diff_l2(got_w[i], ref_w[i])})})
    lr, lg = np.asarray(ref["losses"], np.float64), np.asarray(got["losses"], np.float64)
    loss_abs = float(np.max(np.abs(lr - lg))) if lr.size else 0.0
    loss_rel = float(np.max(np.abs(lr - lg) / np.maximum(np.abs(lr), 1e-12))) if lr.size else 0.0
    loss_ok = bool(np.all(np.abs(lr - lg) <= atol + rtol * np.abs(lr)))
    ok = first is None and loss_ok and got.get("iterations_after") == ref.get("iterations_after")
    return {"status": "parity" if ok else "mismatch", "losses": got["losses"],
            "loss_max_abs": loss_abs, "loss_max_rel": loss_rel, "loss_allclose": loss_ok, "weights_max_abs": worst_abs,
            "weights_max_rel": worst_rel, "min_atol": min_atol, "first_divergent_weight": first,
            "iterations_after": got.get("iterations_after"), "weights": rows}


def compile_losses(run: Run) -> list[Any]:
    """The compiled loss of each output, as the upgraded training config names it."""
    loss = (run.plan.compile or {}).get("loss")
    return list(loss.values()) if isinstance(loss, dict) and "class_name" not in loss else \
        list(loss) if isinstance(loss, list) else [loss]


def fused(run: Run) -> bool:
    """Do the training steps join the verification's pool round (stage 1)? Each worker then trains right after it
    verifies, on the model it holds, instead of waiting for every other backend's verification (a cold jax compile
    of the backward pass starts seconds earlier). When the models are held (reference_lane.hold_models). Decided
    once per run: the stage of a check must not change between the rounds."""
    if "fused" not in run.state:
        run.state["fused"] = reference_lane.hold_models(run)
    return bool(run.state["fused"])


def stage_for(run: Run) -> int:
    return 1 if fused(run) else 3  # 1: the outputs check's stage (registry.OUTPUTS_STAGE)


def expects_tf_keras(run: Run) -> bool:
    """Is tf_keras the reference? Known once the outputs check has its golden; before (the steps joined to its
    round), what the run asks for: tf_keras loads the file unless a golden file is the reference."""
    if "reference" in run.report:
        return run.tf_keras_reference
    return run.given is None and run.reference_h5 is not None and run.pool.golden


class Targets:
    """The batch's targets (`--targets`, or seeded ones shaped like the model's outputs), written once, by the first
    training job that runs. Joined to the verification's round, the steps may start before the parent has read the
    outputs: the shapes come from the Keras 2 golden (waited for: it is the tensorflow worker's first job), a golden
    file's, or else the backend's own outputs (its verify came first on its worker). A bad --targets file is raised
    again by collect()."""

    def __init__(self, run: Run):
        self.run, self.path = run, run.npz("fit-targets")
        self._lock = threading.Lock()
        self._done = False
        self.error: InputError | None = None

    def ensure(self, backend: str) -> str:
        with self._lock:
            if self.error is not None:
                raise self.error
            if not self._done:
                run, opts = self.run, self.run.options
                outputs = self._outputs(backend)
                try:
                    ys = load_targets(opts.targets, outputs) if opts.targets else \
                        make_targets(compile_losses(run), outputs)
                except InputError as exc:
                    self.error = exc
                    raise
                np.savez(self.path, **{f"y{i}": y for i, y in enumerate(ys)})
                self._done = True
        return self.path

    def _outputs(self, backend: str) -> list[np.ndarray]:
        run = self.run
        if run.outputs is not None or run.given is not None:
            return run.outputs if run.outputs is not None else run.given  # type: ignore[return-value]
        written = run.state.get("golden_written")
        if written is not None:
            written.wait()
            if run.state.get("golden_ok"):
                return run.load("golden")
        return run.load(f"out-{backend}")


def carries_gradients(run: Run) -> bool:
    """Can the training steps stand in for the gradient check (checks/gradients.py)? Same mode (training), a file
    compiled with an optimizer, a Keras 2 reference that trains from the file itself (not rebuilt from --src), and
    no loss scaling (its gradients are scaled)."""
    opts = run.options
    optimizer = (run.training_config or {}).get("optimizer_config")
    return bool(opts.grads and opts.fit_steps and opts.grads_training and optimizer
                and not reference_compiles(optimizer)  # a compiled step cannot hand its gradients over
                and expects_tf_keras(run)
                and not ({"golden_config", "build_fn"} & set(run.golden_args))
                and not (set(run.report.get("dtype_policies") or ()) & REDUCED))


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
    # a mismatch's noise probe runs the same steps, on the reference held in its worker (trainingnoise.py)
    # with the gradients: the probe's runs measure their first step's gradients too (the gradients' floor)
    run.state["training"] = {"common": common, "held": reference_lane.hold_models(run), "targets": targets,
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
            trainingnoise.start_first_round(run, got[0])  # a model training BatchNormalization: now
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


def fit_future(done: Done, backend: str) -> Future:
    """A backend's own training job among the round's futures (the tensorflow worker runs tf_keras's first)."""
    return done[backend][1 if backend == "tensorflow" else 0]


class EarlyCompare:
    """Each backend's training row computed in the parent as soon as its steps and tf_keras's are done, while the
    other backends still train (one thread, in the order the replies come): what is left for collect() after the
    last backend finishes is that backend's comparison, not every backend's weights and slots, so the noise
    probe's next round can start sooner."""

    def __init__(self, run: Run):
        from concurrent.futures import ThreadPoolExecutor

        self.run = run
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="k2to3-training-compare")
        self._ref_ready = threading.Event()
        self._ref: dict[str, Any] | None = None
        self.ref_w: list[np.ndarray] | None = None
        self.saved: dict[str, str] = {}  # the file's slot digests, read once for every backend
        self.rows: dict[str, Future] = {}
        self._listeners: list[Callable[[str, dict[str, Any]], None]] = []

    def listen(self, fn: Callable[[str, dict[str, Any]], None]) -> None:
        """fn(backend, reply) as each backend's steps reply (the gradient check compares their gradients then)."""
        self._listeners.append(fn)

    def reference_reply(self) -> dict[str, Any] | None:
        """tf_keras's reply to its steps, once it has come (None: the job never replied)."""
        self._ref_ready.wait()
        return self._ref

    @contextlib.contextmanager
    def reference(self) -> Iterator[list[dict[str, Any]]]:
        """Wraps tf_keras's steps: whatever happens to them, the comparisons waiting for them go on."""
        got: list[dict[str, Any]] = []
        try:
            yield got
        finally:
            self._ref = got[0] if got else None
            self._ref_ready.set()

    def backend(self, b: str, reply: dict[str, Any]) -> None:
        self.rows[b] = self._pool.submit(self._row, b, reply)
        for fn in self._listeners:
            fn(b, reply)

    def reference_weights(self) -> list[np.ndarray] | None:
        """tf_keras's weights after its steps (None: its steps did not give any); read once."""
        self._ref_ready.wait()
        ref = self._ref
        if ref is None or "error" in ref or not ref.get("available") or (not ref.get("state_loaded") and \
                (self.run.report.get("optimizer") or {}).get("status") == "restored"):
            return None
        if self.ref_w is None:
            self.ref_w = arrayfile.read(self.run.arrays("fit-ref"))
        return self.ref_w

    def _row(self, b: str, got: dict[str, Any]) -> dict[str, Any] | None:
        ref_w = self.reference_weights()
        if ref_w is None or "error" in got or not got.get("available"):
            return None  # collect() says why
        assert self._ref is not None
        with single_threaded_blas():
            row = compare_row(self.run, b, self._ref, got, ref_w, self.saved)
        trainingnoise.start_first_round(self.run, self._ref, row)  # on a mismatch rounding may explain
        return row

    def row(self, b: str) -> dict[str, Any] | None:
        fut = self.rows.get(b)
        return None if fut is None else fut.result()

    def close(self) -> None:
        self._ref_ready.set()  # a reference job that never ran (a crashed worker) holds nothing up
        self._pool.shutdown(wait=True, cancel_futures=True)


def compare_row(run: Run, b: str, ref: dict[str, Any], got: dict[str, Any], ref_w: list[np.ndarray],
                saved: dict[str, str]) -> dict[str, Any]:
    """One backend's training row: its weights and losses against tf_keras's, and its optimizer slots as loaded."""
    section, report, h5 = run.report["training"], run.report, run.reference_h5
    assert h5 is not None
    if (report.get("optimizer") or {}).get("slots") and not saved:
        state_as_loaded(h5, report.get("optimizer"), None, saved)
    got_w = arrayfile.read(run.arrays(f"fit-{b}"))
    row = compare_training(ref, got, ref_w, got_w, section["rtol"], section["atol"])
    row["state_as_loaded"] = state_as_loaded(h5, report.get("optimizer"), got.get("state_digests"), saved)
    return row


def collect(run: Run, done: dict[str, Done]) -> None:
    """Fill report["training"] from the replies of the training jobs; the reference held for a noise probe is
    dropped whatever happens."""
    early = run.state["training"]["early"]
    try:
        _collect(run, done, early)
    finally:
        early.close()
        trainingnoise.release(run)


def _collect(run: Run, done: dict[str, Done], early: EarlyCompare) -> None:
    if run.state["training"]["targets"].error is not None:  # --targets did not fit the outputs: the user's to fix
        raise run.state["training"]["targets"].error
    mine, report = done["training"], run.report
    section = report["training"]
    ref = reply_or_error(mine["tensorflow"][0])
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
    trainingnoise.measure(run, section, ref, ref_w, run.state["training"].get("ahead"))
    states = {v.get("status") for v in section["backends"].values()}
    section["status"] = "parity" if states == {"parity"} else trainingnoise.WITHIN \
        if states <= {"parity", trainingnoise.WITHIN} else "mismatch"


def explain(report: dict[str, Any]) -> None:
    """Weights after the step differ as the step's gradients do: when those are within tf_keras's own float32
    sensitivity, say so beside the training verdict (information only, like every numeric_verdict)."""
    training, grads = report.get("training") or {}, report.get("gradients") or {}
    if training.get("status") == "mismatch" and grads.get("numeric_verdict") == "within_reference_sensitivity":
        training["numeric_verdict"] = "within_reference_sensitivity"
        training["note"] = ("this step's gradients differ from tf_keras's no more than tf_keras's own do under a 1e-6 "
                            "relative change of its weights (gradients.numeric_verdict): the weights after the step "
                            "differ as the gradients do; an ill-conditioned step, not a conversion error")


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
                         f"{trainingnoise.cell(v.get('noise'))} |")
    if t.get("status") == trainingnoise.WITHIN:
        lines.append(f"\nEvery difference outside rtol={t['rtol']:g}, atol={t['atol']:g} is within float32 training "
                     f"noise: in L2 norm at most k={trainingnoise.NOISE_K:g} times the change tf_keras's own steps "
                     "make to that weight when its own weights move by a relative 1e-6 (1e-5 in the wide tier, when "
                     "the 1e-6 runs leave a weight unexplained), largest over its runs (its floor), and in its "
                     f"largest element at most {trainingnoise.ABS_K:g} times; the strict figures stay above.")
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
        + (f"; float32 training noise: {trainingnoise.cell(v['noise'])}" if v.get("noise") else ""))
        for b, v in t["backends"].items()]


CHECK = Check(key="training", title="Training steps", stage=3, stage_for=stage_for, role_order=longest_first,
              applies=applies, jobs=jobs, collect=collect,
              markdown=markdown, console=console, outcome=outcome, retry_without_onednn=True)
