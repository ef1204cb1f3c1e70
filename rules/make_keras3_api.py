"""Generate rules/keras3_api.txt, rules/keras3_ops_signatures.json and rules/keras3_signatures.txt from the installed Keras 3, so that
`k2to3 lint` / `k2to3 fix` know which Keras 3 names exist and how keras.ops functions take their arguments
without importing keras. tests/test_fix_safety.py checks both files against the installed keras.

Usage: KERAS_BACKEND=jax python rules/make_keras3_api.py [OUT_DIR]   (rewrites both files; default rules/)"""

from __future__ import annotations

import ast
import inspect
import json
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _kind(obj: object) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "constant"


def api_names(keras: types.ModuleType) -> dict[str, str]:
    """Every public dotted name reachable from `keras` through public API modules -> its kind."""
    out: dict[str, str] = {"keras": "module"}
    todo = [("keras", keras)]
    while todo:
        path, mod = todo.pop()
        for name in dir(mod):
            if name.startswith("_") or (path == "keras" and name in ("src", "api")):
                continue
            try:
                obj = getattr(mod, name)
            except Exception:
                continue
            dotted = f"{path}.{name}"
            kind = _kind(obj)
            if kind == "module":
                # only API namespaces (keras.layers, keras.ops.image); not numpy/tf modules re-exported
                if not obj.__name__.startswith("keras") or obj.__name__.startswith("keras.src"):
                    continue
                if dotted not in out:
                    todo.append((dotted, obj))
            out[dotted] = kind
    return out


def _literal(value: object) -> str | None:
    try:
        text = repr(value)
        ast.literal_eval(text)
        return text
    except (ValueError, SyntaxError):
        return None


def _signatures(keras: types.ModuleType, names: dict[str, str],
                kinds: tuple[str, ...]) -> Iterator[tuple[str, inspect.Signature]]:
    """(dotted name, signature) of every public name of `kinds`, in name order; names without one are skipped."""
    for dotted, kind in sorted(names.items()):
        if kind not in kinds:
            continue
        obj = keras
        for part in dotted.split(".")[1:]:
            obj = getattr(obj, part)
        try:
            yield dotted, inspect.signature(obj)
        except (TypeError, ValueError):
            continue


def ops_signatures(keras: types.ModuleType, names: dict[str, str]) -> dict[str, dict]:
    """keras.ops function (without "keras.ops.") -> {"positional": [names in order], "defaults": {name: repr}}."""
    out: dict[str, dict] = {}
    for dotted, sig in _signatures(keras, names, ("function",)):
        if not dotted.startswith("keras.ops."):
            continue
        positional = [p.name for p in sig.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        defaults = {}
        for p in sig.parameters.values():
            if p.default is not p.empty and (lit := _literal(p.default)) is not None:
                defaults[p.name] = lit
        out[dotted[len("keras.ops."):]] = {"positional": positional, "defaults": defaults}
    return out


def call_signatures(keras: types.ModuleType, names: dict[str, str]) -> list[str]:
    """One line per public class or function: `name<TAB>positional<TAB>keyword-only<TAB>flags` (comma-separated
    parameter names; flags `*` and/or `**` for *args / **kwargs; `-` for none), what `fix` binds a call to."""
    lines = []
    for dotted, sig in _signatures(keras, names, ("class", "function")):
        ps = sig.parameters.values()
        pos = [p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        kw = [p.name for p in ps if p.kind == p.KEYWORD_ONLY]
        flags = ("*" if any(p.kind == p.VAR_POSITIONAL for p in ps) else "") + \
            ("**" if any(p.kind == p.VAR_KEYWORD for p in ps) else "")
        lines.append("\t".join([dotted, ",".join(pos) or "-", ",".join(kw) or "-", flags or "-"]))
    return lines


def required_parameters(keras: types.ModuleType, names: dict[str, str]) -> list[tuple[str, list[str]]]:
    """keras.layers classes whose constructor requires parameters (no default): a config without them is not that
    class's (upgrade/needed_code.py foreign_keys)."""
    out = []
    for dotted, sig in _signatures(keras, names, ("class",)):
        if not dotted.startswith("keras.layers.") or dotted.count(".") != 2:
            continue
        req = [p.name for p in sig.parameters.values() if p.default is p.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if req:
            out.append((dotted, req))
    return out


def main() -> None:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    names = api_names(keras)
    header = (f"# Public names of Keras {keras.__version__} (generated by rules/make_keras3_api.py; "
              "tests/test_fix_safety.py checks it against the installed keras)\n")
    lines = [f"{n} {k}" for n, k in sorted(names.items())]
    (out / "keras3_api.txt").write_text(header + "\n".join(lines) + "\n")
    sigs = ops_signatures(keras, names)
    (out / "keras3_ops_signatures.json").write_text(
        json.dumps({"keras": keras.__version__, "ops": sigs}, indent=1, sort_keys=True) + "\n")
    required = [f"{n.removeprefix('keras.layers.')}\t{','.join(ps)}" for n, ps in required_parameters(keras, names)]
    (out / "keras3_layer_required.txt").write_text(
        f"# The parameters Keras {keras.__version__}'s layer constructors require (no default; generated by "
        "rules/make_keras3_api.py): class, parameters\n" + "\n".join(required) + "\n")
    calls = call_signatures(keras, names)
    (out / "keras3_signatures.txt").write_text(
        f"# Signatures of Keras {keras.__version__}'s public classes and functions (generated by "
        "rules/make_keras3_api.py): name, positional, keyword-only, flags\n" + "\n".join(calls) + "\n")
    print(f"{len(names)} names, {len(sigs)} keras.ops signatures", file=sys.stderr)


if __name__ == "__main__":
    main()
