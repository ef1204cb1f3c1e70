"""The per-step array file (core/arrayfile.py): what is written is read back bit for bit, as read-only views, and a
file that is not one, or whose header points outside it, is refused before anything is mapped."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from k2to3.core import arrayfile

DTYPES = st.sampled_from([np.float32, np.float64, np.float16, np.int64, np.int8, np.bool_, np.uint16])


@settings(max_examples=60, deadline=None)
@given(st.lists(DTYPES.flatmap(lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                                         max_side=5))), max_size=6))
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, arrays: list[np.ndarray]) -> None:
    p = tmp_path_factory.mktemp("af") / "x.arrays"
    arrayfile.write(p, arrays)
    got = arrayfile.read(p)
    assert len(got) == len(arrays)
    for a, b in zip(arrays, got):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()  # bit for bit, NaN payloads and -0.0 included


def test_views_are_read_only_and_non_contiguous_input_is_written_in_c_order(tmp_path: Path) -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    arrayfile.write(tmp_path / "x.arrays", [a.T, a[:, ::2]])
    t, s = arrayfile.read(tmp_path / "x.arrays")
    assert np.array_equal(t, a.T) and np.array_equal(s, a[:, ::2])
    with pytest.raises(ValueError):
        t[0, 0] = 1


def _header(tmp_path: Path, spec: bytes, data: bytes = b"") -> Path:
    p = tmp_path / "bad.arrays"
    p.write_bytes(arrayfile.MAGIC + struct.pack("<Q", len(spec)) + spec + data)
    return p


@pytest.mark.parametrize("spec, why", [
    (b'{"arrays": [{"dtype": "<f4", "shape": [1000000]}]}', "end at byte"),  # sizes beyond the file
    (b'{"arrays": [{"dtype": "|O", "shape": [1]}]}', "dtype object"),
    (b'{"arrays": [{"dtype": "<f4", "shape": [-4]}]}', "shape"),
    (b'{"arrays": [{"shape": [1]}]}', "unreadable header"),
    (b"not json", "unreadable header"),
])
def test_bad_headers_are_refused(tmp_path: Path, spec: bytes, why: str) -> None:
    with pytest.raises(arrayfile.ArrayFileError, match=why):
        arrayfile.read(_header(tmp_path, spec, b"\0" * 256))


def test_not_an_array_file_and_a_header_longer_than_the_file(tmp_path: Path) -> None:
    np.savez(tmp_path / "z.npz", a=np.ones(3))
    with pytest.raises(arrayfile.ArrayFileError, match="not an array file"):
        arrayfile.read(tmp_path / "z.npz")
    p = tmp_path / "long.arrays"
    p.write_bytes(arrayfile.MAGIC + struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(arrayfile.ArrayFileError, match="header of"):
        arrayfile.read(p)
    with pytest.raises(arrayfile.ArrayFileError, match="not numeric"):
        arrayfile.write(tmp_path / "o.arrays", [np.array(["a"])])
