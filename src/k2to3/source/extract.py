"""Index `--src` files without running them: module-level definitions (functions, classes, lambdas bound to
names, constants, imports), what each one references, and the call sites that create Lambda layers or pass
a lambda as an activation. Stdlib `ast` and `symtable` only; nothing in the files is executed."""

from __future__ import annotations

import ast
import re
import symtable
from pathlib import Path
from typing import Any

from k2to3.errors import InputError
from k2to3.source.classify import LAMBDA, keras_name
from k2to3.source.files import notebook_source
from k2to3.source.lint import collect_aliases, dotted
from k2to3.source.nested_definitions import nested_definitions
from k2to3.source.py2 import to_py3
from k2to3.source.source_index import Definition, Site, SourceIndex
from k2to3.source.static_values import (
    eval_const,
    keras_branch,
    keras_root,
    literal_entries,
    numeric_bindings,
    numpy_of_literals,
    static,
    static_iter,
)

# Calls whose custom_objects= (or, for the scopes, first argument) maps names in a saved model to objects.
CUSTOM_OBJECT_CALLS = frozenset({"load_model", "model_from_json", "model_from_yaml", "model_from_config",
                                 "deserialize", "CustomObjectScope", "custom_object_scope"})
# Values a constant's expression may contain: literals, names of other constants, arithmetic.
def _segment(lines: list[str], node: ast.stmt) -> str:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "".join(lines[start - 1: node.end_lineno])


def _imported_path(node: ast.expr, defs: dict[str, Definition]) -> str | None:
    """`keras.backend` where `from tensorflow import keras` was imported -> "tensorflow.keras.backend"; None when
    `node` is not an attribute chain on an imported name."""
    parts: list[str] = []
    root = node
    while isinstance(root, ast.Attribute):
        parts.insert(0, root.attr)
        root = root.value
    if not parts or not isinstance(root, ast.Name) or root.id not in defs or defs[root.id].kind != "import":
        return None
    imp = ast.parse(defs[root.id].code).body[0]
    if isinstance(imp, ast.Import):
        module = imp.names[0].name if imp.names[0].asname else root.id
    elif isinstance(imp, ast.ImportFrom) and imp.module and not imp.level:
        module = f"{imp.module}.{imp.names[0].name}"
    else:
        return None
    return ".".join([module, *parts])


def _table_globals(table: symtable.SymbolTable) -> set[str]:
    """Module-level names referenced by a function/class table and every table nested in it."""
    out: set[str] = set()
    for sym in table.get_symbols():
        if sym.is_global() and sym.is_referenced():
            out.add(sym.get_name())
        elif table.get_type() == "class" and sym.is_referenced() and not sym.is_assigned():
            out.add(sym.get_name())
    for child in table.get_children():
        out |= _table_globals(child)
    return out


def _tables_by_line(table: symtable.SymbolTable, acc: dict[tuple[str, int], list[symtable.SymbolTable]]) -> None:
    for child in table.get_children():
        acc.setdefault((child.get_name(), child.get_lineno()), []).append(child)
        _tables_by_line(child, acc)


