"""Run in a subprocess: resolve, against the installed Keras 3, every name a rewritten file reaches through
a `keras` import that `k2to3 fix` added or changed. Usage: python keras3_names_probe.py PAIRS.json, where the
file holds [[original_path, rewritten_path], ...]; prints {rewritten_path: [missing dotted names]} as JSON."""

from __future__ import annotations

import ast
import importlib
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def bindings(tree: ast.AST) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "keras" or a.name.startswith("keras."):
                    out[a.asname or "keras"] = a.name if a.asname else "keras"
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "keras" or node.module.startswith("keras."):
                for a in node.names:
                    if a.name != "*":
                        out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def chains(tree: ast.AST) -> set[tuple[str, str]]:
    """(root name, dotted chain) for every maximal Name/Attribute chain."""
    inner: set[int] = set()
    out: set[tuple[str, str]] = set()
    for node in ast.walk(tree):  # breadth first: an outer Attribute is seen before its inner ones
        if id(node) in inner or not isinstance(node, (ast.Attribute, ast.Name)):
            continue
        parts, cur = [], node
        while isinstance(cur, ast.Attribute):
            parts.append(cur.attr)
            cur = cur.value
            inner.add(id(cur))
        if isinstance(cur, ast.Name):
            parts.append(cur.id)
            out.add((cur.id, ".".join(reversed(parts))))
    return out


def qualified(tree: ast.AST) -> set[str]:
    b = bindings(tree)
    names = set(b.values())
    for root, chain in chains(tree):
        if root in b:
            names.add(b[root] + chain[len(root):])
    return names


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, p in enumerate(parts[1:], 1):
        if hasattr(obj, p):
            obj = getattr(obj, p)
            continue
        try:
            obj = importlib.import_module(".".join(parts[: i + 1]))
        except ImportError:
            return False
    return True


def missing(original: str, rewritten: str) -> list[str]:
    old = ast.parse(open(original).read())
    new = ast.parse(open(rewritten).read())
    old_b, new_b = bindings(old), bindings(new)
    changed = {k for k, v in new_b.items() if old_b.get(k) != v}
    check = {q for q in qualified(new) if q not in qualified(old)}
    for root, chain in chains(new):
        if root in changed:
            check.add(new_b[root] + chain[len(root):])
    check |= {new_b[k] for k in changed}
    return sorted(q for q in check if not resolves(q))


def main() -> None:
    pairs = json.load(open(sys.argv[1]))
    print(json.dumps({new: missing(old, new) for old, new in pairs}))


if __name__ == "__main__":
    main()
