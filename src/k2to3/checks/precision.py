"""Mixed precision: the float32 shadow (report section `precision`, docs/convert.md#mixed-precision).

A model saved under a reduced-precision policy (mixed_float16, mixed_bfloat16, float16, bfloat16) is compared twice:
its outputs against the Keras 2 golden under the same policy, at the tolerance of the compute dtype (the backends
table), and a float32 shadow (the same graph and weights with a float32 policy, rerun on every backend and by
tf_keras) at the strict float32 tolerance. The shadow isolates the *conversion* error from the *precision* error
(mixed against float32 on the same side), which no policy tolerance can tell apart. numpy only."""

from __future__ import annotations

import time
from typing import Any

from k2to3.checks.base import Check, Done, Run
from k2to3.checks.number_format import fmt
from k2to3.checks.reruns import rerun
from k2to3.core.compare import OutputStats, compare_outputs
from k2to3.core.policies import DEFAULT_ATOL, DEFAULT_RTOL, reduced


def _worst(stats: list[OutputStats]) -> dict[str, Any]:
    return {"max_abs": max(s.max_abs for s in stats), "max_rel": max(s.max_rel for s in stats),
            "min_rtol": max(s.min_rtol for s in stats), "min_atol": max(s.min_atol for s in stats),
            "allclose": all(s.allclose for s in stats)}


def applies(run: Run) -> bool:
    return bool(reduced(run.plan.dtype_policies))


def collect(run: Run, done: dict[str, Done]) -> None:
    """The float32 shadow of a file with a reduced-precision policy: report["precision"], a backend whose shadow
    disagrees with the reference's shadow at the strict float32 tolerance is a conversion error (outcome)."""
    report, reference, found = run.report, run.outputs, reduced(run.plan.dtype_policies)
    rtol = DEFAULT_RTOL if run.options.rtol is None else run.options.rtol
    atol = DEFAULT_ATOL if run.options.atol is None else run.options.atol
    backends = {b: v for b, v in report["backends"].items() if v["status"] != "skipped"}
    ran = [b for b, v in backends.items() if v.get("status") in ("parity", "mismatch", "within_float32_noise")]
    ref_kind = report["reference"].get("kind")
    pr, pa = report["tolerance"]["rtol"], report["tolerance"]["atol"]
    section: dict[str, Any] = {
        "policies": found, "rtol": rtol, "atol": atol, "policy_rtol": pr, "policy_atol": pa,
        "reference": {"kind": ref_kind}, "backends": {}}
    report["precision"] = section
    if reference is None or ref_kind == "golden-npz" or not ran:
        section.update(status="unavailable", decided_by="outputs",
                       reason="the reference is a golden file: no model to rerun in float32" if ref_kind ==
                       "golden-npz" else "no backend ran")
        return
    t0 = time.perf_counter()
    run.progress(f"dtype policy {', '.join(found)}: running the float32 shadow on the reference and "
                 f"{', '.join(ran)}")
    replies = rerun(run, ran, "float32", "f32", "shadow_schedule")
    ref_reply = replies["reference"]
    if not ref_reply["available"]:
        section.update(status="unavailable", decided_by="outputs", reason=f"reference: {ref_reply['reason']}")
        run.timings["precision_seconds"] = round(time.perf_counter() - t0, 3)
        return
    ref32 = run.load("f32-reference")
    section["reference"].update(_precision(compare_outputs(reference, ref32, pr, pa)),
                                seconds=round(ref_reply["seconds"], 3))
    for b in ran:
        rep = replies[b]
        if not rep["available"]:
            section["backends"][b] = {"policy": ", ".join(found), "status": "unavailable", "reason": rep["reason"]}
            continue
        got32 = run.load(f"f32-{b}")
        conv = compare_outputs(got32, ref32, rtol, atol)
        ok = all(s.allclose for s in conv)
        section["backends"][b] = {
            "policy": ", ".join(found), "status": "parity" if ok else "mismatch",
            "conversion": {**_worst(conv), "outputs": [s.to_dict() for s in conv]},
            "precision": _precision(compare_outputs(run.load(f"out-{b}"), got32, pr, pa)),
            "outputs_status": backends[b]["status"], "seconds": round(rep["seconds"], 3)}
    rows = section["backends"].values()
    shadow_ok = all(r["status"] == "parity" for r in rows)
    conv_bad = any(r["status"] == "mismatch" for r in rows)
    out_bad = any(backends[b]["status"] == "mismatch" for b in ran)
    section["status"] = "mismatch" if conv_bad else "parity" if shadow_ok else "unavailable"
    # Which comparison set the verdict: a conversion error outranks a precision one (it is the converter's).
    section["decided_by"] = ("conversion" if conv_bad else "outputs" if out_bad or not shadow_ok else
                             "conversion and outputs")
    if not shadow_ok and not conv_bad:
        section["reason"] = "; ".join(f"{b}: {r['reason']}" for b, r in section["backends"].items()
                                      if r["status"] == "unavailable")
    run.timings["precision_seconds"] = round(time.perf_counter() - t0, 3)


