"""Node references in a Keras 2 model_config: [layer, node, tensor(, kwargs)]."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def is_ref(x: Any) -> bool:
    """[layer, node, tensor(, kwargs)], or Keras 2's [_CONSTANT_VALUE, -1, value(, kwargs)]."""
    return (
        isinstance(x, list)
        and len(x) in (3, 4)
        and isinstance(x[0], str)
        and isinstance(x[1], int)
        and (isinstance(x[2], int) or x[0] == "_CONSTANT_VALUE")
    )


def op_node_kwargs(node: Any) -> dict[str, Any]:
    """An op layer's call kwargs: stored on every element of its first argument."""
    if is_ref(node):
        return node[3] if len(node) == 4 else {}
    if isinstance(node, list):
        for x in node:
            kw = op_node_kwargs(x)
            if kw:
                return kw
    return {}


def as_ref_list(x: Any) -> list[Any]:
    return [x] if is_ref(x) else list(x)


def all_refs(data: Any) -> Iterator[list[Any]]:
    if is_ref(data):
        yield data
        if len(data) == 4:
            yield from all_refs(data[3])
    elif isinstance(data, list):
        for x in data:
            yield from all_refs(x)
    elif isinstance(data, dict):
        for x in data.values():
            yield from all_refs(x)
