"""A tf.keras `.keras` archive whose weights tf_keras's own loader cannot place (tf.keras 2.13/2.14 keyed a functional
model's weights by the layers' creation names: bench/zoo style-transfer-keras213, a decoder whose layers were renamed
after they were made) is read as data (formats/keras_archive.py, workers/archive_bridge.py archive_as_data)."""

from __future__ import annotations

import pytest

from k2to3.errors import NotPortable
from k2to3.formats.keras_archive import layer_keys, snake_case


def test_snake_case_is_keras_automatic_name_prefix():
    assert [snake_case(c) for c in ("ReLU", "UpSampling2D", "DepthwiseConv2D", "InputLayer", "Conv2D", "Dense")] == \
        ["re_lu", "up_sampling2d", "depthwise_conv2d", "input_layer", "conv2d", "dense"]


def test_layers_take_their_class_keys_in_creation_order():
    keys = ["conv2d", "conv2d_10", "conv2d_2", "input_layer", "re_lu", "re_lu_1"]
    layers = [("input_2", "InputLayer"), ("block_1", "Conv2D"), ("relu_1", "ReLU"), ("block_2", "Conv2D"),
              ("relu_2", "ReLU"), ("head", "Conv2D")]
    assert layer_keys(keys, layers) == {"input_2": "input_layer", "block_1": "conv2d", "block_2": "conv2d_2",
                                        "head": "conv2d_10", "relu_1": "re_lu", "relu_2": "re_lu_1"}
    assert layer_keys(["a", "b"], [("a", "Dense"), ("b", "Dense")]) == {"a": "a", "b": "b"}  # by name when it can


def test_counts_that_do_not_agree_stop_with_one_line():
    with pytest.raises(NotPortable, match="name 1 Conv2D layer"):
        layer_keys(["conv2d"], [("a", "Conv2D"), ("b", "Conv2D")])


@pytest.mark.slow
def test_a_renamed_layers_archive_converts(tmp_path):
    """A tf_keras model whose layers were renamed after creation, saved as a .keras archive with its weights re-keyed
    the way tf.keras 2.13 wrote them (_layer_checkpoint_dependencies/<creation name>/vars)."""
    import json
    import os
    import subprocess
    import sys
    import zipfile

    script = f"""
import os, io, zipfile, h5py
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
tf.keras.utils.set_random_seed(0)
x = tf.keras.Input((8, 8, 3))
layers = [tf.keras.layers.Conv2D(4, 3, padding="same"), tf.keras.layers.ReLU(), tf.keras.layers.Conv2D(4, 1)]
h = x
for i, lay in enumerate(layers):
    lay._name = f"block_{{i}}"
    h = lay(h)
model = tf.keras.Model(x, h)
model.save({str(tmp_path / 'k214.keras')!r})
with zipfile.ZipFile({str(tmp_path / 'k214.keras')!r}) as z:
    members = {{n: z.read(n) for n in z.namelist()}}
src = h5py.File(io.BytesIO(members["model.weights.h5"]), "r")
buf = io.BytesIO()
with h5py.File(buf, "w") as dst:
    g = dst.create_group("_layer_checkpoint_dependencies")
    created = {{"block_0": "conv2d", "block_1": "re_lu", "block_2": "conv2d_1", "input_1": "input_layer"}}
    for name in src["layers"]:
        src.copy(src["layers"][name], g, name=created.get(name, name))
    dst.create_group("vars")
members["model.weights.h5"] = buf.getvalue()
with zipfile.ZipFile({str(tmp_path / 'k214.keras')!r}, "w") as z:
    for n, b in members.items():
        z.writestr(n, b)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    with zipfile.ZipFile(tmp_path / "k214.keras") as z:
        import io

        import h5py

        with h5py.File(io.BytesIO(z.read("model.weights.h5")), "r") as f:
            assert sorted(f["_layer_checkpoint_dependencies"]) == ["conv2d", "conv2d_1", "input_layer", "re_lu"]
    out = tmp_path / "m.keras"
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(tmp_path / "k214.keras"), "-o", str(out)],
                       capture_output=True, text=True, timeout=900, env={**os.environ})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((tmp_path / "m.keras.report" / "report.json").read_text())
    assert report["verdict"] == "parity" and "read as data" in report["input"]["bridged"]
