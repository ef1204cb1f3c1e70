"""Layers Keras 3 removed whose Keras 2 weights must survive (K2T460-K2T462): the config upgrade (pure data) and
k2to3's portable LocallyConnected1D/2D against tf_keras's own layers over every implementation mode, data
format and padding. End-to-end parity of the fixtures on tensorflow, torch and jax, and plain Keras 3 failing
on them, run in test_convert.py and test_plain_keras3.py (they are in the fixture manifest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import H5, ROOT

from k2to3.formats.artifact import read_artifact
from k2to3.upgrade import upgrade


def _layers(plan) -> dict[str, dict]:
    return {spec["name"]: spec for spec in plan.model["layers"]}


def test_locally_connected_becomes_portable_with_its_layout():
    art = read_artifact(H5 / "removed_locally_connected.h5")
    plan = upgrade(art.model_config)
    assert not plan.errors and plan.needs_portable
    lcs = {n: s for n, s in _layers(plan).items() if n.startswith("lc")}
    assert len(lcs) == 10
    for name, spec in lcs.items():
        assert spec["registered_name"] == f"k2to3>{spec['class_name']}"
        assert spec["config"]["implementation"] == int(name.split("impl")[1][0])
    assert {s["config"]["data_format"] for s in lcs.values()} == {"channels_last", "channels_first"}
    assert sum(f.code == "K2T460" for f in plan.findings) == 10


def test_tfa_layers_map_to_keras3_and_portable():
    art = read_artifact(H5 / "removed_tfa_layers.h5")
    plan = upgrade(art.model_config)
    assert not plan.errors
    layers = _layers(plan)
    assert layers["maxout_channels"]["registered_name"] == "k2to3>Maxout"
    sn = layers["sn_dense"]
    assert sn["class_name"] == "SpectralNormalization" and sn["registered_name"] is None
    assert sn["config"]["power_iterations"] == 2 and sn["config"]["layer"]["class_name"] == "Dense"
    assert {"K2T461", "K2T462"} <= {f.code for f in plan.findings}
    # the file holds tfa's weight names: the inner layer's kernel/bias and the non-trainable sn_u
    assert [e.name.split("/")[-1] for e in art.weights["sn_dense"]] == ["kernel:0", "bias:0", "sn_u:0"]
    for name, n in (("wn_conv", 6), ("wn_dense", 4)):  # data_init=True also saved tfa's clone of the layer
        assert layers[name]["registered_name"] == "k2to3>WeightNormalization"
        assert [e.name.split("/")[-1] for e in art.weights[name]][:4] == ["g:0", "kernel:0", "bias:0",
                                                                           "initialized:0"]
        assert len(art.weights[name]) == n
    assert layers["wn_dense"]["config"]["data_init"] is False and "K2T463" in {f.code for f in plan.findings}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch"])
def test_portable_locally_connected_matches_tf_keras(backend):
    """One subprocess: 40 configurations (rank, implementation, data format, padding, kernel and stride, with and
    without bias); the portable layer takes tf_keras's weights unchanged and agrees to float32 rounding."""
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT / "src"), "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "removed_layers_probe.py")], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["backend"] == backend and len(got["errors"]) == 40
    bad = {k: v for k, v in got["errors"].items() if not v < 1e-5}
    assert not bad, bad
