"""The Python API without the CLI: the docs/api.md example runs as written, import stays light, errors raise."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, H5, ROOT

import k2to3
from k2to3.errors import InputError

DOC = ROOT / "docs" / "api.md"


def doc_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_import_is_light_and_lint_fix_never_import_backends():
    code = ("import sys, k2to3; r = k2to3.lint(sys.argv[1]); f = k2to3.fix(sys.argv[1]); "
            "k2to3.convert; k2to3.verify; "
            "bad = [m for m in ('keras', 'tensorflow', 'torch', 'jax', 'tf_keras') if m in sys.modules]; "
            "assert not bad, bad; assert r.findings and f.rewrites; print('ok')")
    r = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "src" / "k2_model.py")], capture_output=True,
                       text=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_convert_is_the_api_function_and_takes_every_cli_option():
    import inspect

    from k2to3.core.options import ConvertOptions, VerifyOptions, fields_of
    from k2to3.interfaces import api

    assert k2to3.convert is api.convert and k2to3.verify is api.verify
    for fn, cls, command in ((k2to3.convert, ConvertOptions, "convert"), (k2to3.verify, VerifyOptions, "verify")):
        params = inspect.signature(fn).parameters
        missing = [f.name for f in fields_of(cls, command) if f.name not in params]
        assert not missing, f"{command}: CLI options without an API keyword: {missing}"
    with pytest.raises(TypeError, match="unexpected keyword argument 'fit_stepz'"):
        k2to3.convert("a.h5", "b.keras", fit_stepz=2)


def test_errors_raise_instead_of_exiting(tmp_path):
    with pytest.raises(InputError, match="no such file") as exc:
        k2to3.verify(tmp_path / "missing.keras", reference=H5 / "fm16_softmax_axis_list.h5")
    assert exc.value.code == 2
    with pytest.raises(InputError, match="no such file"):
        k2to3.convert(tmp_path / "missing.h5", tmp_path / "m.keras")
    with pytest.raises(InputError, match="no such file or directory"):
        k2to3.lint(tmp_path / "nope.py")
    assert not list(tmp_path.iterdir())


def test_fix_write_and_lint_report(tmp_path):
    src = tmp_path / "train.py"
    shutil.copy(FIXTURES / "src" / "k2_model.py", src)
    before = src.read_text()
    dry = k2to3.fix(src)
    assert dry.rewrites and src.read_text() == before and "+++" in dry.diff()
    done = k2to3.fix(src, write=True)
    assert done.written and src.read_text() == dry.changed[str(src)]
    lint = k2to3.lint(src)
    assert lint.files == 1 and '"findings"' in lint.to_json()


@pytest.mark.slow
def test_docs_api_example_runs(tmp_path, monkeypatch, capsys):
    """docs/api.md's example, as written: convert (all three backends), verify against the golden file, lint."""
    shutil.copy(H5 / "fm16_softmax_axis_list.h5", tmp_path / "legacy.h5")
    shutil.copy(FIXTURES / "src" / "k2_model.py", tmp_path / "train.py")
    monkeypatch.chdir(tmp_path)
    blocks = doc_blocks()
    assert blocks
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {"__name__": "docs_api"})
    out = capsys.readouterr().out
    assert out.startswith("parity {'tensorflow'") and "2 missing.keras: no such file" in out
    assert (tmp_path / "model.keras").exists() and (tmp_path / "model.golden.npz").exists()
    assert Path("train.py").read_text() == (FIXTURES / "src" / "k2_model.py").read_text()  # dry run
