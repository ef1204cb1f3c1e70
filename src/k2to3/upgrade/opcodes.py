"""Opcode numbers of CPython 3.5-3.10, as reviewed data for the bytecode decompiler (upgrade/decompile.py).

Provenance: CPython's `Lib/opcode.py` (the `def_op`/`name_op`/`jrel_op`/`jabs_op` lines): 3.8's table, and each other
version as the opcodes its release added, removed or renumbered relative to 3.8. Every version's table is checked
against the independent tables of xdis (`xdis.opcodes.opcode_3x.opcode_35` ... `opcode_310`, themselves taken from
CPython) by tests/test_decompile.py. Only numbers are recorded here, never code. `BASE` is 3.8's table.

Semantics that change with the version (not numbers) live in the decompiler: 3.5 writes variable-length
instructions (an argument of two bytes from opcode 90 up) and `CALL_FUNCTION` with `npos | nkw << 8` and
(name, value) pairs on the stack; 3.6+ write 2-byte wordcode and `CALL_FUNCTION_KW` with a tuple of names.
"""

from __future__ import annotations

HAVE_ARGUMENT = 90
EXTENDED_ARG = 144

# CPython 3.8 Lib/opcode.py
BASE: dict[int, str] = {
    1: "POP_TOP", 2: "ROT_TWO", 3: "ROT_THREE", 4: "DUP_TOP", 5: "DUP_TOP_TWO", 6: "ROT_FOUR", 9: "NOP",
    10: "UNARY_POSITIVE", 11: "UNARY_NEGATIVE", 12: "UNARY_NOT", 15: "UNARY_INVERT",
    16: "BINARY_MATRIX_MULTIPLY", 17: "INPLACE_MATRIX_MULTIPLY", 19: "BINARY_POWER", 20: "BINARY_MULTIPLY",
    22: "BINARY_MODULO", 23: "BINARY_ADD", 24: "BINARY_SUBTRACT", 25: "BINARY_SUBSCR", 26: "BINARY_FLOOR_DIVIDE",
    27: "BINARY_TRUE_DIVIDE", 28: "INPLACE_FLOOR_DIVIDE", 29: "INPLACE_TRUE_DIVIDE", 50: "GET_AITER",
    51: "GET_ANEXT", 52: "BEFORE_ASYNC_WITH", 53: "BEGIN_FINALLY", 54: "END_ASYNC_FOR", 55: "INPLACE_ADD",
    56: "INPLACE_SUBTRACT", 57: "INPLACE_MULTIPLY", 59: "INPLACE_MODULO", 60: "STORE_SUBSCR", 61: "DELETE_SUBSCR",
    62: "BINARY_LSHIFT", 63: "BINARY_RSHIFT", 64: "BINARY_AND", 65: "BINARY_XOR", 66: "BINARY_OR",
    67: "INPLACE_POWER", 68: "GET_ITER", 69: "GET_YIELD_FROM_ITER", 70: "PRINT_EXPR", 71: "LOAD_BUILD_CLASS",
    72: "YIELD_FROM", 73: "GET_AWAITABLE", 75: "INPLACE_LSHIFT", 76: "INPLACE_RSHIFT", 77: "INPLACE_AND",
    78: "INPLACE_XOR", 79: "INPLACE_OR", 81: "WITH_CLEANUP_START", 82: "WITH_CLEANUP_FINISH", 83: "RETURN_VALUE",
    84: "IMPORT_STAR", 85: "SETUP_ANNOTATIONS", 86: "YIELD_VALUE", 87: "POP_BLOCK", 88: "END_FINALLY",
    89: "POP_EXCEPT", 90: "STORE_NAME", 91: "DELETE_NAME", 92: "UNPACK_SEQUENCE", 93: "FOR_ITER", 94: "UNPACK_EX",
    95: "STORE_ATTR", 96: "DELETE_ATTR", 97: "STORE_GLOBAL", 98: "DELETE_GLOBAL", 100: "LOAD_CONST",
    101: "LOAD_NAME", 102: "BUILD_TUPLE", 103: "BUILD_LIST", 104: "BUILD_SET", 105: "BUILD_MAP", 106: "LOAD_ATTR",
    107: "COMPARE_OP", 108: "IMPORT_NAME", 109: "IMPORT_FROM", 110: "JUMP_FORWARD", 111: "JUMP_IF_FALSE_OR_POP",
    112: "JUMP_IF_TRUE_OR_POP", 113: "JUMP_ABSOLUTE", 114: "POP_JUMP_IF_FALSE", 115: "POP_JUMP_IF_TRUE",
    116: "LOAD_GLOBAL", 122: "SETUP_FINALLY", 124: "LOAD_FAST", 125: "STORE_FAST", 126: "DELETE_FAST",
    130: "RAISE_VARARGS", 131: "CALL_FUNCTION", 132: "MAKE_FUNCTION", 133: "BUILD_SLICE", 135: "LOAD_CLOSURE",
    136: "LOAD_DEREF", 137: "STORE_DEREF", 138: "DELETE_DEREF", 141: "CALL_FUNCTION_KW", 142: "CALL_FUNCTION_EX",
    143: "SETUP_WITH", 144: "EXTENDED_ARG", 145: "LIST_APPEND", 146: "SET_ADD", 147: "MAP_ADD",
    148: "LOAD_CLASSDEREF", 149: "BUILD_LIST_UNPACK", 150: "BUILD_MAP_UNPACK", 151: "BUILD_MAP_UNPACK_WITH_CALL",
    152: "BUILD_TUPLE_UNPACK", 153: "BUILD_SET_UNPACK", 154: "SETUP_ASYNC_WITH", 155: "FORMAT_VALUE",
    156: "BUILD_CONST_KEY_MAP", 157: "BUILD_STRING", 158: "BUILD_TUPLE_UNPACK_WITH_CALL", 160: "LOAD_METHOD",
    161: "CALL_METHOD", 162: "CALL_FINALLY", 163: "POP_FINALLY",
}

