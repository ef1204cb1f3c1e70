"""`k2to3 export MODEL.keras --format onnx|litert|savedmodel|torch -o PATH`: the verify run (pipeline/verify.py)
on the exporter's backend alone, with the export check (checks/exported_file.py): the exported file, run by its own
runtime, against the Keras 2 golden (`--reference LEGACY.h5` computed by tf_keras, or `--golden FILE`).
No backend import here."""

from __future__ import annotations

import dataclasses
from typing import Any

from k2to3.checks.base import Progress
from k2to3.checks.exported_file import EXPORTER_BACKEND, check_target, target
from k2to3.core.options import ExportOptions, validate
from k2to3.errors import InputError
from k2to3.pipeline import verify as verify_mod
from k2to3.pipeline.recorded_reference import with_recorded_reference
from k2to3.workers.pool import Pool


def check(opts: ExportOptions) -> None:
    """Every problem with the paths and options, before any work."""
    validate(opts)  # first: --grads and --fit-steps, which export does not take (core/options.py)
    check_target(opts.format, opts.output, opts.force, "-o")
    if opts.output.exists() and opts.output.resolve() == opts.model.resolve():
        raise InputError(f"-o {opts.output}: would overwrite MODEL", hint="choose another -o path")
    verify_mod.check(opts)


def export(opts: ExportOptions, progress: Progress = lambda s: None, pool: Pool | None = None) -> dict[str, Any]:
    """Export and check; returns the report dict (report["exit_code"]: 0 parity, 1 mismatch, 3 the format refused
    the model, as docs/exit-codes.md). The .keras itself is verified on the exporter's backend too."""
    opts = dataclasses.replace(opts.resolved(), backends=(EXPORTER_BACKEND.get(opts.format, "tensorflow"),))
    opts, found = with_recorded_reference(opts, "export")  # right after convert: the original it recorded
    if found:
        progress(found)
    check(opts)
    report = verify_mod.verify(opts, progress, pool, export=target(opts.format, opts.output))
    if "export" in report:
        report["export"]["keras"] = str(opts.model)
    if found:
        report.setdefault("reference", {})["found"] = found
    return report
