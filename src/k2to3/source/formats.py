"""Lint output formats: text, json, sarif (2.1.0, with fix availability), github (workflow annotations)."""

from __future__ import annotations

import json

from k2to3.core.tables import lint_tables
from k2to3.core.text import plural
from k2to3.source.run import LintResult
from k2to3.version import __version__


def text(res: LintResult) -> str:
    lines = [f.text() for f in res.findings]
    lines += [f"{e}" for e in res.errors]
    n_fix = sum(f.fixable for f in res.findings)
    lines.append(f"{plural(len(res.findings), 'finding')} ({n_fix} fixable with `k2to3 fix`) in "
                 f"{plural(res.files, 'file')}; {res.suppressed} suppressed by noqa, "
                 f"{plural(res.files_suppressed, 'file')} by `# k2to3: noqa`")
    return "\n".join(lines) + "\n"


def as_json(res: LintResult) -> str:
    return json.dumps({
        "schema": "k2to3.lint/1",
        "files": res.files,
        "findings": [f.to_dict() for f in res.findings],
        "suppressed": res.suppressed,
        "files_suppressed": res.files_suppressed,
        "errors": res.errors,
    }, indent=2) + "\n"


def sarif(res: LintResult) -> str:
    rules = [{"id": r["code"], "name": r["title"], "shortDescription": {"text": r["what"]},
              "fullDescription": {"text": r["why"]},
              # no helpUri: a docs/ path exists only in a checkout; the text says where the whole doc is
              "help": {"text": f"{r['fix']} (more: k2to3 rule {r['code']})"}} for r in lint_tables().rules]
    results = []
    for f in res.findings:
        result = {
            "ruleId": f.code, "level": "warning", "message": {"text": f.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": f.path},
                                                "region": {"startLine": f.line, "startColumn": f.col}}}],
            "properties": {"fixable": f.fixable, **({"cell": f.cell} if f.cell is not None else {})},
        }
        if f.fixable:
            result["fixes"] = [{"description": {"text": "k2to3 fix --write " + f.path}}]
        results.append(result)
    doc = {"version": "2.1.0", "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
           "runs": [{"tool": {"driver": {"name": "k2to3", "version": __version__, "rules": rules}},
                     "results": results}]}
    return json.dumps(doc, indent=2) + "\n"


def github(res: LintResult) -> str:
    out = [f"::warning file={f.path},line={f.line},col={f.col},title={f.code}::{f.message}" for f in res.findings]
    return "\n".join(out) + ("\n" if out else "")


FORMATS = {"text": text, "json": as_json, "sarif": sarif, "github": github}
