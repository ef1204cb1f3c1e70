"""report.md is rendered from the same schema as report.json: every top-level key of a real report has its place in
report.md, every check's section is there when report.json has it, and on a converted trained file both say the
same about the optimizer state (they once disagreed: report.md read a stale input field)."""

from __future__ import annotations

import pytest
from conftest import FIXTURES, H5

from k2to3.checks.registry import CHECKS
from k2to3.core.options import ConvertOptions, VerifyOptions
from k2to3.pipeline.convert import convert
from k2to3.pipeline.report import SECTIONS, rendered_keys, to_markdown
from k2to3.pipeline.verify import verify

OPT = FIXTURES / "optimizers"
VERIFY = FIXTURES / "verify"


def _covered(report: dict) -> None:
    md = to_markdown(report)
    assert set(report) - rendered_keys() == set(), "report.json keys report.md does not show"
    for heading, keys, render in SECTIONS:
        if any(report.get(k) for k in keys) and render(report):
            assert f"\n## {heading}\n" in md, heading


@pytest.mark.slow
def test_trained_file_every_section_and_one_story_of_the_optimizer(pool, tmp_path):
    out = tmp_path / "m.keras"
    rep = convert(ConvertOptions(src=OPT / "batchnorm_adam_legacy.h5", output=out, grads=True, fit_steps=2,
                                 save_golden=True), pool=pool)
    assert {"optimizer", "training", "gradients", "golden", "memory", "timings"} <= set(rep)
    _covered(rep)
    md = to_markdown(rep)
    opt, led = rep["optimizer"], rep["optimizer"]["ledger"]
    assert opt["status"] == "restored"
    assert f"restored: {opt['class_name']}, step {opt['iteration']}, {led['slots_restored']}/" \
           f"{led['slots_expected']} slots" in md
    assert "not carried over" not in md and "## Training steps" in md and "## Gradients" in md
    assert all(f"| {b} | {v['status']} |" in md for b, v in rep["training"]["backends"].items())


@pytest.mark.slow
def test_mismatch_and_precision_reports_are_covered(pool, tmp_path):
    naive = verify(VerifyOptions(model=VERIFY / "fm19_hard_sigmoid_dense.naive.keras",
                                 reference=H5 / "fm19_hard_sigmoid_dense.h5"), pool=pool)
    assert naive["verdict"] == "mismatch" and any(v.get("layer_errors") for v in naive["backends"].values())
    _covered(naive)
    assert "Layers beyond tolerance on" in to_markdown(naive)
    mixed = convert(ConvertOptions(src=OPT / "mixed_float16_lso.h5", output=tmp_path / "p.keras"), pool=pool)
    assert "precision" in mixed
    _covered(mixed)


def test_every_check_has_a_section():
    headings = {h for h, _, _ in SECTIONS}
    assert {c.title for c in CHECKS} <= headings and len({c.key for c in CHECKS}) == len(CHECKS)
