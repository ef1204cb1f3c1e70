"""`k2to3 lint`: findings with stable codes, path:line:col, and whether `k2to3 fix` can rewrite them.

Reads with the standard library's `ast` (a C parser, much faster than libcst) and resolves names through
every import in the file (classify.Aliases); the rewrite (fix.py) uses libcst so that formatting and
comments survive."""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from k2to3.core.tables import lint_tables
from k2to3.source.classify import (
    LAMBDA,
    TF_KERAS_NAMESPACES,
    Aliases,
    CallArgs,
    Expr,
    add_weight_keywords,
    arg_kind,
    classify_call,
    indexed_calls,
    keras_name,
)


@dataclass(frozen=True)
class SourceFinding:
    path: str
    line: int
    col: int
    code: str
    message: str
    fixable: bool
    cell: int | None = None  # notebook cell index

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        where = f"{self.path}:cell{self.cell}:" if self.cell is not None else f"{self.path}:"
        fix = " [fixable]" if self.fixable else ""
        return f"{where}{self.line}:{self.col}: {self.code} {self.message}{fix}"


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return Expr(node)


def call_args(node: ast.Call) -> CallArgs:
    star = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
    return CallArgs(
        positional=[_literal(a) for a in node.args],
        keywords={k.arg: _literal(k.value) for k in node.keywords if k.arg},
        star=star,
        raw=[(None, a) for a in node.args] + [(k.arg, k.value) for k in node.keywords],
    )


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """Every statement (and except handler, match case) in ast.walk's breadth-first order: imports are statements,
    so this finds all of them without visiting the expressions, most of a file's nodes."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        yield node
        for name in node._fields:
            v = getattr(node, name, None)
            if isinstance(v, list) and v and isinstance(v[0], _BLOCK):
                todo.extend(v)


_BLOCK = (ast.stmt, ast.excepthandler, ast.match_case)


def collect_aliases(tree: ast.AST) -> Aliases:
    al = Aliases()
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                al.add_import(a.name, a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name != "*":
                    al.add_from(node.module, a.name, a.asname)
    return al


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_SKIP_FIELDS = {"ctx", "op", "ops", "type_comment", "type_ignores"}  # operators and contexts: leaves, never a finding


@cache
def _fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that can hold nodes with findings, in visiting order (none for a name or a
    constant)."""
    if kind in (ast.Name, ast.Constant, ast.alias):
        return ()
    return tuple(f for f in kind._fields if f not in _SKIP_FIELDS)


