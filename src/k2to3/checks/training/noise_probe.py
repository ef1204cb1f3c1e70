"""The float32 noise floor of a training mismatch (`training.backends.<b>.noise`,
docs/optimizers.md#float32-training-noise). Outputs have theirs (checks/noise_floor.py); a training step needs its own:
an adaptive optimizer turns float32 rounding in a gradient whose true value is 0 (a bias in front of BatchNormalization)
into a step of the learning rate's size, so the weights after the steps can differ from tf_keras's by 1e-3 while every
computation agrees to float32 rounding.

tf_keras measures its own sensitivity: the same steps from the file's state, each trainable weight moved by ±1e-6
relative, in up to four runs (workers/training/noise_fit.py), then, only when a weight is still unexplained, in up to
six runs with ±1e-5 (a training step's discrete events: see WIDE_EPS). Each weight that failed the strict tolerance gets
its floors, the largest change those runs make to it: in L2 norm over the tensor and in its largest element. k = the
backend's error / floor in L2 norm, k_abs the same in the largest element; within float32 training noise when every k <=
NOISE_K (the outputs' bound), the losses included, and every k_abs <= ABS_K. A mismatch rounding cannot explain (a lost
iteration count, a slot loaded differently from the file, a different number of weights) is not measured: it stays a
mismatch."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from k2to3.checks.base import Run, WorkerJob
from k2to3.checks.training.noise_verdict import WITHIN, Floors, judge, not_noise, weight_floors
from k2to3.checks.training.reference_worker import hold_models, role, split
from k2to3.core import arrayfile
from k2to3.core.compare import weight_changes
from k2to3.core.seeds import SENSITIVITY_EPS
from k2to3.workers.process import WorkerError, reply_or_error
from k2to3.workers.protocol import FitNoiseRequest

# Four runs, each with every trainable weight moved by ±1e-6 relative (random signs, fixed seeds): the floor of a
# bias in front of a BatchNormalization varies with the seed, and two runs can leave it below a backend's error that
# four runs explain (tests/fixtures/optimizers/conv_bn_adam.h5). A uniform scale of the inputs (the gradients' probe)
# moves it far less: a BatchNormalization earlier in the model normalises the scale away.
# The runs go in rounds of 1, 1 and 2: floors only grow with runs, so once the runs so far explain every difference
# more runs cannot change the verdict, and they run only while they do not (fewer runs is the stricter test). A
# backend's verdict is taken at the first round that explains it, with that round's floors.
NUDGE_EPS, NUDGE_SEED = SENSITIVITY_EPS, 25
# The wide tier, rounds of 2 and 4 runs at ±1e-5, only after the four runs above leave a weight unexplained. A
# training step has discrete events (a ReLU whose pre-activation is a near-cancellation switches, a max-pool
# near-tie), and an Adam-family optimizer turns each into steps of the learning rate's size on the units whose second
# moment is ~0 (units that stopped learning). Which events a backend's float32 order flips is one draw among many:
# tf_keras's runs land on the backend's weights exactly only in some runs, so sampling at 1e-6 alone calls such a
# conversion a mismatch or not by the seeds' luck (docs/optimizers.md#float32-training-noise). The wide tier's
# floors are looser (its runs move a weight's continuous noise up to 10x); a state error stays far beyond them
# (slots swapped between two BatchNormalization layers), and the report names the tier that explained it.
WIDE_EPS = 1e-5
ROUNDS: tuple[tuple[int, float], ...] = ((1, NUDGE_EPS), (1, NUDGE_EPS), (2, NUDGE_EPS), (2, WIDE_EPS), (4, WIDE_EPS))
RUNS = sum(n for n, _ in ROUNDS)


def _outs(run: Run, first: int, n: int) -> tuple[list[str], list[int]]:
    """Where runs first .. first + n - 1 save their weights, and their seeds."""
    ids = range(first, first + n)
    return [run.arrays(f"fit-noise-{i}") for i in ids], [NUDGE_SEED + i for i in ids]


def _job(run: Run, common: dict[str, Any], first: int, n: int, keep: bool, held_only: bool = False,
         grads_only: bool = False, eps: float = NUDGE_EPS) -> WorkerJob:
    outs, seeds = _outs(run, first, n)
    # the gradients' floor is measured at NUDGE_EPS only (gradients.py reports it as such)
    grads = {"grads": True, "ref_grads": run.arrays("grads-golden"), "grads_only": grads_only} \
        if run.state["training"].get("step_grads") and eps == NUDGE_EPS else {}

    def job(w: Any) -> Any:
        return w.call(FitNoiseRequest(h5=str(run.reference_h5), weights_out=outs, eps=eps, seeds=seeds, keep=keep,
                                      held_only=held_only, ref_weights=run.arrays("fit-ref"), **common, **grads,
                                      **run.golden_args))

    return job


def _reply(run: Run, job: WorkerJob) -> dict[str, Any]:
    """A probe job's reply, on the worker that holds the reference when there is one."""
    try:
        where = role(run)
        return reply_or_error(run.pool.run({where: [job]}, run.weight_bytes)[where][0])
    except WorkerError as exc:
        return {"error": exc.message}


