"""`k2to3 verify` on .keras files that already exist, golden files (convert --save-golden) and their checks."""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import FIXTURES, H5
from test_cli import k2to3, one_error_line

from k2to3.checks.golden_file import golden_path, read_golden
from k2to3.core.options import ConvertOptions as Options
from k2to3.core.options import VerifyOptions
from k2to3.errors import InputError
from k2to3.pipeline.convert import convert
from k2to3.pipeline.verify import verify

NAIVE = FIXTURES / "verify"  # written by tests/fixtures/make_verify_fixtures.py (plain Keras 3, no k2to3)


def perturb(src: Path, dst: Path) -> None:
    """Copy a .keras with one weight changed by 1e-3 (h5py on the archive's model.weights.h5; no Keras)."""
    with zipfile.ZipFile(src) as zin:
        members = {i.filename: zin.read(i) for i in zin.infolist()}
    buf = io.BytesIO(members["model.weights.h5"])
    with h5py.File(buf, "r+") as f:
        dsets: list[h5py.Dataset] = []
        f.visititems(lambda _, o: dsets.append(o) if isinstance(o, h5py.Dataset) and o.size else None)
        d = dsets[0]
        d[...] = d[...] + np.float32(1e-3)
    members["model.weights.h5"] = buf.getvalue()
    with zipfile.ZipFile(dst, "w") as zout:
        for name, data in members.items():
            zout.writestr(name, data)


@pytest.fixture(scope="module")
def converted(pool, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """plain_cnn and fm19 converted by k2to3 with --save-golden: (the .keras, the convert report)."""
    d = tmp_path_factory.mktemp("verify")
    out = {}
    for h5 in (NAIVE / "plain_cnn.h5", H5 / "fm19_hard_sigmoid_dense.h5"):
        keras = d / f"{h5.stem}.keras"
        out[h5.stem] = (keras, convert(Options(src=h5, output=keras, save_golden=True), pool=pool))
    return out


def verdicts(report: dict) -> dict[str, str]:
    return {b: v["status"] for b, v in report["backends"].items()}


@pytest.mark.slow
def test_naive_keras3_file_gets_the_verdict_convert_gives(pool, converted):
    """A .keras from the naive Keras 3 recipe: where the recipe is right (plain_cnn) verify says parity as convert does;
    where it is wrong (fm19: Keras 3's hard_sigmoid has another slope) verify catches it and names the layer."""
    _, conv = converted["plain_cnn"]
    assert conv["verdict"] == "parity"
    rep = verify(VerifyOptions(model=NAIVE / "plain_cnn.naive.keras", reference=NAIVE / "plain_cnn.h5"), pool=pool)
    assert (rep["verdict"], rep["exit_code"], verdicts(rep)) == (conv["verdict"], 0, verdicts(conv))
    assert rep["reference"]["kind"] == "keras2-tf_keras" and rep["command"] == "verify"
    assert rep["backends"]["torch"]["params_trainable"] == conv["backends"]["torch"]["params_trainable"]

    rep = verify(VerifyOptions(model=NAIVE / "fm19_hard_sigmoid_dense.naive.keras",
                               reference=H5 / "fm19_hard_sigmoid_dense.h5"), pool=pool)
    assert rep["verdict"] == "mismatch" and rep["exit_code"] == 1
    for v in rep["backends"].values():
        assert v["status"] == "mismatch" and v["outputs"][0]["max_abs"] > 1e-3
        assert v["first_divergent_layer"]["layer"] == "dense"
        assert v["noise"]["verdict"] == "beyond_float32_noise"
    # the file k2to3 wrote for the same model verifies as convert said
    keras19, conv19 = converted["fm19_hard_sigmoid_dense"]
    rep = verify(VerifyOptions(model=keras19, reference=H5 / "fm19_hard_sigmoid_dense.h5"), pool=pool)
    assert (rep["verdict"], verdicts(rep)) == (conv19["verdict"], verdicts(conv19)) == ("parity", verdicts(rep))


@pytest.mark.slow
def test_golden_file_passes_the_original_and_catches_a_perturbed_weight(pool, converted, tmp_path):
    keras, conv = converted["plain_cnn"]
    g = read_golden(golden_path(keras))
    assert conv["golden"]["path"] == str(golden_path(keras)) and g.meta["weight_hash"] == conv["build"]["weight_hash"]
    assert (g.rtol, g.atol) == (conv["tolerance"]["rtol"], conv["tolerance"]["atol"])
    assert set(g.meta["versions"]) == {"tensorflow", "torch", "jax"}
    rep = verify(VerifyOptions(model=keras, golden=golden_path(keras)), pool=pool)
    assert rep["verdict"] == "parity" and rep["exit_code"] == 0, rep["backends"]
    assert rep["reference"]["kind"] == "golden-npz"
    for v in rep["backends"].values():  # the same arrays as convert's reference: bit-for-bit on tensorflow
        assert v["weight_hash_matches_build"]

    bad = tmp_path / "perturbed.keras"
    perturb(keras, bad)
    r = k2to3("verify", str(bad), "--golden", str(golden_path(keras)), "--report-dir", str(tmp_path / "rep"),
              "--json")
    assert r.returncode == 1, r.stderr[-2000:]
    rep = json.loads(r.stdout)
    assert rep["verdict"] == "mismatch"
    for v in rep["backends"].values():
        assert v["status"] == "mismatch" and not v["weight_hash_matches_build"]
        assert v["noise"]["verdict"] == "unavailable"
    assert (tmp_path / "rep" / "report.md").exists()


def _npz(path: Path, **arrays) -> Path:
    meta = {"schema": "k2to3.golden/1", "rtol": 1e-5, "atol": 1e-6}
    np.savez(path, **{"meta": np.array(json.dumps(meta)), **arrays})
    return path


@pytest.mark.parametrize(("make", "words"), [
    (lambda p: p.write_bytes(b"not a zip"), "not an .npz"),
    (lambda p: _npz(p, in0=np.array([object()], dtype=object), out0=np.zeros(1)), "dtype object"),
    (lambda p: _npz(p, in0=np.zeros((2, 3)), evil=np.zeros(1), out0=np.zeros(2)), "unexpected entry 'evil.npy'"),
    (lambda p: _npz(p, in0=np.zeros((2, 3))), "out0..N entries missing"),
    (lambda p: _npz(p, in0=np.zeros((2, 3)), out0=np.zeros((3, 1))), "batch size"),
    (lambda p: np.savez(p, meta=np.array("{}"), in0=np.zeros(2), out0=np.zeros(2)), "schema"),
])
def test_golden_file_is_untrusted_input(tmp_path, make, words):
    p = tmp_path / "g.golden.npz"
    make(p)
    with pytest.raises(InputError, match="not a usable k2to3 golden file") as exc:
        read_golden(p)
    assert words in str(exc.value) and "\n" not in exc.value.line()


def test_golden_declared_shape_is_checked_before_allocating(tmp_path):
    """An entry whose .npy header declares 10^10 float32 elements but holds none is refused from the header."""
    p = _npz(tmp_path / "g.npz", out0=np.zeros((2, 1), np.float32))
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False, "shape": (100000, 100000)})
    with zipfile.ZipFile(p, "a") as z:
        z.writestr("in0.npy", head.getvalue())
    with pytest.raises(InputError, match="does not fit the file or the size cap"):
        read_golden(p)


