"""A keras.Model subclass used as a layer of a functional model (a siamese network's shared tower), whose Keras 2
config is {} and whose __init__ takes no arguments: the generated module gives it a from_config that keeps what
__init__ takes (source/class_adapters.py with_model_configs). Fixture: tests/fixtures/subclass/siamese.h5
(tests/fixtures/make_subclass_fixtures.py; the real cases are the zoo's fashion-siamese-basenetwork and
image-similarity-siamese-resnet).

A subclassed Model whose layers are connected only in call(), saved whole as the root of a SavedModel or a `.keras`
archive (tests/fixtures/subclass/tower_savedmodel, tower.keras; source tests/fixtures/src/tower_subclass.py):
re-saved by the tensorflow worker as the functional model of one layer, itself, and converted like the siamese
tower, with a get_config recording the plain arguments Keras 3 would not (`Tower(num_classes=3)`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES

from k2to3.formats import open_input
from k2to3.pipeline.prepare import prepare
from k2to3.pipeline.sources import read_sources

H5 = FIXTURES / "subclass" / "siamese.h5"
SRC = FIXTURES / "src" / "siamese_subclass.py"


def test_the_tower_gets_a_from_config_for_its_keras2_config(tmp_path):
    prepared = prepare(open_input(H5, tmp_path), read_sources((str(SRC),)), tmp_path / "m.keras", False)
    assert not prepared.plan.errors, [f.message for f in prepared.plan.errors]
    code = prepared.resolution.k3_code
    assert "BaseNetwork = _k2to3_model_config(BaseNetwork)" in code
    namespace: dict = {}
    exec(compile(code.split("K2TO3_OBJECTS")[0], "m_k3.py", "exec"), namespace)
    tower = namespace["BaseNetwork"].from_config({"name": "base_network", "trainable": True, "dtype": "float32"})
    assert tower.name == "base_network"


@pytest.mark.slow
def test_the_siamese_network_converts_at_parity(tmp_path):
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(H5), "--src", str(SRC), "-o",
                        str(tmp_path / "m.keras")], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((tmp_path / "m.keras.report" / "report.json").read_text())
    assert report["verdict"] == "parity" and report["ledger"]["params_restored"] > 0


TOWER_SRC = FIXTURES / "src" / "tower_subclass.py"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tower_savedmodel", "tower.keras"])
def test_a_subclassed_root_converts_as_a_layer_of_its_own_inputs(name, tmp_path):
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(FIXTURES / "subclass" / name), "--src",
                        str(TOWER_SRC), "-o", str(tmp_path / "m.keras")], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((tmp_path / "m.keras.report" / "report.json").read_text())
    assert report["verdict"] == "parity" and report["ledger"]["params_restored"] == 4 * 0 + 16 * 6 + 16 + 3 * 16 + 3
    assert "Tower, a subclassed Model whose layers are connected in call(), re-saved as the functional model of one " \
           "layer" in report["input"]["bridged"]
    assert {b: v["status"] for b, v in report["backends"].items()} == dict.fromkeys(("tensorflow", "torch", "jax"),
                                                                                      "parity")


def test_a_subclassed_root_without_its_source_stops_on_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(FIXTURES / "subclass" / "tower_savedmodel"),
                        "-o", str(tmp_path / "m.keras")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 3 and not (tmp_path / "m.keras").exists()
    assert r.stderr.strip().splitlines()[-1].endswith(
        "custom objects Tower in a SavedModel (pass the source that defines them with --src model.py)"), r.stderr
