"""Regenerate rules/tf_names.tsv from TensorFlow's own export table (tf_export): every name real code can use
to reach a TensorFlow function -> the canonical name TFOpLambda stores for it (get_canonical_name_for_symbol
with add_prefix_to_v1_names, as tf_keras does), without the leading "tf.".

Rows (alias, canonical, how):
  api     another tf_export name of the same function (tf.reduce_mean -> math.reduce_mean,
          tf.compat.v1.math.log1p -> math.log1p)
  module  the defining module path (tf.python.ops.math_ops.rsqrt -> math.rsqrt)
  v1      a TF1-only variant (tf.compat.v1.reduce_mean) whose parameters start with its TF2 namesake's, with
          the same defaults: a call valid for one means the same for the other
`tf.compat.v2.<name>` is `tf.<name>` and needs no row. Only functions are listed (no classes or modules).
raw_ops and their generated wrappers are left out (never
translatable). The lint/fix resolver and the TFOpLambda translator read the file (they never import tensorflow).

Usage: TF_USE_LEGACY_KERAS=1 python rules/make_tf_names.py > rules/tf_names.tsv
"""

from __future__ import annotations

import inspect
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402,F401  (fills the export table)
from tensorflow.python.util import tf_export  # noqa: E402

# TF1 variants whose meaning differs although the parameters line up (tf.compat.v1.where does not broadcast
# and selects rows with a vector condition).
NOT_V1_COMPATIBLE = {"compat.v1.where"}
# modules whose re-exported functions are listed under the module's path too
REEXPORTING = ("tensorflow.python.ops.", "tensorflow.python.framework.")


def _params(fn) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None


def _v1_compatible(v1, v2) -> bool:
    p1, p2 = _params(v1), _params(v2)
    if p1 is None or p2 is None or len(p2) > len(p1):
        return False
    # TF1's deprecated-keyword wrappers default keepdims=None, meaning TF2's False
    return all(a.name == b.name and a.kind == b.kind and (a.default == b.default or (a.default is None
               and b.default is False)) for a, b in zip(p1, p2))


def rows() -> list[tuple[str, str, str]]:
    mapping = tf_export._NAME_TO_SYMBOL_MAPPING
    out: dict[str, tuple[str, str]] = {}
    for name, sym in mapping.items():
        if not (inspect.isfunction(sym) or inspect.isbuiltin(sym)) or name.startswith("compat.v2."):
            continue
        canon = tf_export.get_canonical_name_for_symbol(sym, add_prefix_to_v1_names=True)
        if not canon:
            continue
        if canon.startswith("compat.v1.") and canon not in NOT_V1_COMPATIBLE:
            v2 = mapping.get(canon[len("compat.v1."):])
            if v2 is not None and v2 is not sym and inspect.isfunction(v2) and _v1_compatible(sym, v2):
                v2_canon = tf_export.get_canonical_name_for_symbol(v2, add_prefix_to_v1_names=True)
                out.setdefault(canon, (v2_canon, "v1"))
                canon = v2_canon
        if name != canon:
            out.setdefault(name, (canon, "api"))
        module = getattr(sym, "__module__", "") or ""
        if module.startswith("tensorflow.") and getattr(sym, "__name__", None):
            path = f"{module[len('tensorflow.'):]}.{sym.__name__}"
            if path != canon:
                out.setdefault(path, (canon, "module"))
    # A function reached through another module that re-exports it (tensorflow.python.ops.math_ops.maximum is
    # gen_math_ops.maximum, imported with `from gen_math_ops import *`): real code imports math_ops.
    # Keyed by defining module and name too: the exported symbol may be a dispatch wrapper of the one imported.
    canon_of: dict[object, str] = {}
    for sym in mapping.values():
        if inspect.isfunction(sym) or inspect.isbuiltin(sym):
            canon = tf_export.get_canonical_name_for_symbol(sym, add_prefix_to_v1_names=True)
            if canon:
                canon_of[id(sym)] = canon
                canon_of.setdefault((getattr(sym, "__module__", None), getattr(sym, "__name__", None)), canon)
    for mod_name, mod in sorted(sys.modules.items()):
        if not mod_name.startswith(REEXPORTING) or mod is None:
            continue
        for attr, sym in sorted(vars(mod).items()):
            if not (inspect.isfunction(sym) or inspect.isbuiltin(sym)):
                continue
            canon = canon_of.get(id(sym)) or canon_of.get((getattr(sym, "__module__", None), attr))
            if canon and not attr.startswith("_") and canon in {c for c, _ in out.values()} | set(mapping):
                out.setdefault(f"{mod_name[len('tensorflow.'):]}.{attr}", (out.get(canon, (canon,))[0], "module"))
    # raw_ops (generated op wrappers) are never in the op table: lint reports them under their own name
    return sorted((a, c, how) for a, (c, how) in out.items() if a != c and not c.startswith("raw_ops."))


def main() -> None:
    print("# alias\tcanonical\thow   (generated by rules/make_tf_names.py from TensorFlow "
          f"{tf.__version__}'s tf_export table; do not edit)")
    for row in rows():
        print("\t".join(row))


if __name__ == "__main__":
    sys.exit(main())