@pytest.mark.parametrize(("kw", "words"), [
    ({"model": "nope.keras", "reference": "x.h5"}, "nope.keras: no such file"),
    ({"model": "{h5}", "reference": "{h5}"}, "not a Keras 3 .keras archive"),
    ({"model": "{keras}"}, "verify needs a reference for"),  # no report beside it (tests/test_after_convert.py)
    ({"model": "{keras}", "reference": "{h5}", "golden": "g.npz"}, "exactly one of --reference"),
    ({"model": "{keras}", "reference": "{keras}"}, "not an HDF5 file"),
    ({"model": "{keras}", "golden": "missing.golden.npz"}, "missing.golden.npz: no such file"),
    ({"model": "{keras}", "golden": "{keras}", "grads": True}, "--grads with --golden"),
    ({"model": "{keras}", "golden": "{keras}", "fit_steps": 2}, "--fit-steps with --golden"),
    ({"model": "{keras}", "reference": "{h5}", "targets": "{h5}"}, "--targets applies to --fit-steps only"),
    ({"model": "{keras}", "reference": "{h5}", "fit_steps": 1, "targets": "no.npz"}, "--targets no.npz: no such"),
])
def test_verify_usage_errors(tmp_path, kw, words):
    keras = tmp_path / "m.keras"
    shutil.copy(NAIVE / "plain_cnn.naive.keras", keras)
    h5 = str(NAIVE / "plain_cnn.h5")
    opts = {k: Path(v.format(h5=h5, keras=keras)) if isinstance(v, str) else v for k, v in kw.items()}
    with pytest.raises(InputError, match=re.escape(words)) as exc:
        verify(VerifyOptions(**opts))
    assert exc.value.code == 2 and "\n" not in exc.value.line()
    assert keras.read_bytes() == (NAIVE / "plain_cnn.naive.keras").read_bytes()


def test_verify_cli_usage_error_is_one_line(tmp_path):
    r = k2to3("verify", str(tmp_path / "nope.keras"), "--reference", str(NAIVE / "plain_cnn.h5"))
    assert r.returncode == 2 and "nope.keras: no such file" in one_error_line(r)
