"""Functions and classes defined inside a function of a --src file (a VAE's `def sampling(args)` in
`_build_encoder`, `class Sampling(Layer)` in `build()`), read as module-level definitions when they capture nothing
of it. Pure: source/extract.py's indexer records what this finds; nothing here runs the source."""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field


@dataclass
class Nested:
    name: str
    kind: str  # function | class
    line: int
    code: str = ""  # dedented, with a comment saying where it came from ("" when captured)
    deps: set[str] = field(default_factory=set)
    args: list[str] = field(default_factory=list)
    captured: list[str] = field(default_factory=list)  # local names of the enclosing function it uses
    outer: str = ""  # the enclosing function


def _segment(lines: list[str], node: ast.stmt) -> str:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "".join(lines[start - 1: node.end_lineno])


def nested_definitions(tree: ast.Module, lines: list[str], where_prefix: str) -> list[Nested]:
    """Every function or class defined inside a module-level function or method; hoistable (`code` set) when it
    uses none of the enclosing function's local names, else with the names it captures."""
    outer = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    outer += [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
              if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found = []
    for fn in outer:
        local = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for node in ast.walk(fn):
            if node is fn or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            own = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            own |= {a.arg for sub in ast.walk(node) if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                          ast.Lambda))
                    for a in ast.walk(sub.args) if isinstance(a, ast.arg)}
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            captured = sorted((used & local) - own - {node.name})
            item = Nested(node.name, kind, node.lineno, captured=captured, outer=fn.name)
            if not captured:
                code = textwrap.dedent(_segment(lines, node))
                try:
                    top = ast.parse(code).body[0]
                except (SyntaxError, IndexError):
                    continue
                item.code = f"# defined inside {fn.name}() at {where_prefix}:{node.lineno}, hoisted to module " \
                            f"level\n{code}"
                item.deps = {n.id for n in ast.walk(top) if isinstance(n, ast.Name)
                             and isinstance(n.ctx, ast.Load)} - own - {node.name}
                item.args = [a.arg for a in top.args.args] if isinstance(top, (ast.FunctionDef,
                                                                              ast.AsyncFunctionDef)) else []
            found.append(item)
    return found
