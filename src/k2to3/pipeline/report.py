"""The report of a run (schema k2to3.convert/2, every field in docs/report.md): what a run starts it with (base);
the checks add their sections, the pipeline its output and verdict. report.json and report.md are written from the
same schema: every top-level key of report.json has its place in report.md (SECTIONS: the header line that shows it,
or the section that renders it; the checks render their own, checks/registry.py), and tests/test_report_schema.py
fails on a key without one."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from k2to3.checks.number_format import fmt
from k2to3.checks.registry import CHECKS
from k2to3.core import ruledocs
from k2to3.core.writable import write_atomic
from k2to3.errors import InputError, NotPortable
from k2to3.formats import Input, checkpoint
from k2to3.formats.artifact import file_sha256
from k2to3.pipeline.target import markdown as target_markdown
from k2to3.source.buildargs import cli_text
from k2to3.upgrade.plan import Plan
from k2to3.version import __version__

SCHEMA = "k2to3.convert/2"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def base(src: Path, inp: Input, plan: Plan | None) -> dict[str, Any]:
    artifact = inp.artifact
    assert artifact is not None
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "k2to3_version": __version__,
        "created": now(),
        "input": {
            "path": str(src),
            "sha256": checkpoint.sha256(Path(inp.bridged["checkpoint"]["prefix"])) if inp.kind == "tf_checkpoint"
            else file_sha256(src),
            "keras_version": artifact.keras_version,
            "saved_backend": artifact.backend,
            "n_weight_tensors": artifact.n_tensors,
            "n_params": artifact.n_params,
            "optimizer_weights_dropped": artifact.optimizer_weight_count,
            "extra_attributes": artifact.extra_root_attrs,
        },
        "findings": [f.to_dict() for f in plan.findings] if plan else [],
        "renames": plan.renames if plan else {},
        "dtype_policies": sorted(plan.dtype_policies) if plan else [],
    }
    report["input"]["format"] = inp.format
    if inp.bridged:
        report["input"].update(inp.bridged)
    return report


class NotPortableReport(NotPortable):
    """The model cannot be converted from what was given; `report` says why (written like any report)."""

    def __init__(self, message: str, report: dict[str, Any]):
        super().__init__(message, hint=None)
        self.report = report


Render = Callable[[dict[str, Any]], list[str]]


def _header(report: dict[str, Any]) -> list[str]:
    inp = report["input"]
    title = "verify" if report.get("command") == "verify" else "convert"
    lines = [f"# k2to3 {title} report: `{Path(inp['path']).name}`", "",
             f"- **Verdict:** {report.get('verdict')} (exit code {report.get('exit_code')})"
             + (f"; numerically: {report['numeric_verdict']}" if report.get("numeric_verdict") not in (None, "parity")
                else "")]
    if report.get("tf_only"):
        lines.append("- **TensorFlow-only ops:** " + ", ".join(f"{t['op']} at layer '{t['layer']}'"
                                                             for t in report["tf_only"]))
    params = f"{inp['n_params']:,} parameters in {inp['n_weight_tensors']} tensors" if inp.get("n_params") is not None \
        else "no parameter count"
    lines.append(f"- **Input:** `{inp['path']}` ({inp.get('format', 'HDF5')}, Keras {inp.get('keras_version')}, "
                 f"{params}, sha256 `{inp['sha256'][:16]}…`)")
    ck = inp.get("checkpoint")
    if ck:
        lines.append(f"- **Checkpoint:** {ck['weight_groups']} weight groups loaded into `{ck['built_by']}`"
                     + (f" ({ck['match']['summary']})" if ck.get("match") else "")
                     + f"; {ck['optimizer_values']} optimizer values, {ck['optimizer_variables_restored']} "
                     f"{ck['optimizer'] or 'optimizer'} variables restored"
                     + (f" from the {ck['optimizer_layout']} layout" if ck.get("optimizer_layout") else "")
                     + f" (iterations {ck['iterations']}); "
                     f"declared {ck['declared_bytes']} bytes in {ck['data_bytes']} of data")
    out = report.get("output")
    if out:
        lines.append(f"- **Output:** `{out['path']}` (sha256 `{out['sha256'][:16]}…`"
                     + (", checked, not written" if out.get("checked_only") else "") + f"); load with `{out['load']}`")
    ref = report.get("reference")
    if ref:
        lines.append(f"- **Reference:** {ref.get('kind')}"
                     + (f" {ref.get('keras_version')}" if ref.get("keras_version") else "")
                     + (f", from {ref['from']}" if ref.get("from") else "")
                     + (f" ({ref['reason']})" if ref.get("reason") else ""))
    tol = report.get("tolerance")
    if tol:
        lines.append(f"- **Tolerance:** rtol={tol['rtol']:g}, atol={tol['atol']:g} ({tol['source']})")
    if report.get("inputs"):
        lines.append("- **Inputs:** " + ", ".join(f"`{i['name']}` {tuple(i['shape'])} {i['dtype']} ({i['source']})"
                                                  for i in report["inputs"]))
    if report.get("dtype_policies"):
        lines.append(f"- **dtype policies found:** {', '.join(report['dtype_policies'])}")
    led = report.get("ledger")
    if led:
        lines.append(f"- **Weights restored:** {led['tensors_restored']}/{led['tensors_expected']} tensors, "
                     f"{led['params_restored']:,}/{led['params_expected']:,} parameters"
                     + (f", matched by {led['weights_matched_by']}" if led.get("weights_matched_by") else ""))
    build = report.get("build")
    if build:
        lines.append(f"- **Built:** weight hash `{build['weight_hash'][:12]}`"
                     + (f"; warnings: {'; '.join(build['warnings'])}" if build.get("warnings") else ""))
    if "weight_hashes_agree" in report:
        lines.append(f"- **Weight hashes agree across backends:** {'yes' if report['weight_hashes_agree'] else 'no'}")
    lines.append(f"- **Written by:** k2to3 {report.get('k2to3_version')} at {report.get('created')} "
                 f"(schema {report.get('schema')})")
    return lines


def _source(report: dict[str, Any]) -> list[str]:
    src = report.get("source")
    if not src:
        return []
    if src.get("set_aside"):  # pipeline/convert.py: the file converted alone after the sources failed
        return [f"Sources {', '.join(f'`{f}`' for f in src['files'])} set aside: {src['set_aside']}; converted from "
                "the file alone.", ""]
    return [f"Generated module: `{src['module']}` (package `{src['package']}`), from "
            f"{', '.join(f'`{f}`' for f in src['files'])}"
            + (f", build function `{src['build_fn']}`" if src.get("build_fn") else "")
            + (f" called with `{cli_text(src['build_args'])}`" if src.get("build_args") else "") + ".", "",
            *([f"Build matched to the file: {src['match']['summary']} ({src['match']['source']}).", ""]
              if src.get("match") else []),
            "| object | kind | source | layers |", "|---|---|---|---|",
            *[f"| `{o['name']}` | {o['kind']} | {o['source']} | {', '.join(o['layers'])} |" for o in src["objects"]]]


def _findings(report: dict[str, Any]) -> list[str]:
    if not report.get("findings"):
        return []
    docs = ruledocs.rule_docs()
    return ["| code | severity | layer | message |", "|---|---|---|---|",
            *[f"| {_code_link(f['code'], docs)} | {f['severity']} | {f['layer'] or ''} | "
              f"{f['message']}{' Fix: ' + f['fix'] if f.get('fix') else ''} |" for f in report["findings"]]]


def _code_link(code: str, docs: dict[str, Any]) -> str:
    """A link to the code's entry in this report's Rules section (to_markdown adds one per cited code)."""
    return f"[{code}](#{ruledocs.anchor(code)})" if code in docs else code


def _renames(report: dict[str, Any]) -> list[str]:
    return [f"- `{a}` → `{b}`" for a, b in (report.get("renames") or {}).items()]


def _workarounds(report: dict[str, Any]) -> list[str]:
    return [f"- {w['backend']}, {w['jobs']}: {w['what']} ({w['why']}). Fix: {w['fix']}"
            for w in report.get("workarounds") or []]


def _run(report: dict[str, Any]) -> list[str]:
    """Where the time and the memory went (timings, memory)."""
    lines = []
    t = report.get("timings") or {}
    if t:
        lines.append("Timings: " + ", ".join(f"{k.removesuffix('_seconds')} {fmt(v)} s" for k, v in t.items()) + ".")
    m = report.get("memory") or {}
    if m:
        def mb(x: Any) -> str:
            return "unlimited" if x is None else f"{x:,.0f} MB" if x >= 10 else f"{x:.1f} MB"

        peaks = ", ".join(f"{b} {mb(v.get('peak_rss_mb'))}" for b, v in (m.get("workers") or {}).items())
        how = "one backend at a time" if m.get("sequential") else "side by side"
        lines.append(f"\nMemory: budget {mb(m.get('budget_mb'))} ({m.get('budget_source')}), weights "
                     f"{mb(m.get('weights_mb'))}, {how} on {m.get('cores')} cores; worker peaks "
                     f"{peaks or 'not measured'}; k2to3 process {mb(m.get('parent_peak_rss_mb'))}.")
    return lines


HEADER_KEYS = ("schema", "k2to3_version", "created", "command", "input", "output", "reference", "tolerance",
               "inputs", "dtype_policies", "ledger", "build", "weight_hashes_agree", "verdict", "exit_code",
               "numeric_verdict", "tf_only")
# report.md's sections after the header, in order: (heading, report.json keys it renders, renderer)
SECTIONS: list[tuple[str, tuple[str, ...], Render]] = [
    *[(c.title, (c.key,), c.markdown) for c in CHECKS],
    ("Target Keras", ("target",), target_markdown),
    ("From the source", ("source",), _source),
    ("Findings", ("findings",), _findings),
    ("Renamed layers", ("renames",), _renames),
    ("Workarounds", ("workarounds",), _workarounds),
    ("Run", ("timings", "memory"), _run),
]


def rendered_keys() -> set[str]:
    """Every report.json key report.md shows (tests/test_report_schema.py)."""
    return set(HEADER_KEYS) | {k for _, keys, _ in SECTIONS for k in keys}


def to_markdown(report: dict[str, Any]) -> str:
    """The header, the sections of SECTIONS, then a Rules section with the docs of every rule code the report
    cites: the findings' `#k2t401` links point there, so they work wherever report.md is opened (no docs/ path)."""
    lines = _header(report)
    for heading, _, render in SECTIONS:
        body = render(report)
        if body:
            lines += ["", f"## {heading}", "", *body]
    rules = ruledocs.report_section(ruledocs.cited("\n".join(lines)))
    if rules:
        lines += ["", *rules]
    return "\n".join(lines) + "\n"


def write(report: dict[str, Any], directory: Path) -> list[Path]:
    """report.json and report.md, each whole or not at all (the directory was checked before the run:
    writable.check_dir); an I/O error is the user's InputError (exit 2), never a traceback."""
    pj, pm = directory / "report.json", directory / "report.md"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(pj, json.dumps(report, indent=2, default=str) + "\n")
        write_atomic(pm, to_markdown(report))
    except OSError as exc:
        raise InputError(f"{directory}: cannot write the report ({exc.strerror or exc})",
                         hint="check the disk space and permissions, or pass --report-dir") from None
    return [pj, pm]
