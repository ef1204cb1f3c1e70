"""`verify` and `export` right after `convert`, with no reference option: the original the conversion recorded in
MODEL.keras.report/report.json is used when it is still there with the same sha256 (and said so); otherwise one line
naming the command and both ways to give a reference, exit 2, nothing written."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import H5

from k2to3.core.options import ConvertOptions, ExportOptions, VerifyOptions
from k2to3.errors import InputError
from k2to3.pipeline.convert import convert
from k2to3.pipeline.export import export
from k2to3.pipeline.report import write
from k2to3.pipeline.verify import verify


@pytest.fixture(scope="module")
def converted(tmp_path_factory, pool):
    d = tmp_path_factory.mktemp("after")
    legacy = d / "legacy.h5"
    shutil.copy(H5 / "fm19_hard_sigmoid.h5", legacy)
    report = convert(ConvertOptions(src=legacy, output=d / "m.keras", save_golden=True), pool=pool)
    assert report["verdict"] == "parity"
    write(report, d / "m.keras.report")  # where the command line writes it
    return d


@pytest.mark.slow
def test_verify_and_export_find_the_recorded_original(converted, pool, tmp_path):
    model = converted / "m.keras"
    report = verify(VerifyOptions(model=model), pool=pool)
    assert report["verdict"] == "parity" and report["reference"]["kind"] == "keras2-tf_keras"
    assert report["reference"]["found"] == f"reference: {converted / 'legacy.h5'} from m.keras.report (sha256 matches)"
    out = tmp_path / "m.onnx"
    report = export(ExportOptions(model=model, format="onnx", output=out), pool=pool)
    assert report["export"]["status"] == "parity" and out.is_file() and "sha256 matches" in report["reference"]["found"]


@pytest.mark.slow
def test_moved_original_falls_back_to_the_saved_golden_then_one_line(converted, pool, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(converted, d)
    rep = d / "m.keras.report" / "report.json"
    data = json.loads(rep.read_text())
    data["input"]["path"] = str(d / "legacy.h5")
    rep.write_text(json.dumps(data))
    (d / "legacy.h5").write_bytes(b"changed")  # same path, another file: not the original
    report = verify(VerifyOptions(model=d / "m.keras"), pool=pool)
    assert report["reference"]["kind"] == "golden-npz" and "m.golden.npz" in report["reference"]["found"]
    (d / "m.golden.npz").unlink()
    with pytest.raises(InputError) as exc:
        verify(VerifyOptions(model=d / "m.keras"), pool=pool)
    line = exc.value.line()
    assert exc.value.code == 2 and line.startswith("verify needs a reference for")
    assert "is not there with sha256" in line and "--reference LEGACY.h5" in line and "--golden m.golden.npz" in line
    with pytest.raises(InputError) as exc:
        export(ExportOptions(model=d / "m.keras", format="onnx", output=tmp_path / "x.onnx"), pool=pool)
    assert exc.value.line().startswith("export needs a reference for") and not (tmp_path / "x.onnx").exists()


def test_a_report_of_another_file_is_not_used(converted, tmp_path):
    d = tmp_path / "other"
    shutil.copytree(converted, d)
    rep = d / "m.keras.report" / "report.json"
    data = json.loads(rep.read_text())
    data["output"]["sha256"] = "0" * 64
    rep.write_text(json.dumps(data))
    (d / "m.golden.npz").unlink()
    with pytest.raises(InputError, match="describes another file"):
        verify(VerifyOptions(model=d / "m.keras"))