class Linter:
    """One pass over the tree in ast.NodeVisitor's order (fields in order, depth first), dispatching on the node's
    type through a dict: NodeVisitor's per-node method lookup and generic_visit's generators make a tree's walk
    much slower."""

    def __init__(self, path: str, aliases: Aliases):
        self.path = path
        self.aliases = aliases
        self.findings: list[SourceFinding] = []
        self.indexed: set[tuple[int, int]] = set()  # calls whose result is only indexed (classify.indexed_calls)
        self.loop_vars: list[set[str]] = []
        self.context: list[str] = []  # "Class.call" while inside a custom layer's call
        self.layer_class: list[str | None] = []
        self.handlers: dict[type, Callable[[Any], None]] = {
            ast.ClassDef: self.visit_ClassDef, ast.FunctionDef: self.visit_FunctionDef,
            ast.AsyncFunctionDef: self.visit_FunctionDef, ast.For: self.visit_For, ast.Call: self.visit_Call,
            ast.Attribute: self.visit_Attribute, ast.ImportFrom: self.visit_ImportFrom,
            ast.Import: self.visit_Import}

    def visit(self, node: ast.AST) -> None:
        handler = self.handlers.get(type(node))
        if handler is not None:
            handler(node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        for name in _fields(type(node)):
            v = getattr(node, name, None)
            if isinstance(v, list):
                for item in v:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(v, ast.AST):
                self.visit(v)

    def add(self, node: Any, code: str, message: str, fixable: bool) -> None:
        if self.context and self.context[-1]:
            message += f" (inside {self.context[-1]})"
        self.findings.append(SourceFinding(self.path, node.lineno, node.col_offset + 1, code, message, fixable))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        is_layer = any((dotted(b) or "").split(".")[-1].endswith(("Layer", "Model")) for b in node.bases)
        self.layer_class.append(node.name if is_layer else None)
        self.context.append("")
        self.generic_visit(node)
        self.context.pop()
        self.layer_class.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        cls = self.layer_class[-1] if self.layer_class else None
        self.context.append(f"{cls}.call" if cls and node.name == "call" else "")
        self.layer_class.append(None)  # nested classes/functions are not the layer's call
        self.generic_visit(node)
        self.layer_class.pop()
        self.context.pop()

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.loop_vars.append(_names(node.target))
        for stmt in node.body + node.orelse:
            self.visit(stmt)
        self.loop_vars.pop()

    def keyword_rules(self, node: ast.Call, q: str | None) -> None:
        """K2T207/K2T208: keywords of a Keras API call that Keras 3 renamed or removed (rules/source.toml)."""
        target = q if q is None or q.startswith("keras.") else keras_name(q)
        rule = lint_tables().calls.get(target or "")
        if rule is None:
            return
        given = [k.arg for k in node.keywords if k.arg]
        renamed = [f"{k}= -> {rule['rename'][k]}=" for k in given if k in rule["rename"]]
        dropped = [f"{k}=" for k in given if k in rule["drop"]]
        if renamed:
            self.add(node, "K2T207", f"{target}: {', '.join(renamed)} (renamed in Keras 3)", True)
        if dropped:
            self.add(node, "K2T208", f"{target}: {', '.join(dropped)} dropped (Keras 3 has no such argument; "
                     "tf.keras ignored it)", True)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "add_weight" and node.args \
                and dotted(node.func.value) == "self" and not any(isinstance(a, ast.Starred) for a in node.args):
            names = add_weight_keywords([arg_kind(a) for a in node.args], {k.arg for k in node.keywords if k.arg})
            if names is None:
                self.add(node, "K2T205", "self.add_weight with positional arguments that would repeat a keyword it "
                         "gives (Keras 3's order starts shape, initializer): write them as keywords", False)
            else:
                self.add(node, "K2T205", f"self.add_weight with positional arguments ({', '.join(names)} in "
                         "Keras 2; Keras 3's order starts shape, initializer)", True)
        q = self.aliases.resolve(dotted(node.func))
        self.keyword_rules(node, q)
        if q is not None:
            if keras_name(q) == LAMBDA:
                self.lambda_layer(node)
            else:
                args = call_args(node)
                args.indexed = (node.lineno, node.col_offset) in self.indexed
                v = classify_call(q, args)
                if v is not None:
                    self.add(node, v.code, v.message, v.fixable)
        self.generic_visit(node)

    def lambda_layer(self, node: ast.Call) -> None:
        fn = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "function"), None)
        kws = {k.arg for k in node.keywords}
        kind = "inline lambda" if isinstance(fn, ast.Lambda) else "named function"
        extras = [k for k in ("arguments", "output_shape", "mask") if k in kws]
        self.add(node, "K2T301", f"Lambda layer ({kind}{', ' + '=, '.join(extras) + '=' if extras else ''}): "
                 "saved as bytecode, refused by safe_mode", False)
        if isinstance(fn, ast.Lambda) and self.loop_vars:
            params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
            late = (_names(fn.body) & set().union(*self.loop_vars)) - params
            if late:
                self.add(node, "K2T302", f"lambda closes over loop variable {', '.join(sorted(late))} "
                         "(late binding: every layer sees the last value)", False)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "keras" and self.aliases.resolve(dotted(node.value)) == "tensorflow":
            self.add(node, "K2T501", f"{dotted(node)}: Keras through TensorFlow; use keras", True)
            return
        if node.attr in TF_KERAS_NAMESPACES and self.aliases.resolve(dotted(node.value)) == "tensorflow":
            self.add(node, "K2T501", f"{dotted(node)}: tf.keras.{node.attr} under TensorFlow's own name; use "
                     f"keras.{node.attr}", True)
            return
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level:
            return
        names = [a.name for a in node.names]
        if (keras_name(mod + ".") is not None and not mod.startswith("keras")) or \
                (mod == "tensorflow" and "keras" in names):
            self.add(node, "K2T501", f"import from {mod}: Keras through TensorFlow; import keras", True)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.startswith(("tensorflow.keras", "tensorflow.python.keras")):
                self.add(node, "K2T501", f"import {a.name}: Keras through TensorFlow; import keras", False)


NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z0-9, ]+))?", re.I)
FILE_NOQA = re.compile(r"#\s*k2to3:\s*noqa\b", re.I)
# Files that cannot contain a finding are not parsed at all: every finding is about a tensorflow or keras name,
# except K2T205 (self.add_weight's Keras 2 argument order), which needs no import.
RELEVANT = re.compile(r"tensorflow|keras|tf_keras|add_weight")


def suppressed(lines: list[str], f: SourceFinding) -> bool:
    if 1 <= f.line <= len(lines):
        m = NOQA.search(lines[f.line - 1])
        if m:
            codes = m.group("codes")
            return codes is None or f.code in {c.strip().upper() for c in codes.split(",")}
    return False


def lint_source(code: str, path: str, prefilter: bool = True) -> tuple[list[SourceFinding], int]:
    """Returns (findings, number suppressed by noqa; -1 when the whole file is). SyntaxError on bad syntax.
    With `prefilter`, a file that never mentions tensorflow, keras or add_weight is not parsed (it cannot have a
    finding)."""
    if FILE_NOQA.search(code):
        return [], -1
    if prefilter and not RELEVANT.search(code):
        return [], 0
    tree = ast.parse(code, filename=path)
    linter = Linter(path, collect_aliases(tree))
    if "shape(" in code:
        linter.indexed = indexed_calls(tree, code)
    linter.visit(tree)
    if not linter.findings:
        return [], 0
    lines = code.splitlines()
    kept = [f for f in linter.findings if not suppressed(lines, f)]
    return kept, len(linter.findings) - len(kept)
