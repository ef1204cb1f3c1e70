"""Which sizes a weights-only file's weight shapes can give a build function (source/build_candidates.py): the
dimensions, likeliest first, and which parameters are sizes at all (an `env` or an activation never is). Pure ast."""

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


def unread(param: str, fn: ast.FunctionDef, callables: dict[str, ast.FunctionDef]) -> bool:
    """`param` of the build's entry `fn` never reaches the model: each use of it stores it on the instance
    (`self.batch_size = batch_size`) where no build body (`callables`: the methods or functions the build runs, by
    name) reads it back, or passes it on as an argument of one of them whose parameter is unread in turn (DDQN's
    `n_states`, stored for `predict`). Any other use (arithmetic, a layer argument, a closure) reads it."""
    attrs = _stored(param, fn, callables, set())
    if attrs is None:
        return False
    return not any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and n.attr in attrs
                   and isinstance(n.value, ast.Name) and n.value.id == "self"
                   for body in [fn, *callables.values()] for n in ast.walk(body))


def _stored(param: str, fn: ast.FunctionDef, callables: dict[str, ast.FunctionDef],
            seen: set[tuple[str, str]]) -> set[str] | None:
    """The instance attributes `param` is stored in, or None when it is used otherwise."""
    if (fn.name, param) in seen:
        return set()
    seen.add((fn.name, param))
    parents = {child: node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    attrs: set[str] = set()
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Name) and n.id == param and isinstance(n.ctx, ast.Load)):
            continue
        up = parents.get(n)
        if isinstance(up, ast.Assign) and up.value is n and all(
                isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                for t in up.targets):
            attrs |= {t.attr for t in up.targets}  # type: ignore[attr-defined]
            continue
        call, keyword = (parents.get(up), up.arg) if isinstance(up, ast.keyword) else (up, None)
        passed = _passed_to(call, n, keyword, callables)
        got = _stored(passed[0], passed[1], callables, seen) if passed else None
        if got is None:
            return None
        attrs |= got
    return attrs


def _passed_to(call: ast.AST | None, arg: ast.expr, keyword: str | None,
               callables: dict[str, ast.FunctionDef]) -> tuple[str, ast.FunctionDef] | None:
    """(the parameter, the function) `arg` is bound to in `call` of a build body (`f(x)`, `self.m(x)`, `k=x`)."""
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    method = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"
    name = f.attr if method else f.id if isinstance(f, ast.Name) else None  # type: ignore[union-attr]
    target = callables.get(name) if name else None
    if target is None:
        return None
    params = [a.arg for a in [*target.args.posonlyargs, *target.args.args, *target.args.kwonlyargs]]
    if keyword is not None:
        return (keyword, target) if keyword in params else None
    i = call.args.index(arg) + (1 if method else 0) if arg in call.args else len(params)
    return (params[i], target) if i < len(params) and not target.args.vararg else None


def build_methods(cls: ast.ClassDef, entries: list[str]) -> dict[str, ast.FunctionDef]:
    """The methods a class's build runs: `entries` (its __init__, a builder method) and the methods they call on
    self, transitively; every method of a keras Model subclass (its call() is the model)."""
    methods = {s.name: s for s in cls.body if isinstance(s, ast.FunctionDef)}
    if any(ast.unparse(b).split(".")[-1] in ("Model", "Sequential") for b in cls.bases):
        return methods
    out: dict[str, ast.FunctionDef] = {}
    todo = [e for e in entries if e in methods]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out[name] = methods[name]
        todo += [n.func.attr for n in ast.walk(methods[name]) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                 and n.func.value.id == "self" and n.func.attr in methods]
    return out