class _Indexer:
    def __init__(self, index: SourceIndex, path: Path, text: str):
        self.index, self.path, self.text = index, path, text
        self.lines = text.splitlines(keepends=True)
        try:
            self.tree = ast.parse(text, filename=str(path))
        except SyntaxError as exc:
            py2 = to_py3(text, exc)
            if py2 is None:
                raise _Unparsed(f"{path}:{exc.lineno}: syntax error in --src file ({exc.msg})") from None
            index.py2[path] = py2.first_error
            self.text = py2.text
            self.lines = py2.text.splitlines(keepends=True)
            self.tree = ast.parse(py2.text, filename=str(path))
        self.aliases = collect_aliases(self.tree)
        self._tables: dict[tuple[str, int], list[symtable.SymbolTable]] | None = None  # built on first use
        self.consts: dict[str, Any] = {}
        self.numeric: dict[str, Any] = {}  # the math and numpy names a constant may use (np.pi / 4)

    @property
    def tables(self) -> dict[tuple[str, int], list[symtable.SymbolTable]]:
        """Symbol tables by (name, line): a second compile of the file, so only when a definition of it is
        needed or it has a Lambda call site (several times the parse for a whole tree otherwise)."""
        if self._tables is None:
            self._tables = {}
            try:
                _tables_by_line(symtable.symtable(self.text, str(self.path), "exec"), self._tables)
            except SyntaxError:
                pass  # ast accepted it; without tables, references are taken from the ast alone
        return self._tables

    def add(self, d: Definition) -> None:
        old = self.index.defs.get(d.name)
        if old is not None and old.kind == "import" and d.kind != "import" and imports_from(old.code, d.path):
            self.index.defs.pop(d.name)  # `from anago.layers import CRF` and anago/layers.py among the files
        elif old is not None and d.kind == "import" and old.kind != "import" and imports_from(d.code, old.path):
            return
        if d.name in self.index.defs and self.index.defs[d.name].path != d.path:
            self.index.notes.append(f"'{d.name}' is defined in {self.index.defs[d.name].where} and {d.where}; "
                                    "the first is used")
            return
        self.index.counter += 1
        d.order = self.index.counter
        self.index.defs[d.name] = d
        self.index.dynamic.pop(d.name, None)

    def lazy_globals(self, kind: str, node: ast.AST) -> Any:
        def deps() -> set[str]:
            table = self.table_of(kind, node)
            if table is not None:
                return _table_globals(table)
            return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}  # no table: every name (safe side)
        return deps

    def table_of(self, kind: str, node: ast.AST) -> symtable.SymbolTable | None:
        name = "lambda" if kind == "lambda" else getattr(node, "name", "")
        cands = self.tables.get((name, node.lineno), [])
        return cands[0] if cands else None

    def run(self) -> None:
        for stmt in self.tree.body:
            self.statement(stmt)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                calls, names, classes = set(), set(), []
                for n in ast.walk(stmt):
                    if isinstance(n, ast.Call):
                        callee = n.func.id if isinstance(n.func, ast.Name) else \
                            n.func.attr if isinstance(n.func, ast.Attribute) else ""
                        if callee[:1].isupper():
                            classes.append(callee)
                        if isinstance(n.func, ast.Name):
                            calls.add(n.func.id)
                        for k in n.keywords:
                            if k.arg == "name" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str):
                                names.add(k.value.value)
                self.index.calls[stmt.name] = calls
                self.index.literal_names[stmt.name] = names
                self.index.class_calls[stmt.name] = classes
        for n in nested_definitions(self.tree, self.lines, str(self.path)):  # a module-level one wins
            if n.name in self.index.defs or n.name in self.index.dynamic:
                continue
            if n.captured:
                self.index.dynamic[n.name] = (f"{self.path}:{n.line} (defined inside {n.outer}() and using its "
                                              f"local name(s) {', '.join(n.captured[:4])})")
            else:
                self.add(Definition(n.name, n.kind, self.path, n.line, n.code, n.deps, args=n.args))
        _SiteVisitor(self).visit(self.tree)

    def statement(self, stmt: ast.stmt) -> None:
        where = f"{self.path}:{stmt.lineno}"
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imports(stmt)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "class" if isinstance(stmt, ast.ClassDef) else "function"
            deps = {n.id for d in getattr(stmt, "decorator_list", []) for n in ast.walk(d) if isinstance(n, ast.Name)}
            if isinstance(stmt, ast.ClassDef):
                deps |= {n.id for b in stmt.bases + [k.value for k in stmt.keywords] for n in ast.walk(b)
                         if isinstance(n, ast.Name)}
            else:  # defaults run when the def does (textgenrnn's optimizer=Adam(lr=4e-3)): not in its symbol table
                deps |= {n.id for d in [*stmt.args.defaults, *stmt.args.kw_defaults] if d is not None
                         for n in ast.walk(d) if isinstance(n, ast.Name)}
            args = [a.arg for a in stmt.args.args] if kind == "function" else []
            self.add(Definition(stmt.name, kind, self.path, stmt.lineno, _segment(self.lines, stmt), deps - {stmt.name},
                                args=args, lazy_deps=self.lazy_globals(kind, stmt)))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if len(names) != 1 or len(targets) != 1:
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            self.index.dynamic[n.id] = where
                return
            name, value = names[0], stmt.value
            if isinstance(value, ast.Lambda):
                self.add(Definition(name, "lambda", self.path, stmt.lineno, _segment(self.lines, stmt), set(),
                                    args=[a.arg for a in value.args.args],
                                    lazy_deps=self.lazy_globals("lambda", value)))
            elif (dotted := _imported_path(value, self.index.defs)) is not None:
                # `K = keras.backend`, `L = tf.keras.layers`: another name for an imported module's attribute, read
                # as the import it stands for (`from tensorflow.keras import backend as K`), which the rewrite
                # to keras.ops understands
                parent, _, last = dotted.rpartition(".")
                code = f"from {parent} import {last}" + (f" as {name}" if name != last else "")
                self.add(Definition(name, "import", self.path, stmt.lineno, code + "\n"))
            elif static(value, set(self.consts), self.numeric) and (got := _value(value, self.consts, self.numeric)):
                self.consts[name] = got[0]
                deps = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                self.add(Definition(name, "constant", self.path, stmt.lineno, _segment(self.lines, stmt), deps))
            elif numpy_of_literals(value, set(self.consts), self.index.defs):
                # `actions = np.array([[0.0, 1.0], ...], dtype=np.float64)`: data, hoisted as written
                deps = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                self.add(Definition(name, "constant", self.path, stmt.lineno, _segment(self.lines, stmt), deps))
            elif (literal := literal_entries(value, set(self.consts))) is not None:
                # a settings dict that also holds objects (`Config = {"latent_dim": 2, "optimizer": Adam(...)}`):
                # the code reads its literal entries (`Config["latent_dim"]`), the rest would need running code
                kept, dropped = literal
                code = (f"{name} = {{{', '.join(f'{ast.unparse(k)}: {ast.unparse(v)}' for k, v in kept)}}}  "
                        f"# the literal entries of {name} at {self.path.name}:{stmt.lineno}; not "
                        f"{', '.join(dropped)} (computed by running code)\n")
                deps = {n.id for _, v in kept for n in ast.walk(v) if isinstance(n, ast.Name)}
                self.add(Definition(name, "constant", self.path, stmt.lineno, code, deps))
            else:
                self.index.dynamic[name] = where
                self.index.defs.pop(name, None)
        elif isinstance(stmt, ast.For):
            values = static_iter(stmt.iter, self.consts)
            if isinstance(stmt.target, ast.Name) and values:
                # Python binds late: after the loop the name holds the last value, which is what a lambda
                # referencing it as a global sees when the model runs.
                self.consts[stmt.target.id] = values[-1]
                code = f"{stmt.target.id} = {values[-1]!r}  # value after the loop at line {stmt.lineno}\n"
                self.add(Definition(stmt.target.id, "loopvar", self.path, stmt.lineno, code, value=values[-1]))
            else:
                for n in ast.walk(stmt.target):
                    if isinstance(n, ast.Name):
                        self.index.dynamic[n.id] = where
        elif isinstance(stmt, ast.If) and _is_main_guard(stmt):
            return  # the script part: never part of what a model needs
        elif isinstance(stmt, (ast.If, ast.Try)):
            for s in stmt.body:  # `try: import x` / `if TF2: import ...`: the first branch's imports
                if isinstance(s, (ast.Import, ast.ImportFrom)):
                    self.imports(s)
            branch = keras_branch(stmt) if isinstance(stmt, ast.If) else None
            for s in branch or ():
                self.add(Definition(s.targets[0].id, "constant", self.path, s.lineno,  # type: ignore[attr-defined]
                                    f"{ast.unparse(s)}  # the `keras.__name__ == 'keras'` branch at "
                                    f"{self.path.name}:{stmt.lineno}: Keras itself, not tf.keras\n", set()))

    def imports(self, stmt: ast.Import | ast.ImportFrom) -> None:
        for a in stmt.names:  # a later import of the same name is not math's any more
            self.numeric.pop(a.asname or a.name.split(".")[0], None)
        self.numeric.update(numeric_bindings(stmt))
        if isinstance(stmt, ast.ImportFrom) and (stmt.level or stmt.module is None):
            for a in stmt.names:
                self.index.dynamic[a.asname or a.name] = f"{self.path}:{stmt.lineno} (a relative import)"
            return
        for a in stmt.names:
            if a.name == "*":
                root = keras_root(stmt)
                if root and "K" not in self.index.defs:
                    # Keras 2's layer modules did `from .. import backend as K`, so `from keras.layers.core import *`
                    # gave the script `K` (the only name of such a star import code relies on without saying so)
                    self.add(Definition("K", "import", self.path, stmt.lineno, f"from {root} import backend as K\n"))
                continue
            if isinstance(stmt, ast.Import):
                bound = a.asname or a.name.split(".")[0]
                code = f"import {a.name}" + (f" as {a.asname}" if a.asname else "")
            else:
                bound = a.asname or a.name
                code = f"from {stmt.module} import {a.name}" + (f" as {a.asname}" if a.asname else "")
            self.add(Definition(bound, "import", self.path, stmt.lineno, code + "\n"))


