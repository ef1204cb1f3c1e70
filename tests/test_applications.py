"""tf_keras.applications models (weights=None, deterministic weights set by the fixture script):
MobileNetV2 (FM-6 groups), EfficientNetB0 (groups, Normalization/Rescaling state), DenseNet121
('/' in names). Generated on demand into tests/.cache, too large to commit."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import CACHE, FIXTURES, record
from test_convert import check_parity

from k2to3.convert import Options, convert

pytestmark = pytest.mark.slow

APPS = ["mobilenetv2", "efficientnetb0", "densenet121"]


@pytest.fixture(scope="session")
def apps() -> dict:
    if not all((CACHE / f"{a}.h5").exists() for a in APPS):
        subprocess.run([sys.executable, str(FIXTURES / "make_fixtures.py"), "--large", str(CACHE)], check=True,
                       capture_output=True, timeout=900)
    return {a: CACHE / f"{a}.h5" for a in APPS}


@pytest.mark.parametrize("app", APPS)
def test_application_converts_with_parity(app, apps, pool, tmp_path):
    report = convert(Options(src=apps[app], out=tmp_path / f"{app}.keras"), pool=pool)
    record(app, report)
    check_parity(report)
    assert report["reference"]["kind"] == "keras2-tf_keras"
    if app == "densenet121":
        assert report["renames"] and all("/" not in v for v in report["renames"].values())
