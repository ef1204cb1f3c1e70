"""The verification input and what it can prove: free dimensions sized from what the model needs (an audio CNN over
(None, 40, None, 1) with six stride-2 poolings shrinks 32 columns to nothing, and both sides return NaN), and NaN
against NaN is never parity (issue 47: two real audio CNNs reported parity on NaN, then torch raised)."""

from __future__ import annotations

import numpy as np
import pytest

from k2to3.core.compare import compare_arrays
from k2to3.core.inputs import FREE_DIM, free_sizes, make_inputs


def _audio_cnn(n_pool: int) -> dict:
    inp = {"name": "x", "orig_name": "x", "class_name": "InputLayer", "inbound_nodes": [],
           "config": {"batch_shape": [None, 40, None, 1], "dtype": "float32"}}
    layers = [inp]
    for i in range(n_pool):
        layers.append({"name": f"c{i}", "class_name": "Conv2D", "inbound_nodes": [],
                       "config": {"kernel_size": [3, 3], "strides": [1, 1]}})
        layers.append({"name": f"p{i}", "class_name": "MaxPooling2D", "inbound_nodes": [],
                       "config": {"pool_size": [2, 2], "strides": None}})
    return {"kind": "functional", "layers": layers, "inputs": [["x", 0, 0]]}


def test_free_dimensions_follow_the_models_downsampling():
    sizes = free_sizes(_audio_cnn(6), [None, 40, None, 1])
    assert sizes[2][0] == 128 and "6 strided layer(s) shrink it 64x" in sizes[2][1]
    assert free_sizes(_audio_cnn(1), [None, 40, None, 1])[2][0] == FREE_DIM  # 2x: the default suffices
    rnn = {"kind": "functional", "layers": [{"name": "l", "class_name": "LSTM", "config": {}, "inbound_nodes": []}]}
    assert free_sizes(rnn, [None, None, 8]) == {1: (FREE_DIM, "")}
    x = make_inputs(_audio_cnn(6))[0]
    assert x.shape == (2, 40, 128, 1)


def test_nan_against_nan_is_not_parity():
    ref = np.array([[np.nan, 1.0], [np.nan, 2.0]], "float32")
    stats = compare_arrays(ref.copy(), ref, 1e-5, 1e-6)
    assert not stats.allclose and "NaN at 2 of 4 elements" in stats.note
    weights = compare_arrays(ref.copy(), ref, 1e-5, 1e-6, output=False)  # a weight restored as stored: equal
    assert weights.allclose


@pytest.mark.slow
def test_an_audio_cnn_with_a_free_width_converts_at_parity(tmp_path):
    """A model as the two real audio CNNs of issue 47 are: (None, 40, None, 1) through six stride-2 poolings. With
    32 columns both sides returned NaN (then torch raised); the width is now chosen from the poolings."""
    import json
    import os
    import subprocess
    import sys

    h5 = tmp_path / "audio.h5"
    script = ("import os\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\nimport tensorflow as tf\nk = tf.keras\n"
              "tf.keras.utils.set_random_seed(3)\nx = k.Input((40, None, 1))\nh = x\n"
              "for i in range(6):\n    h = k.layers.Conv2D(4, 3, padding='same', activation='relu')(h)\n"
              "    h = k.layers.MaxPooling2D(2, padding='same')(h)\n"
              "h = k.layers.GlobalAveragePooling2D()(h)\n"
              f"k.Model(x, k.layers.Dense(3)(h)).save({str(h5)!r})\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert r.returncode == 0, r.stderr[-2000:]
    out = tmp_path / "audio.keras"
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(h5), "-o", str(out)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((tmp_path / "audio.keras.report" / "report.json").read_text())
    assert report["verdict"] == "parity" and report["inputs"][0]["shape"] == [2, 40, 128, 1]
    assert report["inputs"][0]["free_dims"]["2"]["size"] == 128
    assert all(o["note"] is None for v in report["backends"].values() for o in v["outputs"])
