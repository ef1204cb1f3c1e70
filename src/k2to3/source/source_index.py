"""What indexing --src files yields (source/extract.py builds it; nothing here parses or runs anything): each
module-level definition with its dependencies, each call that makes a Lambda layer, and the index of both."""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k2to3.upgrade.decompile import DECOMPILED_PREFIX

BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__"}


@dataclass
class Definition:
    name: str
    kind: str  # function | class | lambda | constant | import | loopvar
    path: Path
    line: int
    code: str  # the statement's source (an import: just this name's import)
    deps: set[str] = field(default_factory=set)  # module-level names it references
    lazy_deps: Any = None  # computes more deps on first use (symtable, paid only for definitions a model needs)
    order: int = 0
    value: Any = None  # loopvar: the value the name holds after the loop (static iterables only)
    args: list[str] = field(default_factory=list)  # function / lambda parameters

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class Site:
    """A call that creates a Lambda layer, or passes a lambda as a layer's activation."""

    kind: str  # "Lambda" | "activation"
    path: Path
    line: int
    func: ast.expr  # ast.Lambda, or a Name of a function
    func_code: str
    name: str | None  # literal name= of the layer
    argument_keys: frozenset[str] | None  # keys of a literal arguments= dict; None: no arguments=
    arguments_static: bool  # arguments= is a dict literal / dict(...) with literal keys
    has_output_shape: bool
    layer_class: str | None
    frees: tuple[str, ...]  # names bound in an enclosing function (closure cells, sorted as CPython does)
    globals_: frozenset[str]  # module-level names the function body references
    loop_vars: frozenset[str]  # frees or globals that are targets of an enclosing for loop
    params: list[str]
    order: int
    owner: str | None = None  # the module-level function the call is in (None: module level)
    in_loop: bool = False  # inside a for/while loop (a module-level call outside loops runs once)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def identity(self) -> tuple[Any, ...]:
        if isinstance(self.func, ast.Name):
            return ("def", self.func.id)
        return ("site", str(self.path), self.line, self.func.col_offset)


@dataclass
class SourceIndex:
    paths: list[Path]
    defs: dict[str, Definition] = field(default_factory=dict)
    dynamic: dict[str, str] = field(default_factory=dict)  # name -> path:line of a run-time assignment
    sites: list[Site] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    texts: dict[Path, str] = field(default_factory=dict)
    counter: int = 0
    calls: dict[str, set[str]] = field(default_factory=dict)  # module-level function -> names it calls
    literal_names: dict[str, set[str]] = field(default_factory=dict)  # function -> its name="..." literals
    # function -> the capitalised names it calls (Conv2D, layers.Dense, Convolution2D): the layer classes it makes
    class_calls: dict[str, list[str]] = field(default_factory=dict)
    # custom_objects={"name": obj} passed to load_model / model_from_json / CustomObjectScope /
    # get_custom_objects().update(...): artifact name -> (module-level name it maps to, path:line)
    custom_objects: dict[str, tuple[str, str]] = field(default_factory=dict)
    py2: dict[Path, str] = field(default_factory=dict)  # read after the 2->3 step -> its first Python 3 error
    unparsed: dict[Path, str] = field(default_factory=dict)  # neither Python 3 nor 2: skipped -> why

    def reachable(self, fn: str) -> set[str]:
        """Module-level functions `fn` calls, directly or not (by name), and `fn` itself."""
        seen, todo = set(), [fn]
        while todo:
            f = todo.pop()
            if f in seen or f not in self.calls:
                continue
            seen.add(f)
            todo.extend(self.calls[f])
        return seen

    def closure(self, roots: set[str]) -> tuple[list[Definition], dict[str, str]]:
        """Definitions needed by `roots` (transitively), in source order, and the unresolved names
        (name -> why)."""
        seen: set[str] = set()
        missing: dict[str, str] = {}
        todo = list(roots)
        while todo:
            n = todo.pop()
            if n in seen or n in BUILTINS:
                continue
            seen.add(n)
            d = self.defs.get(n)
            if d is None:
                missing[n] = (f"is assigned by running code at {self.dynamic[n]}" if n in self.dynamic
                              else "is not defined or imported at module level in the --src files")
                continue
            if d.lazy_deps is not None:
                d.deps |= d.lazy_deps() - {d.name}
                d.lazy_deps = None
            todo.extend(d.deps)
        out = sorted((self.defs[n] for n in seen if n in self.defs), key=lambda d: d.order)
        return out, missing


DECOMPILED_LABEL = "decompiled from the file's bytecode (--trust-bytecode)"


def label(where: str) -> str:
    """Where a definition came from: its file:line, or the file's own bytecode when k2to3 decompiled it."""
    return DECOMPILED_LABEL if Path(where.rsplit(":", 1)[0]).name.startswith(DECOMPILED_PREFIX) else where


