"""`--trust-bytecode` only: look inside a Lambda's marshalled bytecode to show what it references.

Nothing else in k2to3 imports this module or unmarshals anything from a file. Unmarshalling builds a code
object (it does not run it), but marshal data is unchecked input, so it is done only when the user trusts
the file. A code object written by another Python version does not unmarshal here."""

from __future__ import annotations

import base64
import marshal
import types
from typing import Any

from k2to3.core.findings import Finding
from k2to3.core.rules import builtin_code
from k2to3.upgrade.needs import walk_layers


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
            msg = f"Lambda bytecode (--trust-bytecode): {code}; it cannot be inspected or used for the reference"
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
