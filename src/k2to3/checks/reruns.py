"""The same model rerun in another dtype on the same weights and inputs (worker op `float64`): float64 for the float32
noise floor (checks/noise_floor.py), float32 for the shadow of a mixed-precision model (checks/precision.py)."""

from __future__ import annotations

from typing import Any

from k2to3.checks.base import Jobs, Run
from k2to3.checks.pool_round import switched
from k2to3.workers.process import WorkerError
from k2to3.workers.protocol import Float64Request


def rerun(run: Run, backends: list[str], dtype: str, prefix: str, schedule_key: str) -> dict[str, dict[str, Any]]:
    """Rerun the reference and each of `backends` in `dtype`; outputs go to run.npz(f"{prefix}-{name}"). Returns
    the worker replies by name ("reference" and each backend)."""
    common = {"inputs": run.npz("inputs"), "dtype": dtype}
    ref_kind = run.report["reference"].get("kind")
    if ref_kind == "keras2-tf_keras":
        ref_call = ("tensorflow", {**common, "golden": True, "h5": str(run.reference_h5), **run.golden_args})
    else:
        ref_call = (ref_kind.split("-", 1)[1], {**common, "keras": str(run.keras), "modules": run.modules})
    calls = {"reference": ref_call} | {b: (b, {**common, "keras": str(run.keras), "modules": run.modules})
                                       for b in backends}
    # Scheduled through the memory budget like the verification (Pool.run): float64 doubles the weights.
    jobs: Jobs = {}
    names: dict[str, list[str]] = {}
    for name, (kind, args) in calls.items():
        jobs.setdefault(kind, []).append(
            lambda w, name=name, args=args: w.call(Float64Request(out=run.npz(f"{prefix}-{name}"), **args)))
        names.setdefault(kind, []).append(name)
    weight_bytes = (8 if dtype == "float64" else 4) * int(run.report.get("ledger", {}).get("params_restored") or 0)
    done = run.pool.run(switched(run, jobs), weight_bytes)
    if isinstance(run.report.get("memory"), dict):
        run.report["memory"][schedule_key] = run.pool.schedule
    replies: dict[str, dict[str, Any]] = {}
    for kind, futs in done.items():
        for name, fut in zip(names[kind], futs):
            try:
                replies[name] = fut.result()
            except WorkerError as exc:
                replies[name] = {"available": False, "reason": f"{dtype} rerun failed: {exc.message}"}
    return replies
