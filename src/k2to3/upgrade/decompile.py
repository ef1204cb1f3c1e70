"""`--trust-bytecode` only: read a Lambda's marshalled code object of CPython 3.5-3.10 as data, and decompile a
simple function body into the source of an equivalent `lambda`.

Nothing here calls `marshal` or runs anything: the bytes are parsed by the reader below (every declared size
checked against the bytes left before anything is built, nesting bounded), the instructions are evaluated
symbolically into `ast` expressions, and the result is text. Anything the decompiler does not understand (a
jump, a loop, a statement, an opcode it does not know, a closure it cannot resolve) is refused with the reason;
it never guesses. Opcode numbers come from `upgrade/opcodes.py` (CPython's `Lib/opcode.py` of each version)."""

from __future__ import annotations

import ast
import base64
import binascii
import struct
from dataclasses import dataclass, field
from typing import Any

from k2to3.upgrade import opcodes

DECOMPILED_PREFIX = "_k2to3_decompiled_"  # the generated module's file name: its objects came from bytecode
MAX_PAYLOAD = 1 << 20  # a Lambda's code object is a few hundred bytes; 1 MiB is generous
MAX_DEPTH = 32
MAX_OBJECTS = 100_000
MAX_STACK = 256

# Global names a Keras 2 Lambda commonly used, and the import that binds them in the script that saved it.
GLOBAL_IMPORTS = {
    "K": "from keras import backend as K", "tf": "import tensorflow as tf", "np": "import numpy as np",
    "keras": "import keras", "backend": "from keras import backend", "math": "import math",
}
BUILTINS = {"abs", "min", "max", "len", "float", "int", "round", "sum", "tuple", "list", "bool", "pow", "slice"}


class Refused(Exception):
    """The payload cannot be read or decompiled; the message says why (one line)."""


@dataclass
class Code:
    argcount: int
    posonlyargcount: int
    kwonlyargcount: int
    nlocals: int
    stacksize: int
    flags: int
    code: bytes
    consts: tuple[Any, ...]
    names: tuple[Any, ...]
    varnames: tuple[Any, ...]
    freevars: tuple[Any, ...]
    cellvars: tuple[Any, ...]
    filename: Any
    name: Any
    firstlineno: int
    layout: str  # "3.5-3.7" (no posonlyargcount) or "3.8-3.10"


