"""Mixed precision: the float32 shadow separates conversion error from precision error (issue 10 item 4;
docs/convert.md#mixed-precision, report section `precision`).

Fixtures: tests/fixtures/make_optimizer_fixtures.py (mixed_float16_lso.h5: Dense + LossScaleOptimizer;
mixed_bfloat16_conv.h5: Conv2D model with a float32 head)."""

from __future__ import annotations

import json
import zipfile

import pytest
from conftest import FIXTURES
from test_verify import perturb

from k2to3.workers.reruns import Float64Unavailable, _float64_config

OPT = FIXTURES / "optimizers"
MIXED = {"mixed_float16_lso": "mixed_float16", "mixed_bfloat16_conv": "mixed_bfloat16"}


def test_shadow_config_recasts_reduced_policies_only():
    k2 = {"dtype": {"class_name": "Policy", "config": {"name": "mixed_bfloat16"}}}
    k3 = {"layers": [{"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float16"}}},
                     {"dtype": "int32"}, {"dtype": "float32"}]}
    assert _float64_config(k2, "float32")["dtype"]["config"]["name"] == "float32"
    got = _float64_config(k3, "float32")["layers"]
    assert [got[0]["dtype"]["config"]["name"], got[1]["dtype"], got[2]["dtype"]] == ["float32", "int32", "float32"]
    with pytest.raises(Float64Unavailable, match="mixed_bfloat16"):  # the float64 noise probe still refuses
        _float64_config(k2)


@pytest.fixture(scope="module")
def mixed(pool, tmp_path_factory):
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    d = tmp_path_factory.mktemp("precision")
    return {n: (d / f"{n}.keras", convert(Options(src=OPT / f"{n}.h5", output=d / f"{n}.keras"), pool=pool))
            for n in MIXED}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MIXED))
def test_float32_shadow_separates_conversion_from_precision(mixed, name):
    keras, r = mixed[name]
    policy = MIXED[name]
    with zipfile.ZipFile(keras) as z:  # the policy stays in the .keras; the shadow is a verification device
        cfg = json.loads(z.read("config.json"))
    assert policy in json.dumps(cfg["config"]["layers"])
    p = r["precision"]
    assert p["policies"] == [policy] and p["status"] == "parity" and p["decided_by"] == "conversion and outputs"
    assert (p["rtol"], p["atol"]) == (1e-5, 1e-6) and p["policy_rtol"] == r["tolerance"]["rtol"] > 1e-5
    # Keras 2's own cost of the policy: mixed against float32 on tf_keras
    assert p["reference"]["kind"] == "keras2-tf_keras" and p["reference"]["max_abs"] > 1e-5
    for b in ("tensorflow", "torch", "jax"):
        v = p["backends"][b]
        assert v["policy"] == policy and v["status"] == "parity" and v["outputs_status"] == "parity"
        # conversion error at float32 rounding, precision error orders of magnitude above it
        assert v["conversion"]["max_abs"] <= 2e-7 and v["conversion"]["min_rtol"] == 0.0, (b, v["conversion"])
        assert v["precision"]["max_abs"] > 100 * max(v["conversion"]["max_abs"], 1e-9), (b, v["precision"])
    if name == "mixed_bfloat16_conv":  # torch and jax differ from tf_keras in bfloat16, not in the conversion
        assert max(r["backends"][b]["outputs"][0]["max_abs"] for b in ("torch", "jax")) > 1e-4
    assert r["verdict"] == "parity"


@pytest.mark.slow
def test_shadow_catches_a_weight_error_the_bfloat16_tolerance_hides(pool, mixed, tmp_path):
    """A weight off by 1e-3 passes the mixed_bfloat16 output tolerance (5e-2) but not the float32 shadow: the
    verdict is mismatch and the report says the conversion decided it."""
    from k2to3.core.options import VerifyOptions
    from k2to3.pipeline.verify import verify

    keras, _ = mixed["mixed_bfloat16_conv"]
    bad = tmp_path / "perturbed.keras"
    perturb(keras, bad)
    rep = verify(VerifyOptions(model=bad, reference=OPT / "mixed_bfloat16_conv.h5"), pool=pool)
    assert all(v["status"] == "parity" for v in rep["backends"].values())  # the policy tolerance alone misses it
    p = rep["precision"]
    assert p["status"] == "mismatch" and p["decided_by"] == "conversion"
    assert all(v["status"] == "mismatch" and v["conversion"]["max_abs"] > 1e-5 for v in p["backends"].values())
    assert rep["verdict"] == rep["numeric_verdict"] == "mismatch" and rep["exit_code"] == 1


def test_precision_markdown_and_summary_name_the_deciding_comparison():
    from k2to3.checks.precision import markdown, summary_lines

    row = {"policy": "mixed_float16", "status": "mismatch", "outputs_status": "parity",
           "conversion": {"max_abs": 3e-4, "max_rel": 1e-3, "min_rtol": 2e-4, "min_atol": 3e-4, "allclose": False},
           "precision": {"max_abs": 1e-3, "max_rel": 1e-2}}
    rep = {"precision": {"policies": ["mixed_float16"], "rtol": 1e-5, "atol": 1e-6, "policy_rtol": 5e-3,
                         "policy_atol": 5e-3, "status": "mismatch", "decided_by": "conversion",
                         "reference": {"kind": "keras2-tf_keras", "max_abs": 1e-3, "max_rel": 1e-2},
                         "backends": {"torch": row}}}
    lines = summary_lines(rep)
    assert "decided by the float32 shadow (conversion error at rtol=1e-05" in lines[0]
    assert "torch: conversion mismatch (max abs 0.0003" in lines[2]
    assert "| torch | mixed_float16 | mismatch | 0.0003 |" in "\n".join(markdown(rep))
    assert summary_lines({}) == [] and markdown({"precision": None}) == []
