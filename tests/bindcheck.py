"""Compile a rewritten or generated file and bind every call it makes to Keras 3 (`keras.X.Y(...)`, and
`self.add_weight(...)` in a class whose bases are Keras 3 names) to the installed Keras 3 signature with
`inspect.signature(...).bind`. Tests only: this imports keras."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from typing import Any

from k2to3.source.lint import collect_aliases, dotted


@dataclass
class BindResult:
    calls: int = 0  # calls resolved to a Keras 3 object with a signature and bound
    failures: list[str] = field(default_factory=list)  # "path:line: why"


_MISSING = object()


def _keras_object(qname: str) -> Any:
    import keras

    obj: Any = keras
    for part in qname.split(".")[1:]:
        obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            return _MISSING
    return obj


def _signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None  # a builtin or a C function: nothing to bind to


def _bind(sig: inspect.Signature, call: ast.Call, bound_self: bool) -> str | None:
    """Bind placeholders in the call's layout; None when it binds, else why not. A *args / **kwargs in the call
    leaves the count open: only the explicit keywords are checked then."""
    star = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
    args = [] if star else [None] * len(call.args)
    kwargs = {k.arg: None for k in call.keywords if k.arg is not None}
    try:
        if star:
            params = sig.parameters
            takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
            bad = [k for k in kwargs if k not in params and not takes_any]
            return f"unexpected keyword {bad[0]!r}" if bad else None
        (sig.bind(None, *args, **kwargs) if bound_self else sig.bind(*args, **kwargs))
    except TypeError as exc:
        return str(exc)
    return None


def _keras_bases(tree: ast.Module, aliases: Any) -> set[int]:
    """ids of the Call nodes `self.add_weight(...)` inside classes with a Keras 3 base."""
    out: set[int] = set()
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        bases = [aliases.resolve(dotted(b)) for b in cls.bases]
        if not any(b and (b == "keras" or b.startswith("keras.")) for b in bases):
            continue
        for node in ast.walk(cls):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "add_weight" and dotted(node.func.value) == "self":
                out.add(id(node))
    return out


def _called(code: str) -> set[str]:
    """The qualified names a file calls (through its imports)."""
    tree = ast.parse(code)
    aliases = collect_aliases(tree)
    return {q for n in ast.walk(tree) if isinstance(n, ast.Call) and (q := aliases.resolve(dotted(n.func)))}


def check_code(code: str, path: str = "<string>", original: str | None = None) -> BindResult:
    """Compile `code` (the compiler also rejects what ast.parse accepts: a repeated keyword) and bind its
    Keras 3 calls. With the `original` of a rewritten file, a `keras.X(...)` call the original already made
    through the same name (standalone Keras 2 code the rewrite did not touch) is not the rewrite's and is left
    out; `self.add_weight` calls are always checked (the rewrite maps their positionals)."""
    before = _called(original) if original is not None else set()
    res = BindResult()
    try:
        compile(code, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        res.failures.append(f"{path}:{exc.lineno}: does not compile ({exc.msg})")
        return res
    tree = ast.parse(code)
    aliases = collect_aliases(tree)
    add_weights = _keras_bases(tree, aliases)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if id(node) in add_weights:
            import keras

            sig, bound_self, what = _signature(keras.layers.Layer.add_weight), True, "keras.layers.Layer.add_weight"
        else:
            q = aliases.resolve(dotted(node.func))
            if not q or not (q == "keras" or q.startswith("keras.")) or q.startswith("keras.src") or q in before:
                continue
            obj = _keras_object(q)
            if obj is _MISSING:
                res.failures.append(f"{path}:{node.lineno}: {q} does not exist in Keras 3")
                continue
            sig, bound_self, what = _signature(obj), False, q
        if sig is None:
            continue
        res.calls += 1
        why = _bind(sig, node, bound_self)
        if why:
            res.failures.append(f"{path}:{node.lineno}: {what}(...) does not bind: {why}")
    return res


def main(spec: str) -> None:
    """`python tests/bindcheck.py FILES.json`: [[original path or null, file], ...] -> prints {calls, failures}
    as JSON (a subprocess, so the test process never imports keras)."""
    import json
    import os

    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    total = BindResult()
    for original, path in json.loads(open(spec).read()):
        r = check_code(open(path).read(), path, open(original).read() if original else None)
        total.calls += r.calls
        total.failures += r.failures
    print(json.dumps({"calls": total.calls, "failures": total.failures}))


if __name__ == "__main__":
    import sys

    main(sys.argv[1])
