"""--trust-bytecode's reader and decompiler of Lambda bytecode written by CPython 3.5-3.10 (upgrade/decompile.py):
real payloads of real files (tests/fixtures/bytecode/, hand-checked), code objects written here byte by byte in
the marshal format of those versions, and hostile payloads that must give one clean refusal."""

from __future__ import annotations

import base64
import json
import struct
import tracemalloc

import pytest
from conftest import FIXTURES

from k2to3.upgrade.bytecode import decompiled_module, inspect_lambdas
from k2to3.upgrade.decompile import Refused, decompile, read_code

PAYLOADS = json.loads((FIXTURES / "bytecode" / "payloads.json").read_text())


# -- the marshal format, written by hand (this Python cannot write 3.5-3.10 code objects) ----------------------
def _m(v) -> bytes:
    if v is None:
        return b"N"
    if isinstance(v, bool):
        return b"T" if v else b"F"
    if isinstance(v, int):
        return b"i" + struct.pack("<i", v)
    if isinstance(v, float):
        return b"g" + struct.pack("<d", v)
    if isinstance(v, bytes):
        return b"s" + struct.pack("<i", len(v)) + v
    if isinstance(v, str):
        return b"z" + bytes([len(v)]) + v.encode()
    if isinstance(v, tuple):
        return b")" + bytes([len(v)]) + b"".join(_m(x) for x in v)
    raise TypeError(v)


def code_obj(code: bytes, consts=(None,), names=(), varnames=("x",), argcount=1, layout="3.6", name="<lambda>"):
    ints = [argcount] + ([0] if layout == "3.8" else []) + [0, len(varnames), 8, 0x43]
    return (b"\xe3" + b"".join(struct.pack("<i", i) for i in ints) + _m(code) + _m(consts) + _m(names)
            + _m(varnames) + _m(()) + _m(()) + _m("t.py") + _m(name) + struct.pack("<i", 1) + _m(b""))


def b64(raw: bytes) -> list:
    return [base64.b64encode(raw).decode(), None, None]


def wc(*ops: tuple[int, int]) -> bytes:  # wordcode 3.6+
    return bytes(b for op, arg in ops for b in (op, arg))


LOAD_FAST, LOAD_CONST, LOAD_GLOBAL, LOAD_ATTR, RETURN = 124, 100, 116, 106, 83


# -- real payloads -----------------------------------------------------------------------------------------------
def test_carnd_python35_lambda():
    d = decompile(PAYLOADS["carnd"]["function"])
    assert d.source == "lambda x: x / 127.5 - 1.0"  # the source: Lambda(lambda x: x/127.5-1.0)
    assert (d.version, d.name, d.filename, d.line, d.globals, d.imports) == ("3.5", "<lambda>", "run5.py", 72, [], [])


def test_nnom_named_function_with_local_import():
    p = PAYLOADS["nnom_mnist"]
    d = decompile(p["function"])
    assert d.version == "3.6-3.7" and d.name == "quant_layer"
    assert d.source == ("lambda x, clip_range, bits: tf.fake_quant_with_min_max_vars(x, min=clip_range[0], "
                        "max=clip_range[1], num_bits=bits)")
    assert d.imports == ["import tensorflow as tf"]  # `import tensorflow as tf` inside the def
    assert decompile(p["output_shape"]).source == "lambda input_shape: input_shape"


def test_module_of_the_nnom_file_defines_each_function_once():
    cfg = {"class_name": "Sequential", "config": {"name": "m", "layers": [
        {"class_name": "Lambda", "config": {**PAYLOADS["nnom_mnist"], "name": f"lambda_{i}",
                                            "function_type": "lambda"}} for i in (1, 2)]}}
    text, findings = decompiled_module(cfg, "m.h5")
    assert text is not None and text.count("def quant_layer(x, clip_range, bits):") == 1
    assert "Lambda(quant_layer, arguments={'clip_range': [-128.0, 127.0], 'bits': 8}, output_shape=quant_shape, " \
           "name='lambda_2')" in text
    compile(text, "m.py", "exec")  # valid Python (compiled, not run)
    assert [f.layer for f in findings] == ["lambda_1", "lambda_2"]
    info = inspect_lambdas(cfg)
    assert "decompiled (CPython 3.6-3.7" in info[0].message and "fake_quant_with_min_max_vars" in info[0].message


# -- code objects of each layout and encoding ----------------------------------------------------------------------
def test_slicing_module_calls_and_keywords_wordcode():
    # lambda x: K.mean(x[:, :, 0], axis=1)   (3.6 wordcode: CALL_FUNCTION_KW with a names tuple)
    code = wc((LOAD_GLOBAL, 0), (LOAD_ATTR, 1), (LOAD_FAST, 0), (LOAD_CONST, 0), (LOAD_CONST, 0), (133, 2),
              (LOAD_CONST, 0), (LOAD_CONST, 0), (133, 2), (LOAD_CONST, 1), (102, 3), (25, 0), (LOAD_CONST, 2),
              (LOAD_CONST, 3), (141, 2), (RETURN, 0))
    d = decompile(b64(code_obj(code, consts=(None, 0, 1, ("axis",)), names=("K", "mean"))))
    assert d.source == "lambda x: K.mean(x[:, :, 0], axis=1)" and d.globals == ["K"]
    assert d.imports == ["from keras import backend as K"] and d.version == "3.6-3.7"


