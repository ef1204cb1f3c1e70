"""`k2to3 audit`'s deployment targets (docs/audit.md#deployment-targets): the lowest Keras 3 release each artifact's
converted config can be written for and the export formats a recorded stop rules out, predicted statically and,
after --verify, computed from the converted file with the release its backends loaded it with verified."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES, H5

from k2to3.core.keras_versions import export_stops
from k2to3.stores.audit import run_audit
from k2to3.stores.auditreport import build, write

# fixture -> (lowest Keras 3 release, {format: stop code}); tests/fixtures/make_target_fixtures.py and
# make_fixtures.py / make_tfop_fixtures.py write them with tf_keras
CASES = {
    "target/bn_renorm.h5": ("3.14", {}),  # K2T703: renorm=True needs 3.14
    "target/rnn_variable_length.h5": ("3.0", {"litert": "K2T713"}),
    "h5/fm11_mixed_precision.h5": ("3.0", {"litert": "K2T712"}),
    "h5/tfop_everyday.h5": ("3.0", {"onnx": "K2T711"}),
    "h5/tfop_shape_tf_only.h5": ("3.0", {"torch": "K2T904"}),  # a TF call runs on tensorflow only
    "h5/embedding_lstm.h5": ("3.0", {}),
}


def test_static_audit_predicts_lowest_keras_and_export_stops(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for rel in CASES:
        shutil.copy(FIXTURES / rel, tree / rel.replace("/", "_"))
    write(run_audit([tree], tmp_path / "out"), tmp_path / "out", ["json", "md", "html"])
    rows = {a["relpath"]: a for a in json.loads((tmp_path / "out" / "audit.json").read_text())["artifacts"]}
    for rel, (lowest, stops) in CASES.items():
        t = rows[rel.replace("/", "_")]["targets"]
        assert t["keras"]["lowest"] == lowest and t["keras"]["evidence"] == "predicted", (rel, t)
        assert t["keras"]["basis"] == "plan" and "verified" not in t["keras"]
        assert {f: x["code"] for f, x in t["formats"].items() if x["reach"] == "stop"} == stops, (rel, t)
        assert all(x["evidence"] == "predicted" and x["reason"] for x in t["formats"].values())
    assert "K2T703" in rows["target_bn_renorm.h5"]["targets"]["keras"]["limit"]  # why not 3.13
    md = (tmp_path / "out" / "audit.md").read_text()
    assert "Keras >= 3.14 (predicted) · onnx, litert, savedmodel, torch" in md
    assert "onnx stop (K2T711)" in md and "litert stop (K2T712)" in md
    html = (tmp_path / "out" / "audit.html").read_text()
    assert "<th>deployment targets</th>" in html and "class='reach-stop'>litert stop (K2T713)" in html


def test_every_recorded_export_stop_is_predicted_on_a_fixture():
    predicted = {c for _, stops in CASES.values() for c in stops.values()}
    assert {s.code for s in export_stops()} <= predicted
    assert all(s.format in ("onnx", "litert", "savedmodel", "torch") for s in export_stops())


@pytest.mark.slow
def test_verify_computes_the_lowest_release_from_the_converted_file(tmp_path):
    """--verify converts (as it always did, no Keras venv or export of its own): the lowest release is computed from
    the written .keras, the installed release is verified by the backends' parity, the formats stay predicted."""
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(FIXTURES / "target" / "bn_renorm.h5", tree / "bn.h5")
    shutil.copy(H5 / "fm11_mixed_precision.h5", tree / "mp.h5")
    model = build(run_audit([tree], tmp_path / "out", verify=True))
    rows = {a["relpath"]: a for a in model["artifacts"]}
    for name, lowest in (("bn.h5", "3.14"), ("mp.h5", "3.0")):
        k = rows[name]["targets"]["keras"]
        assert k["basis"] == "converted" and k["lowest"] == lowest and k["evidence"] == "predicted", k
        assert k["verified"]["status"] == "parity" and set(k["verified"]["backends"]) == {"tensorflow", "torch",
                                                                                           "jax"}
    f = rows["mp.h5"]["targets"]["formats"]
    assert f["litert"]["reach"] == "stop" and f["litert"]["code"] == "K2T712"
    assert f["torch"]["evidence"] == "predicted" and "parity on torch (not exported)" in f["torch"]["reason"]
