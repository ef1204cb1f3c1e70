"""Activation values in layer configs: renamed identifiers, Keras 2 semantics kept via k2to3.portable,
functions rebuilt from --src, and lambdas/custom functions the file cannot provide."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from k2to3.upgrade.plan import PORTABLE_PACKAGE

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState

KERAS3_ACTIVATIONS = frozenset(
    "celu elu exponential gelu glu hard_shrink hard_sigmoid hard_silu hard_swish hard_tanh leaky_relu "
    "linear log_sigmoid log_softmax mish relu relu6 selu sigmoid silu soft_shrink softmax softplus "
    "softsign sparse_plus sparse_sigmoid sparsemax squareplus swish tanh tanh_shrink threshold".split()
)


def portable_function(name: str) -> dict[str, Any]:
    """How Keras 3 serializes a registered function (k2to3.portable)."""
    return {
        "module": "builtins",
        "class_name": "function",
        "config": f"{PORTABLE_PACKAGE}>{name}",
        "registered_name": "function",
    }


def function_name(value: Any) -> str | None:
    """The name an activation/loss config holds: a string, a serialized function's name, or "<lambda>" for a
    tf_keras-serialized lambda ({"value": [bytecode, ...]})."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value.get("class_name") == "function" and isinstance(value.get("config"), str):
        return value["config"]
    if isinstance(value, dict) and (isinstance(value.get("value"), list) or value.get("class_name") == "__lambda__"):
        return "<lambda>"
    return None


def activation(up: UpgradeState, value: Any, key: str, layer: str) -> Any:
    src = up.source
    if src is not None:
        name = src.activations.get((layer, key))
        if name is None:
            name = src.functions.get(function_name(value) or "")
        if name is not None:
            up.note(up.code("from_source"), "info", f"{key} rebuilt from the source as {src.registered(name)}",
                    layer)
            return src.function_config(name)
    for r in up.rules:
        if r.action == "map_value" and key in r.keys and value == r.from_:
            if r.to_portable:
                up.plan.needs_portable = True
                up.note(r.code, "info", f"{key}='{value}' keeps Keras 2 semantics via k2to3>{r.to_portable}",
                        layer)
                return portable_function(r.to_portable)
            up.note(r.code, "info", f"{key}='{value}' renamed to '{r.to}'", layer)
            return r.to
    stored = function_name(value)
    registered = isinstance(stored, str) and re.fullmatch(r"[\w.]+>[\w.]+", stored)
    if isinstance(stored, str) and stored not in KERAS3_ACTIVATIONS and not registered:
        up.note(up.code("activation_lambda"), "error",
                f"{key}='{stored}' is a custom or lambda function whose code is not in the file", layer,
                "pass the source that defines it with --src model.py")
    return value
