"""On a mismatch: the per-layer probe (first divergent layer) on a model with a nested model (tf_keras's and
Keras 3's `.output` of a nested model is its own inner graph's, which a probe over the outer inputs cannot reach),
and the float64 noise probe scheduled through the memory budget (--max-memory) like the verification. One
conversion checks both."""

from __future__ import annotations

from itertools import pairwise

import pytest
from conftest import H5

import k2to3.pipeline.prepare as prepare_mod
from k2to3.core.options import ConvertOptions as Options
from k2to3.pipeline.convert import convert
from k2to3.workers.memory import MB


def _relu_to_elu(layers: list) -> None:
    for layer in layers:
        cfg = layer.get("config", {})
        if cfg.get("activation") == "relu":
            cfg["activation"] = "elu"
        _relu_to_elu((layer.get("nested") or {}).get("layers", []))


@pytest.mark.slow
def test_first_divergent_layer_is_the_nested_model(pool, tmp_path, monkeypatch):
    """A conversion bug inside the nested Sequential 'enc' (its Dense's relu written as elu): the probe runs on
    the tf_keras reference and every backend and names 'enc'; with a budget nothing fits, the float64 reruns of
    the reference and the three mismatching backends run one after another."""
    real = prepare_mod.upgrade

    def wrong_activation(*args, **kwargs):
        plan = real(*args, **kwargs)
        _relu_to_elu(plan.model["layers"])
        return plan

    monkeypatch.setattr(prepare_mod, "upgrade", wrong_activation)
    monkeypatch.setattr(pool, "max_memory", 1 * MB)  # nothing fits: one worker at a time
    report = convert(Options(src=H5 / "fm03_nested_sequential.h5", output=tmp_path / "m.keras"), pool=pool)
    assert report["verdict"] == "mismatch"
    for b, v in report["backends"].items():
        assert v["status"] == "mismatch", b
        first = v["first_divergent_layer"]
        assert "error" not in first, (b, first)
        assert first["layer"] == "enc" and first["reference_layer"] == "enc", (b, first)
        assert [r["layer"] for r in v["layer_errors"]] == ["enc", "head"]
    sched = report["memory"]["noise_schedule"]
    assert [e["role"] for e in sched] == ["tensorflow", "torch", "jax"]  # the reference runs on tensorflow
    assert all(e["over_budget"] and not e["concurrent"] for e in sched)
    for before, after in pairwise(sched):
        assert after["start_s"] >= before["end_s"]
    assert all(v["noise"]["verdict"] == "beyond_float32_noise" for v in report["backends"].values())
