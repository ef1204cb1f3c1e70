"""Render docs/rules.md from rules/layers.toml (`python -m k2to3.interfaces.docgen.rules > docs/rules.md`)."""

from __future__ import annotations

from k2to3.core.ruledocs import where
from k2to3.core.rules import keras1_rules, layer_rules, source_rules

HEADER = """# k2to3 rules

Generated from `rules/layers.toml`, `rules/keras1.toml` and `rules/source.toml` by
`python -m k2to3.interfaces.docgen.rules`; do not edit by hand (a test checks it is current). Codes: `K2T1xx` tf.*
calls, `K2T2xx` keras.backend calls, `K2T3xx` Lambda layers, `K2T5xx` tf.keras namespace (reported by
`k2to3 lint`, rewritten by `k2to3 fix` where fixable); `K2T4xx` artifact config fixes applied by
`k2to3 convert`; `K2T9xx` things that need more input (source code) or have no portable equivalent. FM numbers
refer to the failure catalogue in `shared/research/catalogue.md`.

| code | title | failure mode | safety |
|---|---|---|---|
"""


def render() -> str:
    rules = sorted((*source_rules(), *layer_rules(), *keras1_rules()), key=lambda r: r.code)
    out = [HEADER]
    for r in rules:
        out.append(f"| [{r.code}](#{r.code.lower()}) | {r.title} | {r.fm} | {r.safety} |\n")
    for r in rules:
        out.append(f"\n## {r.code}\n\n**{r.title}** ({where(r)}; fix safety: {r.safety})\n\n")
        if r.classes:
            out.append(f"Applies to: {', '.join(f'`{c}`' for c in r.classes)}.\n\n")
        out.append(f"**What it does.** {r.what}\n\n**Why.** {r.why}\n\n")
        out.append(f"**Before:**\n\n```\n{r.before}\n```\n\n**After:**\n\n```\n{r.after}\n```\n\n")
        out.append(f"**Fix.** {r.fix}\n")
        if r.unblock:
            out.append(f"\n**Unblock (audit).** {r.unblock}\n")
        if r.fixture:
            out.append(f"\nTested by `tests/fixtures/h5/{r.fixture}.h5` (plain Keras 3 fails or drifts on it; "
                       "k2to3 converts it with parity).\n")
    return "".join(out)


if __name__ == "__main__":
    print(render(), end="")
