"""Hostile files (docs/security.md): refused with one line and exit 2 before any backend worker starts; nothing
outside the artifact is read (the secret's bytes never reach an output); NaN/Inf weights convert and are reported."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from conftest import CORPUS, FIXTURES
from test_cli import k2to3, one_error_line

sys.path.insert(0, str(FIXTURES))
import make_hostile_fixtures as hostile

WHY = {
    "external_link": "external link", "external_storage": "external storage", "virtual_dataset": "virtual dataset",
    "soft_link": "soft link", "shape_bomb": "byte cap", "small_bomb": "but stores 0",
    "compressed_bomb": "but stores 0", "string_weights": "non-numeric",
    "wrong_shape": "kernel:0 declares shape (3, 5), but the layer's config implies",
    "config_not_object": "not an object", "config_no_layers": "layers is missing",
    "config_no_config": "config is missing", "config_no_class_name": "class_name is missing",
    "dangling_inbound": "'no_such_layer', which is not a layer", "graph_cycle": "cycle",
    "duplicate_names": "duplicate layer name 'dense'", "zip_bomb": "zip bomb", "zip_traversal": "parent-directory",
}
REFUSED = {**hostile.H5_CASES, **hostile.ZIP_CASES}


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _no_secret(*texts: str | bytes) -> None:
    for t in texts:
        b = t if isinstance(t, bytes) else t.encode()
        assert hostile.SECRET not in b and hostile.SECRET[:13] not in b


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_convert_refuses_with_one_line(case, tmp_path):
    src = REFUSED[case](tmp_path)
    before = _sha(src)
    out = tmp_path / "out" / "m.keras"
    out.parent.mkdir()
    r = k2to3("convert", str(src), "-o", str(out), "--report-dir", str(tmp_path / "out"))
    line = one_error_line(r)
    assert r.returncode == 2, r.stderr
    assert WHY[case] in line and str(src) in line
    assert "worker" not in r.stderr.lower()  # refused before any backend started
    assert not out.exists() and not list(out.parent.glob("*.keras*"))
    assert _sha(src) == before
    _no_secret(r.stdout, r.stderr, *(p.read_bytes() for p in out.parent.iterdir()))


def test_library_refuses_before_reading(tmp_path):
    """The same checks through the API: read_artifact/read_keras_config and the golden's gate (check_file)."""
    from k2to3.core.h5safe import check_file
    from k2to3.errors import InputError
    from k2to3.formats.artifact import read_artifact, read_keras_config

    for case, make in REFUSED.items():
        p = make(tmp_path)
        with pytest.raises(InputError, match=WHY[case].replace("(", r"\(").replace(")", r"\)")) as exc:
            read_keras_config(p) if p.suffix == ".keras" else read_artifact(p)
        assert "\n" not in exc.value.line()
        if case in ("external_link", "external_storage", "virtual_dataset", "soft_link", "shape_bomb"):
            with pytest.raises(InputError):
                check_file(p)


def test_a_file_changed_after_its_check_is_checked_again(tmp_path):
    """A file that passed is not walked again while unchanged (the same run opens it in several places), and one
    written afterwards is, even with its modification time put back: an external link added in place is refused."""
    import os
    import shutil

    import h5py

    from k2to3.core import h5safe
    from k2to3.errors import InputError

    p = tmp_path / "m.h5"
    shutil.copy(hostile.BASE, p)
    h5safe.check_file(p)
    walks = []
    real = h5safe.check_open
    h5safe.check_open = lambda *a: (walks.append(a[0]), real(*a))[1]
    try:
        h5safe.check_file(p)
        assert walks == []  # unchanged: not walked again
        st = os.stat(p)
        with h5py.File(p, "a") as f:
            f["model_weights/elsewhere"] = h5py.ExternalLink("/etc/hostname", "/")
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        with pytest.raises(InputError, match="external link"):
            h5safe.check_file(p)
        assert walks == [p]
    finally:
        h5safe.check_open = real


