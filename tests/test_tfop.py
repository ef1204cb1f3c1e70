"""TFOpLambda / SlicingOpLambda conversion through the op table (issue: one op table)."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import pytest
from conftest import CACHE, FIXTURES, H5, record
from test_convert import check_parity

from k2to3.convert import NotPortableReport, Options, convert
from k2to3.upgrade import upgrade

pytestmark = pytest.mark.slow


def _functions(path) -> set[str]:
    cfg = json.loads(h5py.File(path, "r").attrs["model_config"])
    return {layer["config"]["function"] for layer in cfg["config"]["layers"]
            if layer["class_name"] in ("TFOpLambda", "SlicingOpLambda")}


def test_zoo_uses_at_least_40_tf_functions():
    assert len(_functions(H5 / "tfop_zoo.h5")) >= 40


def test_zoo_converts_with_parity(pool, tmp_path):
    report = convert(Options(src=H5 / "tfop_zoo.h5", out=tmp_path / "zoo.keras"), pool=pool)
    record("tfop_zoo", report)
    check_parity(report)
    assert report["reference"]["kind"] == "keras2-tf_keras"
    assert not report["output"]["needs_k2to3_portable"]  # built-in keras.ops nodes only
    translated = [f for f in report["findings"] if f["code"] == "K2T904"]
    assert len(translated) >= 60 and all(f["severity"] == "info" for f in translated)


@pytest.fixture(scope="module")
def regnets() -> dict:
    names = ("regnetx002", "regnety002")
    if not all((CACHE / f"{n}.h5").exists() for n in names):
        subprocess.run([sys.executable, str(FIXTURES / "make_tfop_fixtures.py"), "--large", str(CACHE)],
                       check=True, capture_output=True, timeout=900)
    return {n: CACHE / f"{n}.h5" for n in names}


@pytest.mark.parametrize("name", ["regnetx002", "regnety002"])
def test_regnet_converts_with_parity(name, regnets, pool, tmp_path):
    assert _functions(regnets[name])  # the application really contains TFOpLambda layers
    report = convert(Options(src=regnets[name], out=tmp_path / f"{name}.keras"), pool=pool)
    record(name, report)
    check_parity(report)


def _op_model(function: str, kwargs: dict) -> dict:
    return {"class_name": "Functional", "config": {
        "name": "m", "input_layers": [["x", 0, 0]], "output_layers": [["op", 0, 0]],
        "layers": [
            {"class_name": "InputLayer", "name": "x", "config": {"name": "x", "batch_input_shape": [None, 3]},
             "inbound_nodes": []},
            {"class_name": "TFOpLambda", "name": "op", "config": {"name": "op", "function": function},
             "inbound_nodes": [["x", 0, 0, kwargs]]}]}}


def test_untranslatable_op_is_a_finding_naming_layer_and_op():
    plan = upgrade(_op_model("raw_ops.AddV2", {"y": 1.0}))
    (err,) = plan.errors
    assert err.code == "K2T904" and err.layer == "op" and "raw_ops.AddV2" in err.message
    plan = upgrade(_op_model("math.cumsum", {"axis": 1, "exclusive": True}))
    assert plan.errors and "exclusive" in plan.errors[0].message


def test_untranslatable_op_stops_convert_without_output(tmp_path):
    src = tmp_path / "m.h5"
    with h5py.File(src, "w") as f:
        f.attrs["model_config"] = json.dumps(_op_model("strings.length", {}))
        f.attrs["keras_version"] = "2.15.0"
        f.create_group("model_weights").attrs["layer_names"] = []
    with pytest.raises(NotPortableReport) as exc:
        convert(Options(src=src, out=tmp_path / "m.keras"))
    assert "strings.length" in exc.value.line() and not (tmp_path / "m.keras").exists()
