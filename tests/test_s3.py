"""Stores in a bucket: audit and convert from and to an S3-compatible server (moto's standalone server, started
here on a free port; k2to3 finds it through AWS_ENDPOINT_URL, as it would find MinIO). The bucket is read one
artifact at a time and h5safe still refuses a hostile file that arrives through it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
from conftest import FIXTURES
from store_tree import EXPECTED, OUTPUTS, make_tree

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    fs.mkdir("models")
    root = tmp_path_factory.mktemp("s3")
    tree = make_tree(root / "store")
    sys.path.insert(0, str(FIXTURES))
    import make_hostile_fixtures as hostile

    (root / "outside").mkdir()
    (tree / "bad").mkdir()
    # Its weights point at a secret file on this machine, outside the store.
    shutil.move(hostile.external_storage(root / "outside"), tree / "bad" / "external_storage.h5")
    fs.put(str(tree) + "/", "models/store", recursive=True)
    yield fs, {**os.environ, **env, "TF_CPP_MIN_LOG_LEVEL": "3", "COLUMNS": "200"}, root
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def k2to3(env, *args):
    return subprocess.run([sys.executable, "-m", "k2to3", *args], env=env, capture_output=True, text=True,
                          timeout=1200)


def test_audit_a_bucket(s3):
    _, env, root = s3
    r = k2to3(env, "audit", "s3://models/store", "-o", str(root / "audit"), "--format", "json")
    assert r.returncode == 3, r.stderr[-3000:]
    rep = json.loads((root / "audit" / "audit.json").read_text())
    by = {a["path"]: a for a in rep["artifacts"]}
    assert set(by) == {f"s3://models/store/{k}" for k in EXPECTED} | {"s3://models/store/bad/external_storage.h5"}
    assert by["s3://models/store/lam/lambda_activation.h5"]["src"] == ["s3://models/store/lam/k2_zoo.py"]
    assert "external" in by["s3://models/store/bad/external_storage.h5"]["reason"]
    assert list(rep["sources"]) == ["s3://models/store/lam/k2_zoo.py"]


def test_convert_bucket_to_bucket_and_rerun(s3):
    fs, env, root = s3
    r = k2to3(env, "convert", "s3://models/store", "-o", "s3://models/converted", "--backends", "tensorflow")
    assert r.returncode == 2, r.stderr[-3000:]  # worst: the hostile file, refused
    written = {p.split("models/converted/", 1)[1] for p in fs.find("models/converted")}
    assert OUTPUTS <= written and not any(p.startswith("bad/") and p.endswith(".keras") for p in written)
    rep = json.loads(fs.cat("models/converted/store-report.json"))
    got = {a["rel"]: a["verify"]["verdict"] for a in rep["artifacts"]}
    assert got == {**EXPECTED, "bad/external_storage.h5": "invalid"}
    bad = next(a for a in rep["artifacts"] if a["rel"] == "bad/external_storage.h5")
    assert "external" in bad["verify"]["reason"]
    one = json.loads(fs.cat("models/converted/lam/lambda_activation.keras.report/report.json"))
    assert one["input"]["path"] == "s3://models/store/lam/lambda_activation.h5" and one["verdict"] == "parity"
    from make_hostile_fixtures import SECRET

    assert SECRET not in fs.cat("models/converted/store-report.json")
    # A converted model from the bucket loads like any other .keras (safe_mode, its generated module).
    local = root / "fm19.keras"
    fs.get("models/converted/a/fm19_hard_sigmoid.keras", str(local))
    assert local.read_bytes()[:2] == b"PK"
    r = k2to3(env, "convert", "s3://models/store", "-o", "s3://models/converted", "--backends", "tensorflow")
    assert r.returncode == 2
    rep = json.loads(fs.cat("models/converted/store-report.json"))
    assert rep["cached"] == len(EXPECTED)  # every finished artifact skipped; the refused one is checked again


def test_audit_verify_of_a_bucket(s3):
    fs, env, root = s3
    fs.put(str(root / "store" / "a" / "fm19_hard_sigmoid.h5"), "models/one/fm19.h5")
    r = k2to3(env, "audit", "s3://models/one", "--verify", "-o", str(root / "verify"), "--format", "json")
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((root / "verify" / "audit.json").read_text())
    assert rep["artifacts"][0]["verify"]["verdict"] == "parity"
    assert json.loads((root / "verify" / ".k2to3-audit-cache.json").read_text())


def test_missing_bucket_and_missing_credentials_are_one_line_errors(s3):
    _, env, root = s3
    r = k2to3(env, "audit", "s3://no-such-bucket/models", "-o", str(root / "none"))
    assert r.returncode == 2 and "s3://no-such-bucket/models" in r.stderr and "Traceback" not in r.stderr
    bare = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    bare.update(AWS_ENDPOINT_URL=env["AWS_ENDPOINT_URL"], AWS_SHARED_CREDENTIALS_FILE=str(root / "none.ini"),
                AWS_CONFIG_FILE=str(root / "none.ini"), AWS_EC2_METADATA_DISABLED="true")
    r = k2to3(bare, "convert", "s3://models/store", "-o", str(root / "nocreds"))
    assert r.returncode == 2 and "credentials" in r.stderr and "Traceback" not in r.stderr
    assert not (root / "nocreds").exists()
