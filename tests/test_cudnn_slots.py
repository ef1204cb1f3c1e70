"""CuDNN layers' optimizer slots follow their weights' layout (issue 47: a CuDNNLSTM file with Adam state stopped
with exit 4, "optimizer slot ... has shape (384,), the Keras 3 variable ... (192,)"). Fixture:
tests/fixtures/longtail/cudnn/cudnn_lstm_adam.h5 (make_longtail_fixtures.py cudnn_adam: tf_keras's own CuDNNLSTM and
CuDNNGRU, compiled with Adam, the optimizer built and its slots set as training leaves them)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import FIXTURES

from k2to3.upgrade.cudnn import convert_slot, convert_weights


def test_slots_take_their_weights_layout_and_the_merged_bias_its_halves_mean():
    rng = np.random.default_rng(0)
    units, n_in = 3, 2
    kernel, recurrent = rng.normal(size=(n_in, 4 * units)), rng.normal(size=(units, 4 * units))
    half = rng.normal(size=4 * units)
    weights, _ = convert_weights("LSTM", [kernel, recurrent, np.concatenate([half, half])])
    # a slot is elementwise state: the kernels move as the weights do
    assert np.array_equal(convert_slot("LSTM", "lstm/kernel:0", kernel, kernel.shape), weights[0])
    assert np.array_equal(convert_slot("LSTM", "lstm/recurrent_kernel:0", recurrent, recurrent.shape), weights[1])
    # the weight sums the two biases; their equal slots are the merged one's
    assert np.allclose(convert_slot("LSTM", "lstm/bias:0", np.concatenate([half, half]), (4 * units,)), half)
    gru_bias = rng.normal(size=6 * units)
    assert convert_slot("GRU", "gru/bias:0", gru_bias, (2, 3 * units)).shape == (2, 3 * units)
    assert convert_slot("LSTM", "lstm/kernel:0", kernel, (5, 5)) is None


@pytest.mark.slow
def test_a_cudnn_file_with_adam_state_converts_with_its_slots(tmp_path):
    out = tmp_path / "m.keras"
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(FIXTURES / "longtail" / "cudnn" /
                                                                       "cudnn_lstm_adam.h5"), "-o", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((tmp_path / "m.keras.report" / "report.json").read_text())
    assert report["verdict"] == "parity" and report["optimizer"]["status"] == "restored", report["optimizer"]
