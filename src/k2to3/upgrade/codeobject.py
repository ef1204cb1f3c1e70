"""`--trust-bytecode` only: a Keras 2 Lambda's marshalled code object of CPython 3.5-3.10, read as data, and its
instructions. Nothing here calls `marshal` or runs anything: every declared size is checked against the bytes left
before anything is built, nesting and object counts are bounded, and an opcode is named from `upgrade/opcodes.py`
(CPython's `Lib/opcode.py` of each version). upgrade/decompile.py evaluates the instructions."""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from typing import Any

from k2to3.upgrade import opcodes

MAX_PAYLOAD = 1 << 20  # a Lambda's code object is a few hundred bytes; 1 MiB is generous
MAX_DEPTH = 32
MAX_OBJECTS = 100_000


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
                          f"{span(cands)}" + (f" (it is {'/'.join(names)} in another version)" if names else ""))
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


def span(versions: list[tuple[int, int]]) -> str:
    lo, hi = versions[0], versions[-1]
    return f"{lo[0]}.{lo[1]}" if lo == hi else f"{lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}"
