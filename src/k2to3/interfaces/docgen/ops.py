"""Render docs/ops.md from rules/ops.toml (`python -m k2to3.interfaces.docgen.ops > docs/ops.md`)."""

from __future__ import annotations

from k2to3.core.optable import OpEntry, backend_obsolete, config_aliases, raw_table, table
from k2to3.core.rules import rules_dir


def keras_ops_names() -> list[str]:
    """rules/keras_ops.txt (rules/make_keras_ops.py): keras.ops' public functions."""
    lines = (rules_dir() / "keras_ops.txt").read_text(encoding="utf-8").splitlines()
    return [n for n in lines if n and not n.startswith("#")]


def coverage() -> tuple[list[str], list[tuple[str, str]]]:
    """keras.ops functions with a TF entry, and those without (with the reason from rules/ops.toml)."""
    covered = {e.keras for e in table() if e.tf and e.namespace == "ops"} | \
        {e.compose.split(".")[-1] for e in table() if e.tf and e.compose}
    reasons = {n["keras"]: n["reason"] for n in raw_table().get("no_tf", [])}
    names = keras_ops_names()
    return ([n for n in names if n in covered],
            [(n, reasons.get(n, "no entry yet")) for n in names if n not in covered])


def _row(e: OpEntry) -> str:
    args = ", ".join(f"`{k}`→`{v}`" for k, v in e.args.items()) or ""
    required = [f"`{k}={v!r}`" for k, v in e.require.items()] + [f"`{k}=None`" for k in e.require_none]
    if required:
        args += (" " if args else "") + "requires " + ", ".join(required)
    if e.needs:
        args += (" " if args else "") + "needs " + ", ".join(f"`{k}`" for k in e.needs)
    defaults = ", ".join(f"`{k}={v!r}`" for k, v in e.defaults.items())
    names = ", ".join(f"`{n}`" for n in e.tf) if e.tf else ", ".join(f"`K.{n}`" for n in e.k)
    params = ", ".join(e.params)
    notes = e.notes
    if e.transform:
        notes = f"transform `{e.transform}`. {notes}".strip()
    target = e.keras if e.namespace == "ops" else e.target  # a keras.ops name stays short, as before
    return (f"| {names} | ({params}) | `{target}` (first arg `{e.first}`) | {args} | {defaults} | {e.safety} "
            f"| {notes} |\n")


def _coverage() -> list[str]:
    covered, missing = coverage()
    total = len(covered) + len(missing)
    out = ["\n## Coverage of keras.ops by TF entries\n\n",
           f"{len(covered)} of keras.ops' {total} public functions (`rules/keras_ops.txt`, from "
           "`rules/make_keras_ops.py`) are the target of a TensorFlow entry. TensorFlow names reach the table "
           "through `rules/tf_names.tsv` (generated from TensorFlow's export table by `rules/make_tf_names.py`): "
           "`tf.compat.v1.*` / `tf.compat.v2.*` aliases and `tensorflow.python.ops.*` module paths resolve to the "
           "canonical name TFOpLambda stores.\n\n",
           "Without a TF entry (reasons from the `[[no_tf]]` lines of `rules/ops.toml`):\n\n",
           "| keras.ops | why |\n|---|---|\n"]
    out += [f"| `{n}` | {why} |\n" for n, why in missing]
    return out


def tf_no_equivalent() -> dict[str, str]:
    """The [[tf_no_equivalent]] lines of rules/ops.toml: TF functions named like a Keras 3 function that no keras.ops
    call with adapted arguments expresses, canonical name -> the reason."""
    return {r["tf"]: r["reason"] for r in raw_table().get("tf_no_equivalent", [])}


def _no_equivalent() -> list[str]:
    records = tf_no_equivalent()
    return ["\n## TensorFlow functions named like a Keras 3 function, with no equivalent\n\n",
            "Every public function of `tf`, `tf.math`, `tf.linalg`, `tf.nn`, `tf.image` and `tf.signal` whose name is "
            "also a function of `keras.ops` (with `keras.ops.image`, `keras.ops.linalg`, `keras.ops.nn`, "
            "`keras.ops.numpy`) or `keras.random` has an entry above, or is one of these "
            f"{len(records)} (the `[[tf_no_equivalent]]` lines of `rules/ops.toml`; "
            "`tests/test_ops.py::test_every_tf_function_named_in_keras3_has_an_entry`): no keras.ops call with "
            "adapted arguments gives TensorFlow's result.\n\n",
            "| TF name | why |\n|---|---|\n",
            *(f"| `tf.{n}` | {why} |\n" for n, why in records.items())]


