"""The console summary of a convert or verify report: the backends table, the notes, the findings that changed the
model, the gradient and precision lines, and the verdict with the line that loads the result.

The table fits the console: a column empty on every backend is left out, and below COMPACT columns the figures that
are the same on every backend (parameters, weights hash) move to one line under the table and the relative error
goes (report.json keeps every figure)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from k2to3.checks.number_format import fmt
from k2to3.checks.outputs import noise_cell, notes
from k2to3.checks.registry import CHECKS
from k2to3.core.text import plural

COMPACT = 110  # console columns below which the table takes its compact layout
COLUMNS = ("backend", "status", "params", "weights sha256", "max abs", "max rel", "min rtol", "argmax",
           "float32 noise", "first divergent layer")
SHARED = ("params", "weights sha256")  # factored out of a compact table when every backend has the same


def backend_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """One dict per backend: column -> cell (rich markup in `status`)."""
    rows = []
    for b, v in report["backends"].items():
        if v["status"] in ("error", "skipped", "not_runnable"):
            color = "red" if v["status"] == "error" else "yellow"
            rows.append({"backend": b, "status": f"[{color}]{v['status']}[/]",
                         "first divergent layer": v.get("error") or v.get("reason") or ""})
            continue
        outs = v["outputs"]
        agree = [o["argmax_agreement"] for o in outs if o["argmax_agreement"] is not None]
        noise = v.get("noise") or {}
        color = "green" if v["status"] == "parity" else "yellow" if noise.get("verdict") == "within_float32_noise" \
            else "red"
        rows.append({"backend": b, "status": f"[{color}]{v['status']}[/]",
                     "params": f"{v['params_trainable'] + v['params_non_trainable']:,}",
                     "weights sha256": v["weight_hash"][:12], "max abs": fmt(max(o["max_abs"] for o in outs)),
                     "max rel": fmt(max(o["max_rel"] for o in outs)), "min rtol": fmt(max(o["min_rtol"] for o in outs)),
                     "argmax": f"{min(agree):.0f}%" if agree else "n/a", "float32 noise": noise_cell(v.get("noise")),
                     "first divergent layer": (v.get("first_divergent_layer") or {}).get("layer", "")})
    return rows


def backends_table(report: dict[str, Any], width: int) -> tuple[Table, list[str]]:
    """The table for a console `width` columns wide, and the lines printed under it (figures moved out of it).
    Its title is the line above it: a title wider than the table would be centred and wrapped."""
    rows = backend_rows(report)
    cols = [c for c in COLUMNS if c in ("backend", "status") or any(r.get(c) for r in rows)]
    below: list[str] = []
    compact = width < COMPACT
    if compact:
        measured = [r for r in rows if r.get("params")]
        for c in SHARED:
            values = {r[c] for r in measured}
            if c in cols and len(values) == 1:
                cols.remove(c)
                below.append(f"{c}: {values.pop()}")
        cols = [c for c in cols if c != "max rel"]
        if below:
            below = ["; ".join(below) + (" on every backend" if len(measured) > 1 else "")]
    # compact: no vertical rules; only the last column (a layer name or an error's reason) ever wraps
    t = Table(box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD)
    failed = any(r["status"].endswith(("error[/]", "skipped[/]")) for r in rows)
    for c in cols:
        last = c == "first divergent layer"
        t.add_column(f"{c} / reason" if last and failed else c, overflow="fold" if last else "ellipsis",
                     no_wrap=not last)
    for r in rows:
        t.add_row(*(r.get(c, "") for c in cols))
    return t, below


def title(report: dict[str, Any]) -> str:
    ref, tol = report["reference"], report["tolerance"]
    return (f"{report['input']['path']} → {report['output']['path']}  (reference: {ref.get('kind')}, "
            f"rtol={tol['rtol']:g}, atol={tol['atol']:g})")


def print_summary(out: Console, report: dict[str, Any]) -> None:
    table, below = backends_table(report, out.width)
    out.print(title(report), highlight=False)
    out.print(table)
    for line in below:
        out.print(line, highlight=False)
    for note in notes(report):
        out.print(f"[yellow]note[/]: {note}", highlight=False)
    changed = [f for f in report["findings"] if f["severity"] != "info"]
    n_info = len(report["findings"]) - len(changed)
    fixes = plural(n_info, "config fix", "config fixes")
    applied = f"convert would apply {fixes}" if report.get("command") == "verify" else f"{fixes} applied"
    out.print(f"{applied}; {plural(len(changed), 'warning')}", highlight=False)
    for f in changed:
        where = f"layer '{f['layer']}': " if f.get("layer") else ""
        out.print(f"  {f['code']} {f['severity']}: {where}{f['message']}", highlight=False)
    for check in CHECKS:  # each check's own lines (precision: which comparison decided the verdict)
        for line in check.console(report):
            out.print(line, highlight=False)
    t = report.get("target")
    if t:  # --target-keras: what the older release said, with its figures
        worst = max((o["max_abs"] for o in t.get("outputs") or []), default=None)
        fig = f", max abs {worst:.3g}" if worst is not None else ""
        why = f": {t['error']}" if t.get("error") else ""
        out.print(f"target Keras {t.get('keras_version', t['keras'])} ({(t.get('environment') or {}).get('backend')})"
                  f": [bold]{t.get('status')}[/]{fig}; {len(t.get('dropped') or [])} keys rewritten for it{why}",
                  highlight=False)
    led = report.get("ledger")  # absent from `k2to3 verify` reports: nothing was restored
    nv = report.get("numeric_verdict")
    numeric = f" (numerically: {nv})" if nv not in (None, "parity") else ""
    restored = f"weights: {led['tensors_restored']}/{led['tensors_expected']} tensors restored; " if led else ""
    e = report.get("export") or {}
    # `k2to3 export`: what the user takes away is the exported file, and only when it was written
    load = (f"exported: {e['path']}" if e.get("written") else "nothing exported") if report.get("command") == \
        "export" else f"load with: {report['output']['load']}"
    out.print(f"{restored}verdict: [bold]{report['verdict']}[/]{numeric}; {load}", highlight=False)


def print_audit_summary(out: Console, m: dict[str, Any], written: list[Any]) -> None:
    """The audit's last lines: verdict counts, how many are verified vs predicted, the source findings, the top
    blocker with what unblocks it, and where the reports are."""
    s = m["summary"]
    for verdict, n in s["verdicts"].items():
        if n:
            out.print(f"{n:4d} {verdict}", highlight=False)
    out.print(f"evidence: {s['verified']} verified with --verify, {s['predicted']} predicted from the config"
              + ("" if s["verified"] or not s["artifacts"] else " (run with --verify for the proof)"), highlight=False,
              soft_wrap=True)
    out.print(f"sources: {plural(s['source_files'], 'file')}, {plural(s['findings'], 'finding')} "
              f"({s['fixable']} fixable by `k2to3 fix`)", highlight=False, soft_wrap=True)
    if m["blockers"]:
        b = m["blockers"][0]
        code = f" {b['code']}" if b.get("code") else ""
        out.print(f"top blocker:{code} {b['label']} ({plural(b['artifacts'], 'artifact')}): {b['action']}",
                  highlight=False, soft_wrap=True, markup=False)
        first = next((a for a in m["artifacts"] if a["relpath"] == b["examples"][0]), None) if b["examples"] else None
        if first and first.get("next"):
            out.print(f"  next: {first['next']}", highlight=False, soft_wrap=True, markup=False)
    out.print(f"reports: {'  '.join(str(p) for p in written)}", highlight=False, soft_wrap=True, markup=False)
