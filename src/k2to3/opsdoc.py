"""Render docs/ops.md from rules/ops.toml (`python -m k2to3.opsdoc > docs/ops.md`)."""

from __future__ import annotations

from .ops import table


def render() -> str:
    rows = table()
    out = [
        "# The op table: TensorFlow → keras.ops\n\n",
        "Generated from `rules/ops.toml` by `python -m k2to3.opsdoc`; do not edit by hand (a test checks it is\n"
        "current). `k2to3 convert` uses it to translate `TFOpLambda` layers; every entry is checked by a\n"
        "differential test (TF eager against the translation, on seeded inputs, on tensorflow, torch and jax:\n"
        "`tests/test_ops.py`). `__operators__.getitem` (SlicingOpLambda) is translated structurally: slices,\n"
        "integers, `Ellipsis` and `tf.newaxis` become a Python index; a negative step without bounds becomes\n"
        "`keras.ops.flip` plus a positive step (torch cannot slice with negative steps).\n\n",
        f"{len(rows)} entries, {sum(len(e.cases) for e in rows)} differential cases.\n\n",
        "| TF function (as TFOpLambda stores it) | keras.ops | arguments | explicit defaults | safety | notes |\n",
        "|---|---|---|---|---|---|\n",
    ]
    for e in rows:
        args = ", ".join(f"`{k}`→`{v}`" for k, v in e.args.items()) or ""
        if e.require:
            args += (" " if args else "") + "requires " + ", ".join(f"`{k}={v!r}`" for k, v in e.require.items())
        defaults = ", ".join(f"`{k}={v!r}`" for k, v in e.defaults.items())
        names = ", ".join(f"`{n}`" for n in e.tf)
        notes = e.notes
        if e.transform:
            notes = f"transform `{e.transform}`. {notes}".strip()
        out.append(f"| {names} | `{e.keras}` (first arg `{e.first}`) | {args} | {defaults} | {e.safety} | {notes} |\n")
    return "".join(out)


if __name__ == "__main__":
    print(render(), end="")
