"""rules/optimizers.toml (reviewed data) and its rendering into docs/optimizers.md between the markers
(`python -m k2to3.interfaces.docgen.optimizers --write`)."""

from __future__ import annotations

import sys
from pathlib import Path

from k2to3.core.ruledocs import optimizer_rules  # the loader lives with the other rule data (k2to3 rule reads it)

BEGIN, END = "<!-- optimizer-rules:begin -->", "<!-- optimizer-rules:end -->"


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
