"""`--trust-bytecode` only: look inside a Lambda's marshalled bytecode to show what it references.

Nothing else in k2to3 imports this module or unmarshals anything from a file. Unmarshalling builds a code
object (it does not run it), but marshal data is unchecked input, so it is done only when the user trusts
the file. A code object written by another Python version does not unmarshal here: it is read as data and, when
its body is simple, decompiled (upgrade/decompile.py, never `marshal`, never run) into the source of a Keras 2
module that convert then treats as if the user had passed it with --src."""

from __future__ import annotations

import base64
import marshal
import types
from typing import Any

from k2to3.core.findings import Finding
from k2to3.core.rules import builtin_code
from k2to3.upgrade.decompile import DECOMPILED_PREFIX, Decompiled, Refused, decompile
from k2to3.upgrade.needed_code import walk_layers

__all__ = ["DECOMPILED_PREFIX", "decompiled_module", "inspect_lambdas", "loads_here"]


def _code(payload: Any) -> types.CodeType | str:
    raw = payload[0] if isinstance(payload, list) and payload else payload
    if not isinstance(raw, str):
        return "no bytecode stored"
    try:
        code = marshal.loads(base64.b64decode(raw.encode("ascii")))
    except (ValueError, EOFError, TypeError) as exc:
        return f"written by another Python version ({exc})"
    return code if isinstance(code, types.CodeType) else "not a code object"


def _names(code: types.CodeType) -> tuple[list[str], list[Any]]:
    names, consts = list(code.co_names), []
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            n, k = _names(c)
            names += n
            consts += k
        elif isinstance(c, (int, float, str)) and not isinstance(c, bool) and c != code.co_name:
            consts.append(c)
    return names, consts


def inspect_lambdas(model_config: dict[str, Any]) -> list[Finding]:
    out = []
    for layer in walk_layers(model_config):
        cfg = layer.get("config", {})
        if layer.get("class_name") != "Lambda" or cfg.get("function_type") != "lambda":
            continue
        code = _code(cfg.get("function"))
        if isinstance(code, str):
            try:
                d = decompile(cfg.get("function"))
                msg = (f"Lambda bytecode (--trust-bytecode): {code}; read as data and decompiled (CPython "
                       f"{d.version}, function {d.name!r} from {d.filename}:{d.line}): {d.source}")
            except Refused as exc:
                msg = (f"Lambda bytecode (--trust-bytecode): {code}; not decompiled: {exc}; it cannot be used for "
                       "the reference")
        else:
            names, consts = _names(code)
            msg = (f"Lambda bytecode (--trust-bytecode): function {code.co_name!r} from {code.co_filename}:"
                   f"{code.co_firstlineno}, arguments {list(code.co_varnames[:code.co_argcount])}, references "
                   f"{sorted(set(names))}, constants {consts[:8]}")
        out.append(Finding(builtin_code("lambda"), "info", msg, cfg.get("name")))
    return out


def loads_here(model_config: dict[str, Any]) -> bool:
    """Whether every Lambda's bytecode unmarshals in this Python (then tf_keras can use it for the golden)."""
    return all(not isinstance(_code(layer.get("config", {}).get("function")), str)
               for layer in walk_layers(model_config) if layer.get("class_name") == "Lambda"
               and layer.get("config", {}).get("function_type") == "lambda")


def _lambdas(model_config: dict[str, Any]) -> list[dict[str, Any]]:
    return [layer.get("config", {}) for layer in walk_layers(model_config) if layer.get("class_name") == "Lambda"
            and layer.get("config", {}).get("function_type") == "lambda"]


def _def(name: str, d: Decompiled) -> str:
    import ast

    lam = ast.parse(d.source, mode="eval").body
    assert isinstance(lam, ast.Lambda)
    return f"def {name}({ast.unparse(lam.args)}):\n    return {ast.unparse(lam.body)}\n"


def decompiled_module(model_config: dict[str, Any], label: str) -> tuple[str | None, list[Finding]]:
    """With --trust-bytecode and no --src: the Keras 2 source of every Lambda whose bytecode does not unmarshal in
    this Python, decompiled, as a module of `Lambda(..., name=...)` calls the --src matching takes by name. None
    when a Lambda's bytecode loads here (tf_keras then uses it) or when one does not decompile (the finding says
    why; the Lambda then stops the conversion as without the flag)."""
    cfgs = _lambdas(model_config)
    if not cfgs or all(not isinstance(_code(c.get("function")), str) for c in cfgs):
        return None, []
    imports = ["from keras.layers import Lambda"]
    defs: list[str] = []
    calls: list[str] = []
    findings: list[Finding] = []
    seen: dict[tuple[str, str], str] = {}
    for i, cfg in enumerate(cfgs):
        layer = str(cfg.get("name"))
        try:
            d = decompile(cfg.get("function"))
            shape = None
            if cfg.get("output_shape") is not None:
                if cfg.get("output_shape_type") == "lambda":
                    shape = decompile(cfg.get("output_shape"))
                elif not isinstance(cfg.get("output_shape"), (list, tuple)):
                    raise Refused("output_shape is stored by name")
        except Refused as exc:
            return None, [Finding(builtin_code("lambda"), "warning", f"Lambda bytecode (--trust-bytecode) not "
                                  f"decompiled: {exc}", layer)]
        fn = _named(d, f"bytecode_fn_{i}", seen, defs)
        imports += d.imports
        args = [fn]
        if cfg.get("arguments"):
            args.append(f"arguments={cfg['arguments']!r}")
        if shape is not None:
            imports += shape.imports
            args.append(f"output_shape={_named(shape, f'bytecode_shape_{i}', seen, defs)}")
        elif cfg.get("output_shape") is not None:
            args.append(f"output_shape={tuple(cfg['output_shape'])!r}")
        calls.append(f"{_ident(layer, i)} = Lambda({', '.join(args)}, name={layer!r})")
        findings.append(Finding(builtin_code("lambda"), "info", f"Lambda function decompiled from the file's "
                                f"bytecode (--trust-bytecode; CPython {d.version}, {d.name!r} from {d.filename}:"
                                f"{d.line}): {d.source}", layer))
    text = (f'"""Keras 2 source of the Lambda layers of {label}, decompiled by k2to3 from the file\'s bytecode '
            '(--trust-bytecode).\nRead by the --src matching, never imported by k2to3 itself."""\n'
            + "\n".join(dict.fromkeys(imports)) + "\n\n\n" + "\n\n".join(defs) + ("\n\n" if defs else "")
            + "\n".join(calls) + "\n")
    return text, findings


def _named(d: Decompiled, fallback: str, seen: dict[tuple[str, str], str], defs: list[str]) -> str:
    """A decompiled named function (`def quant_layer`) becomes a def (once for all the layers that share it);
    a lambda stays inline."""
    if d.name == "<lambda>" or not d.name.isidentifier():
        return d.source
    key = (d.name, d.source)
    if key not in seen:
        name = d.name if d.name not in {k[0] for k in seen} else fallback
        seen[key] = name
        defs.append(_def(name, d))
    return seen[key]


def _ident(layer: str, i: int) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in layer)
    return name if name.isidentifier() and not name.startswith("_") else f"layer_{i}"
