"""One backend's training row: its weights and per-step losses after the steps against tf_keras's, the first weight
that diverges, and whether it loaded the file's optimizer slots bit for bit (numpy only)."""

from __future__ import annotations

from typing import Any

import numpy as np

from k2to3.checks.base import Run
from k2to3.checks.slotstate import state_as_loaded
from k2to3.core import arrayfile
from k2to3.core.compare import compare_arrays, diff_l2

# Training tolerances (docs/optimizers.md): float32 steps. Kernels and accumulation order differ between
# tf_keras and each backend at ~1e-7 relative per op; an adaptive optimizer divides by sqrt(v) + eps, which
# amplifies a 1e-7 gradient difference on small second moments, so the defaults are looser than the forward
# pass's 1e-5 / 1e-6.
FIT_RTOL, FIT_ATOL = 1e-4, 1e-5

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
                     # the statistic a float32 training noise verdict judges (noise_verdict.py)
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
