"""Reading legacy artifacts with h5py only."""

from __future__ import annotations

import pytest
from conftest import BAD, H5

from k2to3.errors import Exit, K2to3Error
from k2to3.formats.artifact import read_artifact, sniff


def test_reads_config_weights_and_training_config():
    a = read_artifact(H5 / "fm02_training_config.h5")
    assert a.keras_version and a.keras_version.startswith("2.")
    assert a.model_config["class_name"] in ("Sequential", "Functional")
    assert a.training_config and "optimizer_config" in a.training_config
    assert a.n_tensors == 4 and a.n_params == 4 * 8 + 8 + 8 + 1
    assert a.optimizer_weight_count > 0


@pytest.mark.parametrize(
    ("name", "code", "words"),
    [
        ("not_h5.h5", Exit.USAGE, "not an HDF5 file"),
        ("truncated.h5", Exit.USAGE, "truncated or corrupt"),
        ("weights_only.h5", Exit.NOT_PORTABLE, "weights-only"),
    ],
)
def test_bad_files_give_one_clear_line(name, code, words):
    with pytest.raises(K2to3Error) as exc:
        read_artifact(BAD / name)
    assert exc.value.code == code
    assert words in exc.value.line() and "\n" not in exc.value.line()


def test_sniff_by_content_not_extension(tmp_path):
    p = tmp_path / "model.keras"
    p.write_bytes((H5 / "fm02_training_config.h5").read_bytes())
    assert sniff(p) == "hdf5"