# -- the marshal format, read as data -------------------------------------------------------------------------
FLAG_REF = 0x80


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos, self.refs, self.count, self.layout = data, 0, [], 0, ""

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or n > len(self.data) - self.pos:
            raise Refused(f"{what} declares {n} bytes at offset {self.pos}, but {len(self.data) - self.pos} remain")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i32(self, what: str = "int") -> int:
        return int(struct.unpack("<i", self.take(4, what))[0])

    def size(self, what: str, unit: int = 1) -> int:
        n = self.i32(what)
        if n < 0 or n * unit > len(self.data) - self.pos:
            raise Refused(f"{what} declares {n} items at offset {self.pos - 4}, more than the "
                          f"{len(self.data) - self.pos} bytes left")
        return n

    def obj(self, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise Refused(f"marshal data nested deeper than {MAX_DEPTH} at offset {self.pos}")
        self.count += 1
        if self.count > MAX_OBJECTS:
            raise Refused(f"marshal data holds more than {MAX_OBJECTS} objects")
        at = self.pos
        byte = self.take(1, "type code")[0]
        flag, t = byte & FLAG_REF, chr(byte & ~FLAG_REF)
        simple = {"N": None, "F": False, "T": True, ".": Ellipsis}
        if t in simple:
            return self._ref(flag, simple[t])
        if t == "i":
            return self._ref(flag, self.i32())
        if t == "g":
            return self._ref(flag, struct.unpack("<d", self.take(8, "float"))[0])
        if t == "y":
            re, im = struct.unpack("<dd", self.take(16, "complex"))
            return self._ref(flag, complex(re, im))
        if t == "l":
            n = self.i32("long")
            if abs(n) > 64 or abs(n) * 2 > len(self.data) - self.pos:  # 64 15-bit digits: far beyond any literal
                raise Refused(f"integer of {abs(n)} digits at offset {at}")
            digits = struct.unpack(f"<{abs(n)}H", self.take(abs(n) * 2, "long digits"))
            v = sum(d << (15 * i) for i, d in enumerate(digits))
            return self._ref(flag, -v if n < 0 else v)
        if t == "s":
            return self._ref(flag, self.take(self.size("bytes"), "bytes"))
        if t in "tuaA":
            return self._ref(flag, self._text(self.take(self.size("string"), "string"), t))
        if t in "zZ":
            return self._ref(flag, self._text(self.take(self.take(1, "short string")[0], "short string"), "a"))
        if t == "r":
            i = self.i32("ref")
            if not 0 <= i < len(self.refs) or self.refs[i] is _PENDING:
                raise Refused(f"reference {i} at offset {at} to an object not read yet")
            return self.refs[i]
        if t in "()[<>":
            n = self.take(1, "small tuple")[0] if t == ")" else self.size("sequence", 1)
            slot = self._reserve(flag)
            items = tuple(self.obj(depth + 1) for _ in range(n))
            v: Any = items if t in "()" else list(items) if t == "[" else frozenset(self._hashable(items, at))
            return self._fill(slot, v)
        if t == "c":
            slot = self._reserve(flag)
            return self._fill(slot, self._code(depth, at))
        raise Refused(f"marshal type code {t!r} (0x{byte:02x}) at offset {at} is not one a Lambda's code object "
                      "holds")

    @staticmethod
    def _text(raw: bytes, t: str) -> str:
        try:
            return raw.decode("ascii" if t in "aA" else "utf-8", "strict")
        except UnicodeDecodeError as exc:
            raise Refused(f"a string that is not {'ascii' if t in 'aA' else 'utf-8'} ({exc.reason})") from None

    @staticmethod
    def _hashable(items: tuple[Any, ...], at: int) -> tuple[Any, ...]:
        if not all(isinstance(x, (int, float, str, bytes, tuple, frozenset, type(None))) for x in items):
            raise Refused(f"a set at offset {at} holds unhashable items")
        return items

    def _ref(self, flag: int, v: Any) -> Any:
        if flag:
            self.refs.append(v)
        return v

    def _reserve(self, flag: int) -> int:
        if not flag:
            return -1
        self.refs.append(_PENDING)
        return len(self.refs) - 1

    def _fill(self, slot: int, v: Any) -> Any:
        if slot >= 0:
            self.refs[slot] = v
        return v

    def _code(self, depth: int, at: int) -> Code:
        # 3.5-3.7: argcount, kwonlyargcount, nlocals, stacksize, flags (raw int32s), then the bytecode ('s');
        # 3.8-3.10: posonlyargcount after argcount. The type code after the ints tells the layouts apart.
        old = self._is_bytes_at(self.pos + 20)
        new = self._is_bytes_at(self.pos + 24)
        layout = "3.5-3.7" if old and not new else "3.8-3.10" if new and not old else ""
        if not layout:
            raise Refused(f"code object at offset {at}: neither the 3.5-3.7 nor the 3.8-3.10 field layout "
                          "(another Python version, or not a code object)")
        if self.layout and layout != self.layout:
            raise Refused(f"code object at offset {at} has the {layout} layout inside a {self.layout} one")
        self.layout = layout
        ints = [self.i32("code field") for _ in range(5 if layout == "3.5-3.7" else 6)]
        if layout == "3.5-3.7":
            ints.insert(1, 0)
        fields = [self.obj(depth + 1) for _ in range(8)]  # code, consts, names, varnames, freevars, cellvars, ...
        firstlineno = self.i32("firstlineno")
        self.obj(depth + 1)  # lnotab / linetable
        code, consts, names, varnames, freevars, cellvars, filename, name = fields
        if not isinstance(code, bytes) or not all(isinstance(x, tuple) for x in (consts, names, varnames, freevars,
                                                                                  cellvars)):
            raise Refused(f"code object at offset {at}: fields of the wrong types for the {layout} layout")
        if not all(isinstance(s, str) for s in names + varnames + freevars + cellvars):
            raise Refused(f"code object at offset {at}: a variable name that is not a string")
        argcount, posonly, kwonly, nlocals, stacksize, flags = ints
        if not 0 <= argcount <= len(varnames) or kwonly < 0 or posonly < 0:
            raise Refused(f"code object at offset {at}: {argcount} arguments but {len(varnames)} variable names")
        return Code(argcount, posonly, kwonly, nlocals, stacksize, flags, code, consts, names, varnames, freevars,
                    cellvars, filename, name, firstlineno, layout)

    def _is_bytes_at(self, pos: int) -> bool:
        return pos < len(self.data) and self.data[pos] & ~FLAG_REF == ord("s")


_PENDING = object()


def read_code(payload: Any) -> Code:
    """A Keras 2 Lambda's `function` value (base64 text, or `[text, defaults, closure]`) -> its code object, read
    as data. Raises Refused."""
    raw = payload[0] if isinstance(payload, list) and payload else payload
    if not isinstance(raw, str):
        raise Refused("no bytecode stored")
    if len(raw) > MAX_PAYLOAD * 4 // 3 + 1024:
        raise Refused(f"bytecode payload of {len(raw)} characters (over {MAX_PAYLOAD} bytes)")
    try:
        data = base64.b64decode(raw.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise Refused(f"not base64 ({exc})") from None
    r = _Reader(data)
    code = r.obj()
    if not isinstance(code, Code):
        raise Refused("the payload is not a code object")
    if r.pos != len(data):
        raise Refused(f"{len(data) - r.pos} bytes after the code object")
    return code


# -- instructions ----------------------------------------------------------------------------------------------
@dataclass
class Instr:
    offset: int
    op: int
    arg: int


def instructions(code: Code) -> tuple[list[Instr], list[tuple[int, int]]]:
    """The instructions and the CPython versions (3, minor) they are consistent with. 3.5 writes variable-length
    instructions and ends with a bare RETURN_VALUE byte; 3.6+ write 2-byte wordcode (RETURN_VALUE, 0)."""
    b = code.code
    if not b:
        raise Refused("empty bytecode")
    if code.layout == "3.8-3.10":
        cands, wordcode = [(3, 8), (3, 9), (3, 10)], True
    elif len(b) % 2 == 0 and b[-2] == 83 and b[-1] == 0:
        cands, wordcode = [(3, 6), (3, 7)], True
    elif b[-1] == 83:
        cands, wordcode = [(3, 5)], False
    else:
        raise Refused("the bytecode does not end with RETURN_VALUE in any CPython 3.5-3.10 encoding")
    out, i, ext = [], 0, 0
    while i < len(b):
        op = b[i]
        if wordcode:
            if i + 1 >= len(b):
                raise Refused(f"truncated instruction at offset {i}")
            arg, size = b[i + 1] | ext, 2
        elif op >= opcodes.HAVE_ARGUMENT:
            if i + 2 >= len(b):
                raise Refused(f"truncated instruction at offset {i}")
            arg, size = (b[i + 1] | b[i + 2] << 8) | ext, 3
        else:
            arg, size = 0, 1
        known = [v for v in cands if op in opcodes.TABLES[v]]
        if not known:
            names = sorted({opcodes.TABLES[v][op] for v in opcodes.TABLES if op in opcodes.TABLES[v]})
            raise Refused(f"opcode {op} at offset {i} is not an instruction of CPython "
                          f"{_span(cands)}" + (f" (it is {'/'.join(names)} in another version)" if names else ""))
        cands = known
        if op == opcodes.EXTENDED_ARG:
            ext = arg << (8 if wordcode else 16)
            if ext > 1 << 24:
                raise Refused(f"EXTENDED_ARG too large at offset {i}")
        else:
            out.append(Instr(i, op, arg))
            ext = 0
        i += size
    return out, cands


def _span(versions: list[tuple[int, int]]) -> str:
    lo, hi = versions[0], versions[-1]
    return f"{lo[0]}.{lo[1]}" if lo == hi else f"{lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}"


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
    version = _span(versions)
    py35 = versions == [(3, 5)]
    args = list(code.varnames[:code.argcount])
    stack: list[Any] = []
    local: dict[str, Any] = {}  # variables assigned in the body (an import, or an expression inlined)
    used_globals: list[str] = []
    imports: list[str] = []

    def pop(n: int = 1) -> list[Any]:
        if n > len(stack):
            raise Refused(f"{where}: pops {n} value(s) from a stack of {len(stack)}")
        out = stack[len(stack) - n:]
        del stack[len(stack) - n:]
        return out

    def expr(v: Any) -> ast.expr:
        if isinstance(v, _Module):
            raise Refused(f"{where}: a module used as a value")
        return v

    def call(func: Any, pos: list[Any], kw: list[tuple[str, Any]]) -> ast.expr:
        return ast.Call(expr(func), [expr(a) for a in pos], [ast.keyword(k, expr(v)) for k, v in kw])

    def item(table: tuple[Any, ...], i: int, what: str) -> Any:
        if not 0 <= i < len(table):
            raise Refused(f"{where}: {what} index {i} out of range ({len(table)})")
        return table[i]

    last = len(instrs) - 1
    for n, ins in enumerate(instrs):
        name = opcodes.TABLES[versions[-1]].get(ins.op) or opcodes.TABLES[versions[0]][ins.op]
        where = f"{name} at offset {ins.offset}"
        if len(stack) > MAX_STACK:
            raise Refused(f"{where}: the stack grows beyond {MAX_STACK}")
        if name == "NOP":
            continue
        if name == "LOAD_FAST":
            var = item(code.varnames, ins.arg, "variable")
            if var in local:
                stack.append(local[var])
            elif var in args:
                stack.append(ast.Name(var, ast.Load()))
            else:
                raise Refused(f"{where}: variable {var!r} read before it is assigned")
        elif name == "STORE_FAST":
            var = item(code.varnames, ins.arg, "variable")
            if var in args or var in local:
                raise Refused(f"{where}: {var!r} is assigned twice (or an argument is reassigned)")
            (v,) = pop()
            if isinstance(v, _Module):
                imports.append(_import_line(v, var, where))
                local[var] = ast.Name(var, ast.Load())
            else:
                local[var] = v
        elif name == "LOAD_CONST":
            stack.append(_const(item(code.consts, ins.arg, "constant"), where))
        elif name == "LOAD_GLOBAL":
            g = item(code.names, ins.arg, "name")
            if g not in GLOBAL_IMPORTS and g not in BUILTINS:
                raise Refused(f"{where}: global name {g!r} is not a module k2to3 knows the import of "
                              f"({', '.join(sorted(GLOBAL_IMPORTS))}) or a builtin; it was defined by the script "
                              "that saved the model")
            if g not in used_globals:
                used_globals.append(g)
            stack.append(ast.Name(g, ast.Load()))
        elif name == "LOAD_DEREF":
            free = code.cellvars + code.freevars
            var = item(free, ins.arg, "free variable")
            j = code.freevars.index(var)
            if j >= len(closure) or not _literal(closure[j]):
                raise Refused(f"{where}: closure variable {var!r} has no literal value stored in the file")
            stack.append(ast.Constant(closure[j]) if not isinstance(closure[j], list)
                         else ast.parse(repr(closure[j]), mode="eval").body)
        elif name in ("LOAD_ATTR", "LOAD_METHOD"):
            attr = item(code.names, ins.arg, "name")
            (v,) = pop()
            if isinstance(v, _Module):
                stack.append(_Module(v.module, f"{v.path}.{attr}", v.fromlist))
            else:
                stack.append(ast.Attribute(expr(v), attr, ast.Load()))
        elif name in BINARY:
            a, b = pop(2)
            stack.append(ast.BinOp(expr(a), BINARY[name](), expr(b)))
        elif name in UNARY:
            (a,) = pop()
            stack.append(ast.UnaryOp(UNARY[name](), expr(a)))
        elif name == "COMPARE_OP":
            if ins.arg >= len(opcodes.CMP_OP):
                raise Refused(f"{where}: comparison {ins.arg} (exception match) in a straight-line function")
            a, b = pop(2)
            stack.append(ast.Compare(expr(a), [CMP[opcodes.CMP_OP[ins.arg]]()], [expr(b)]))
        elif name in ("IS_OP", "CONTAINS_OP"):
            a, b = pop(2)
            cmp = ("is", "is not") if name == "IS_OP" else ("in", "not in")
            stack.append(ast.Compare(expr(a), [CMP[cmp[1 if ins.arg else 0]]()], [expr(b)]))
        elif name == "BINARY_SUBSCR":
            v, idx = pop(2)
            stack.append(ast.Subscript(expr(v), expr(idx), ast.Load()))
        elif name == "BUILD_SLICE":
            if ins.arg not in (2, 3):
                raise Refused(f"{where}: a slice of {ins.arg} parts")
            parts = [None if isinstance(p, ast.Constant) and p.value is None else expr(p) for p in pop(ins.arg)]
            stack.append(ast.Slice(*parts))
        elif name in ("BUILD_TUPLE", "BUILD_LIST"):
            items = [expr(p) for p in pop(ins.arg)]
            stack.append(ast.Tuple(items, ast.Load()) if name == "BUILD_TUPLE" else ast.List(items, ast.Load()))
        elif name in ("CALL_FUNCTION", "CALL_METHOD"):
            npos, nkw = (ins.arg & 0xFF, ins.arg >> 8) if py35 else (ins.arg, 0)
            kw = []
            for k, v in zip(*[iter(pop(2 * nkw))] * 2):
                if not isinstance(k, ast.Constant) or not isinstance(k.value, str):
                    raise Refused(f"{where}: a keyword argument without a constant name")
                kw.append((k.value, v))
            pos = pop(npos)
            (func,) = pop()
            stack.append(call(func, pos, kw))
        elif name == "CALL_FUNCTION_KW" and not py35:
            (names,) = pop()
            if not isinstance(names, ast.Tuple) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                           for k in names.elts):
                raise Refused(f"{where}: keyword names are not a constant tuple of strings")
            values = pop(ins.arg)
            nk = len(names.elts)
            if nk > len(values):
                raise Refused(f"{where}: {nk} keyword names for {len(values)} arguments")
            (func,) = pop()
            pos, kwv = values[:len(values) - nk], values[len(values) - nk:]
            stack.append(call(func, pos, [(k.value, v) for k, v in zip(names.elts, kwv)]))
        elif name == "IMPORT_NAME":
            level, fromlist = pop(2)
            mod = item(code.names, ins.arg, "name")
            if not (isinstance(level, ast.Constant) and level.value == 0):
                raise Refused(f"{where}: a relative import of {mod!r}")
            fl = fromlist.value if isinstance(fromlist, ast.Constant) else \
                tuple(e.value for e in fromlist.elts) if isinstance(fromlist, ast.Tuple) else "?"
            if fl == "?":
                raise Refused(f"{where}: an import with a computed name list")
            stack.append(_Module(mod, mod if fl else mod.split(".")[0], fl))
        elif name == "IMPORT_FROM":
            attr = item(code.names, ins.arg, "name")
            top = stack[-1] if stack else None
            if not isinstance(top, _Module):
                raise Refused(f"{where}: IMPORT_FROM without a module")
            stack.append(_Module(top.module, f"{top.module}.{attr}", (attr,)))
        elif name == "POP_TOP":
            (v,) = pop()
            if not isinstance(v, _Module):
                raise Refused(f"{where}: an expression statement (a call for its side effect)")
        elif name == "RETURN_VALUE":
            if n != last:
                raise Refused(f"{where}: a return before the end (code after it)")
            (v,) = pop()
            if stack:
                raise Refused(f"{where}: {len(stack)} value(s) left on the stack")
            body = expr(v)
        else:
            kind = "a jump or loop" if "JUMP" in name or name in ("FOR_ITER", "SETUP_LOOP", "SETUP_EXCEPT",
                                                                  "SETUP_FINALLY", "SETUP_WITH") else \
                "an instruction the decompiler does not handle"
            raise Refused(f"{where} (CPython {version}): {kind}")
    if not instrs or opcodes.TABLES[versions[0]][instrs[-1].op] != "RETURN_VALUE":
        raise Refused("the function does not end with RETURN_VALUE")
    lam_args = ast.arguments(posonlyargs=[], args=[ast.arg(a) for a in args], vararg=None, kwonlyargs=[],
                             kw_defaults=[], kwarg=None, defaults=[_const(d if not isinstance(d, list) else
                                                                          tuple(d), "default") for d in defaults])
    lam = ast.Lambda(lam_args, body)
    source = ast.unparse(ast.fix_missing_locations(lam))
    try:
        ast.parse(source, mode="eval")
    except SyntaxError as exc:  # pragma: no cover - unparse of a well-formed tree
        raise Refused(f"the decompiled text does not parse ({exc.msg})") from None
    imports = [GLOBAL_IMPORTS[g] for g in used_globals if g in GLOBAL_IMPORTS] + imports
    return Decompiled(source, str(code.name), used_globals, list(dict.fromkeys(imports)), list(defaults), version,
                      str(code.filename), code.firstlineno)


def _import_line(m: _Module, var: str, where: str) -> str:
    if not all(p.isidentifier() for p in m.path.split(".")) or not var.isidentifier():
        raise Refused(f"{where}: an import of a name that is not an identifier")
    if m.fromlist and m.path != m.module:  # from a.b import c as var
        parent, _, last = m.path.rpartition(".")
        return f"from {parent} import {last} as {var}"
    return f"import {m.path} as {var}" if m.path != var else f"import {m.path}"