def test_tensor_cap_is_configurable(tmp_path):
    """K2TO3_MAX_TENSOR_BYTES lowers (or raises) the per-tensor cap; the real fixture passes at the default."""
    r = k2to3("audit", str(hostile.BASE), "-o", str(tmp_path / "a"), "--format", "json")
    assert r.returncode != 2 and "byte cap" not in r.stdout + r.stderr
    import os
    import subprocess

    env = {**os.environ, "K2TO3_MAX_TENSOR_BYTES": "16"}
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(hostile.BASE), "-o", str(tmp_path / "m.keras")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "over the 16-byte cap (K2TO3_MAX_TENSOR_BYTES)" in one_error_line(r)
    assert not (tmp_path / "m.keras").exists()


def test_savedmodel_symlink_outside_refused(tmp_path):
    from k2to3.errors import InputError
    from k2to3.formats.artifact import read_keras_config

    sm = tmp_path / "sm"
    (sm / "variables").mkdir(parents=True)
    (sm / "saved_model.pb").write_bytes(b"")
    (sm / "keras_metadata.pb").symlink_to(hostile.secret_file(tmp_path))
    with pytest.raises(InputError, match="outside the SavedModel"):
        read_keras_config(sm)


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    for make in (*REFUSED.values(), *hostile.NONFINITE_CASES.values()):
        make(d)
    for p in d.glob("secret*"):  # keep the secrets outside the audited directory
        p.rename(d.parent / p.name) if not (d.parent / p.name).exists() else p.unlink()
    return d


def _audit(d: Path, out: Path, *extra: str) -> tuple[object, dict]:
    out.mkdir()
    r = k2to3("audit", str(d), "-o", str(out), "--format", "json", *extra)
    assert "Traceback" not in r.stderr and r.returncode != 4, r.stderr
    return r, json.loads((out / "audit.json").read_text())


def test_audit_names_each_hostile_artifact(hostile_dir, tmp_path):
    r, rep = _audit(hostile_dir, tmp_path / "a")
    rows = {Path(a["path"]).stem: a for a in rep["artifacts"]}
    for case in REFUSED:
        assert rows[case]["verdict"] == "blocked" and WHY[case] in rows[case]["reason"], rows[case]
    _no_secret(r.stdout, r.stderr, (tmp_path / "a" / "audit.json").read_bytes())


def test_audit_verify_over_all_cases(hostile_dir, tmp_path):
    """The one backend run of this file: hostile cases stay blocked, NaN/Inf weights verify and are reported."""
    r, rep = _audit(hostile_dir, tmp_path / "v", "--verify")
    rows = {Path(a["path"]).stem: a for a in rep["artifacts"]}
    for case in REFUSED:
        assert rows[case]["verdict"] == "blocked", rows[case]
    _no_secret(r.stdout, r.stderr, *(p.read_bytes() for p in (tmp_path / "v").rglob("*") if p.is_file()))
    for case in hostile.NONFINITE_CASES:
        assert rows[case]["verdict"] == "portable", rows[case]
        assert "verify" in rows[case], rows[case]


def test_nonfinite_weights_convert_and_are_reported(tmp_path):
    src = hostile.nan_weights(tmp_path)
    r = k2to3("convert", str(src), "-o", str(tmp_path / "m.keras"), "--report-dir", str(tmp_path))
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ledger"]["nonfinite"] == ["/" + hostile.KERNEL]
    # shown on the console and in report.md too, not only in report.json
    line = f"1 weight tensor(s) hold NaN or Inf, restored as stored: /{hostile.KERNEL}"
    assert line in " ".join(r.stdout.split()), r.stdout
    assert line in (tmp_path / "report.md").read_text()


def test_declared_shapes_match_the_config_on_every_real_file():
    """The config-implied shape check refuses none of the real and fixture files (and checks most weights)."""
    from k2to3.core.weight_shapes import _top_layers, expected_shapes
    from k2to3.errors import K2to3Error
    from k2to3.formats.artifact import read_artifact

    files = sorted({*FIXTURES.glob("**/*.h5"), *CORPUS.glob("**/*.h5")})
    read = checked = 0
    for f in files:
        try:
            a = read_artifact(f)
        except K2to3Error as exc:
            assert "config implies" not in exc.message, exc.message
            continue
        read += 1
        for layer in _top_layers(a.model_config):
            exp = expected_shapes(layer["class_name"], layer["config"])
            checked += sum(e.name.rsplit("/", 1)[-1].split(":")[0] in exp
                           for e in a.weights.get(layer["config"].get("name"), []))
    assert read >= 50 and checked >= 500, (read, checked)
