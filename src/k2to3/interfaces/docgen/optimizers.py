"""rules/optimizers.toml (reviewed data) and its rendering into docs/optimizers.md between the markers
(`python -m k2to3.interfaces.docgen.optimizers --write`)."""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import Any

import tomllib

from k2to3.core.rules import rules_dir

BEGIN, END = "<!-- optimizer-rules:begin -->", "<!-- optimizer-rules:end -->"
STATUSES = {"translated", "portable", "finding", "same"}


@cache
def optimizer_rules() -> tuple[dict[str, Any], ...]:
    path = rules_dir() / "optimizers.toml"
    with open(path, "rb") as fh:
        rules = tuple(tomllib.load(fh)["rule"])
    for r in rules:
        missing = {"code", "title", "optimizer", "status", "what", "why", "before", "after", "fix"} - set(r)
        if missing or r["status"] not in STATUSES:
            raise ValueError(f"{path}: rule {r.get('code')}: missing {sorted(missing)} or bad status")
    if len({r["code"] for r in rules}) != len(rules):
        raise ValueError(f"{path}: duplicate rule codes")
    return rules


def render() -> str:
    out = [BEGIN, "\n\n| code | title | optimizer | status |\n|---|---|---|---|\n"]
    for r in optimizer_rules():
        out.append(f"| [{r['code']}](#{r['code'].lower()}) | {r['title']} | {r['optimizer']} | {r['status']} |\n")
    for r in optimizer_rules():
        out.append(f"\n### {r['code']}\n\n**{r['title']}** ({r['optimizer']}; {r['status']})\n\n")
        out.append(f"**What.** {r['what']}\n\n**Why.** {r['why']}\n\n")
        out.append(f"**Example.** Keras 2: `{r['before']}`; k2to3: `{r['after']}`\n\n**Fix.** {r['fix']}\n")
    out.append("\n" + END)
    return "".join(out)


def updated(doc: str) -> str:
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + render() + tail


if __name__ == "__main__":
    p = Path(__file__).resolve().parents[4] / "docs" / "optimizers.md"
    if "--write" in sys.argv:
        p.write_text(updated(p.read_text()))
    else:
        print(render())
