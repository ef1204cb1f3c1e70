"""The gradient comparison (report section `gradients`, docs/report.md#gradients): per-variable figures of each
backend's loss gradient against the reference's, tf_keras's own float32 sensitivity when it was probed, and the
section built from the workers' replies (numpy only)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from k2to3.checks.base import Run
from k2to3.core import arrayfile
from k2to3.core.compare import compare_arrays, per_backend
from k2to3.core.seeds import SENSITIVITY_EPS

TOP = 5
SENSITIVITY_K = 10.0  # a mismatch up to this many times tf_keras's own sensitivity is ill-conditioning
ILL_CONDITIONED = 0.01  # reference sensitivity (relative L2) above which the report says so


def _cosine(g: np.ndarray, r: np.ndarray) -> float | None:
    ng, nr = float(np.linalg.norm(g)), float(np.linalg.norm(r))
    if ng == 0.0 and nr == 0.0:
        return 1.0
    if ng == 0.0 or nr == 0.0:
        return 0.0
    return float(np.dot(g, r) / (ng * nr))


def _l2_figures(g: np.ndarray, r: np.ndarray, norms: dict[str, float], max_abs: float
                ) -> tuple[float | None, float, float]:
    """Cosine, relative L2 error and max |ref| of one variable, from the dot products compare_arrays took (the
    norms np.linalg.norm computes: sqrt(x.x), bit for bit), or from fresh float64 copies when it took none (NaN)."""
    if "diff" in norms:
        ng, nr = np.sqrt(norms["got"]), np.sqrt(norms["ref"])
        cosine = 1.0 if ng == 0.0 and nr == 0.0 else 0.0 if ng == 0.0 or nr == 0.0 else \
            float(norms["dot"] / (ng * nr))
        rel_l2 = float(np.sqrt(norms["diff"]) / nr) if nr > 0 else (0.0 if max_abs == 0 else float("inf"))
        return cosine, rel_l2, norms["ref_max_abs"] if r.size else 0.0
    g64, r64 = g.astype(np.float64).ravel(), r.astype(np.float64).ravel()
    nr = float(np.linalg.norm(r64))
    cosine = _cosine(g64, r64)
    rel_l2 = float(np.linalg.norm(np.subtract(g64, r64, out=g64)) / nr) if nr > 0 else \
        (0.0 if max_abs == 0 else float("inf"))
    return cosine, rel_l2, float(np.abs(r64).max()) if r.size else 0.0


def compare_grads(names: list[str], got: list[np.ndarray], ref_names: list[str], ref: list[np.ndarray],
                  rtol: float, atol: float, sensitivity: list[float] | None = None) -> dict[str, Any]:
    """Per-variable figures (in the model's topological variable order), the first divergent variable, the worst."""
    if [list(a.shape) for a in got] != [list(a.shape) for a in ref]:
        return {"status": "error", "error": f"trainable variables do not line up with the reference: {len(got)} "
                f"vs {len(ref)} variables or shapes differ"}
    rows = []
    for name, rname, g, r in zip(names, ref_names, got, ref):
        norms: dict[str, float] = {}
        s = compare_arrays(g, r, rtol, atol, output=False, norms=norms)
        cosine, rel_l2, ref_max_abs = _l2_figures(g, r, norms, s.max_abs)
        rows.append({"variable": name, "reference_variable": rname, "shape": list(r.shape), "max_abs": s.max_abs,
                     "max_rel": s.max_rel, "cosine": cosine, "rel_l2": rel_l2, "allclose": s.allclose,
                     "min_atol": s.min_atol, "ref_max_abs": ref_max_abs})
        if sensitivity is not None:
            rows[-1]["reference_sensitivity"] = sensitivity[len(rows) - 1]
    first = next((r for r in rows if not r["allclose"]), None)
    top = sorted(rows, key=lambda r: -r["rel_l2"])[:TOP]
    ok = first is None
    return {"status": "parity" if ok else "mismatch", "numeric_verdict": _numeric(rows, sensitivity is not None),
            "max_abs": max((r["max_abs"] for r in rows), default=0.0),
            "max_rel": max((r["max_rel"] for r in rows), default=0.0),
            "max_rel_l2": max((r["rel_l2"] for r in rows), default=0.0),
            "min_cosine": min((r["cosine"] for r in rows), default=1.0),
            "first_divergent_variable": first["variable"] if first else None,
            "top_divergent": [{k: r[k] for k in ("variable", "rel_l2", "max_abs", "cosine")} for r in top],
            "variables": rows}


def _numeric(rows: list[dict[str, Any]], probed: bool) -> str | None:
    if all(r["allclose"] for r in rows):
        return "parity"
    if not probed:
        return None
    # every mismatch as large as tf_keras's own sensitivity at most
    within = all(r["allclose"] or r["rel_l2"] <= SENSITIVITY_K * r["reference_sensitivity"] for r in rows)
    return "within_reference_sensitivity" if within else "mismatch"


def add_sensitivity(section: dict[str, Any], ref_names: list[str], sens: list[float], change: dict[str, Any]
                    ) -> None:
    """Give a built section tf_keras's sensitivity per variable (probed after a mismatch: gradients._probe, under
    the weight `change` it made) without comparing the gradients again."""
    for row in section.get("backends", {}).values():
        if "variables" in row:
            for r, v in zip(row["variables"], sens):
                r["reference_sensitivity"] = v
            row["numeric_verdict"] = _numeric(row["variables"], True)
    _sensitivity_summary(section, ref_names, sens, change)
    _overall_numeric(section)


def _sensitivity_summary(section: dict[str, Any], ref_names: list[str], sens: list[float],
                         change: dict[str, Any]) -> None:
    i = int(np.argmax(sens))
    section["reference"]["sensitivity"] = {**change, "max_rel_l2": sens[i], "variable": ref_names[i]}
    if sens[i] > ILL_CONDITIONED:
        what = "the inputs" if "input_change" in change else "every weight"
        section["notes"].append(f"ill-conditioned: a 1e-6 relative change of {what} moves tf_keras's own "
                                f"gradient of '{ref_names[i]}' by {sens[i]:.3g} (relative L2); backends that "
                                "round differently cannot agree closer (typical: BatchNormalization in training "
                                "mode over few values per channel)")


def _overall_numeric(section: dict[str, Any]) -> None:
    backends = section["backends"]
    statuses = {v["status"] for v in backends.values()}
    nums = {v.get("numeric_verdict") for v in backends.values()}
    section["numeric_verdict"] = None if "error" in statuses else "mismatch" if "mismatch" in nums else \
        "within_reference_sensitivity" if "within_reference_sensitivity" in nums else "parity"


def backend_row(run: Run, b: str, r: dict[str, Any], ref: dict[str, Any], ref_arrays: list[np.ndarray],
                rt: float, at: float) -> dict[str, Any]:
    """One backend's row of the section: its gradients (grads-{b}) against the reference's."""
    if "error" in r:
        return {"status": "error", "error": r["error"]}
    row = compare_grads(r["names"], load_grads(run.arrays(f"grads-{b}"), len(r["names"])), ref["names"], ref_arrays,
                        rt, at, ref.get("sensitivity"))
    row.update(loss=r["loss"], loss_abs_diff=abs(r["loss"] - ref["loss"]), seconds=round(r["grad_seconds"], 3),
               unconnected=r.get("none", []))
    return row


def build_section(run: Run, replies: dict[str, dict[str, Any]], ref: dict[str, Any] | None,
                  ctx: dict[str, Any], early: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fill report["gradients"] from each backend's reply and tf_keras's (None: no Keras 2 reference). `early`: the rows
    already computed against tf_keras's gradients as the replies came (gradient_check.EarlyRows), with the reference's
    arrays they were compared with (`ref_arrays`)."""
    report = run.report
    t0, golden, rt, at = ctx["t0"], ctx["golden"], ctx["rt"], ctx["at"]
    losses, source, training = ctx["losses"], ctx["source"], ctx["training"]
    section: dict[str, Any] = {"loss": losses, "loss_source": source, "targets": ctx.get("targets", "seeded"),
                               "training": training, "from": ctx.get("from", "standalone differentiation"),
                               "tolerance": {"rtol": rt, "atol": at,
                                             "source": ctx["tol_source"]}}
    if golden:
        assert ref is not None
        got = {"error": ref["error"]} if "error" in ref else {"loss": ref["loss"],
                                                               "from": run.reference_origin}
        section["reference"] = {"kind": "keras2-tf_keras", **got}
    if not golden or "error" in ref:
        kind = "tensorflow" if "error" not in replies.get("tensorflow", {"error": 1}) else None
        if kind is None:
            section.update(verdict="unavailable", backends={b: {"status": "error", "error": r.get("error")}
                                                           for b, r in replies.items()})
            report["gradients"] = section
            return section
        ref = replies[kind]
        section["reference"] = {"kind": f"keras3-{kind}", "loss": ref["loss"],
                                **({"reason": section["reference"]["error"]} if golden else {})}
        ref_path = run.arrays(f"grads-{kind}")
    else:
        ref_path = run.arrays("grads-golden")
    done = (early or {}).get("rows", {}) if ref_path == run.arrays("grads-golden") else {}
    ref_arrays = (early or {}).get("ref_arrays") if done else None
    if ref_arrays is None:
        ref_arrays = load_grads(ref_path, len(ref["names"]))
    section["derandomized"] = sorted(set(ref.get("derandomized", [])).union(
        *(r.get("derandomized", []) for r in replies.values() if "error" not in r)))
    section["notes"] = sorted(set().union(*(r.get("notes", []) for r in replies.values() if "error" not in r)))
    sens = ref.get("sensitivity")
    if sens:  # the standalone check's, under a relative input change (workers/grads.py)
        _sensitivity_summary(section, ref["names"], sens, {"input_change": SENSITIVITY_EPS})

    def one(b: str) -> dict[str, Any]:
        return done[b] if done.get(b) is not None else backend_row(run, b, replies[b], ref, ref_arrays, rt, at)

    backends = dict(zip(replies, per_backend(one, list(replies), ref_arrays)))
    section["backends"] = backends
    statuses = {v["status"] for v in backends.values()}
    section["verdict"] = "error" if "error" in statuses else "mismatch" if "mismatch" in statuses else "parity"
    _overall_numeric(section)
    section["seconds"] = round(time.perf_counter() - t0, 3)
    report["gradients"] = section
    return section


def load_grads(path: str, n: int) -> list[np.ndarray]:
    arrays = arrayfile.read(path)
    if len(arrays) < n:
        raise ValueError(f"{path}: {len(arrays)} gradients, {n} named")
    return arrays[:n]
