"""`--trust-bytecode` only: read a Lambda's marshalled code object of CPython 3.5-3.10 as data, and decompile a
simple function body into the source of an equivalent `lambda`.

Nothing here calls `marshal` or runs anything: the bytes are parsed by the reader below (every declared size
checked against the bytes left before anything is built, nesting bounded), the instructions are evaluated
symbolically into `ast` expressions, and the result is text. Anything the decompiler does not understand (a
jump, a loop, a statement, an opcode it does not know, a closure it cannot resolve) is refused with the reason;
it never guesses. Opcode numbers come from `upgrade/opcodes.py` (CPython's `Lib/opcode.py` of each version)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from k2to3.upgrade import opcodes
from k2to3.upgrade.codeobject import Code, Refused, instructions, read_code, span

DECOMPILED_PREFIX = "_k2to3_decompiled_"  # the generated module's file name: its objects came from bytecode
MAX_STACK = 256

# Global names a Keras 2 Lambda commonly used, and the import that binds them in the script that saved it.
GLOBAL_IMPORTS = {
    "K": "from keras import backend as K", "tf": "import tensorflow as tf", "np": "import numpy as np",
    "keras": "import keras", "backend": "from keras import backend", "math": "import math",
}
BUILTINS = {"abs", "min", "max", "len", "float", "int", "round", "sum", "tuple", "list", "bool", "pow", "slice"}


# -- symbolic evaluation ---------------------------------------------------------------------------------------
BINARY = {"BINARY_ADD": ast.Add, "BINARY_SUBTRACT": ast.Sub, "BINARY_MULTIPLY": ast.Mult,
          "BINARY_TRUE_DIVIDE": ast.Div, "BINARY_FLOOR_DIVIDE": ast.FloorDiv, "BINARY_MODULO": ast.Mod,
          "BINARY_POWER": ast.Pow, "BINARY_MATRIX_MULTIPLY": ast.MatMult, "BINARY_LSHIFT": ast.LShift,
          "BINARY_RSHIFT": ast.RShift, "BINARY_AND": ast.BitAnd, "BINARY_OR": ast.BitOr, "BINARY_XOR": ast.BitXor}
UNARY = {"UNARY_NEGATIVE": ast.USub, "UNARY_POSITIVE": ast.UAdd, "UNARY_INVERT": ast.Invert, "UNARY_NOT": ast.Not}
CMP = {"<": ast.Lt, "<=": ast.LtE, "==": ast.Eq, "!=": ast.NotEq, ">": ast.Gt, ">=": ast.GtE, "in": ast.In,
       "not in": ast.NotIn, "is": ast.Is, "is not": ast.IsNot}


@dataclass
class _Module:
    """An `import` inside the function: IMPORT_NAME's result, with the attributes or names taken from it."""
    module: str
    path: str
    fromlist: Any


@dataclass
class Decompiled:
    source: str  # `lambda x: x / 127.5 - 1.0`
    name: str  # the code object's name (`<lambda>` or the def's name)
    globals: list[str]
    imports: list[str]  # the import statements the source needs (for its global names and local imports)
    defaults: list[Any]
    version: str  # the CPython versions the bytecode is consistent with, e.g. "3.5" or "3.6-3.7"
    filename: str = ""
    line: int = 0
    notes: list[str] = field(default_factory=list)


def _const(v: Any, where: str) -> ast.expr:
    if isinstance(v, Code):
        raise Refused(f"{where}: a nested function or lambda")
    if isinstance(v, tuple):
        return ast.Tuple([_const(x, where) for x in v], ast.Load())
    if isinstance(v, (frozenset, bytes, complex)) or v is Ellipsis:
        raise Refused(f"{where}: a {type(v).__name__} constant")
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        raise Refused(f"{where}: a non-finite float constant")
    return ast.Constant(v)


