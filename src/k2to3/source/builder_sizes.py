"""Which sizes a weights-only file's weight shapes can give a build function (source/builders.py): the dimensions,
likeliest first, and which parameters are sizes at all (an `env` or an activation never is). Pure ast."""

from __future__ import annotations

import ast
from typing import Any

MAX_DIMS = 6  # weight-shape dimensions tried for one size the sources do not give


def shape_dims(groups: list[dict[str, Any]]) -> list[int]:
    """The distinct dimensions of the file's weight shapes, the likeliest sizes first: the first layer's weight
    dimensions (its input width), the last layer's output width, then by how often they occur."""
    if not groups:
        return []
    first = [int(d) for d in groups[0]["shapes"][0]] if groups[0]["shapes"] else []
    last = [int(groups[-1]["shapes"][-1][-1])] if groups[-1]["shapes"] and groups[-1]["shapes"][-1] else []
    counts: dict[int, int] = {}
    for g in groups:
        for shape in g["shapes"]:
            for d in shape:
                counts[int(d)] = counts.get(int(d), 0) + 1
    rest = sorted(counts, key=lambda d: -counts[d])
    return [d for d in dict.fromkeys([*first, *last, *rest]) if d > 0]


def objectlike(name: str, trees: list[ast.AST]) -> bool:
    """`name.shape`, `name[0]`, `for x in name`: an object or a sequence, not a size a weight shape shows."""
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.value, ast.Name) \
                    and node.value.id == name:
                return True
            if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Name) \
                    and node.iter.id == name:
                return True
    return False


# layer arguments that are sizes: a name passed there (or in a tuple or arithmetic there) is a dimension
SIZE_KEYWORDS = frozenset({"units", "filters", "input_dim", "output_dim", "input_shape", "shape", "batch_shape",
                           "batch_input_shape", "kernel_size", "input_length", "num_heads", "key_dim", "value_dim",
                           "pool_size", "target_shape", "n", "dims", "size"})


def sizelike(name: str, trees: list[ast.AST]) -> bool:
    """`name` (or `self.x` set from it) reaches a layer size: a positional argument of a capitalised call (Dense(n),
    Input((n,))) or a size keyword (units=, input_dim=, shape=(n,)), alone, in a tuple or in arithmetic."""
    attrs = {t.attr for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Assign)
             and isinstance(node.value, ast.Name) and node.value.id == name
             for t in node.targets if isinstance(t, ast.Attribute)}

    def mentions(expr: ast.AST) -> bool:
        return any((isinstance(n, ast.Name) and n.id == name) or (isinstance(n, ast.Attribute) and n.attr in attrs)
                   for n in ast.walk(expr) if not isinstance(n, ast.Call))

    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if callee[:1].isupper() and any(mentions(a) for a in node.args[:2]):
                return True
            if any(k.arg in SIZE_KEYWORDS and mentions(k.value) for k in node.keywords):
                return True
    return False
