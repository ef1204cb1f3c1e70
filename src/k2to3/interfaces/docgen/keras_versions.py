"""Render docs/keras-versions.md from rules/keras_versions.toml
(`python -m k2to3.interfaces.docgen.keras_versions > docs/keras-versions.md`)."""

from __future__ import annotations

from k2to3.core.keras_versions import show, version_rules

HEADER = """# Keras 3 versions: what `--target-keras` rewrites

Generated from `rules/keras_versions.toml` by `python -m k2to3.interfaces.docgen.keras_versions`; do not edit by hand
(a test checks it is current). `k2to3 convert LEGACY -o MODEL.keras --target-keras 3.N` applies every rule whose
`added` release is newer than 3.N (docs/convert.md). Each was derived from the released wheels' source (keras 3.3.3,
3.4.1, 3.8.0, 3.13.2, 3.14.0, 3.15.1) and is tested by `tests/test_target_keras.py`.

| code | title | added in | action |
|---|---|---|---|
"""


def render() -> str:
    rules = version_rules()
    out = [HEADER]
    for r in rules:
        out.append(f"| [{r.code}](#{r.code.lower()}) | {r.title} | {show(r.added)} | {r.action} |\n")
    for r in rules:
        out.append(f"\n## {r.code}\n\n**{r.title}** (written since Keras {show(r.added)}; action: {r.action})\n\n")
        if r.classes:
            out.append(f"Applies to: {', '.join(f'`{c}`' for c in r.classes)}; keys "
                       f"{', '.join(f'`{k}`' for k in r.keys)}.\n\n")
        out.append(f"**What it does.** {r.what}\n\n**Why.** {r.why}\n\n")
        out.append(f"**Before:**\n\n```\n{r.before}\n```\n\n**After:**\n\n```\n{r.after}\n```\n\n")
        out.append(f"**Fix.** {r.fix}\n")
    return "".join(out)


if __name__ == "__main__":
    print(render(), end="")