def _grad_changes(reply: dict[str, Any]) -> list[list[float]]:
    return [r["grad_changes"] for r in reply.get("runs") or () if r.get("grad_changes") is not None]


def trains_batchnorm(run: Run) -> bool:
    """Does the model train a BatchNormalization layer? Its batch statistics turn float32 rounding into differences
    above the strict tolerance after one step, routinely: such a model puts many of its weights outside the strict
    tolerance on torch and jax, within the noise floor, so it needs the probe (conv_bn_adam.h5), while dense and
    recurrent fixtures train to parity."""
    return any("BatchNormalization" in str(layer.get("class_name"))
               and (layer.get("config") or {}).get("trainable", True) is not False
               for layer in _layers(run.plan.model))


def _layers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every layer of a plan's graph spec (upgrade/plan.py), nested models' included."""
    for layer in spec.get("layers") or ():
        yield layer
        if layer.get("nested"):
            yield from _layers(layer["nested"])


_STARTING = threading.Lock()


def start_first_round(run: Run, ref: dict[str, Any], row: dict[str, Any] | None = None) -> None:
    """The first round, run while the other backends still train, on the reference its worker holds (the
    [reference worker](convert.md#the-reference-worker)): it overlaps their steps (an eager tf_keras step is over
    well before jax's traced one) instead of following them; measure() takes it as its first round, so the runs and the
    verdict are the ones a probe after the steps gives. It starts when tf_keras's steps reply (`row` None) if the
    model trains BatchNormalization (a mismatch at the noise floor is then the rule), else at the first backend row
    that is a mismatch rounding may explain (step_replies.EarlyCompare): on 2 cores a probe parity does not need takes
    a core from the backends' steps."""
    state = run.state["training"]
    if row is None:
        if "error" in ref or not ref.get("available") or not trains_batchnorm(run):
            return
    elif row.get("status") != "mismatch" or not_noise(row, ref) is not None:
        return
    if not (hold_models(run) and run.pool.max_parallel > 1 and set(run.backends) - {"tensorflow"}):
        return
    worker = run.pool.workers.get(role(run))
    if worker is None:  # no held reference to run on: measure() runs the rounds itself
        return
    with _STARTING:  # the reference's thread and the comparisons' thread may both get here
        if "ahead" not in state:  # the worker serves one request at a time: a job after this one waits its turn
            ex = ThreadPoolExecutor(max_workers=1, thread_name_prefix="k2to3-training-noise")
            state["ahead"] = ex.submit(_job(run, state["common"], 0, ahead_runs(run), keep=True, held_only=True),
                                       worker)
            ex.shutdown(wait=False)  # the job still runs; measure() waits on its future


def ahead_runs(run: Run) -> int:
    """How many runs the job queued with the steps takes: the first round's, and the second's too when the reference
    has a worker of its own (reference_worker.py) and a core no other worker of the run needs. That worker is otherwise
    idle while the parent compares the last backend's steps, and the second run is what a mismatch the first does not
    explain asks for next, already done when it is needed instead of added to the end of the run. On fewer cores
    the run is CPU-bound, and a run the verdict may not need is paid for in wall time (one run may explain every
    backend). measure() judges round by round either way: a run the verdict did not need is not counted, nor
    reported."""
    spare = run.pool.cores > len(set(run.backends) | {"tensorflow"}) + 1
    return ROUNDS[0][0] + (ROUNDS[1][0] if split(run) and spare else 0)


def _read(run: Run, reply: dict[str, Any], first: int, n: int, ref_w: list[np.ndarray]
          ) -> tuple[dict[str, Any], list[Floors]]:
    """Each run's change to each weight: as the worker measured it, or from the weights it saved."""
    if "error" in reply or not reply.get("available"):
        return {"available": False, "reason": reply.get("error") or reply.get("reason")}, []
    changes = []
    for r, out in zip(reply["runs"], _outs(run, first, n)[0]):
        if "changes" in r:
            changes.append((r["changes"], r["l2_changes"]))
            continue
        changes.append(weight_changes(arrayfile.read(out), ref_w))
    return reply, changes


def _probe(run: Run, common: dict[str, Any], first: int, n: int, keep: bool, ref_w: list[np.ndarray], eps: float
           ) -> tuple[dict[str, Any], list[Floors]]:
    """Runs first .. first + n - 1 (their seeds), on the held reference when there is one."""
    return _read(run, _reply(run, _job(run, common, first, n, keep, eps=eps)), first, n, ref_w)


def measure(run: Run, section: dict[str, Any], ref: dict[str, Any], ref_w: list[np.ndarray],
            ahead: Future | None = None) -> None:
    """On a training mismatch only: fills backends[b]["noise"] of each mismatching backend and sets its status to
    within_float32_noise when the nudges explain every difference. `ahead`: the first round, run with the steps
    (start_first_round); run again here when it could not be taken there."""
    backends = section["backends"]
    bad = [b for b, v in backends.items() if v.get("status") == "mismatch"]
    if not bad:
        return
    measured = []
    for b in bad:
        why = not_noise(backends[b], ref)
        if why:
            backends[b]["noise"] = {"verdict": "not_measured", "reason": why}
        else:
            measured.append(b)
    if not measured:
        return
    t0 = time.perf_counter()
    run.progress(f"training mismatch on {', '.join(measured)}: tf_keras reruns the steps with nudged weights to "
                 "measure the float32 training noise")
    ref_losses = np.asarray(ref["losses"], np.float64)
    floors: Floors | None = None
    loss_floor, losses, reply = 0.0, [], {}
    first, with_steps = 0, False
    taken: list[dict[str, Any]] = []  # the rounds that ran: runs, weights_moved_by
    verdicts: dict[str, dict[str, Any]] = {}
    early: tuple[dict[str, Any], list[Floors]] = ({}, [])  # the runs queued with the steps (at NUDGE_EPS)
    if ahead is not None:
        got = reply_or_error(ahead)
        early = _read(run, got, 0, len(got.get("runs") or ()), ref_w)
    for i, (n, eps) in enumerate(ROUNDS):
        last = i == len(ROUNDS) - 1
        reply, runs = ({**early[0], "runs": early[0]["runs"][first:first + n]}, early[1][first:first + n]) \
            if eps == NUDGE_EPS and len(early[1]) >= first + n else ({}, [])
        with_steps = with_steps or bool(reply.get("available"))
        if not reply.get("available"):
            reply, runs = _probe(run, run.state["training"]["common"], first, n, not last, ref_w, eps)
        first += n
        if not reply.get("available"):
            break
        taken.append({"runs": n, "weights_moved_by": eps})
        floors = weight_floors(len(ref_w), runs, floors)
        for r in reply["runs"]:
            losses.append(r["losses"])
            if r.get("grad_changes") is not None:  # the gradients' float32 floor (gradient_check.py), same runs
                run.state["training"].setdefault("grad_runs", []).append(r["grad_changes"])
            if ref_losses.size:
                diff = np.abs(np.asarray(r["losses"], np.float64) - ref_losses)
                loss_floor = max(loss_floor, float(np.max(diff)))
        for b in measured:  # a verdict within noise is kept with the floors of the round that gave it
            if verdicts.get(b, {}).get("verdict") != WITHIN:
                verdicts[b] = {**judge(backends[b], floors, loss_floor), "runs": len(losses),
                               "weights_moved_by": eps}
        if all(v["verdict"] == WITHIN for v in verdicts.values()) or last:
            break
    section["noise_probe"] = {"runs": len(losses),
                              "weights_moved_by": max((r["weights_moved_by"] for r in taken), default=NUDGE_EPS),
                              "rounds": taken, "available": bool(taken), "first_round_with_steps": with_steps,
                              **({"losses": losses} if taken else {"reason": reply.get("reason")}),
                              **({"stopped": reply.get("reason") or reply.get("error")}
                                 if taken and not reply.get("available") else {}),
                              "seconds": round(time.perf_counter() - t0, 3)}
    if not taken:
        for b in measured:
            backends[b]["noise"] = {"verdict": "unavailable", "reason": reply.get("reason") or reply.get("error")}
        return
    for b in measured:
        backends[b]["noise"] = verdicts[b]
        if verdicts[b]["verdict"] == WITHIN:
            backends[b]["status"] = WITHIN
    run.timings["training_noise_seconds"] = round(time.perf_counter() - t0, 3)


# One run when the training check took none: the gradients' bound (gradient_compare.SENSITIVITY_K = 10) leaves the
# margin more runs would give a weight's floor (measured: see docs/report.md#gradients).
GRAD_RUNS = 1


def gradient_runs(run: Run) -> list[list[float]]:
    """The float32 floor of the training step's gradients (gradient_check.py, after a gradient mismatch): for each
    nudged run, the relative L2 change of tf_keras's first-step gradient per variable. The runs the training noise
    probe took (measure(), or its first round started with the steps when training needed no probe); else a run
    of its own now, stopped at the gradients (nothing applied)."""
    state = run.state.get("training") or {}
    if state.get("grad_runs"):
        return state["grad_runs"]
    runs = _grad_changes(reply_or_error(state["ahead"])) if state.get("ahead") is not None else []
    if runs:
        return runs
    run.progress("--grads: the gradients differ; tf_keras takes its first step again with nudged weights to "
                 "measure its own float32 sensitivity")
    # the training probe's first seeds: the same floor whichever took it
    return _grad_changes(_reply(run, _job(run, state["common"], 0, GRAD_RUNS, keep=False, grads_only=True)))


