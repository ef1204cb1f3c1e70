"""The CLI on bad input: one clear line, a documented exit code, no traceback, no partial output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import BAD, H5


def k2to3(*args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-m", "k2to3", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("name", "code", "words"),
    [
        ("not_h5.h5", 2, "not an HDF5 file"),
        ("truncated.h5", 2, "truncated or corrupt"),
        ("weights_only.h5", 3, "weights-only"),
        ("unknown_layer.h5", 3, "unknown layer class 'MyUnknownLayer'"),
    ],
)
def test_bad_input(name, code, words, tmp_path):
    src = tmp_path / name
    shutil.copy(BAD / name, src)
    before = src.read_bytes()
    r = k2to3("convert", str(src), "-o", str(tmp_path / "out.keras"))
    assert r.returncode == code, r.stderr
    line = one_error_line(r)
    assert words in line
    assert not (tmp_path / "out.keras").exists()
    assert not list(tmp_path.glob(".*partial*"))
    assert src.read_bytes() == before


def test_unknown_layer_names_the_layer(tmp_path):
    r = k2to3("convert", str(BAD / "unknown_layer.h5"), "-o", str(tmp_path / "o.keras"))
    assert "'mystery'" in one_error_line(r)


def test_missing_input(tmp_path):
    r = k2to3("convert", str(tmp_path / "nope.h5"), "-o", str(tmp_path / "o.keras"))
    assert r.returncode == 2 and "no such file" in one_error_line(r)


def test_existing_output_is_refused_without_force(tmp_path):
    out = tmp_path / "o.keras"
    out.write_bytes(b"keep me")
    r = k2to3("convert", str(H5 / "fm02_training_config.h5"), "-o", str(out))
    assert r.returncode == 2 and "--force" in one_error_line(r)
    assert out.read_bytes() == b"keep me"


def test_unwritable_output_directory():
    r = k2to3("convert", str(H5 / "fm02_training_config.h5"), "-o", "/proc/k2to3-out.keras")
    assert r.returncode == 2 and "not writable" in one_error_line(r)


def test_missing_output_directory(tmp_path):
    r = k2to3("convert", str(H5 / "fm02_training_config.h5"), "-o", str(tmp_path / "no" / "o.keras"))
    assert r.returncode == 2 and "does not exist" in one_error_line(r)


def test_output_must_be_keras_and_not_the_input(tmp_path):
    src = tmp_path / "m.h5"
    shutil.copy(H5 / "fm02_training_config.h5", src)
    r = k2to3("convert", str(src), "-o", str(src))
    assert r.returncode == 2 and ".keras" in one_error_line(r)
    assert src.read_bytes() == (H5 / "fm02_training_config.h5").read_bytes()


def test_unknown_backend(tmp_path):
    r = k2to3("convert", str(H5 / "fm02_training_config.h5"), "-o", str(tmp_path / "o.keras"),
              "--backends", "tensorflow,mxnet")
    assert r.returncode == 2 and "mxnet" in one_error_line(r)


def test_help_has_examples():
    r = k2to3("convert", "--help")
    assert r.returncode == 0 and "Examples" in r.stdout and "Exit codes" in r.stdout


@pytest.mark.slow
def test_convert_json_output(tmp_path):
    out = tmp_path / "o.keras"
    r = k2to3("convert", str(H5 / "fm12_thresholded_relu.h5"), "-o", str(out), "--json",
              "--backends", "tensorflow,jax")
    assert r.returncode == 0, r.stderr
    import json

    report = json.loads(r.stdout)
    assert report["schema"] == "k2to3.convert/2" and report["verdict"] == "parity"
    assert (tmp_path / "o.keras.report" / "report.json").exists()
    assert (tmp_path / "o.keras.report" / "report.md").exists()
    assert set(report["backends"]) == {"tensorflow", "jax"}
