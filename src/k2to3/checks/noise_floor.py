"""The float32 noise floor of a mismatch (`backends.<b>.noise`, docs/report.md#float32-noise): the reference and each
mismatching backend rerun in float64 on the same weights and inputs say whether the error is float32 rounding."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from k2to3.checks.base import Run
from k2to3.checks.reruns import rerun
from k2to3.core.compare import noise_stats, noise_verdict


def measure(run: Run, backends: dict[str, Any], reference: list[np.ndarray]) -> None:
    """On a mismatch only; fills backends[b]["noise"] for each mismatching backend."""
    bad = [b for b, v in backends.items() if v.get("status") == "mismatch"]
    if not bad:
        return
    if run.report["reference"].get("kind") == "golden-npz":  # no reference model to rerun in float64
        for b in bad:
            backends[b]["noise"] = {"verdict": "unavailable", "reason": "the reference is a golden file"}
        return
    t0 = time.perf_counter()
    run.progress(f"mismatch on {', '.join(bad)}: rerunning in float64 to measure the float32 noise floor")
    replies = rerun(run, bad, "float64", "f64", "noise_schedule")
    ref_reply = replies["reference"]
    for b in bad:
        rep = replies[b]
        if not rep["available"] or not ref_reply["available"]:
            why = rep.get("reason") if not rep["available"] else f"reference: {ref_reply.get('reason')}"
            backends[b]["noise"] = {"verdict": "unavailable", "reason": why}
            continue
        stats = [noise_stats(g, g64, r, r64, i) for i, (g, g64, r, r64) in enumerate(zip(
            run.load(f"out-{b}"), run.load(f"f64-{b}"), reference, run.load("f64-reference")))]
        verdict, k = noise_verdict(stats)
        backends[b]["noise"] = {"verdict": verdict, "k": k, "outputs": [s.to_dict() for s in stats],
                                "seconds": round(rep["seconds"], 3),
                                "reference_seconds": round(ref_reply["seconds"], 3)}
    run.timings["noise_seconds"] = round(time.perf_counter() - t0, 3)
