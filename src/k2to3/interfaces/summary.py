"""The console summary of a convert or verify report: the backends table, the notes, the findings that changed the
model, the gradient and precision lines, and the verdict with the line that loads the result."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from k2to3.checks.format import fmt
from k2to3.checks.outputs import noise_cell, notes
from k2to3.checks.registry import CHECKS


def print_summary(out: Console, report: dict[str, Any]) -> None:
    ref = report["reference"]
    t = Table(title=f"{report['input']['path']} → {report['output']['path']}  "
                    f"(reference: {ref.get('kind')}, rtol={report['tolerance']['rtol']:g}, "
                    f"atol={report['tolerance']['atol']:g})")
    for col in ("backend", "status", "params", "weights sha256", "max abs", "max rel", "min rtol", "argmax",
                "float32 noise", "first divergent layer"):
        t.add_column(col)
    for b, v in report["backends"].items():
        if v["status"] == "error":
            t.add_row(b, "[red]error[/]", "", "", "", "", "", "", "", v["error"][:60])
            continue
        if v["status"] == "skipped":
            t.add_row(b, "[yellow]skipped[/]", "", "", "", "", "", "", "", v["reason"][:60])
            continue
        outs = v["outputs"]
        agree = [o["argmax_agreement"] for o in outs if o["argmax_agreement"] is not None]
        noise = v.get("noise") or {}
        color = "green" if v["status"] == "parity" else "yellow" if noise.get("verdict") == "within_float32_noise" \
            else "red"
        t.add_row(b, f"[{color}]{v['status']}[/]", f"{v['params_trainable'] + v['params_non_trainable']:,}",
                  v["weight_hash"][:12], fmt(max(o["max_abs"] for o in outs)),
                  fmt(max(o["max_rel"] for o in outs)), fmt(max(o["min_rtol"] for o in outs)),
                  f"{min(agree):.0f}%" if agree else "n/a", noise_cell(v.get("noise"))[:40],
                  (v.get("first_divergent_layer") or {}).get("layer", ""))
    out.print(t)
    for note in notes(report):
        out.print(f"[yellow]note[/]: {note}", highlight=False)
    changed = [f for f in report["findings"] if f["severity"] != "info"]
    n_info = len(report["findings"]) - len(changed)
    applied = "config fixes convert applies" if report.get("command") == "verify" else "config fixes applied"
    out.print(f"{n_info} {applied}; {len(changed)} warnings", highlight=False)
    for f in changed:
        where = f"layer '{f['layer']}': " if f.get("layer") else ""
        out.print(f"  {f['code']} {f['severity']}: {where}{f['message']}", highlight=False)
    for check in CHECKS:  # each check's own lines (precision: which comparison decided the verdict)
        for line in check.console(report):
            out.print(line, highlight=False)
    led = report.get("ledger")  # absent from `k2to3 verify` reports: nothing was restored
    nv = report.get("numeric_verdict")
    numeric = f" (numerically: {nv})" if nv not in (None, "parity") else ""
    restored = f"weights: {led['tensors_restored']}/{led['tensors_expected']} tensors restored; " if led else ""
    out.print(f"{restored}verdict: [bold]{report['verdict']}[/]{numeric}; load with: {report['output']['load']}",
              highlight=False)
