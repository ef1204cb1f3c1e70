"""What module-level source k2to3 reads as data, without running it: literal constants and arithmetic of them, the
values a `for` loop over literals leaves, numpy arrays of literals, the literal entries of a settings dict, the branch
of a `keras.__name__` check that Keras itself takes, the `K` a star import from a Keras 2 layers module gave, and
the scalar constants and pure functions of `math` and numpy over literals (`upper_bound = np.pi / 4`,
`math.sqrt(2)`). Pure `ast`; nothing is imported or run except `eval` of expressions checked to be literals,
arithmetic and those names (given their values from the standard library's `math`, never numpy itself)."""

from __future__ import annotations

import ast
import math
import re
from types import SimpleNamespace
from typing import Any

from k2to3.source.source_index import Definition

_STATIC = (ast.Constant, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List, ast.Dict,
           ast.operator, ast.unaryop, ast.Set)


# what a constant may take from math and numpy: scalar constants, and pure functions of numbers (numpy's as math's)
_CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf}
_FUNCTIONS = {n: getattr(math, n) for n in ("sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan")}
NUMERIC = {
    "math": {**_CONSTANTS, "tau": math.tau, **_FUNCTIONS, "radians": math.radians, "degrees": math.degrees,
             "floor": math.floor, "ceil": math.ceil},
    "numpy": {**_CONSTANTS, "Inf": math.inf, "euler_gamma": 0.5772156649015329, **_FUNCTIONS,
              "deg2rad": math.radians, "rad2deg": math.degrees},
}


def numeric_bindings(stmt: ast.stmt) -> dict[str, Any]:
    """The names an import of math or numpy binds that a constant may use: `np` (a namespace of NUMERIC's entries)
    for `import numpy as np`, the value itself for `from math import pi`."""
    out: dict[str, Any] = {}
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            if a.name in NUMERIC and (a.asname or "." not in a.name):
                out[a.asname or a.name] = SimpleNamespace(**NUMERIC[a.name])
    elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module in NUMERIC:
        for a in stmt.names:
            if a.name in NUMERIC[stmt.module]:
                out[a.asname or a.name] = NUMERIC[stmt.module][a.name]
    return out


def static(node: ast.expr, known: set[str], numeric: dict[str, Any] | None = None) -> bool:
    """Literals, arithmetic, names in `known`, and (with `numeric`: numeric_bindings) `np.pi`, `math.sqrt(2)`."""
    numeric = numeric or {}

    def entry(n: ast.expr) -> Any:  # the math or numpy value a name or attribute stands for, else None
        if isinstance(n, ast.Name) and n.id not in known and not isinstance(numeric.get(n.id), SimpleNamespace):
            return numeric.get(n.id)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id not in known \
                and isinstance(numeric.get(n.value.id), SimpleNamespace):
            return getattr(numeric[n.value.id], n.attr, None)
        return None

    def ok(n: ast.AST) -> bool:
        if isinstance(n, ast.Call):
            return callable(entry(n.func)) and not n.keywords and all(
                not isinstance(a, ast.Starred) and ok(a) for a in n.args)
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(entry(n), (int, float)):
            return True
        if isinstance(n, ast.Name):
            return n.id in known
        return isinstance(n, _STATIC) and all(ok(c) for c in ast.iter_child_nodes(n))

    return ok(node)


NUMPY_CONSTRUCTORS = frozenset({"array", "asarray", "zeros", "ones", "full", "arange", "linspace", "eye", "identity",
                                "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool_"})


def numpy_root(node: ast.expr, defs: dict[str, Definition]) -> bool:
    """`np.float64`, `numpy.pi`: an attribute of an imported numpy."""
    while isinstance(node, ast.Attribute):
        node = node.value
    d = defs.get(node.id) if isinstance(node, ast.Name) else None
    return d is not None and d.kind == "import" and bool(re.match(r"import numpy\b|from numpy\b", d.code))


def numpy_of_literals(node: ast.expr, known: set[str], defs: dict[str, Definition]) -> bool:
    """A numpy constructor (np.array, np.zeros, ...) called on literals and numpy attributes only: data."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in NUMPY_CONSTRUCTORS and numpy_root(node.func, defs)):
        return False
    values = [*node.args, *(k.value for k in node.keywords)]
    return not any(isinstance(v, ast.Starred) for v in values) and all(
        static(v, known) or (isinstance(v, ast.Attribute) and numpy_root(v, defs)) for v in values)


def keras_branch(node: ast.If) -> list[ast.Assign] | None:
    """`if keras.__name__ == 'keras': is_tf_keras = False elif ...: is_tf_keras = True else: raise` (keras-contrib's
    utils): which Keras runs is asked at import; for a generated module it is Keras itself, so that branch's literal
    assignments are the module's constants. None unless the chain has such a branch of literal assignments only."""
    while True:
        t = node.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq) \
                and isinstance(t.left, ast.Attribute) and t.left.attr == "__name__" \
                and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value == "keras":
            body = node.body
            ok = all(isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                     and static(s.value, set()) for s in body)
            return body if ok else None  # type: ignore[return-value]
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        return None


def literal_entries(node: ast.expr, known: set[str]) -> tuple[list[tuple[ast.expr, ast.expr]], list[str]] | None:
    """A dict display with literal keys, some of whose values are not static: (the static items, the keys of the
    others); None for anything else."""
    if not isinstance(node, ast.Dict) or None in node.keys or not node.keys:
        return None
    kept: list[tuple[ast.expr, ast.expr]] = []
    dropped: list[str] = []
    for k, v in zip(node.keys, node.values):
        if not isinstance(k, ast.Constant) or not isinstance(k.value, (str, int)):
            return None
        if static(v, known):
            kept.append((k, v))
        else:
            dropped.append(repr(k.value))
    return (kept, dropped) if dropped and kept else None


def static_iter(node: ast.expr, known_values: dict[str, Any]) -> list[Any] | None:
    """Values of a for loop's iterable when static: range(...) of constants, a literal list or tuple."""
    try:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            args = [eval_const(a, known_values) for a in node.args]
            return list(range(*args))
        return list(eval_const(node, known_values))
    except Exception:  # not static: the caller reports it
        return None


def eval_const(node: ast.expr, known_values: dict[str, Any], numeric: dict[str, Any] | None = None) -> Any:
    """The value of a static expression (`static`); raises ValueError (or what the arithmetic raises: 1 / 0)."""
    if not static(node, set(known_values), numeric):
        raise ValueError("not static")
    code = compile(ast.Expression(node), "<const>", "eval")
    # literals, arithmetic and math's values only (checked above)
    return eval(code, {"__builtins__": {}}, {**(numeric or {}), **known_values})


def keras_root(stmt: ast.Import | ast.ImportFrom) -> str | None:
    """`keras` or `tensorflow.keras` for a star import from one of Keras's layer modules, else None."""
    module = getattr(stmt, "module", None) or ""
    for root in ("tensorflow.keras", "keras"):
        if module.startswith(root + ".layers") or module.startswith(root + ".engine"):
            return root
    return None
