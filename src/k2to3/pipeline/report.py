"""The report a run starts from (schema k2to3.convert/2, every field in docs/report.md); the checks add their
sections, the pipeline its output and verdict."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from k2to3 import __version__
from k2to3.errors import NotPortable
from k2to3.formats import Input
from k2to3.formats.artifact import file_sha256
from k2to3.upgrade.plan import Plan

SCHEMA = "k2to3.convert/2"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def base(src: Path, inp: Input, plan: Plan | None) -> dict[str, Any]:
    artifact = inp.artifact
    assert artifact is not None
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "k2to3_version": __version__,
        "created": now(),
        "input": {
            "path": str(src),
            "sha256": file_sha256(src),
            "keras_version": artifact.keras_version,
            "saved_backend": artifact.backend,
            "n_weight_tensors": artifact.n_tensors,
            "n_params": artifact.n_params,
            "optimizer_weights_dropped": artifact.optimizer_weight_count,
            "extra_attributes": artifact.extra_root_attrs,
        },
        "findings": [f.to_dict() for f in plan.findings] if plan else [],
        "renames": plan.renames if plan else {},
        "dtype_policies": sorted(plan.dtype_policies) if plan else [],
    }
    report["input"]["format"] = inp.format
    if inp.bridged:
        report["input"].update(inp.bridged)
    return report


class NotPortableReport(NotPortable):
    """The model cannot be converted from what was given; `report` says why (written like any report)."""

    def __init__(self, message: str, report: dict[str, Any]):
        super().__init__(message, hint=None)
        self.report = report
