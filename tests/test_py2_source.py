"""Python 2 sources (Keras 1-era repositories): `convert --src` reads them after a mechanical 2->3 step or skips
them with one warning, never stopping a model that needs nothing from them; `lint` checks them as read, `fix` never
writes them. The real file is tests/fixtures/py2/kerasify_make_tests.py (PROVENANCE.md there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, H5

from k2to3.core.options import ConvertOptions as Options
from k2to3.errors import NotPortable
from k2to3.formats.artifact import read_artifact
from k2to3.pipeline.convert import convert
from k2to3.source.extract import index_sources
from k2to3.source.files import Config
from k2to3.source.py2 import to_py3
from k2to3.source.resolve_files import resolve_in_files
from k2to3.source.run import fix_paths, lint_paths

KERASIFY = FIXTURES / "py2" / "kerasify_make_tests.py"
ZOO = FIXTURES / "src" / "k2_zoo.py"
MODELS = FIXTURES / "src_models"
# Python 2 constructs Python 3 rejects, and what the 2->3 step reads them as (on the same line)
CASES = [
    ('print "loss", loss\n', 'print("loss", loss)\n'),
    ('print "epoch", i,\n', 'print("epoch", i, end=\' \')\n'),
    ("try:\n    pass\nexcept ValueError, e:\n    pass\n", "try:\n    pass\nexcept ValueError as e:\n    pass\n"),
    ("s = `x`\n", "s = repr(x)\n"),
    ("r = ur'\\d'\n", "r = r'\\d'\n"),
    ("mode = 0777 + 10L\n", "mode = 0o777 + 10\n"),
    ('exec "y = 1"\n', 'exec("y = 1")\n'),
    ("if a <> b:\n    pass\n", "if a != b:\n    pass\n"),
    ("raise ValueError, 'bad'\n", "raise ValueError('bad')\n"),
    ("def f(x):\n\tif x:\n\t    return 1\n        return 2\n", "def f(x):\n        if x:\n            return 1\n"
     "        return 2\n"),
]


def _py2(text: str) -> str | None:
    try:
        compile(text, "<t>", "exec")
    except SyntaxError as exc:
        got = to_py3(text, exc)
        return got.text if got else None
    raise AssertionError("valid Python 3")


@pytest.mark.parametrize("before,after", CASES, ids=[c[0].split()[0] + str(i) for i, c in enumerate(CASES)])
def test_mechanical_step_keeps_lines(before, after):
    assert _py2(before) == after


def test_not_python2_either_is_none():
    assert _py2("def f(:\n    pass\n") is None


def _zoo_py2(tmp_path: Path) -> tuple[Path, Path]:
    """k2_zoo.py as is, and the same file with a Python 2 tail (statements, a helper the model does not use)."""
    (a := tmp_path / "py3").mkdir()
    (b := tmp_path / "py2").mkdir()
    text = ZOO.read_text()
    (a / "zoo.py").write_text(text)
    (b / "zoo.py").write_text(text + 'print "zoo loaded"\n\ndef _legacy(x):\n\tif x <> 0:\n\t    print `x`\n'
                              "        try:\n\t\treturn 0777\n\texcept ValueError, e:\n\t\traise ValueError, e\n")
    return a / "zoo.py", b / "zoo.py"


def test_python2_definitions_resolve_as_from_python3(tmp_path):
    py3, py2 = _zoo_py2(tmp_path)
    a = read_artifact(MODELS / "lambda_args.h5")
    want = resolve_in_files(index_sources([py3]), a.model_config, a.training_config, "m_k3")
    got = resolve_in_files(index_sources([py2]), a.model_config, a.training_config, "m_k3")
    assert not got.errors, [f.line() for f in got.errors]
    assert got.k3_code.replace(str(py2), str(py3)) == want.k3_code
    assert got.lambdas.keys() == want.lambdas.keys() == {"affine", "lambda"}
    (warn,) = [f for f in got.findings if f.code == "K2T908"]
    assert warn.severity == "warning" and f"{py2} (line 113: Missing parentheses" in warn.message


def test_unparsable_src_is_skipped_and_named_where_the_model_needs_it(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    with pytest.raises(NotPortable, match=r"bad\.py could not be parsed and was skipped") as exc:
        convert(Options(src=MODELS / "lambda_args.h5", output=tmp_path / "m.keras", sources=(str(bad),)))
    warn = [f for f in exc.value.report["findings"] if f["code"] == "K2T908"]
    assert len(warn) == 1 and "bad.py:1: syntax error" in warn[0]["message"]
    assert not (tmp_path / "m.keras").exists() and not (tmp_path / "m_k3.py").exists()


@pytest.mark.slow
def test_python2_src_does_not_block_a_model_that_needs_nothing(pool, tmp_path):
    """The real Keras 1-era script next to a full model that needs nothing from it: it converts as without
    --src, and the report says once that the file was read as Python 2."""
    out = tmp_path / "m.keras"
    report = convert(Options(src=H5 / "fm07_conv1d.h5", output=out, sources=(str(KERASIFY),)), pool=pool)
    assert report["verdict"] == "parity", report["verdict"]
    warn = [f for f in report["findings"] if f["code"] == "K2T908"]
    assert len(warn) == 1 and f"{KERASIFY} (line 67: Missing parentheses in call to 'print'" in warn[0]["message"]
    assert out.exists()


def test_lint_checks_python2_as_read_and_fix_leaves_it_alone(tmp_path):
    src = tmp_path / "train.py"
    src.write_text("import keras.backend as K\nprint 'mean'\ny = K.mean(z, axis=1)\n")
    res = lint_paths([src, KERASIFY], Config())
    assert [(f.line, f.code, f.fixable) for f in res.findings] == [(3, "K2T201", False)]
    assert res.errors == [
        f"{src}:2:1: Python 2 syntax error (Missing parentheses in call to 'print'. Did you mean print(...)?), "
        "checked after a mechanical 2->3 step (`k2to3 fix` leaves the file alone: port it to Python 3 first)",
        f"{KERASIFY}:67:5: Python 2 syntax error (Missing parentheses in call to 'print'. Did you mean print(...)?)"
        ", checked after a mechanical 2->3 step (`k2to3 fix` leaves the file alone: port it to Python 3 first)"]
    fixed = fix_paths([src], Config())
    assert not fixed.changed and fixed.errors == [
        f"{src}:2:1: Python 2 syntax error (Missing parentheses in call to 'print'. Did you mean print(...)?), "
        "not fixed: port it to Python 3 first (2to3 -w)"]
    before = src.read_bytes()
    r = subprocess.run([sys.executable, "-m", "k2to3", "fix", "--write", str(src)], capture_output=True, text=True)
    assert r.returncode == 0 and src.read_bytes() == before and "Traceback" not in r.stderr
    assert "Python 2 syntax error" in r.stderr and "rewrote 0 calls and imports in 0 files" in r.stderr
