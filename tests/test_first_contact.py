"""A new user's first contact (issue 26): errors before work, an empty audit that fails, a table that fits 80
columns, help that reads like ruff's, messages in whole words, and no silence on long work. Real fixtures, the
real command line in its own process."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BAD, FIXTURES, H5, ROOT

import k2to3
from k2to3.errors import InputError, NotPortable

LAMBDAS = FIXTURES / "src_models" / "lambda_loop.h5"  # three Lambda layers stored as bytecode


def run(*args: str, cwd: Path | None = None, columns: int = 200) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-m", "k2to3", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


def error_line(r: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


# 1. every output location is checked before any work


@pytest.mark.parametrize("where", ["/proc/k2to3-reports", "file"])
def test_convert_unwritable_report_dir_fails_before_work(where, tmp_path):
    rdir = str(tmp_path / "a_file" / "sub") if where == "file" else where
    (tmp_path / "a_file").write_text("x")
    out = tmp_path / "out.keras"
    r = run("convert", str(H5 / "fm19_hard_sigmoid.h5"), "-o", str(out), "--report-dir", rdir)
    assert r.returncode == 2 and "--report-dir" in error_line(r)
    assert "starting workers" not in r.stderr  # nothing was converted
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_verify_and_audit_unwritable_outputs_fail_before_work(tmp_path):
    r = run("verify", str(H5 / "fm19_hard_sigmoid.h5"), "--reference", str(H5 / "fm19_hard_sigmoid.h5"),
            "--report-dir", "/proc/k2to3-verify")
    assert r.returncode == 2 and "--report-dir" in error_line(r)
    r = run("audit", str(H5), "-o", "/proc/k2to3-audit")
    assert r.returncode == 2 and "-o /proc/k2to3-audit" in error_line(r)
    r = run("convert", str(H5), "-o", "/proc/k2to3-store")
    assert r.returncode == 2 and "not writable" in error_line(r)


def test_report_write_error_is_an_input_error_and_leaves_nothing_half_written(tmp_path):
    from k2to3.pipeline.report import write

    with pytest.raises(NotPortable) as exc:  # a real report (of a model stopped before any backend)
        k2to3.convert(LAMBDAS, tmp_path / "o.keras")
    rdir = tmp_path / "r"
    (rdir / "report.md").mkdir(parents=True)  # report.md cannot be replaced by a file
    with pytest.raises(InputError, match="cannot write the report"):
        write(exc.value.report, rdir)
    assert sorted(p.name for p in rdir.iterdir()) == ["report.json", "report.md"]
    assert (rdir / "report.md").is_dir() and json.loads((rdir / "report.json").read_text())["verdict"]
    assert not list(rdir.glob(".*tmp"))


# 2. an audit that finds nothing fails; a file named like a model that is not one is said


def test_empty_audit_exits_5_and_writes_nothing(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run("audit", str(tmp_path / "empty"), "-o", str(tmp_path / "out"))
    assert r.returncode == 5 and "nothing to audit" in error_line(r)
    assert not (tmp_path / "out").exists()
    r = run("convert", str(tmp_path / "empty"), "-o", str(tmp_path / "store"))
    assert r.returncode == 5 and "nothing to convert" in error_line(r)


def test_audit_says_what_it_skipped(tmp_path):
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "model.h5").write_text("not an HDF5 file at all\n")
    (tree / "tiny.keras").write_bytes(b"PK")
    r = run("audit", str(tree), "-o", str(tmp_path / "out"))
    assert r.returncode == 5 and "2 files named like a model skipped" in error_line(r)
    assert "skipped sub/model.h5: no HDF5 signature" in r.stderr
    shutil.copy(H5 / "fm19_hard_sigmoid.h5", tree / "good.h5")
    r = run("audit", str(tree), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert "skipped sub/model.h5: no HDF5 signature and not a Keras archive" in r.stderr
    rep = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert {x["relpath"]: x["reason"] for x in rep["skipped"]} == {
        "sub/model.h5": "no HDF5 signature and not a Keras archive",
        "tiny.keras": "2 bytes: too short for HDF5 or a Keras archive"}
    assert rep["summary"]["skipped"] == 2
    assert "## Skipped files" in (tmp_path / "out" / "audit.md").read_text()
    assert "id='skipped'" in (tmp_path / "out" / "audit.html").read_text()


def test_audit_console_ends_with_evidence_sources_blocker_and_reports(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(H5 / "fm19_hard_sigmoid.h5", tree / "good.h5")
    shutil.copy(LAMBDAS, tree / "lambdas.h5")
    shutil.copy(FIXTURES / "src" / "k2_model.py", tree / "train.py")
    r = run("audit", str(tree), "-o", str(tmp_path / "out"))
    lines = r.stdout.splitlines()
    assert r.returncode == 3
    assert "evidence: 0 verified with --verify, 2 predicted from the config" in r.stdout
    assert any(x.startswith("sources: 1 file, ") for x in lines), r.stdout
    blocker = next(x for x in lines if x.startswith("top blocker:"))
    assert "K2T901" in blocker and "k2to3 convert FILE -o OUT.keras --src SCRIPT.py" in r.stdout
    assert lines[-1].startswith("reports: ")
    md = (tmp_path / "out" / "audit.md").read_text()
    assert "Effort: 1 file to touch" in md and " 1 files" not in md


# 3. the result table fits the terminal


@pytest.mark.slow
def test_convert_table_fits_80_columns_and_drops_empty_columns(tmp_path):
    from rich.console import Console

    from k2to3.interfaces.summary import print_summary

    r = run("convert", str(H5 / "fm19_hard_sigmoid.h5"), "-o", str(tmp_path / "m.keras"), columns=80)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(x) <= 80 for x in lines), [x for x in lines if len(x) > 80]
    table = [x for x in lines if x.strip().startswith(("backend", "tensorflow", "torch", "jax"))]
    assert len(table) == 4 and not any("…" in x for x in table), r.stdout
    assert "float32 noise" not in r.stdout and "first divergent layer" not in r.stdout  # empty on parity
    assert "params: 142; weights sha256: " in r.stdout and "on every backend" in r.stdout
    report = json.loads((tmp_path / "m.keras.report" / "report.json").read_text())
    wide = io.StringIO()
    print_summary(Console(file=wide, width=200), report)
    assert "weights sha256" in wide.getvalue() and "max rel" in wide.getvalue()
    assert "float32 noise" not in wide.getvalue()


# 4. help


def test_help_reads_like_a_cli():
    r = run("convert", "--help", columns=120)
    assert r.returncode == 0
    for wrong in ("<bool>", "<list[str]>", "{src}", "<str>"):
        assert wrong not in r.stdout, wrong
    assert "Usage: k2to3 convert [OPTIONS] LEGACY..." in r.stdout
    assert "[default: 1e-5]" in r.stdout and "[default: 1e-4]" in r.stdout  # the tolerances' defaults
    assert "train|inference" in r.stdout and "local|ray" in r.stdout and "FILE[:FUNCTION]" in r.stdout
    for panel in ("Output", "Verification", "Model source", "Training checks", "Model store"):
        assert f"─ {panel}" in r.stdout, panel
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"k2to3 {k2to3.__version__}"
    assert "text|json|sarif|github" in run("lint", "--help").stdout


def test_lint_without_paths_lints_the_current_directory(tmp_path):
    shutil.copy(FIXTURES / "src" / "k2_model.py", tmp_path / "model.py")
    r = run("lint", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1 and "model.py:" in r.stdout and "in 1 file;" in r.stdout
    r = run("fix", cwd=tmp_path)
    assert r.returncode == 1 and "in 1 file" in r.stderr


def test_unknown_rule_codes_are_refused(tmp_path):
    f = FIXTURES / "src" / "k2_model.py"
    r = run("lint", str(f), "--select", "K2T9999")
    assert r.returncode == 2 and "--select K2T9999" in error_line(r)
    r = run("lint", str(f), "--ignore", "E501")
    assert r.returncode == 2 and "--ignore E501" in error_line(r)
    assert run("lint", str(f), "--select", "k2t1", "--no-cache").returncode == 1  # a prefix of real codes
    (tmp_path / "pyproject.toml").write_text('[tool.k2to3]\nselect = ["K2T10l"]\n')
    shutil.copy(f, tmp_path / "m.py")
    r = run("lint", str(tmp_path / "m.py"))
    assert r.returncode == 2 and "[tool.k2to3] select" in error_line(r)


# 5. messages


def test_truncated_hdf5_message_is_whole_words(tmp_path):
    r = run("convert", str(BAD / "truncated.h5"), "-o", str(tmp_path / "o.keras"))
    line = error_line(r)
    assert r.returncode == 2 and "truncated or corrupt" in line and "of its" in line and "bytes are there" in line
    assert "sblock" not in line and line.count("(") == line.count(")")


def test_one_line_per_problem_not_per_layer(tmp_path):
    r = run("convert", str(LAMBDAS), "-o", str(tmp_path / "o.keras"))
    assert r.returncode == 3
    assert r.stderr.count("K2T901") == 1, r.stderr
    line = error_line(r)
    assert "K2T901 on 3 layers ('lambda', 'lambda_1', 'lambda_2')" in line
    assert "from a file (pass the model source with --src model.py, or --trust-bytecode for a file you trust" in line
    assert "Fix:" not in line and line.count("(") == line.count(")")


def test_api_errors_name_keywords_not_flags(tmp_path):
    with pytest.raises(NotPortable) as exc:
        k2to3.convert(LAMBDAS, tmp_path / "o.keras")
    assert "sources=['model.py'], or trust_bytecode=True" in exc.value.line() and "--" not in exc.value.line()
    out = tmp_path / "o.keras"
    out.write_bytes(b"x")
    with pytest.raises(InputError) as exc:
        k2to3.convert(H5 / "fm19_hard_sigmoid.h5", out)
    assert exc.value.line().endswith("output exists (pass force=True to replace it)")
    with pytest.raises(InputError) as exc:
        k2to3.convert(H5 / "fm19_hard_sigmoid.h5", tmp_path / "p.keras", targets=BAD / "not_h5.h5")
    assert exc.value.line() == "targets applies to fit_steps only (add fit_steps=N)"


def test_plural_words():
    from k2to3.core.text import clip, plural

    assert [plural(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert plural(1, "config fix", "config fixes") == "1 config fix"
    assert clip("Unable to open (truncated file: eof = 698700, sblock->base_addr = 0)", 40) == "Unable to open …"


# 6. long work is never silent


@pytest.mark.slow
def test_verify_says_it_is_starting_workers(tmp_path):
    r = run("verify", str(tmp_path / "missing.keras"), "--reference", str(H5 / "fm19_hard_sigmoid.h5"))
    assert r.returncode == 2  # (checked first: no worker for a missing file)
    conv = run("convert", str(H5 / "fm19_hard_sigmoid.h5"), "-o", str(tmp_path / "m.keras"), "--save-golden",
               "--backends", "tensorflow")
    assert conv.returncode == 0, conv.stderr
    r = run("verify", str(tmp_path / "m.keras"), "--golden", str(tmp_path / "m.golden.npz"), "--backends",
            "tensorflow")
    assert r.returncode == 0, r.stderr
    assert "starting workers: tensorflow" in r.stderr


# 8. the README's set-up on a fresh machine


def test_readme_sets_up_a_venv_says_the_disk_and_the_cpu_torch_wheel():
    text = (ROOT / "README.md").read_text()
    assert "-m venv" in text
    assert "GB" in text and "disk" in text
    assert "download.pytorch.org/whl/cpu" in text