def _literal(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return len(v) < 1000 and all(_literal(x) for x in v)
    return v is None or isinstance(v, (bool, int, float, str))


def decompile(payload: Any) -> Decompiled:
    """A Lambda's stored `function` -> the source of an equivalent lambda. Raises Refused with the reason."""
    code = read_code(payload)
    defaults = payload[1] if isinstance(payload, list) and len(payload) > 1 and payload[1] else []
    closure = payload[2] if isinstance(payload, list) and len(payload) > 2 and payload[2] else []
    if not isinstance(defaults, list) or not _literal(defaults) or len(defaults) > code.argcount:
        raise Refused("the stored defaults are not literal values of the function's arguments")
    if not isinstance(closure, list):
        raise Refused("the stored closure is not a list of values")
    if code.flags & 0x0C:  # CO_VARARGS | CO_VARKEYWORDS
        raise Refused("a function with *args or **kwargs")
    if code.flags & 0x20 or code.flags & 0x80 or code.flags & 0x100 or code.flags & 0x200:
        raise Refused("a generator or coroutine")
    if code.kwonlyargcount or code.posonlyargcount:
        raise Refused("keyword-only or positional-only arguments")
    if code.cellvars:
        raise Refused(f"a function whose variables {list(code.cellvars)} are captured by an inner function")
    instrs, versions = instructions(code)
    ev = _Eval(code, closure, versions)
    body = ev.run(instrs)
    lam_args = ast.arguments(posonlyargs=[], args=[ast.arg(a) for a in ev.args], vararg=None, kwonlyargs=[],
                             kw_defaults=[], kwarg=None, defaults=[_const(d if not isinstance(d, list) else
                                                                          tuple(d), "default") for d in defaults])
    source = ast.unparse(ast.fix_missing_locations(ast.Lambda(lam_args, body)))
    try:
        ast.parse(source, mode="eval")
    except SyntaxError as exc:  # pragma: no cover - unparse of a well-formed tree
        raise Refused(f"the decompiled text does not parse ({exc.msg})") from None
    imports = [GLOBAL_IMPORTS[g] for g in ev.used_globals if g in GLOBAL_IMPORTS] + ev.imports
    return Decompiled(source, str(code.name), ev.used_globals, list(dict.fromkeys(imports)), list(defaults),
                      span(versions), str(code.filename), code.firstlineno)


class _Eval:
    """The symbolic evaluation of a straight-line body: each instruction's effect on a stack of `ast` expressions
    (and of `_Module`s for an import inside the function). A handler per family of instructions; anything else is
    refused, naming the instruction and its offset."""

    def __init__(self, code: Code, closure: list[Any], versions: list[tuple[int, int]]):
        self.code, self.closure, self.versions = code, closure, versions
        self.py35 = versions == [(3, 5)]
        self.args = list(code.varnames[:code.argcount])
        self.stack: list[Any] = []
        self.local: dict[str, Any] = {}  # variables assigned in the body (an import, or an expression inlined)
        self.used_globals: list[str] = []
        self.imports: list[str] = []
        self.where = ""
        self.body: ast.expr | None = None

    def run(self, instrs: list[Any]) -> ast.expr:
        handlers = {"LOAD_FAST": self._load_fast, "STORE_FAST": self._store_fast, "LOAD_CONST": self._load_const,
                    "LOAD_GLOBAL": self._load_global, "LOAD_DEREF": self._load_deref, "LOAD_ATTR": self._attr,
                    "LOAD_METHOD": self._attr, "COMPARE_OP": self._compare, "IS_OP": self._is_in,
                    "CONTAINS_OP": self._is_in, "BINARY_SUBSCR": self._subscr, "BUILD_SLICE": self._slice,
                    "BUILD_TUPLE": self._build, "BUILD_LIST": self._build, "CALL_FUNCTION": self._call,
                    "CALL_METHOD": self._call, "IMPORT_NAME": self._import_name, "IMPORT_FROM": self._import_from,
                    "POP_TOP": self._pop_top}
        if not self.py35:
            handlers["CALL_FUNCTION_KW"] = self._call_kw
        last = len(instrs) - 1
        for n, ins in enumerate(instrs):
            name = opcodes.TABLES[self.versions[-1]].get(ins.op) or opcodes.TABLES[self.versions[0]][ins.op]
            self.where = f"{name} at offset {ins.offset}"
            if len(self.stack) > MAX_STACK:
                raise Refused(f"{self.where}: the stack grows beyond {MAX_STACK}")
            if name == "NOP":
                continue
            if name in BINARY:
                a, b = self.pop(2)
                self.stack.append(ast.BinOp(self.expr(a), BINARY[name](), self.expr(b)))
            elif name in UNARY:
                (a,) = self.pop()
                self.stack.append(ast.UnaryOp(UNARY[name](), self.expr(a)))
            elif name == "RETURN_VALUE":
                self._return(n == last)
            elif name in handlers:
                handlers[name](name, ins)
            else:
                kind = "a jump or loop" if "JUMP" in name or name in ("FOR_ITER", "SETUP_LOOP", "SETUP_EXCEPT",
                                                                      "SETUP_FINALLY", "SETUP_WITH") else \
                    "an instruction the decompiler does not handle"
                raise Refused(f"{self.where} (CPython {span(self.versions)}): {kind}")
        if self.body is None or opcodes.TABLES[self.versions[0]][instrs[-1].op] != "RETURN_VALUE":
            raise Refused("the function does not end with RETURN_VALUE")
        return self.body

    # -- the stack
    def pop(self, n: int = 1) -> list[Any]:
        if n > len(self.stack):
            raise Refused(f"{self.where}: pops {n} value(s) from a stack of {len(self.stack)}")
        out = self.stack[len(self.stack) - n:]
        del self.stack[len(self.stack) - n:]
        return out

    def expr(self, v: Any) -> ast.expr:
        if isinstance(v, _Module):
            raise Refused(f"{self.where}: a module used as a value")
        return v

    def item(self, table: tuple[Any, ...], i: int, what: str) -> Any:
        if not 0 <= i < len(table):
            raise Refused(f"{self.where}: {what} index {i} out of range ({len(table)})")
        return table[i]

    # -- names and constants
    def _load_fast(self, name: str, ins: Any) -> None:
        var = self.item(self.code.varnames, ins.arg, "variable")
        if var in self.local:
            self.stack.append(self.local[var])
        elif var in self.args:
            self.stack.append(ast.Name(var, ast.Load()))
        else:
            raise Refused(f"{self.where}: variable {var!r} read before it is assigned")

    def _store_fast(self, name: str, ins: Any) -> None:
        var = self.item(self.code.varnames, ins.arg, "variable")
        if var in self.args or var in self.local:
            raise Refused(f"{self.where}: {var!r} is assigned twice (or an argument is reassigned)")
        (v,) = self.pop()
        if isinstance(v, _Module):
            self.imports.append(_import_line(v, var, self.where))
            self.local[var] = ast.Name(var, ast.Load())
        else:
            self.local[var] = v

    def _load_const(self, name: str, ins: Any) -> None:
        self.stack.append(_const(self.item(self.code.consts, ins.arg, "constant"), self.where))

    def _load_global(self, name: str, ins: Any) -> None:
        g = self.item(self.code.names, ins.arg, "name")
        if g not in GLOBAL_IMPORTS and g not in BUILTINS:
            raise Refused(f"{self.where}: global name {g!r} is not a module k2to3 knows the import of "
                          f"({', '.join(sorted(GLOBAL_IMPORTS))}) or a builtin; it was defined by the script "
                          "that saved the model")
        if g not in self.used_globals:
            self.used_globals.append(g)
        self.stack.append(ast.Name(g, ast.Load()))

    def _load_deref(self, name: str, ins: Any) -> None:
        code = self.code
        var = self.item(code.cellvars + code.freevars, ins.arg, "free variable")
        j = code.freevars.index(var)
        if j >= len(self.closure) or not _literal(self.closure[j]):
            raise Refused(f"{self.where}: closure variable {var!r} has no literal value stored in the file")
        value = self.closure[j]
        self.stack.append(ast.Constant(value) if not isinstance(value, list)
                          else ast.parse(repr(value), mode="eval").body)

    def _attr(self, name: str, ins: Any) -> None:
        attr = self.item(self.code.names, ins.arg, "name")
        (v,) = self.pop()
        if isinstance(v, _Module):
            self.stack.append(_Module(v.module, f"{v.path}.{attr}", v.fromlist))
        else:
            self.stack.append(ast.Attribute(self.expr(v), attr, ast.Load()))

    # -- operators and containers
    def _compare(self, name: str, ins: Any) -> None:
        if ins.arg >= len(opcodes.CMP_OP):
            raise Refused(f"{self.where}: comparison {ins.arg} (exception match) in a straight-line function")
        a, b = self.pop(2)
        self.stack.append(ast.Compare(self.expr(a), [CMP[opcodes.CMP_OP[ins.arg]]()], [self.expr(b)]))

    def _is_in(self, name: str, ins: Any) -> None:
        a, b = self.pop(2)
        cmp = ("is", "is not") if name == "IS_OP" else ("in", "not in")
        self.stack.append(ast.Compare(self.expr(a), [CMP[cmp[1 if ins.arg else 0]]()], [self.expr(b)]))

    def _subscr(self, name: str, ins: Any) -> None:
        v, idx = self.pop(2)
        self.stack.append(ast.Subscript(self.expr(v), self.expr(idx), ast.Load()))

    def _slice(self, name: str, ins: Any) -> None:
        if ins.arg not in (2, 3):
            raise Refused(f"{self.where}: a slice of {ins.arg} parts")
        parts = [None if isinstance(p, ast.Constant) and p.value is None else self.expr(p) for p in self.pop(ins.arg)]
        self.stack.append(ast.Slice(*parts))

    def _build(self, name: str, ins: Any) -> None:
        items = [self.expr(p) for p in self.pop(ins.arg)]
        self.stack.append(ast.Tuple(items, ast.Load()) if name == "BUILD_TUPLE" else ast.List(items, ast.Load()))

    # -- calls
    def _make_call(self, func: Any, pos: list[Any], kw: list[tuple[str, Any]]) -> ast.expr:
        return ast.Call(self.expr(func), [self.expr(a) for a in pos],
                        [ast.keyword(k, self.expr(v)) for k, v in kw])

    def _call(self, name: str, ins: Any) -> None:
        npos, nkw = (ins.arg & 0xFF, ins.arg >> 8) if self.py35 else (ins.arg, 0)
        kw = []
        for k, v in zip(*[iter(self.pop(2 * nkw))] * 2):
            if not isinstance(k, ast.Constant) or not isinstance(k.value, str):
                raise Refused(f"{self.where}: a keyword argument without a constant name")
            kw.append((k.value, v))
        pos = self.pop(npos)
        (func,) = self.pop()
        self.stack.append(self._make_call(func, pos, kw))

    def _call_kw(self, name: str, ins: Any) -> None:
        (names,) = self.pop()
        if not isinstance(names, ast.Tuple) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                       for k in names.elts):
            raise Refused(f"{self.where}: keyword names are not a constant tuple of strings")
        values = self.pop(ins.arg)
        nk = len(names.elts)
        if nk > len(values):
            raise Refused(f"{self.where}: {nk} keyword names for {len(values)} arguments")
        (func,) = self.pop()
        pos, kwv = values[:len(values) - nk], values[len(values) - nk:]
        self.stack.append(self._make_call(func, pos, [(k.value, v) for k, v in zip(names.elts, kwv)]))

    # -- imports inside the function, statements, the end
    def _import_name(self, name: str, ins: Any) -> None:
        level, fromlist = self.pop(2)
        mod = self.item(self.code.names, ins.arg, "name")
        if not (isinstance(level, ast.Constant) and level.value == 0):
            raise Refused(f"{self.where}: a relative import of {mod!r}")
        fl = fromlist.value if isinstance(fromlist, ast.Constant) else \
            tuple(e.value for e in fromlist.elts) if isinstance(fromlist, ast.Tuple) else "?"
        if fl == "?":
            raise Refused(f"{self.where}: an import with a computed name list")
        self.stack.append(_Module(mod, mod if fl else mod.split(".")[0], fl))

    def _import_from(self, name: str, ins: Any) -> None:
        attr = self.item(self.code.names, ins.arg, "name")
        top = self.stack[-1] if self.stack else None
        if not isinstance(top, _Module):
            raise Refused(f"{self.where}: IMPORT_FROM without a module")
        self.stack.append(_Module(top.module, f"{top.module}.{attr}", (attr,)))

    def _pop_top(self, name: str, ins: Any) -> None:
        (v,) = self.pop()
        if not isinstance(v, _Module):
            raise Refused(f"{self.where}: an expression statement (a call for its side effect)")

    def _return(self, at_end: bool) -> None:
        if not at_end:
            raise Refused(f"{self.where}: a return before the end (code after it)")
        (v,) = self.pop()
        if self.stack:
            raise Refused(f"{self.where}: {len(self.stack)} value(s) left on the stack")
        self.body = self.expr(v)


def _import_line(m: _Module, var: str, where: str) -> str:
    if not all(p.isidentifier() for p in m.path.split(".")) or not var.isidentifier():
        raise Refused(f"{where}: an import of a name that is not an identifier")
    if m.fromlist and m.path != m.module:  # from a.b import c as var
        parent, _, last = m.path.rpartition(".")
        return f"from {parent} import {last} as {var}"
    return f"import {m.path} as {var}" if m.path != var else f"import {m.path}"
