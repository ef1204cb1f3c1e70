"""The --src files as the build search reads them (source/build_candidates.py): each file's module-level functions,
classes, literal constants (and math and numpy constants: `upper_bound = np.pi / 4`) and dict keys, with the constants
it imports from another --src file merged in where the import stands: `from parameters import *`, `from config import
BATCH_SIZE`, `from .config import ...`, `import config as cfg` (then `cfg.BATCH_SIZE`). Pure ast; nothing is run."""

from __future__ import annotations

import ast
import copy
from pathlib import Path
from typing import Any

from k2to3.source.static_values import eval_const, numeric_bindings


class SourceFile:
    def __init__(self, path: Path, text: str):
        self.path = path
        self.tree = ast.parse(text)
        self.functions = {s.name: s for s in self.tree.body if isinstance(s, ast.FunctionDef)}
        self.classes = {s.name: s for s in self.tree.body if isinstance(s, ast.ClassDef)}
        self.dicts: dict[str, list[Any]] = {}  # module-level NAME = {literal keys: ...}
        for s in self.tree.body:
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Dict) and len(s.targets) == 1 \
                    and isinstance(s.targets[0], ast.Name):
                keys = [literal(k) for k in s.value.keys if k is not None]
                self.dicts[s.targets[0].id] = [v for ok, v in keys if ok]
        self.constants: dict[str, Any] = {}  # module-level NAME = literal (STATE_LENGTH = 3), imported ones too
        self.imported: dict[str, str] = {}  # an imported constant -> where it is written ("parameters.py:6")
        self.modules: dict[str, SourceFile] = {}  # `import config as cfg`: cfg -> config.py
        self.numeric: dict[str, Any] = {}  # math and numpy names (static_values.numeric_bindings)
        self.linked = False

    def value(self, node: ast.expr) -> tuple[bool, Any]:
        """(True, value) of an expression the file's constants give (`[STATE_LENGTH]`, `np.pi / 4`,
        `cfg.BATCH_SIZE`), else (False, None)."""
        ok, v = literal(node)
        if ok:
            return ok, v
        node = _module_attributes(node, self.modules)
        try:
            return True, eval_const(node, self.constants, self.numeric)
        except (ArithmeticError, ValueError, TypeError, MemoryError, RecursionError):
            return False, None


def literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _module_attributes(node: ast.expr, modules: dict[str, SourceFile]) -> ast.expr:
    """`cfg.BATCH_SIZE` with the value config.py gives it put in (for eval_const: nothing is run)."""
    if not modules:
        return node

    class Sub(ast.NodeTransformer):
        def visit_Attribute(self, n: ast.Attribute) -> Any:
            if isinstance(n.value, ast.Name) and n.value.id in modules and n.attr in modules[n.value.id].constants:
                return ast.parse(repr(modules[n.value.id].constants[n.attr]), mode="eval").body
            return self.generic_visit(n)

    return Sub().visit(copy.deepcopy(node))


def link(files: list[SourceFile]) -> None:
    """Every file's constants, in statement order, with what it imports from the other files."""
    for f in files:
        _link(f, files, set())


def _link(file: SourceFile, files: list[SourceFile], stack: set[Path]) -> dict[str, Any]:
    if file.linked or file.path in stack:  # an import cycle: the constants so far
        return file.constants
    stack.add(file.path)
    for s in file.tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            _imported(file, s, files, stack)
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            name = s.targets[0].id
            ok, v = file.value(s.value)
            file.imported.pop(name, None)
            if ok:
                file.constants[name] = v
            else:  # assigned by running code: not the earlier value any more
                file.constants.pop(name, None)
    file.linked = True
    stack.discard(file.path)
    return file.constants


def _imported(file: SourceFile, stmt: ast.Import | ast.ImportFrom, files: list[SourceFile], stack: set[Path]) -> None:
    for a in stmt.names:
        bound = a.asname or a.name.split(".")[0]
        file.numeric.pop(bound, None)
        file.constants.pop(bound, None)
        file.modules.pop(bound, None)
    file.numeric.update(numeric_bindings(stmt))
    if isinstance(stmt, ast.Import):
        for a in stmt.names:
            target = find_module(file, a.name, 0, files)
            if target is not None and (a.asname or "." not in a.name):
                _link(target, files, stack)
                file.modules[a.asname or a.name] = target
        return
    target = find_module(file, stmt.module or "", stmt.level, files)
    got = _link(target, files, stack) if target is not None else {}
    for a in stmt.names:
        names = [k for k in got if not k.startswith("_")] if a.name == "*" else [a.name] if a.name in got else []
        for n in names:
            file.constants[a.asname or n] = got[n]
            file.imported[a.asname or n] = f"{n} of {target.path.name}"  # type: ignore[union-attr]
        if a.name != "*" and not names:  # `from . import config`: a module
            sub = find_module(file, ".".join(p for p in (stmt.module, a.name) if p), stmt.level, files)
            if sub is not None:
                _link(sub, files, stack)
                file.modules[a.asname or a.name] = sub


def find_module(file: SourceFile, module: str, level: int, files: list[SourceFile]) -> SourceFile | None:
    """The --src file an import names: relative to the importing file (level dots), or absolute, the file beside
    the importer first (a script's folder is on its path when it runs)."""
    parts = [p for p in module.split(".") if p]
    if not parts:
        return None
    tails = [(*parts[:-1], parts[-1] + ".py"), (*parts, "__init__.py")]
    if level:
        base = file.path.parent
        for _ in range(level - 1):
            base = base.parent
        wanted = {base.joinpath(*t) for t in tails}
        return next((f for f in files if f.path in wanted and f is not file), None)
    found = [f for f in files if f is not file and any(f.path.parts[-len(t):] == t for t in tails)]
    found.sort(key=lambda f: (f.path.parent != file.path.parent, len(f.path.parts)))
    return found[0] if found else None
