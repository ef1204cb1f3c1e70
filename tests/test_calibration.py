"""Calibration of the static audit: its verdict is a prediction of what `convert` does, so one `audit --verify`
over a directory of every artifact the tests have (the rule fixtures, the bad files, the --src models with their
training scripts, the hostile cases) must agree with it on each artifact. A disagreement is a bug in the static
checks or a missing rule, not an accepted difference. (The shared real-h5 corpus is calibrated the same way by
test_audit.py::test_static_verdicts_agree_with_verify; the tf_keras.applications models by test_applications.py,
whose MobileNetV3 and dotted/slashed names the static audit also calls portable.)"""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURES

from k2to3.stores.audit import run_audit
from k2to3.stores.auditreport import build, write

sys.path.insert(0, str(FIXTURES))
import make_hostile_fixtures as hostile

pytestmark = pytest.mark.slow

CONVERTS = {"portable": True, "portable with source": True, "tf-only": True, "blocked": False}


def all_artifacts(d: Path) -> Path:
    shutil.copytree(FIXTURES / "h5", d / "h5", ignore=shutil.ignore_patterns("manifest.json"))
    shutil.copytree(FIXTURES / "bad", d / "bad")
    shutil.copytree(FIXTURES / "src_models", d / "src_models", ignore=shutil.ignore_patterns("*.npz"))
    shutil.copytree(FIXTURES / "src", d / "src")  # the training scripts the --src models resolve from
    (d / "hostile").mkdir()
    for make in (*hostile.H5_CASES.values(), *hostile.NONFINITE_CASES.values(), *hostile.ZIP_CASES.values()):
        make(d / "hostile")
    return d


def test_static_verdicts_agree_with_verify(tmp_path):
    root = all_artifacts(tmp_path / "all")
    rep = run_audit([root], tmp_path / "out", verify=True)
    model = build(rep)
    rows = [(a["relpath"], a["verdict"], a["verify"]) for a in model["artifacts"]]
    print(f"{len(rows)} artifacts; static {dict(Counter(v for _, v, _ in rows))}; "
          f"verify {dict(Counter(x['verdict'] for _, _, x in rows))}")
    assert len(rows) >= 60
    wrong = [(p, v, x["verdict"], x.get("reason")) for p, v, x in rows
             if CONVERTS[v] != x["converted"] or (v == "tf-only") != (x["verdict"] == "tf_only")]
    assert not wrong, wrong
    assert model["summary"]["verified"] == len(rows) and model["summary"]["predicted"] == 0
    assert model["summary"]["verified_verdicts"] == dict(Counter(x["verdict"] for _, _, x in rows))
    parity = [a for a in model["artifacts"] if a["verify"]["verdict"] == "parity"]
    worst = max(a["worst_error"] for a in parity if not a["relpath"].startswith("hostile/"))  # NaN/Inf weights
    print(f"worst max abs error over the {len(parity)} artifacts at parity: {worst:.2e}")
    assert all(a["evidence"] == "verified" and "worst_error" in a for a in parity) and worst < 1e-4
    write(rep, tmp_path / "out", ["html"])
    assert (tmp_path / "out" / "audit.html").read_text().count("verified: parity") == len(parity)
    # what the static audit says of the cases that used to over-promise: they convert now, with parity
    verified = {p: x["verdict"] for p, _, x in rows}
    assert verified["h5/fm17_dotted_names.h5"] == verified["h5/fm17_slash_names.h5"] == "parity"