def _precision(stats: list[OutputStats]) -> dict[str, Any]:
    """Mixed against float32 on the same side: what the policy itself costs (information, no verdict)."""
    return {"max_abs": max(s.max_abs for s in stats), "max_rel": max(s.max_rel for s in stats)}


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The console's precision lines: which comparison decided the verdict, and both errors per backend."""
    p = report.get("precision")
    if not p:
        return []
    pol = ", ".join(p["policies"])
    strict, loose = f"rtol={p['rtol']:g}, atol={p['atol']:g}", f"rtol={p['policy_rtol']:g}, atol={p['policy_atol']:g}"
    head = {"conversion": f"the float32 shadow (conversion error at {strict})",
            "outputs": f"the {pol} outputs at {loose}",
            "conversion and outputs": f"the float32 shadow at {strict} (conversion) and the {pol} outputs at "
                                      f"{loose} (both pass)"}[p["decided_by"]]
    lines = [f"precision ({pol}): verdict decided by {head}"
             + (f"; shadow unavailable: {p['reason']}" if p.get("reason") else "")]
    ref = p.get("reference") or {}
    if "max_abs" in ref:
        lines.append(f"  Keras 2 {pol} vs float32 (precision): max abs {fmt(ref['max_abs'])}, "
                     f"max rel {fmt(ref['max_rel'])}")
    for b, v in p.get("backends", {}).items():
        if v["status"] == "unavailable":
            lines.append(f"  {b}: shadow unavailable: {v['reason']}")
            continue
        c, q = v["conversion"], v["precision"]
        lines.append(f"  {b}: conversion {v['status']} (max abs {fmt(c['max_abs'])}, max rel {fmt(c['max_rel'])}, "
                     f"min rtol {fmt(c['min_rtol'])}); precision max abs {fmt(q['max_abs'])}, "
                     f"max rel {fmt(q['max_rel'])}")
    return lines


def outcome(report: dict[str, Any]) -> str | None:
    """A shadow that disagrees is a conversion error (the policy's own error cannot explain it)."""
    rows = ((report.get("precision") or {}).get("backends") or {}).values()
    return "mismatch" if any(r["status"] == "mismatch" for r in rows) else None


def numeric(report: dict[str, Any]) -> str | None:
    return "mismatch" if (report.get("precision") or {}).get("status") == "mismatch" else None


def markdown(report: dict[str, Any]) -> list[str]:
    p = report.get("precision")
    if not p:
        return []
    lines = [summary_lines(report)[0], ""]
    if p.get("backends"):
        lines += ["| backend | policy | conversion | conv. max abs | conv. max rel | conv. min rtol | "
                  "precision max abs | precision max rel |", "|---|---|---|---|---|---|---|---|"]
        ref = p.get("reference") or {}
        if "max_abs" in ref:
            lines.append(f"| Keras 2 ({ref['kind']}) | {', '.join(p['policies'])} | reference | | | | "
                         f"{fmt(ref['max_abs'])} | {fmt(ref['max_rel'])} |")
        for b, v in p["backends"].items():
            if v["status"] == "unavailable":
                lines.append(f"| {b} | {v['policy']} | unavailable: {v['reason']} | | | | | |")
                continue
            c, q = v["conversion"], v["precision"]
            lines.append(f"| {b} | {v['policy']} | {v['status']} | {fmt(c['max_abs'])} | {fmt(c['max_rel'])} | "
                         f"{fmt(c['min_rtol'])} | {fmt(q['max_abs'])} | {fmt(q['max_rel'])} |")
    return lines


CHECK = Check(key="precision", title="Precision (float32 shadow)", stage=2, applies=applies, collect=collect,
              markdown=markdown, console=summary_lines, outcome=outcome, numeric=numeric)
