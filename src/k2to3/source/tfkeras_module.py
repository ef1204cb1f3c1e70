"""The Keras 2 module of a --src conversion (golden only): the user's definitions as written, imports pointed at
tf_keras, `import tensorflow as tf` at the TF1 fallback object (libcst; no keras import)."""

from __future__ import annotations

from typing import Any

import libcst as cst


def _tf_keras_module(mod: str) -> str | None:
    for prefix in ("tensorflow.python.keras", "tensorflow.keras", "keras"):
        if mod == prefix or mod.startswith(prefix + "."):
            return "tf_keras" + mod[len(prefix):]
    return None


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _as_expr(dotted: str) -> cst.Attribute | cst.Name:
    return cst.parse_expression(dotted)  # type: ignore[return-value]


# Keras 2.0 still took Keras 1's Model(input=..., output=...) (with a warning); tf_keras raises on it
MODEL_KEYWORDS = {"input": "inputs", "output": "outputs"}


class ToTfKeras(cst.CSTTransformer):
    """Keras 2 imports -> tf_keras (standalone keras 2, tensorflow.keras); `import tensorflow as tf` -> the TF1
    fallback object, in every scope (Keras 2.2-era Lambdas import tensorflow inside the function); Keras 1's
    Model(input=, output=) keywords -> inputs=, outputs=."""

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> Any:
        if not _dotted(updated.func).split(".")[-1] == "Model":
            return updated
        given = {a.keyword.value for a in updated.args if a.keyword is not None}
        if not given & set(MODEL_KEYWORDS) or given & set(MODEL_KEYWORDS.values()):
            return updated
        return updated.with_changes(args=[a.with_changes(keyword=cst.Name(MODEL_KEYWORDS[a.keyword.value]))
                                          if a.keyword is not None and a.keyword.value in MODEL_KEYWORDS else a
                                          for a in updated.args])

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> Any:
        if len(updated.names) != 1:
            return updated
        alias = updated.names[0]
        mod = _dotted(alias.name)
        asname = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None
        if mod == "tensorflow" and asname != "_k2to3_tensorflow":
            return cst.Assign([cst.AssignTarget(cst.Name(asname or "tensorflow"))], cst.Name("_K2TO3_TF"))
        new = _tf_keras_module(mod)
        if new is None:
            return updated
        if asname is None and "." not in mod:
            asname = mod
        if asname is None:  # `import keras.backend` binds `keras`: bind it to tf_keras instead
            return cst.Import([cst.ImportAlias(cst.Name("tf_keras"), asname=cst.AsName(name=cst.Name("keras")))])
        return cst.Import([cst.ImportAlias(_as_expr(new), asname=cst.AsName(name=cst.Name(asname)))])

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> Any:
        if updated.relative or updated.module is None:
            return updated
        mod = _dotted(updated.module)
        if mod == "tensorflow" and not isinstance(updated.names, cst.ImportStar) and all(
                isinstance(a.name, cst.Name) and a.name.value == "keras" for a in updated.names):
            a = updated.names[0]
            asname = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else "keras"
            return cst.Import([cst.ImportAlias(cst.Name("tf_keras"), asname=cst.AsName(name=cst.Name(asname)))])
        new = _tf_keras_module(mod)
        return updated if new is None else updated.with_changes(module=_as_expr(new))
