"""The optimizer state as each backend loaded it is compared with the file's slots through digests
(core.compare.value_digest), bit for bit, without the slots going through a file."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from k2to3.checks.slotstate import state_as_loaded
from k2to3.core.compare import value_digest


def _h5(tmp_path: Path, slots: dict[str, np.ndarray]) -> Path:
    p = tmp_path / "opt.h5"
    with h5py.File(p, "w") as f:
        g = f.create_group("optimizer_weights")
        for n, a in slots.items():
            g.create_dataset(n, data=a)
    return p


def test_digest_is_bit_for_bit_and_ignores_shape() -> None:
    a = np.arange(6, dtype=np.float32)
    assert value_digest(a) == value_digest(a.reshape(2, 3)) == value_digest(a.reshape(3, 2).T.T)
    assert value_digest(a) != value_digest(a.astype(np.float64))
    b = a.copy()
    b[0] = -0.0  # equal as numbers, not as bits: a loaded slot is the file's bytes
    assert value_digest(a) != value_digest(b)
    assert value_digest(np.asfortranarray(np.ones((3, 4), np.float32) * np.arange(4))) == value_digest(
        np.ones((3, 4), np.float32) * np.arange(4))


def test_state_as_loaded_counts_equal_swapped_and_cast_slots(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    m1, m2 = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    it = np.array(7, np.int64)
    h5 = _h5(tmp_path, {"m1": m1, "m2": m2, "iter": it})
    opt = {"slots": {"iter": 0, "m1": 1, "m2": 2}}
    saved: dict[str, str] = {}
    assert state_as_loaded(h5, opt, None, saved) is None and set(saved) == {"iter", "m1", "m2"}
    same = [value_digest(it), value_digest(m1), value_digest(m2)]
    assert state_as_loaded(h5, opt, same, saved) == {"slots": 3, "equal": 3, "differ": []}
    swapped = [same[0], same[2], same[1]]  # two slots of one shape swapped: a misplaced slot
    assert state_as_loaded(h5, opt, swapped, saved) == {"slots": 3, "equal": 1, "differ": ["m1", "m2"]}
    # another dtype holding the same values (an int32 iteration count) is the same slot; a lossy cast is not
    cast = [value_digest(it.astype(np.int32)), value_digest(m1.astype(np.float16)), same[2]]
    assert state_as_loaded(h5, opt, cast, saved) == {"slots": 3, "equal": 2, "differ": ["m1"]}
    assert state_as_loaded(h5, opt, same[:2], saved)["differ"] == ["m2"]  # a variable missing
