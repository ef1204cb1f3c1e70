"""Render docs/keras-versions.md from rules/keras_versions.toml
(`python -m k2to3.interfaces.docgen.keras_versions > docs/keras-versions.md`)."""

from __future__ import annotations

from k2to3.core.keras_versions import export_stops, show, version_rules

HEADER = """# Keras 3 versions: what `--target-keras` rewrites

Generated from `rules/keras_versions.toml` by `python -m k2to3.interfaces.docgen.keras_versions`; do not edit by hand
(a test checks it is current). `k2to3 convert LEGACY -o MODEL.keras --target-keras 3.N` applies every rule whose
`added` release is newer than 3.N (docs/convert.md). Each was derived from the released wheels' source (keras 3.3.3,
3.4.1, 3.8.0, 3.13.2, 3.14.0, 3.15.1) and is tested by `tests/test_target_keras.py`.

| code | title | added in | action |
|---|---|---|---|
"""


EXPORT_HEADER = """
# Export formats: the stops `k2to3 audit` predicts

`k2to3 audit` predicts from an artifact's config which export formats (`k2to3 export --format`) it reaches
(docs/audit.md#deployment-targets): a format is a predicted stop when one of these applies, else predicted reachable.
Each is a stop docs/export.md#stops records; `measured` names the fixture `tests/test_export.py` measured it on.

| code | title | format | applies when | measured on |
|---|---|---|---|---|
"""


def render() -> str:
    rules = version_rules()
    out = [HEADER]
    for r in rules:
        added = "per key" if r.scope == "layer-keywords" else show(r.added)
        out.append(f"| [{r.code}](#{r.code.lower()}) | {r.title} | {added} | {r.action} |\n")
    for r in rules:
        since = "each key since the release rules/keras_layer_params.json names" if r.scope == "layer-keywords" \
            else f"written since Keras {show(r.added)}"
        out.append(f"\n## {r.code}\n\n**{r.title}** ({since}; action: {r.action})\n\n")
        if r.classes:
            out.append(f"Applies to: {', '.join(f'`{c}`' for c in r.classes)}; keys "
                       f"{', '.join(f'`{k}`' for k in r.keys)}.\n\n")
        out.append(f"**What it does.** {r.what}\n\n**Why.** {r.why}\n\n")
        out.append(f"**Before:**\n\n```\n{r.before}\n```\n\n**After:**\n\n```\n{r.after}\n```\n\n")
        out.append(f"**Fix.** {r.fix}\n")
    out.append(EXPORT_HEADER)
    stops = export_stops()
    for s in stops:
        out.append(f"| [{s.code}](#{s.code.lower()}) | {s.title} | {s.format} | {s.when}: "
                   f"{', '.join(f'`{v}`' for v in s.values)} | {f'`{s.measured}`' if s.measured else '-'} |\n")
    for s in stops:
        out.append(f"\n## {s.code}\n\n**{s.title}** (format: {s.format})\n\n**What.** {s.what}\n\n"
                   f"**Why.** {s.why}\n\n**Before:** {s.before}\n\n**After:** {s.after}\n\n**Fix.** {s.fix}\n")
    return "".join(out)


if __name__ == "__main__":
    print(render(), end="")
