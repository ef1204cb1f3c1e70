"""Noise-aware verdicts: a mismatch at the strict tolerance is rerun in float64 on each side to tell float32
rounding (`within_float32_noise`) from a conversion difference. One rule (docs/verify.md#float32-noise): a backend whose
every difference the measured floor explains has the status `within_float32_noise` and exits 0, its strict figures
kept; a difference the float64 runs keep is a mismatch, exit 1."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import H5, record, record_line

import k2to3.pipeline.prepare as prepare_mod
from k2to3.core.compare import NOISE_K, noise_stats, noise_verdict
from k2to3.core.options import ConvertOptions as Options
from k2to3.pipeline.convert import convert
from k2to3.pipeline.report import to_markdown


def test_noise_stats_separates_rounding_from_a_difference():
    rng = np.random.default_rng(0)
    exact = rng.standard_normal((4, 64)) * 3.0
    ref32 = exact.astype(np.float32)
    got32 = (exact + rng.standard_normal(exact.shape) * 1e-6).astype(np.float32)  # another accumulation order
    s = noise_stats(got32, exact, ref32, exact)
    assert s.within and s.float64_max_abs == 0.0 and 0 < s.k <= 1.0 + 1e-9
    bug = exact.copy()
    bug[1, 3] += 2e-6  # a difference the float64 run keeps: not rounding, however small
    s = noise_stats((bug + rng.standard_normal(exact.shape) * 1e-6).astype(np.float32), bug, ref32, exact)
    assert not s.within and s.float64_max_abs == pytest.approx(2e-6)
    assert noise_verdict([s])[0] == "beyond_float32_noise"
    assert not noise_stats(got32[:2], exact[:2], ref32, exact).within  # shapes differ
    assert noise_stats(ref32, exact, ref32, exact).k == 0.0



def _noise(report: dict) -> dict:
    return {b: v.get("noise") for b, v in report["backends"].items()}


@pytest.mark.slow
def test_parity_pays_no_float64_rerun(pool, tmp_path):
    report = convert(Options(src=H5 / "fm06_depthwise_groups.h5", output=tmp_path / "m.keras"), pool=pool)
    assert report["verdict"] == "parity" and report["numeric_verdict"] == "parity"
    assert report["schema"] == "k2to3.convert/2"
    assert all(n is None for n in _noise(report).values()) and "noise_seconds" not in report["timings"]


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["fm06_depthwise_groups.h5", "embedding_lstm.h5"])
def test_zero_tolerance_mismatch_is_float32_noise(fixture, pool, tmp_path):
    """Conv, BatchNormalization, Dense, Embedding, LSTM: at rtol=atol=0 any backend that rounds differently
    is outside the strict tolerance, and the float64 rerun shows it is rounding: the noise status, exit 0, with the
    strict figures in the report."""
    report = convert(Options(src=H5 / fixture, output=tmp_path / "m.keras", rtol=0.0, atol=0.0), pool=pool)
    bad = {b: v for b, v in report["backends"].items() if v["status"] != "parity"}
    assert report["exit_code"] == 0 and report["verdict"] == "parity"
    assert not [v for v in bad.values() if v["status"] != "within_float32_noise"], bad
    for b, v in bad.items():
        assert not all(o["allclose"] for o in v["outputs"]) and v["outputs"][0]["max_abs"] > 0  # strict figures
        noise = v["noise"]
        record_line("noise", {"model": fixture, "backend": b, "tol": 0, **{k: noise.get(k) for k in ("verdict", "k")},
                              "outputs": noise.get("outputs")})
        assert noise["verdict"] == "within_float32_noise", (b, noise)
        assert 0 < noise["k"] <= NOISE_K
        for o in noise["outputs"]:
            assert o["floor_abs"] > 0 and o["float64_max_abs"] < 1e-12
    assert report["numeric_verdict"] == ("within_float32_noise" if bad else "parity")
    if bad:
        assert "noise_seconds" in report["timings"]


@pytest.mark.slow
def test_a_conversion_bug_is_not_float32_noise(pool, tmp_path, monkeypatch):
    """A real conversion bug: the upgraded BatchNormalization epsilon off by 10% (a rule written wrong). Its
    error is tiny (of the order of the float32 floor at this tolerance) but the float64 runs keep it."""
    real = prepare_mod.upgrade

    def wrong_epsilon(*args, **kwargs):
        plan = real(*args, **kwargs)
        for layer in plan.model["layers"]:
            if layer["class_name"] == "BatchNormalization":
                layer["config"]["epsilon"] *= 1.1
        return plan

    monkeypatch.setattr(prepare_mod, "upgrade", wrong_epsilon)
    report = convert(Options(src=H5 / "fm06_depthwise_groups.h5", output=tmp_path / "m.keras"), pool=pool)
    assert report["verdict"] == "mismatch" and report["exit_code"] == 1
    assert report["numeric_verdict"] == "mismatch"
    for b, v in report["backends"].items():
        assert v["status"] == "mismatch", b
        noise = v["noise"]
        record_line("noise", {"model": "fm06 epsilon bug", "backend": b, "verdict": noise["verdict"], "k": noise["k"],
                              "outputs": noise["outputs"]})
        assert noise["verdict"] == "beyond_float32_noise", (b, noise)
        assert all(o["float64_max_abs"] > 0.5 * o["max_abs"] for o in noise["outputs"])
    assert "| beyond (k=" in to_markdown(report)


@pytest.mark.slow
def test_sleap_512_unet_is_within_float32_noise(corpus, pool, tmp_path):
    """The 512x512 SLEAP UNet (1x1 conv head summing ~1e2 activations into ~0.3): torch and jax differ from
    Keras 2 by ~2e-5, a mismatch at the default tolerance, and the float64 rerun shows the floor is as large."""
    src = corpus / "sleap/min_tracks_2node.UNet.bottomup_multiclass.best_model.h5"
    report = convert(Options(src=src, output=tmp_path / "m.keras"), pool=pool)
    record("sleap bottomup_multiclass 512x512 (noise)", report)
    assert report["inputs"][0]["shape"][1:3] == [512, 512]
    for b, v in report["backends"].items():
        noise = v["noise"]
        if v["status"] == "parity":
            assert noise is None
            continue
        record_line("noise", {"model": "sleap bottomup_multiclass 512x512", "backend": b, "verdict": noise["verdict"],
                              "k": noise["k"], "outputs": noise["outputs"]})
        assert v["status"] == "within_float32_noise" and noise["verdict"] == "within_float32_noise", (b, noise)
        assert noise["outputs"][0]["floor_abs"] > 1e-6  # the floor is of the error's order, not 1e-7
    assert report["exit_code"] == 0 and report["verdict"] == "parity"
    if any(v["status"] != "parity" for v in report["backends"].values()):
        assert report["numeric_verdict"] == "within_float32_noise"



def test_float64_config_rewrites_float32_and_refuses_reduced_precision():
    """The worker's config rewrite (no keras import): float32 policies become float64, integer dtypes stay,
    a float16 compute policy is refused with the reason (it is not float32 noise; fm11 reaches parity even
    at zero tolerance, so this is checked on the config)."""
    from k2to3.workers.reruns import Float64Unavailable, _float64_config

    k3 = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": None}
    cfg = {"layers": [{"config": {"dtype": k3, "units": 3}}, {"config": {"dtype": "int32"}},
                      {"config": {"dtype": "float32", "layer": {"config": {"dtype": "float32"}}}}]}
    out = _float64_config(cfg)
    assert out["layers"][0]["config"]["dtype"]["config"]["name"] == "float64"
    assert out["layers"][1]["config"]["dtype"] == "int32"
    assert out["layers"][2]["config"]["layer"]["config"]["dtype"] == "float64"
    assert cfg["layers"][0]["config"]["dtype"]["config"]["name"] == "float32"  # the input is not changed
    with pytest.raises(Float64Unavailable, match="mixed_float16"):
        _float64_config({"dtype": {"class_name": "Policy", "config": {"name": "mixed_float16"}}})