_LOOPS_36 = {80: "BREAK_LOOP", 119: "CONTINUE_LOOP", 120: "SETUP_LOOP", 121: "SETUP_EXCEPT"}
_NEW_38 = (6, 53, 54, 162, 163)  # ROT_FOUR, BEGIN_FINALLY, END_ASYNC_FOR, CALL_FINALLY, POP_FINALLY
_NEW_36 = (85, 142, 155, 156, 157, 158)  # SETUP_ANNOTATIONS, CALL_FUNCTION_EX, FORMAT_VALUE, ...KEY_MAP, ...
_GONE_39 = (53, 81, 82, 88, 149, 150, 151, 152, 153, 158, 162, 163)
_NEW_39 = {48: "RERAISE", 49: "WITH_EXCEPT_START", 74: "LOAD_ASSERTION_ERROR", 82: "LIST_TO_TUPLE",
           117: "IS_OP", 118: "CONTAINS_OP", 121: "JUMP_IF_NOT_EXC_MATCH", 162: "LIST_EXTEND", 163: "SET_UPDATE",
           164: "DICT_MERGE", 165: "DICT_UPDATE"}
_NEW_310 = {119: "RERAISE", 30: "GET_LEN", 31: "MATCH_MAPPING", 32: "MATCH_SEQUENCE", 33: "MATCH_KEYS",
            34: "COPY_DICT_WITHOUT_KEYS", 99: "ROT_N", 129: "GEN_START", 152: "MATCH_CLASS"}
# 3.5: 134 MAKE_CLOSURE, 140 CALL_FUNCTION_VAR, 142 CALL_FUNCTION_VAR_KW (3.6 replaced them); 3.6: 127
# STORE_ANNOTATION (removed in 3.7); 3.7: LOAD_METHOD/CALL_METHOD.


def _table(version: tuple[int, int]) -> dict[int, str]:
    t = dict(BASE)
    if version <= (3, 7):
        for op in _NEW_38:
            t.pop(op, None)
        t.update(_LOOPS_36)
    if version <= (3, 6):
        t.pop(160)
        t.pop(161)
    if version == (3, 6):
        t[127] = "STORE_ANNOTATION"
    if version == (3, 5):
        for op in _NEW_36:
            t.pop(op, None)
        t.update({134: "MAKE_CLOSURE", 140: "CALL_FUNCTION_VAR", 142: "CALL_FUNCTION_VAR_KW"})
    if version >= (3, 9):
        for op in _GONE_39:
            t.pop(op, None)
        t.update(_NEW_39)
    if version >= (3, 10):
        t.pop(48)  # RERAISE took an argument in 3.10: 119
        t.update(_NEW_310)
    return t


TABLES: dict[tuple[int, int], dict[int, str]] = {(3, m): _table((3, m)) for m in range(5, 11)}

CMP_OP = ("<", "<=", "==", "!=", ">", ">=", "in", "not in", "is", "is not")  # COMPARE_OP's argument, 3.5-3.10
