"""The tf_keras side of a run that trains, on a worker of its own (docs/convert.md#the-reference-worker).

With `--fit-steps` the tensorflow worker would do the work of two: the Keras 3 side (build, verification, training
steps) and the Keras 2 reference (the golden outputs, tf_keras's steps, the gradients' sensitivity probe and the
float32 noise probe): most of a run's CPU time in one process, the critical path, while the torch and jax
workers wait. A second tensorflow process (pool role `reference`) takes the reference's jobs, and its
first one (tf_keras loads the file and computes the golden) starts beside the build, on the core the build leaves
idle. Every job keeps its place in its check's futures: the checks queue them on "tensorflow" as before and
one_round moves the marked ones (`on_reference`)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from k2to3.checks.base import Jobs, Run, WorkerJob
from k2to3.workers.pool import REFERENCE
from k2to3.workers.process import WorkerError
from k2to3.workers.protocol import DropHeldRequest

MARK = "_k2to3_reference_side"

# With --fit-steps the models stay in their workers between jobs (workers/training/held_models.py: the .keras verify
# loaded for fit, the tf_keras golden model for the reference steps, the reference's state before its steps for the
# noise probe) up to this size of weights: a held state is a second copy of the weights and the optimizer slots.
HOLD_MAX_BYTES = 512 << 20


def hold_models(run: Run) -> bool:
    """Do this run's workers keep their models between the verification, the training steps and the probe?"""
    return bool(run.options.fit_steps) and run.weight_bytes <= HOLD_MAX_BYTES


def release_held(run: Run) -> None:
    """Every model this run's workers hold dropped (at the end of the training check, whatever happened); a
    worker already closed holds nothing."""
    if not run.state.get("training", {}).pop("held", False):
        return

    def drop(worker: Any) -> None:
        try:
            worker.call(DropHeldRequest())
        except WorkerError:
            pass

    from concurrent.futures import ThreadPoolExecutor

    workers = list(run.pool.workers.values())
    with ThreadPoolExecutor(max_workers=max(1, len(workers))) as ex:  # side by side: the last step of the run
        list(ex.map(drop, workers))


def on_reference(job: WorkerJob) -> WorkerJob:
    """Marks a job of the tensorflow role as the tf_keras reference's: it runs on the reference worker when the run
    has one."""
    setattr(job, MARK, True)
    return job


def split(run: Run) -> bool:
    """Does this run give the reference its own worker? When it trains with the models held in their workers (the
    reference's steps and probes then follow one another on the model tf_keras loaded once), tf_keras is the
    reference, the machine has a core for each side, and the budget holds a second tensorflow process beside the
    first. Decided once per run: the held models must stay where they were loaded."""
    if "reference_worker" not in run.state:
        pool = run.pool
        tf_keras = run.given is None and run.reference_h5 is not None and pool.golden  # schedule.expects_tf_keras
        run.state["reference_worker"] = bool(
            hold_models(run) and tf_keras and pool.max_parallel > 1
            and pool.fits(["tensorflow", REFERENCE], run.weight_bytes))
    return bool(run.state["reference_worker"])


def role(run: Run) -> str:
    """Where a reference job queued on its own goes (the noise probe's later rounds, the sensitivity probe)."""
    return REFERENCE if split(run) else "tensorflow"


def route(run: Run, merged: Jobs) -> tuple[Jobs, dict[str, list[tuple[str, int]]]]:
    """The round's jobs with the marked tensorflow ones on the reference worker (first: its golden came early),
    and where each of the original per-role jobs went (role, index), to give every check its futures back in the
    order it queued them."""
    where = {r: [(r, i) for i in range(len(js))] for r, js in merged.items()}
    if not split(run) or "tensorflow" not in merged:
        return merged, where
    ref: list[WorkerJob] = []
    keep: list[WorkerJob] = []
    for i, job in enumerate(merged["tensorflow"]):
        if getattr(job, MARK, False):
            where["tensorflow"][i] = (REFERENCE, len(ref))
            ref.append(job)
        else:
            where["tensorflow"][i] = ("tensorflow", len(keep))
            keep.append(job)
    if not ref:
        return merged, where
    routed: Jobs = {REFERENCE: ref, **({"tensorflow": keep} if keep else {})}
    routed.update({r: js for r, js in merged.items() if r != "tensorflow"})
    return routed, where


def start_early(run: Run, job: WorkerJob) -> WorkerJob:
    """Run `job` on the reference worker now, in the background (the build runs meanwhile on the tensorflow
    worker); returns the job to queue in its place, which hands over its result when the round reaches it."""
    fut: Future = Future()
    worker = run.pool.get(REFERENCE)  # started here, in this thread: the round's get() finds it

    def go() -> None:
        fut.set_running_or_notify_cancel()
        try:
            fut.set_result(job(worker))
        except BaseException as exc:  # delivered to the round through the future
            fut.set_exception(exc)

    threading.Thread(target=go, name="k2to3-reference-early", daemon=True).start()

    def handed_over(_w: Any) -> Any:
        return fut.result()

    return on_reference(handed_over)
