"""run_checks: every applicable check of the given stages, a stage at a time, one pool round per stage; and the
verdict they give together. convert and verify run the same sequence."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from k2to3.checks.base import Run
from k2to3.checks.pool_round import one_round
from k2to3.checks.registry import CHECKS, OUTPUTS_STAGE, SAVED_STAGE
from k2to3.errors import Exit

# Weights from which the workers close once the outputs are checked, when no later check needs them (a mismatch's
# diagnostics start them again): on a small model restarting costs seconds of imports and saves little memory.
RELEASE_MIN_BYTES = 32 * 2**20


def run_checks(run: Run, stages: Iterable[int]) -> None:
    for stage in stages:
        queued = [(c, c.jobs(run)) for c in CHECKS if c.stage_of(run) == stage and c.applies(run)]
        if not queued:
            continue
        # after the outputs, nothing needs a worker unless a later check does, or a check of this round whose collect
        # runs rounds of its own (the training steps joined to it: their noise probe)
        later = any(c.applies(run) for c in CHECKS if stage < c.stage_of(run) < SAVED_STAGE)
        alone = all(c.key == "backends" for c, _ in queued)
        release = stage == OUTPUTS_STAGE and alone and not later and run.weight_bytes >= RELEASE_MIN_BYTES
        done = one_round(run, queued, release_finished=release)
        for check, _ in queued:
            check.prepare(run, done)
        for check, _ in queued:
            check.collect(run, done)


def set_verdict(report: dict[str, Any], tf_only: list[dict[str, Any]]) -> None:
    """verdict and exit_code (docs/exit-codes.md) from every check's outcome: a backend that failed is an error (4),
    any mismatch a mismatch (1), an export format that refused the model not_portable (3), a TF-only model that
    passed is tf_only (3), else parity (0). A check judged `after_parity` (gradients) only changes a parity.
    numeric_verdict is the outputs' figure (float32 noise), made a mismatch by any check that says so."""
    primary = [c.outcome(report) for c in CHECKS if not c.after_parity]
    if "error" in primary:
        report.update(verdict="error", exit_code=int(Exit.INTERNAL))
    elif "mismatch" in primary:
        report.update(verdict="mismatch", exit_code=int(Exit.MISMATCH))
    elif "not_portable" in primary:  # an export format that cannot take the model (checks/exported_file.py)
        report.update(verdict="not_portable", exit_code=int(Exit.NOT_PORTABLE))
    elif tf_only:  # written and verified on tensorflow; not portable to torch / jax
        report.update(verdict="tf_only", exit_code=int(Exit.NOT_PORTABLE), tf_only=tf_only)
    else:
        report.update(verdict="parity", exit_code=int(Exit.PARITY))
    base = next(c for c in CHECKS if c.key == "backends").numeric(report)
    others = [c.numeric(report) for c in CHECKS if c.key != "backends"]
    report["numeric_verdict"] = "mismatch" if base is not None and "mismatch" in others else base
    for check in CHECKS:
        if check.after_parity and report["exit_code"] == int(Exit.PARITY):
            said = check.outcome(report)
            if said == "mismatch":
                report.update(verdict="mismatch", exit_code=int(Exit.MISMATCH))
            elif said == "error":
                report.update(verdict="error", exit_code=int(Exit.INTERNAL))
