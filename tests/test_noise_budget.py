"""The float64 noise probe runs through the memory budget (--max-memory) like the verification: with a budget
nothing fits, the reference and each mismatching backend rerun one after another."""

from __future__ import annotations

from itertools import pairwise

import pytest
from conftest import H5

import k2to3.convert as convert_mod
from k2to3.convert import Options, convert
from k2to3.workers.memory import MB


@pytest.mark.slow
def test_float64_probe_respects_a_tight_budget(pool, tmp_path, monkeypatch):
    real = convert_mod.upgrade

    def wrong_epsilon(*args, **kwargs):  # a conversion bug, so every backend mismatches and is rerun
        plan = real(*args, **kwargs)
        for layer in plan.model["layers"]:
            if layer["class_name"] == "BatchNormalization":
                layer["config"]["epsilon"] *= 1.1
        return plan

    monkeypatch.setattr(convert_mod, "upgrade", wrong_epsilon)
    monkeypatch.setattr(pool, "max_memory", 1 * MB)
    report = convert(Options(src=H5 / "fm06_depthwise_groups.h5", out=tmp_path / "m.keras"), pool=pool)
    assert all(v["noise"]["verdict"] == "beyond_float32_noise" for v in report["backends"].values())
    sched = report["memory"]["noise_schedule"]
    assert [e["role"] for e in sched] == ["tensorflow", "torch", "jax"]  # the reference runs on tensorflow
    assert all(e["over_budget"] and not e["concurrent"] for e in sched)
    for before, after in pairwise(sched):
        assert after["start_s"] >= before["end_s"]
