"""SavedModel directories as tf.keras 2.0-2.4 wrote them: no keras_metadata.pb, the Keras config in saved_model.pb's
object graph (the root's SavedUserObject.metadata), read as data by formats/artifact.py, then loaded by tf_keras and
converted like any Keras SavedModel.

Fixtures: tests/fixtures/make_savedmodel_tf24_fixtures.py (tf_keras saves each model, then its keras_metadata.pb is
moved into saved_model.pb's nodes as TF 2.0-2.4 wrote them); tests/fixtures/src/tf24_gate.py defines `Gate`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, record

from k2to3.core.options import ConvertOptions as Options
from k2to3.errors import InputError, NotPortable
from k2to3.formats import artifact
from k2to3.formats.artifact import read_keras_config
from k2to3.pipeline.convert import convert
from k2to3.stores.audit import run_audit

TF24 = FIXTURES / "savedmodel_tf24"
GATE_SRC = FIXTURES / "src" / "tf24_gate.py"
NOT_KERAS = "a SavedModel without keras_metadata.pb (written by tf.saved_model.save, not Keras"


def test_config_read_from_the_object_graph():
    for name, cls, layers in (("rnn", "Sequential", ["InputLayer", "SimpleRNN", "Dense"]),
                              ("gate", "Functional", ["InputLayer", "Conv2D", "Flatten", "Dense", "Dense", "Dense",
                                                      "Gate"])):
        assert not (TF24 / name / "keras_metadata.pb").exists()
        config, version, fmt = read_keras_config(TF24 / name)
        assert (config["class_name"], fmt) == (cls, "SavedModel") and version
        assert [x["class_name"] for x in config["config"]["layers"]] == layers


def test_tf_saved_model_save_still_stops_with_its_line():
    with pytest.raises(NotPortable, match=r"not Keras; its root object is a _generic_user_object\): it has no "
                                          "layers to rebuild") as exc:
        read_keras_config(TF24 / "plain")
    assert NOT_KERAS in exc.value.line()
    with pytest.raises(NotPortable, match=r"not Keras' model.save; its root object, a _tf_keras_sequential, "
                                          "carries no config"):
        read_keras_config(TF24 / "keras_tf_save")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _msg(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _saved_model(user_object: bytes) -> bytes:
    """SavedModel.meta_graphs[0].object_graph_def.nodes[0].user_object = `user_object`."""
    return _msg(2, _msg(7, _msg(1, _msg(4, user_object))))


def _dir(tmp_path: Path, pb: bytes) -> Path:
    d = tmp_path / "sm"
    (d / "variables").mkdir(parents=True)
    (d / "saved_model.pb").write_bytes(pb)
    return d


def test_hand_written_object_graph_reads(tmp_path):
    config = {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "Dense", "config": {"name": "d", "units": 2, "batch_input_shape": [None, 3]}}]}}
    meta = json.dumps({"class_name": "Sequential", "model_config": config, "keras_version": "2.3.0"}).encode()
    d = _dir(tmp_path, _msg(1, b"") + _saved_model(_msg(1, b"_tf_keras_sequential") + _msg(3, meta)))
    got, version, _ = read_keras_config(d)
    assert got == config and version == "2.3.0"


@pytest.mark.parametrize("case,pb", [
    ("truncated", _saved_model(_msg(1, b"_tf_keras_sequential") + _msg(3, b"{}"))[:-5]),
    ("length past the end", _varint(2 << 3 | 2) + _varint(1 << 40) + b"x"),
    ("metadata a varint", _saved_model(_msg(1, b"_tf_keras_model") + _varint(3 << 3) + _varint(1 << 40))),
    ("not JSON", _saved_model(_msg(1, b"_tf_keras_model") + _msg(3, b"\xff{"))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_hostile_object_graph_is_one_clean_error(tmp_path, case, pb):
    with pytest.raises(InputError, match="unreadable Keras savedmodel"):
        read_keras_config(_dir(tmp_path, pb))


def test_oversized_saved_model_pb_refused_before_read(tmp_path, monkeypatch):
    monkeypatch.setattr(artifact, "MAX_SAVED_MODEL_BYTES", 1000)
    with pytest.raises(InputError, match="over the 1000-byte limit"):
        read_keras_config(TF24 / "rnn")


def test_saved_model_pb_symlink_outside_refused(tmp_path):
    d = tmp_path / "sm"
    (d / "variables").mkdir(parents=True)
    (d / "saved_model.pb").symlink_to((TF24 / "rnn" / "saved_model.pb").resolve())
    with pytest.raises(InputError, match="outside the SavedModel"):
        read_keras_config(d)


def test_audit_classifies_them_as_convert_does(tmp_path):
    store = tmp_path / "store"
    for name in ("rnn", "gate", "plain"):
        shutil.copytree(TF24 / name, store / name)
    shutil.copy(GATE_SRC, store / "tf24_gate.py")
    rows = {Path(a["path"]).name: a for a in run_audit([store], tmp_path / "out")["artifacts"]}
    assert (rows["rnn"]["kind"], rows["rnn"]["verdict"]) == ("savedmodel", "portable")
    assert rows["gate"]["verdict"] == "portable with source"
    assert rows["plain"]["verdict"] == "blocked" and NOT_KERAS in rows["plain"]["reason"]


def _inputs(name: str, tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    with np.load(TF24 / f"{name}.expected.npz") as z:
        path = tmp_path / "inputs.npz"
        np.savez(path, in0=z["in0"])
        return path, [z["out0"]]


@pytest.mark.slow
@pytest.mark.parametrize("name,src", [("rnn", None), ("gate", GATE_SRC)])
def test_converts_at_parity_on_every_backend(name, src, pool, tmp_path):
    inputs, _ = _inputs(name, tmp_path)
    report = convert(Options(src=TF24 / name, output=tmp_path / "model.keras", inputs=inputs,
                             sources=(str(src),) if src else ()), pool=pool)
    record(f"savedmodel_tf24:{name}", report)
    assert report["verdict"] == "parity", json.dumps(report["backends"], indent=1)[:3000]
    assert report["input"]["format"] == "SavedModel" and "re-saved as HDF5" in report["input"]["bridged"]
    assert report["ledger"]["tensors_restored"] == report["ledger"]["tensors_expected"] > 0
    for b in ("tensorflow", "torch", "jax"):
        assert report["backends"][b]["status"] == "parity"


@pytest.mark.slow
def test_live_outputs_and_the_custom_object_stop(pool, tmp_path):
    """The converted model computes what the model computed before it was saved (outputs the fixture script kept),
    and a custom layer without --src stops with the archive's line, before any worker starts."""
    inputs, live = _inputs("rnn", tmp_path)
    out = tmp_path / "rnn.keras"
    convert(Options(src=TF24 / "rnn", output=out, inputs=inputs), pool=pool)
    code = ("import sys, numpy as np, keras\n"
            "m = keras.saving.load_model(sys.argv[1], safe_mode=True)\n"
            "np.save(sys.argv[3], m.predict(np.load(sys.argv[2])['in0'], verbose=0))\n")
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", code, str(out), str(inputs), str(tmp_path / "got.npy")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "got.npy"), live[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(NotPortable, match=r"custom objects Gate in a SavedModel"):
        convert(Options(src=TF24 / "gate", output=tmp_path / "gate.keras"), pool=pool)


@pytest.mark.slow
def test_audit_verify_converts_it(tmp_path):
    store = tmp_path / "store"
    shutil.copytree(TF24 / "rnn", store / "rnn")
    row = run_audit([store], tmp_path / "out", verify=True)["artifacts"][0]
    assert row["verdict"] == "portable" and row["verify"]["converted"], row["verify"]
