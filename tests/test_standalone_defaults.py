"""Standalone Keras 2.0-2.3's GRU default (reset_after=False) written into the --src texts of a file those releases
saved (source/standalone_defaults.py): every line number kept, calls that say reset_after or pass **kwargs left
alone, tf.keras and Keras 2.4+ files untouched. The conversion of such a build at parity is in
test_repo_builders.py (standalone_gru)."""

from __future__ import annotations

import pytest

from k2to3.source.standalone_defaults import standalone_before_tf2, with_old_defaults

SOURCE = """x = L.GRU(128, return_sequences=True)(y)
z = GRU(4,)
q = GRU(
  3,
  # units, see above
)
r = GRU(2, reset_after=True)
s = GRU(2, **cfg)
t = GRUCell()
u = GRU(f(1, 2))
v = CuDNNGRU(8)
"""


def test_old_default_written_where_the_call_leaves_it_out():
    out, lines = with_old_defaults(SOURCE)
    assert out.splitlines() == [
        "x = L.GRU(128, return_sequences=True, reset_after=False)(y)",
        "z = GRU(4, reset_after=False)",
        "q = GRU(", "  3,", "  # units, see above", " reset_after=False)",
        "r = GRU(2, reset_after=True)",
        "s = GRU(2, **cfg)",
        "t = GRUCell(reset_after=False)",
        "u = GRU(f(1, 2), reset_after=False)",
        "v = CuDNNGRU(8)",
    ]
    assert lines == [1, 2, 6, 9, 10]
    assert len(out.splitlines()) == len(SOURCE.splitlines())  # every line number stays


def test_text_without_a_gru_is_returned_as_is():
    text = "from keras.layers import LSTM\nm = LSTM(3)\n"
    assert with_old_defaults(text) == (text, [])


@pytest.mark.parametrize("version,old", [("2.1.6", True), ("2.3.1", True), ("2.0.8", True), ("2.2.4-tf", False),
                                         ("2.4.0", False), ("2.13.1", False), ("1.2.2", False), (None, False)])
def test_which_files_standalone_keras_wrote(version, old):
    assert standalone_before_tf2(version) is old
