"""The tf_keras reference's jobs on a worker of their own (checks/training/reference_worker.py): one_round moves the
marked tensorflow jobs to the reference role and gives every check its futures back in the order it queued them; a run
that does not split keeps every job where it was queued. The end-to-end paths (the same noise runs, floors and
verdicts with and without the split) are tests/test_training_noise.py's."""

from __future__ import annotations

from types import SimpleNamespace

from k2to3.checks.training import reference_worker
from k2to3.workers.pool import REFERENCE


def _jobs():
    ref1 = reference_worker.on_reference(lambda w: "golden")
    ref2 = reference_worker.on_reference(lambda w: "fit_golden")
    return {"tensorflow": [ref1, lambda w: "verify", ref2, lambda w: "fit"], "jax": [lambda w: "jax"]}


def test_marked_jobs_move_to_the_reference_worker_and_come_back_in_order():
    run = SimpleNamespace(state={"reference_worker": True})
    merged = _jobs()
    routed, where = reference_worker.route(run, merged)
    assert list(routed) == [REFERENCE, "tensorflow", "jax"]  # admitted first: its golden started beside the build
    assert [j(None) for j in routed[REFERENCE]] == ["golden", "fit_golden"]
    assert [j(None) for j in routed["tensorflow"]] == ["verify", "fit"]
    ran = {r: [j(None) for j in js] for r, js in routed.items()}
    back = {r: [ran[at][i] for at, i in where[r]] for r in merged}
    assert back == {"tensorflow": ["golden", "verify", "fit_golden", "fit"], "jax": ["jax"]}


def test_a_run_without_the_split_keeps_every_job_where_it_was_queued():
    run = SimpleNamespace(state={"reference_worker": False})
    merged = _jobs()
    routed, where = reference_worker.route(run, merged)
    assert routed is merged and where == {"tensorflow": [("tensorflow", i) for i in range(4)], "jax": [("jax", 0)]}
