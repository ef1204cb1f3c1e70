"""The audit report as Markdown: the same facts as the HTML page, as plain tables."""

from __future__ import annotations

from typing import Any

from k2to3.core import ruledocs
from k2to3.core.text import plural
from k2to3.stores import targets
from k2to3.stores.auditreport.model import optimizer_text


def _cell(text: Any) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def to_markdown(m: dict[str, Any]) -> str:
    """m is the report model (model.build)."""
    s = m["summary"]
    counts = ", ".join(f"{n} {v}" for v, n in s["verdicts"].items() if n) or "none"
    lines = [f"# k2to3 audit of {m['root']}", "",
             f"- Artifacts: {s['artifacts']} ({counts}); worst verdict: {m['worst_verdict']}",
             f"- Evidence: {s['verified']} verified with `--verify`, {s['predicted']} predicted from the config "
             "(a static verdict is a prediction; `--verify` is the proof)",
             f"- Source files: {s['source_files']}; findings: {s['findings']} ({s['fixable']} fixable by "
             f"`k2to3 fix`, {s['needs_person']} need a person)",
             f"- Effort: {plural(s['files_to_touch'], 'file')} to touch; after `k2to3 fix`, "
             f"{plural(s['findings_left_after_fix'], 'finding')} in {plural(s['files_left_after_fix'], 'file')}",
             "- Findings per rule: " + (", ".join(f"{k} {v}" for k, v in m["rule_totals"].items()) or "none"),
             f"- Debt behind noqa: {plural(s['noqa_debt']['lines'], 'line')}, "
             f"{plural(s['noqa_debt']['files'], 'file')}",
             f"- Skipped: {plural(s.get('skipped', 0), 'file')} named like a model but not one" if s.get("skipped")
             else "- Skipped: none",
             "- Optimizer state: " + (", ".join(f"{n} {k}" for k, n in sorted(s.get("optimizer_states", {}).items()))
                                      or "no HDF5 model read"),
             f"- Commands run from `{m['root']}`", ""]
    lines += ["## Top blockers", ""]
    if m["blockers"]:
        lines += ["| artifacts | cause | rule | what unblocks them | e.g. |", "|---|---|---|---|---|"]
        for b in m["blockers"]:
            rule = f"[{b['code']}]({b['docs']})" if b["docs"] else (b["code"] or "")
            lines.append(f"| {b['artifacts']} | {_cell(b['label'])} | {rule} | {_cell(b['action'])} | "
                         f"{', '.join(f'`{x}`' for x in b['examples'])} |")
    else:
        lines.append("None: every artifact is portable." if s["artifacts"] else "None: no artifact was found.")
    lines += ["", "## Artifacts", "", "| artifact | verdict | effort | evidence | optimizer state | deployment "
              "targets | reason | next command | custom objects from | rules | Keras |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for a in m["artifacts"]:
        v = a.get("verify")
        if v:
            err = a.get("worst_error")
            ev = f"verified: {v['verdict']}" + (" (cached)" if v.get("cached") else "") \
                + (f", worst error {err:.1e}" if err is not None else "")
        else:
            ev = "static"
        cmd = f"`{a['next']}`" if a.get("next") else "blocked"
        rules = ", ".join(f"{k}×{n}" for k, n in a.get("rules", {}).items())
        lines.append(f"| `{a['relpath']}` | {a['verdict']} | {a['effort']} | {ev} | "
                     f"{_cell(optimizer_text(a.get('optimizer_state')))} | "
                     f"{_cell(targets.summary(a.get('targets')) or 'blocked')} | "
                     f"{_cell(a['reason'])} | {cmd} | "
                     f"{', '.join(a['custom_sources'])} | {rules} | {a.get('keras_version') or ''} |")
    if m["source_files"]:
        lines += ["", "## Source files (by effort: findings left after `k2to3 fix`)", "",
                  "| file | left after fix | findings | fixable | by rule | preview the fix |",
                  "|---|---|---|---|---|---|"]
        for f in m["source_files"]:
            rules = ", ".join(f"{r['code']}×{r['n']}" + (f" ({r['fixable']} fixable)" if r["fixable"] else "")
                              for r in f["rules"])
            lines.append(f"| `{f['relpath']}` | {f['left']} | {f['findings']} | {f['fixable']} | {rules} | "
                         f"`{f['command']}` |")
    if m.get("skipped"):
        lines += ["", "## Skipped files (named like a model, but not one)", "", "| file | why |", "|---|---|"]
        lines += [f"| `{x['relpath']}` | {_cell(x['reason'])} |" for x in m["skipped"]]
    rules = ruledocs.report_section([r["code"] for r in m.get("rules", [])])  # what the #k2t901 links point to
    if rules:
        lines += ["", *rules]
    return "\n".join(lines) + "\n"
