"""One report dict -> report.json (schema k2to3.convert/2, docs/report.md) and report.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return "" if x is None else str(x)


def worst(report: dict[str, Any], key: str) -> dict[str, float]:
    out = {}
    for b, v in report.get("backends", {}).items():
        vals = [o[key] for o in v.get("outputs", [])]
        if vals:
            out[b] = max(vals)
    return out


def to_markdown(report: dict[str, Any]) -> str:
    inp = report["input"]
    lines = [
        f"# k2to3 convert report: `{Path(inp['path']).name}`",
        "",
        f"- **Verdict:** {report.get('verdict')} (exit code {report.get('exit_code')})"
        + (f"; numerically: {report['numeric_verdict']}" if report.get("numeric_verdict") not in (None, "parity")
           else ""),
        f"- **Input:** `{inp['path']}` (Keras {inp.get('keras_version')}, {inp['n_params']:,} parameters in "
        f"{inp['n_weight_tensors']} tensors, sha256 `{inp['sha256'][:16]}…`)",
    ]
    out = report.get("output")
    if out:
        lines.append(f"- **Output:** `{out['path']}` (sha256 `{out['sha256'][:16]}…`); load with "
                     f"`{out['load']}`")
    ref = report.get("reference")
    if ref:
        lines.append(f"- **Reference:** {ref.get('kind')}"
                     + (f" {ref.get('keras_version')}" if ref.get("keras_version") else "")
                     + (f" ({ref['reason']})" if ref.get("reason") else ""))
    tol = report.get("tolerance")
    if tol:
        lines.append(f"- **Tolerance:** rtol={tol['rtol']:g}, atol={tol['atol']:g} ({tol['source']})")
    if report.get("dtype_policies"):
        lines.append(f"- **dtype policies found:** {', '.join(report['dtype_policies'])}")
    led = report.get("ledger")
    if led:
        lines.append(f"- **Weights restored:** {led['tensors_restored']}/{led['tensors_expected']} tensors, "
                     f"{led['params_restored']:,}/{led['params_expected']:,} parameters")
    if inp.get("optimizer_weights_dropped"):
        lines.append(f"- **Optimizer state:** {inp['optimizer_weights_dropped']} tensors not carried over")
    if report.get("backends"):
        lines += ["", "## Backends", "",
                  "| backend | status | params (trainable / non-trainable) | weight hash | max abs err | "
                  "max rel err | min rtol | min atol | argmax agree | float32 noise | first divergent layer |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for b, v in report["backends"].items():
            if v["status"] in ("error", "skipped"):
                lines.append(f"| {b} | {v['status']}: {v.get('error') or v.get('reason')} | | | | | | | | | |")
                continue
            outs = v["outputs"]
            fdl = v.get("first_divergent_layer") or {}
            agree = [o["argmax_agreement"] for o in outs if o["argmax_agreement"] is not None]
            lines.append(
                f"| {b} | {v['status']} | {v['params_trainable']:,} / {v['params_non_trainable']:,} | "
                f"`{v['weight_hash'][:12]}` | {_fmt(max(o['max_abs'] for o in outs))} | "
                f"{_fmt(max(o['max_rel'] for o in outs))} | {_fmt(max(o['min_rtol'] for o in outs))} | "
                f"{_fmt(max(o['min_atol'] for o in outs))} | "
                f"{_fmt(min(agree)) + '%' if agree else 'n/a'} | {noise_cell(v.get('noise'))} | "
                f"{fdl.get('layer', '')} |")
        lines += [f"\nNote: {n}" for n in output_notes(report)]
    if report.get("gradients"):
        from k2to3.gradients import markdown

        lines += markdown(report["gradients"])
    from k2to3.precision import markdown as precision_markdown

    lines += precision_markdown(report)
    if report.get("source"):
        src = report["source"]
        lines += ["", "## From the source", "", f"Generated module: `{src['module']}` (package `{src['package']}`), "
                  f"from {', '.join(f'`{f}`' for f in src['files'])}.", "",
                  "| object | kind | source | layers |", "|---|---|---|---|"]
        lines += [f"| `{o['name']}` | {o['kind']} | {o['source']} | {', '.join(o['layers'])} |" for o in src["objects"]]
    if report.get("findings"):
        lines += ["", "## Findings", "", "| code | severity | layer | message |", "|---|---|---|---|"]
        for f in report["findings"]:
            lines.append(f"| [{f['code']}](docs/rules.md#{f['code'].lower()}) | {f['severity']} | "
                         f"{f['layer'] or ''} | {f['message']}{' Fix: ' + f['fix'] if f.get('fix') else ''} |")
    if report.get("renames"):
        lines += ["", "## Renamed layers", ""] + [f"- `{a}` → `{b}`" for a, b in report["renames"].items()]
    return "\n".join(lines) + "\n"


def noise_cell(noise: dict[str, Any] | None) -> str:
    """The float32 noise verdict in a few words: `within (k=0.55, floor 3.8e-05)`; empty when not measured."""
    if not noise:
        return ""
    if noise["verdict"] == "unavailable":
        return f"unavailable: {noise['reason']}"
    floor = max(o["floor_abs"] + o["reference_floor_abs"] for o in noise["outputs"])
    word = "within" if noise["verdict"] == "within_float32_noise" else "beyond"
    return f"{word} (k={_fmt(noise['k'])}, floor {_fmt(floor)})"


def output_notes(report: dict[str, Any]) -> list[str]:
    notes = []
    if report.get("numeric_verdict") == "within_float32_noise":
        notes.append("every mismatch is within float32 noise: the float64 reruns agree and the error is at most "
                     "k times the float32 noise floor of the two sides; the exit code keeps the strict tolerance "
                     "(pass --atol with the min atol shown to accept it)")
    nonfinite = (report.get("ledger") or {}).get("nonfinite") or []
    if nonfinite:  # restored as stored (docs/security.md): say so where the user looks, not only in report.json
        more = f" and {len(nonfinite) - 3} more" if len(nonfinite) > 3 else ""
        notes.append(f"{len(nonfinite)} weight tensor(s) hold NaN or Inf, restored as stored: "
                     f"{', '.join(nonfinite[:3])}{more} (ledger.nonfinite; docs/security.md)")
    for v in report.get("backends", {}).values():
        for o in v.get("outputs", []):
            if o.get("note") and f"output {o['index']}: {o['note']}" not in notes:
                notes.append(f"output {o['index']}: {o['note']}")
    return notes


def write(report: dict[str, Any], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    pj, pm = directory / "report.json", directory / "report.md"
    pj.write_text(json.dumps(report, indent=2, default=str) + "\n")
    pm.write_text(to_markdown(report))
    return [pj, pm]
