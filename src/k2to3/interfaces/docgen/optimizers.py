"""rules/optimizers.toml (reviewed data) and its rendering into docs/optimizers.md between the markers
(`python -m k2to3.interfaces.docgen.optimizers --write`)."""

from __future__ import annotations

from k2to3.core.ruledocs import optimizer_rules  # the loader lives with the other rule data (k2to3 rule reads it)
from k2to3.interfaces.docgen import replace_section, section_main

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
    return replace_section(doc, BEGIN, END, render())


if __name__ == "__main__":
    section_main("optimizers.md", render, updated)
