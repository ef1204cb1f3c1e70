"""`verify` / `export` right after `convert`, with no reference option: the Keras 2 original the conversion recorded in
MODEL.keras.report/report.json (its path and sha256), when it is still there unchanged, or the golden file the
conversion saved beside the .keras (--save-golden). Read as data (json, size-capped); nothing else is trusted."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from k2to3.checks.golden_file import golden_path
from k2to3.core.options import VerifyOptions
from k2to3.errors import InputError
from k2to3.formats.artifact import file_sha256

MAX_REPORT_BYTES = 64 << 20  # a report.json is kilobytes; a larger file is not a report


def report_path(model: Path) -> Path:
    return model.with_name(model.name + ".report") / "report.json"


def _report(model: Path) -> dict[str, Any] | None:
    path = report_path(model)
    try:
        if not path.is_file() or path.stat().st_size > MAX_REPORT_BYTES:
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _candidates(recorded: str, model: Path) -> list[Path]:
    """Where the original may be: as recorded (relative to where convert ran: here, or beside the .keras), or beside
    the .keras under its own name."""
    p = Path(recorded)
    if p.is_absolute():
        return [p, model.parent / p.name]
    return [Path.cwd() / p, model.parent / p, model.parent / p.name]


def with_recorded_reference(opts: VerifyOptions, command: str) -> tuple[VerifyOptions, str | None]:
    """opts with --reference (and the recorded --src files) or --golden filled in from what convert recorded, and
    the line that says so; unchanged when the user gave either. One line naming `command` and both options when
    nothing recorded can be used."""
    if opts.reference is not None or opts.golden is not None or not opts.model.is_file():
        return opts, None
    report = _report(opts.model)
    why = f"no {report_path(opts.model)} beside it"
    if report is not None:
        out = report.get("output") or {}
        if out.get("sha256") and out.get("sha256") != file_sha256(opts.model):
            why = f"{report_path(opts.model)} describes another file (its sha256 differs from {opts.model.name}'s)"
        else:
            got = _original(report, opts)
            if got is not None:
                return got
            inp = report.get("input") or {}
            why = f"the original it records ({inp.get('path')}) is not there with sha256 {str(inp.get('sha256'))[:12]}"
    golden = golden_path(opts.model)
    if golden.is_file():
        return dataclasses.replace(opts, golden=golden), f"reference: {golden.name}, saved by convert beside the model"
    raise InputError(f"{command} needs a reference for {opts.model}: {why}",
                     hint=f"pass --reference LEGACY.h5 (the Keras 2 file) or --golden {golden.name}, e.g. k2to3 "
                          f"{command} {opts.model.name} --reference legacy.h5")


def _original(report: dict[str, Any], opts: VerifyOptions) -> tuple[VerifyOptions, str] | None:
    inp = report.get("input") or {}
    recorded, sha = inp.get("path"), inp.get("sha256")
    if not isinstance(recorded, str) or not isinstance(sha, str):
        return None
    for cand in _candidates(recorded, opts.model):
        if cand.is_file() and file_sha256(cand) == sha:
            src = report.get("source") or {}
            files = [] if src.get("set_aside") else [f for f in src.get("files") or [] if isinstance(f, str)]
            found = [next((str(p) for p in _candidates(f, opts.model) if p.is_file()), None) for f in files]
            if not opts.sources and None in found:
                return None  # the model needs its source, and the recorded files are not all there
            sources = opts.sources or tuple(f for f in found if f is not None)
            line = f"reference: {cand} from {report_path(opts.model).parent.name} (sha256 matches)" + (
                f"; sources: {', '.join(sources)}" if sources and not opts.sources else "")
            return dataclasses.replace(opts, reference=cand, sources=tuple(sources)), line
    return None