def _value(node: ast.expr, consts: dict[str, Any], numeric: dict[str, Any]) -> tuple[Any] | None:
    """(the value,) of a static expression, or None when evaluating it fails (1 / 0, math.log(0))."""
    try:
        return (eval_const(node, consts, numeric),)
    except (ArithmeticError, ValueError, TypeError, MemoryError, RecursionError):
        return None


def imports_from(code: str, path: Any) -> bool:
    """`from a.b import name` and a file .../a/b.py, .../a/b/__init__.py or a module of the package .../a/b/ (a
    class its `__init__.py` re-exports): the import names that file's definition."""
    m = re.match(r"from ([\w.]+) import ", code)
    if not m:
        return False
    file, mod = "/" + str(path).replace("\\", "/"), "/" + m.group(1).replace(".", "/")
    return file.endswith((mod + ".py", mod + "/__init__.py")) or (mod + "/") in file


def _is_main_guard(stmt: ast.If) -> bool:
    t = stmt.test
    return (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__")


class _SiteVisitor(ast.NodeVisitor):
    def __init__(self, ix: _Indexer):
        self.ix = ix
        self.loops: list[set[str]] = []
        self.whiles = 0
        self.owner: str | None = None

    def visit_While(self, node: ast.While) -> None:
        self.whiles += 1
        self.generic_visit(node)
        self.whiles -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if self.owner is None and node in self.ix.tree.body:
            self.owner = node.name
            self.generic_visit(node)
            self.owner = None
        else:
            self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if self.ix.tree.body and node in self.ix.tree.body and _is_main_guard(node):
            return
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        self.loops.append({n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)})
        self.generic_visit(node)
        self.loops.pop()

    def custom_objects(self, node: ast.Call, q: str | None) -> None:
        """Keras 2 users mapped artifact names to their objects when loading: load_model(path,
        custom_objects={"<lambda>": lrelu}), CustomObjectScope({...}), get_custom_objects().update({...})."""
        last = (q or dotted(node.func) or "").split(".")[-1]
        mapping: ast.expr | None = None
        if last in CUSTOM_OBJECT_CALLS:
            mapping = next((k.value for k in node.keywords if k.arg == "custom_objects"), None)
            if mapping is None and last in ("CustomObjectScope", "custom_object_scope") and node.args:
                mapping = node.args[0]
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "update" and node.args \
                and isinstance(node.func.value, ast.Call) \
                and (dotted(node.func.value.func) or "").split(".")[-1] == "get_custom_objects":
            mapping = node.args[0]
        pairs: list[tuple[str, ast.expr]] = []
        if isinstance(mapping, ast.Dict):
            pairs = [(k.value, v) for k, v in zip(mapping.keys, mapping.values)
                     if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif isinstance(mapping, ast.Call) and dotted(mapping.func) == "dict":
            pairs = [(k.arg, k.value) for k in mapping.keywords if k.arg]
        for key, value in pairs:
            if isinstance(value, ast.Name):
                self.ix.index.custom_objects.setdefault(key, (value.id, f"{self.ix.path}:{node.lineno}"))

    def visit_Call(self, node: ast.Call) -> None:
        q = self.ix.aliases.resolve(dotted(node.func))
        self.custom_objects(node, q)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        name = kw.get("name")
        lit_name = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
        cls = keras_name(q) if q else None
        if cls == LAMBDA or (q is None and dotted(node.func) in ("Lambda", "layers.Lambda")):
            func = node.args[0] if node.args else kw.get("function")
            if func is not None:
                self.site("Lambda", node, func, lit_name, kw, "Lambda")
        elif "activation" in kw and isinstance(kw["activation"], ast.Lambda):
            owner_cls = (cls or dotted(node.func) or "").split(".")[-1]
            self.site("activation", node, kw["activation"], lit_name, kw, owner_cls)
        elif cls == "keras.layers.Activation" and node.args and isinstance(node.args[0], ast.Lambda):
            self.site("activation", node, node.args[0], lit_name, kw, "Activation")
        self.generic_visit(node)

    def site(self, kind: str, call: ast.Call, func: ast.expr, name: str | None, kw: dict[str, ast.expr],
             layer_class: str) -> None:
        args = kw.get("arguments")
        keys: frozenset[str] | None = None
        static = True
        if args is not None:
            if isinstance(args, ast.Dict) and all(isinstance(k, ast.Constant) for k in args.keys):
                keys = frozenset(str(k.value) for k in args.keys)  # type: ignore[union-attr]
            elif isinstance(args, ast.Call) and dotted(args.func) == "dict" and not args.args:
                keys = frozenset(k.arg for k in args.keywords if k.arg)
            else:
                keys, static = frozenset(), False
        frees: tuple[str, ...] = ()
        globals_: set[str] = set()
        params: list[str] = []
        if isinstance(func, ast.Lambda):
            table = self.ix.table_of("lambda", func)
            if table is not None:
                frees = tuple(sorted(table.get_frees()))
                globals_ = _table_globals(table)
            params = [a.arg for a in func.args.args]
        elif isinstance(func, ast.Name):
            globals_ = {func.id}
        loop_names = set().union(*self.loops) if self.loops else set()
        self.ix.index.sites.append(Site(
            kind=kind, path=self.ix.path, line=call.lineno, func=func,
            func_code=ast.get_source_segment(self.ix.text, func) or "", name=name,
            argument_keys=keys, arguments_static=static, has_output_shape="output_shape" in kw,
            layer_class=layer_class, frees=frees, globals_=frozenset(globals_),
            loop_vars=frozenset((set(frees) | globals_) & loop_names), params=params,
            order=len(self.ix.index.sites), owner=self.owner, in_loop=bool(self.loops) or self.whiles > 0))


class _Unparsed(Exception):
    """A --src file that is neither Python 3 nor Python 2 after the 2->3 step."""


def index_sources(paths: list[Path], skip_bad: bool = False) -> SourceIndex:
    """Index the files; `skip_bad` (audit over a whole tree) notes unreadable files instead of failing."""
    index = SourceIndex(paths=list(paths))
    for p in paths:
        try:
            if not p.is_file():
                raise InputError(f"{p}: --src file not found", hint="pass the Python file that defines the model")
            try:
                text = p.read_text(encoding="utf-8")
                if p.suffix == ".ipynb":
                    text = notebook_source(text)
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                raise InputError(f"{p}: cannot read --src file ({exc})") from None
            indexer = _Indexer(index, p, text)
        except _Unparsed as exc:  # a file the model needs nothing from must not block it: the resolution says
            index.unparsed[p] = str(exc)
            continue
        except InputError as exc:
            if not skip_bad:
                raise
            index.notes.append(exc.line())
            continue
        index.texts[p] = indexer.text
        indexer.run()
    return index


def index_texts(paths: list[Path], texts: dict[Path, str]) -> SourceIndex:
    """Index texts already read (and brought to Python 3) as the files `paths` (source/script_builds.py adds to
    them what a script builds at top level)."""
    index = SourceIndex(paths=list(paths))
    for p, text in texts.items():
        indexer = _Indexer(index, p, text)
        index.texts[p] = indexer.text
        indexer.run()
    return index