def render() -> str:
    rows = table()
    tf_rows = [e for e in rows if e.tf]
    k_rows = [e for e in rows if e.k]
    head = ("| TF / K name | parameters | keras.ops | arguments | explicit defaults | safety | notes |\n"
            "|---|---|---|---|---|---|---|\n")
    out = [
        "# The op table: TensorFlow and keras.backend → keras.ops\n\n",
        "Generated from `rules/ops.toml` by `python -m k2to3.interfaces.docgen.ops`; do not edit by hand (a test\n"
        "checks it is current). `k2to3 convert` uses it to translate `TFOpLambda` layers, and the source rewriter to\n"
        "translate "
        "`tf.*` and `K.*` (`keras.backend`) calls: positional arguments are named by the parameter list first.\n"
        "Every entry is checked by a differential test (TF eager, or `tf_keras.backend` for a `K.*` entry,\n"
        "against the translation, on seeded inputs, on tensorflow, torch and jax: `tests/test_ops.py`).\n"
        "Its tolerance is derived from each case (`tests/op_tolerance.py`), so that it holds for any CPU's float32\n"
        "kernels: an element may differ by `1e-6 + 1e-5·|ref| + 4·(floor + eps·summed)`. `floor` is the reference's\n"
        "own float32 rounding, max \\|ref − ref64\\| over the output with ref64 the same TF function on the inputs in\n"
        "float64 (at most 16 eps of the output's largest magnitude; one eps of it where TF has no float64 kernel);\n"
        "`summed`, for the entries marked `sums` (matmul, convolutions, pooling, reductions, interpolation), is the\n"
        "same function on the inputs' absolute values in float64, the magnitude each element sums. A translation\n"
        "error moves the result by a share of itself, far above that\n"
        "(`test_derived_tolerance_catches_translation_errors`).\n"
        "`__operators__.getitem` (SlicingOpLambda) is translated structurally: slices,\n"
        "integers, `Ellipsis` and `tf.newaxis` become a Python index; a negative step without bounds becomes\n"
        "`keras.ops.flip` plus a positive step (torch cannot slice with negative steps).\n\n",
        f"{len(tf_rows)} TensorFlow entries, {len(k_rows)} `K.*` entries, "
        f"{sum(len(e.cases) for e in rows)} differential cases.\n\n",
        "## TensorFlow functions (names as TFOpLambda stores them)\n\n",
        head,
        *map(_row, tf_rows),
        *_coverage(),
        *_no_equivalent(),
        "\n## keras.backend (`K.*`) functions\n\n",
        "`K` is `tf.keras.backend` / `tf_keras.backend` (Keras 2). A `k2to3.portable.*` target is a keras.ops\n"
        "composition k2to3 ships (src/k2to3/portable/).\n\n",
        head,
        *map(_row, k_rows),
        "\n## keras.backend functions that moved\n\n",
        "| K name | Keras 3 |\n|---|---|\n",
        *(f"| `K.{k}` | `{to}` |\n" for k, to in config_aliases().items()),
        render_backend_obsolete(),
    ]
    return "".join(out)


def render_backend_obsolete() -> str:
    """The K.* functions with no Keras 3 function to call instead, and the K.* coverage figures."""
    obsolete = backend_obsolete()
    k_rows = [e for e in table() if e.k]
    portable = [e for e in k_rows if e.keras.startswith("k2to3.")]
    return "".join([
        "\n## keras.backend functions with no Keras 3 function to call\n\n",
        f"Every public function of `tf_keras.backend` is classified: {len(k_rows) - len(portable)} keras.ops calls, "
        f"{len(portable)} `k2to3.portable` helpers (keras.ops compositions with Keras 2's semantics; rewritten code\n"
        f"then calls `k2to3.portable.<name>` and needs k2to3 installed), {len(config_aliases())} moved functions "
        f"and the {len(obsolete)} below (tests/test_ops.py checks the list is complete).\n\n",
        "| K name | finding | Keras 3 idiom |\n|---|---|---|\n",
        *(f"| `K.{k}` | {code} | {idiom} |\n" for k, (code, idiom) in obsolete.items()),
    ])


if __name__ == "__main__":
    print(render(), end="")