def test_load_method_pins_37_and_posonly_layout_is_38_plus():
    # lambda x: tf.image.resize(x, [2, 3])  with LOAD_METHOD/CALL_METHOD (3.7+)
    code = wc((LOAD_GLOBAL, 0), (LOAD_ATTR, 1), (160, 2), (LOAD_FAST, 0), (LOAD_CONST, 0), (LOAD_CONST, 1),
              (103, 2), (161, 2), (RETURN, 0))
    names = ("tf", "image", "resize")
    assert decompile(b64(code_obj(code, consts=(2, 3), names=names))).version == "3.7"
    d = decompile(b64(code_obj(code, consts=(2, 3), names=names, layout="3.8")))
    assert d.source == "lambda x: tf.image.resize(x, [2, 3])" and d.version == "3.8-3.10"


def test_python35_keywords_are_name_value_pairs():
    # 3.5: K.sum(x, axis=-1, keepdims=True) is CALL_FUNCTION with arg 1 | 2 << 8
    code = bytes([LOAD_GLOBAL, 0, 0, LOAD_ATTR, 1, 0, LOAD_FAST, 0, 0, LOAD_CONST, 1, 0, LOAD_CONST, 2, 0,
                  LOAD_CONST, 3, 0, LOAD_CONST, 4, 0, 131, 1, 2, 11, RETURN])  # UNARY_NEGATIVE after the call
    d = decompile(b64(code_obj(code, consts=(None, "axis", -1, "keepdims", True), names=("K", "sum"))))
    assert d.source == "lambda x: -K.sum(x, axis=-1, keepdims=True)" and d.version == "3.5"


def test_defaults_and_literal_closure():
    code = wc((LOAD_FAST, 0), (136, 0), (20, 0), (LOAD_FAST, 1), (23, 0), (RETURN, 0))  # x * scale + b
    raw = code_obj(code, varnames=("x", "b"), argcount=2)
    raw = raw.replace(_m(()) + _m(()), _m(("scale",)) + _m(()), 1)  # freevars = ('scale',)
    d = decompile([base64.b64encode(raw).decode(), [0.5], [2.0]])
    assert d.source == "lambda x, b=0.5: x * 2.0 + b"


# -- refusals: each one line, no trace, no big allocation ---------------------------------------------------------
def _refused(payload) -> str:
    with pytest.raises(Refused) as exc:
        decompile(payload)
    return str(exc.value)


def test_jumps_unknown_opcodes_and_statements_are_refused():
    jump = wc((LOAD_FAST, 0), (114, 6), (LOAD_FAST, 0), (RETURN, 0))
    assert _refused(b64(code_obj(jump))) == \
        "POP_JUMP_IF_FALSE at offset 2 (CPython 3.6-3.7): a jump or loop"
    assert "opcode 7 at offset 0 is not an instruction of CPython 3.6-3.7" in \
        _refused(b64(code_obj(wc((7, 0), (LOAD_FAST, 0), (RETURN, 0)))))
    assert "IS_OP" in _refused(b64(code_obj(wc((LOAD_FAST, 0), (LOAD_FAST, 0), (117, 0), (RETURN, 0)))))
    print_call = wc((LOAD_GLOBAL, 0), (LOAD_FAST, 0), (131, 1), (1, 0), (LOAD_FAST, 0), (RETURN, 0))
    assert "expression statement" in _refused(b64(code_obj(print_call, names=("abs",))))
    assert "global name 'helper'" in _refused(b64(code_obj(wc((LOAD_GLOBAL, 0), (RETURN, 0)), names=("helper",))))
    assert "closure variable" in _refused(b64(code_obj(wc((136, 0), (RETURN, 0))).replace(
        _m(()) + _m(()), _m(("w",)) + _m(()), 1)))
    nested = wc((LOAD_CONST, 0), (RETURN, 0))
    inner = code_obj(wc((LOAD_FAST, 0), (RETURN, 0)))
    raw = code_obj(nested, consts=(None,)).replace(_m((None,)), b")\x01" + inner, 1)
    assert "nested function" in _refused(b64(raw))


def test_hostile_payloads_are_refused_cleanly():
    real = base64.b64decode(PAYLOADS["carnd"]["function"][0])
    tracemalloc.start()
    try:
        for cut in range(1, len(real)):
            assert _refused(b64(real[:cut]))  # every truncation: one reason
        huge = bytearray(real)
        huge[22:26] = struct.pack("<i", 0x7FFFFFFF)  # the bytecode declares 2 GiB
        assert "declares 2147483647" in _refused(b64(bytes(huge)))
        deep = b")\x01" * 100_000 + b"N"
        assert "nested deeper than 32" in _refused(b64(deep))
        many = b"(" + struct.pack("<i", 1 << 30) + b"N" * 16
        assert "more than the 16 bytes left" in _refused(b64(many))
        long_ = b"l" + struct.pack("<i", -(1 << 30))
        assert "integer of" in _refused(b64(long_))
        assert "reference 5" in _refused(b64(b"r" + struct.pack("<i", 5)))
        assert "not base64" in _refused(["!!not base64!!", None, None])
        assert "type code" in _refused(b64(b"\x01"))
        assert "bytes after the code object" in _refused(b64(real + b"N"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def test_other_versions_layout_is_refused():
    with pytest.raises(Refused, match=r"neither the 3\.5-3\.7 nor the 3\.8-3\.10 field layout"):
        read_code(b64(b"\xe3" + b"\0" * 40))


@pytest.mark.parametrize("minor", range(5, 11))
def test_opcode_tables_agree_with_xdis(minor):
    """upgrade/opcodes.py against xdis's tables of the same CPython version (an independent transcription of each
    release's Lib/opcode.py): every number names the same instruction, none missing, none extra."""
    import importlib

    from k2to3.upgrade.opcodes import TABLES

    mod = importlib.import_module(f"xdis.opcodes.opcode_3x.opcode_3{minor}")
    assert TABLES[(3, minor)] == {num: name for name, num in mod.opmap.items()}
