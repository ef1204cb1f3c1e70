"""Which Keras 3 names exist and how keras.ops functions take their arguments, read from data generated
offline (rules/make_keras3_api.py): lint and fix never import keras."""

from __future__ import annotations

import ast
import json
from functools import cache
from typing import Any

from k2to3.core.rules import rules_dir


@cache
def api() -> dict[str, str]:
    """Public dotted name of Keras 3 -> kind (module, class, function, constant)."""
    out: dict[str, str] = {}
    for line in (rules_dir() / "keras3_api.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, kind = line.split()
            out[name] = kind
    return out


def exists(dotted: str) -> bool:
    """True if `dotted` (keras.backend.shape) resolves in Keras 3. Attributes of a class, function or
    constant are not listed and count as resolved; a missing name inside a module does not."""
    names = api()
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        kind = names.get(prefix)
        if kind is not None:
            return n == len(parts) or kind != "module"
    return False


@cache
def _signatures() -> dict[str, dict[str, Any]]:
    return json.loads((rules_dir() / "keras3_ops_signatures.json").read_text())["ops"]


def positional(target: str) -> tuple[str, ...] | None:
    """keras.ops.mean -> ("x", "axis", "keepdims"): the parameters it accepts positionally, in order."""
    sig = _signatures().get(target.removeprefix("keras.ops."))
    return tuple(sig["positional"]) if sig and target.startswith("keras.ops.") else None


_MISSING = object()


def default(target: str, param: str) -> Any:
    """keras.ops.sum, "keepdims" -> False; a sentinel (`no_default()`) when there is none or it is not a literal."""
    sig = _signatures().get(target.removeprefix("keras.ops.")) if target.startswith("keras.ops.") else None
    if not sig or param not in sig["defaults"]:
        return _MISSING
    return ast.literal_eval(sig["defaults"][param])


def no_default() -> object:
    return _MISSING


@cache
def _calls() -> dict[str, tuple[tuple[str, ...], frozenset[str], str]]:
    out = {}
    for line in (rules_dir() / "keras3_signatures.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, pos, kw, flags = line.split("\t")
            out[name] = (tuple(pos.split(",")) if pos != "-" else (), frozenset(kw.split(",")) if kw != "-"
                         else frozenset(), flags.replace("-", ""))
    return out


def binds(target: str, n_positional: int, keywords: list[str]) -> str | None:
    """Why a call of Keras 3's `target` with these arguments would not bind (None: it binds, or the signature is
    not known); the same test as inspect.signature(...).bind on the installed Keras 3 (rules/keras3_signatures.txt)."""
    sig = _calls().get(target)
    if sig is None:
        return None
    pos, kwonly, flags = sig
    if n_positional > len(pos) and "*" not in flags.replace("**", ""):
        return f"takes {len(pos)} positional arguments, {n_positional} given"
    taken = set(pos[:n_positional])
    for k in keywords:
        if k in taken:
            return f"got multiple values for {k}"
        if k not in pos and k not in kwonly and "**" not in flags:
            return f"has no argument {k}="
        taken.add(k)
    return None
