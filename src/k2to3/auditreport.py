"""Audit report forms: JSON, Markdown and one self-contained HTML page (inline CSS and SVG, no network)."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;width:100%}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}
.portable{color:#137333}.tf-only,.blocked{color:#b3261e}.with-source{color:#a56200}code{font-size:12px}
svg{background:#fafafa;border:1px solid #ddd}"""


def _cls(verdict: str) -> str:
    return {"portable with source": "with-source"}.get(verdict, verdict)


def layer_plot(rows: list[dict[str, Any]], width: int = 520, height: int = 160) -> str:
    """Inline SVG: log10 max abs error per layer, in topological order."""
    vals = [r["max_abs"] for r in rows if r.get("max_abs") is not None]
    if not vals:
        return ""
    logs = [math.log10(max(v, 1e-12)) for v in vals]
    lo, hi = min(logs), max(max(logs), min(logs) + 1)
    n = len(logs)
    xs = [20 + i * (width - 40) / max(n - 1, 1) for i in range(n)]
    ys = [height - 20 - (v - lo) / (hi - lo) * (height - 40) for v in logs]
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
    return (f'<svg class="layer-plot" width="{width}" height="{height}" role="img" '
            f'aria-label="per-layer error"><polyline fill="none" stroke="#b3261e" stroke-width="1.5" '
            f'points="{pts}"/><text x="4" y="12" font-size="10">log10 max abs error per layer '
            f'({lo:.1f} to {hi:.1f})</text></svg>')


def to_markdown(rep: dict[str, Any]) -> str:
    lines = [f"# k2to3 audit of {', '.join(rep['paths'])}", "",
             f"- Artifacts: {len(rep['artifacts'])} ({', '.join(f'{v} {k}' for k, v in rep['totals'].items())}); "
             f"worst verdict: {rep['worst_verdict']}",
             f"- Source files: {rep['n_source_files']}; findings per rule: "
             + (", ".join(f"{k} {v}" for k, v in rep["rule_totals"].items()) or "none"),
             f"- Debt behind noqa: {rep['noqa_debt']['lines']} lines, {rep['noqa_debt']['files']} files", "",
             "| artifact | Keras | verdict | reason | rules | verify |", "|---|---|---|---|---|---|"]
    for a in rep["artifacts"]:
        v = a.get("verify")
        vtxt = "" if v is None else (v["verdict"] + (" (cached)" if v.get("cached") else ""))
        rules = ", ".join(f"{k}×{n}" for k, n in a.get("rules", {}).items())
        lines.append(f"| `{a['path']}` | {a.get('keras_version') or ''} | {a['verdict']} | "
                     f"{a['reason'].replace('|', '/')} | {rules} | {vtxt} |")
    if rep["sources"]:
        lines += ["", "## Sources", "", "| file | findings |", "|---|---|"]
        for p, c in rep["sources"].items():
            lines.append(f"| `{p}` | {', '.join(f'{k}×{n}' for k, n in c.items())} |")
    return "\n".join(lines) + "\n"


def to_html(rep: dict[str, Any]) -> str:
    e = html.escape
    rows = []
    for a in rep["artifacts"]:
        v = a.get("verify") or {}
        plots = "".join(f"<div>{e(b)}: first divergent layer <code>{e(str(fd))}</code><br>"
                        f"{layer_plot(v.get('layer_errors', {}).get(b, []))}</div>"
                        for b, fd in ((b, x.get("first_divergent_layer")) for b, x in v.get("backends", {}).items())
                        if fd)
        rows.append(f"<tr><td><code>{e(a['path'])}</code></td><td>{e(str(a.get('keras_version') or ''))}</td>"
                    f"<td class='{_cls(a['verdict'])}'>{e(a['verdict'])}</td><td>{e(a['reason'])}</td>"
                    f"<td>{e(', '.join(f'{k}×{n}' for k, n in a.get('rules', {}).items()))}</td>"
                    f"<td>{e(v.get('verdict', ''))}{plots}</td></tr>")
    src = "".join(f"<tr><td><code>{e(p)}</code></td><td>{e(', '.join(f'{k}×{n}' for k, n in c.items()))}</td></tr>"
                  for p, c in rep["sources"].items())
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>k2to3 audit</title><style>{CSS}</style>"
            f"</head><body><h1>k2to3 audit</h1><p>{len(rep['artifacts'])} artifacts; worst verdict: "
            f"<b>{e(str(rep['worst_verdict']))}</b>; {rep['n_source_files']} source files.</p>"
            f"<table id='artifacts'><tr><th>artifact</th><th>Keras</th><th>verdict</th><th>reason</th>"
            f"<th>rules</th><th>verify</th></tr>{''.join(rows)}</table>"
            f"<h2>Sources</h2><table id='sources'><tr><th>file</th><th>findings</th></tr>{src}</table>"
            f"<script type='application/json' id='data'>{e(json.dumps(rep['totals']))}</script></body></html>\n")


def write(rep: dict[str, Any], out_dir: Path, formats: list[str]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        p = out_dir / f"audit.{fmt}"
        text = {"json": lambda: json.dumps(rep, indent=2, default=str) + "\n", "md": lambda: to_markdown(rep),
                "html": lambda: to_html(rep)}[fmt]()
        p.write_text(text)
        written.append(p)
    return written
