"""The Python API (docs/api.md): `k2to3.convert`, `k2to3.verify`, `k2to3.lint`, `k2to3.fix` return typed reports
and raise the documented K2to3Error subclasses (errors.py) instead of exiting. Light on import: the pipelines
are imported when called, and only convert/verify start backend worker processes (lint/fix never import
keras, tensorflow, torch or jax)."""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PathLike = str | Path


@dataclass
class BackendResult:
    """One backend's row of the report (report.json `backends.<b>`, summarised; `data` has all of it)."""

    status: str  # parity / mismatch / error / skipped
    max_abs: float | None = None
    max_rel: float | None = None
    min_rtol: float | None = None
    min_atol: float | None = None
    weight_hash: str | None = None
    first_divergent_layer: str | None = None
    error: str | None = None
    data: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, v: dict[str, Any]) -> BackendResult:
        outs = v.get("outputs") or []

        def worst(key: str) -> float | None:
            return max((o[key] for o in outs), default=None)

        return cls(status=v["status"], max_abs=worst("max_abs"), max_rel=worst("max_rel"), min_rtol=worst("min_rtol"),
                   min_atol=worst("min_atol"), weight_hash=v.get("weight_hash"),
                   first_divergent_layer=(v.get("first_divergent_layer") or {}).get("layer"),
                   error=v.get("error") or v.get("reason"), data=v)


@dataclass
class ModelReport:
    """What `convert` and `verify` return: report.json as typed fields, and all of it in `data`."""

    verdict: str
    exit_code: int
    numeric_verdict: str | None
    reference: dict[str, Any]
    tolerance: dict[str, Any]
    backends: dict[str, BackendResult]
    output: dict[str, Any] | None
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, report: dict[str, Any]) -> ModelReport:
        return cls(verdict=report["verdict"], exit_code=report["exit_code"],
                   numeric_verdict=report.get("numeric_verdict"), reference=report.get("reference") or {},
                   tolerance=report.get("tolerance") or {},
                   backends={b: BackendResult.from_dict(v) for b, v in (report.get("backends") or {}).items()},
                   output=report.get("output"), data=report)

    @property
    def ok(self) -> bool:
        """Parity on every backend (exit code 0)."""
        return self.exit_code == 0

    def to_json(self) -> str:
        """report.json, exactly as the CLI writes it."""
        return json.dumps(self.data, indent=2, default=str) + "\n"

    def write(self, directory: PathLike) -> list[Path]:
        """Write report.json and report.md into `directory`."""
        from k2to3.report import write

        return write(self.data, Path(directory))


def _training(mode: str) -> bool:
    if mode not in ("train", "inference"):
        from k2to3.errors import InputError

        raise InputError(f"grads_mode={mode!r}: unknown mode", hint="choose 'train' or 'inference'")
    return mode == "train"


def _paths(paths: PathLike | Iterable[PathLike]) -> list[Path]:
    return [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]


def convert(src: PathLike, output: PathLike, *, backends: Sequence[str] = ("tensorflow", "torch", "jax"),
            rtol: float | None = None, atol: float | None = None, inputs: PathLike | None = None,
            sources: Sequence[str] = (), force: bool = False, trust_bytecode: bool = False,
            save_golden: bool = False, report_dir: PathLike | None = None, max_memory: int | None = None,
            progress: Callable[[str], None] | None = None, pool: Any = None, grads: bool = False,
            loss: str | None = None, grad_rtol: float | None = None, grad_atol: float | None = None,
            grads_mode: str = "train") -> ModelReport:
    """`k2to3 convert` as a call. Returns the report (a mismatch is `verdict == "mismatch"`, not an exception);
    raises InputError (exit code 2), NotPortable (3) or K2to3Error (4) where the CLI would exit with that code.
    `report_dir`: also write report.json/report.md there (the NotPortable report too, before raising).
    `pool`: a warm k2to3.workers.pool.Pool to reuse across calls (else one is started and closed per call).
    `grads`, `loss`, `grad_rtol`, `grad_atol`, `grads_mode` ("train" or "inference"): as --grads and its options."""
    from k2to3.convert import NotPortableReport, Options
    from k2to3.convert import convert as run
    from k2to3.report import write

    opts = Options(src=Path(src), out=Path(output), input_npz=Path(inputs) if inputs else None, rtol=rtol,
                   atol=atol, backends=tuple(backends), force=force, sources=tuple(str(s) for s in sources),
                   trust_bytecode=trust_bytecode, max_memory=max_memory, save_golden=save_golden, grads=grads,
                   loss=loss, grad_rtol=grad_rtol, grad_atol=grad_atol, grads_training=_training(grads_mode))
    try:
        report = run(opts, progress=progress or (lambda s: None), pool=pool)
    except NotPortableReport as exc:
        if report_dir is not None:
            write(exc.report, Path(report_dir))
        raise
    if report_dir is not None:
        write(report, Path(report_dir))
    return ModelReport.from_dict(report)


def verify(model: PathLike, *, reference: PathLike | None = None, golden: PathLike | None = None,
           backends: Sequence[str] = ("tensorflow", "torch", "jax"), rtol: float | None = None,
           atol: float | None = None, inputs: PathLike | None = None, sources: Sequence[str] = (),
           report_dir: PathLike | None = None, max_memory: int | None = None,
           progress: Callable[[str], None] | None = None, pool: Any = None, grads: bool = False,
           loss: str | None = None, grad_rtol: float | None = None, grad_atol: float | None = None,
           grads_mode: str = "train") -> ModelReport:
    """`k2to3 verify` as a call: check an existing .keras against its Keras 2 original (`reference`) or a golden
    file (`golden`); the same report and exceptions as `convert`."""
    from k2to3.report import write
    from k2to3.verification import VerifyOptions
    from k2to3.verification import verify as run

    opts = VerifyOptions(keras=Path(model), reference=Path(reference) if reference else None,
                         golden=Path(golden) if golden else None, input_npz=Path(inputs) if inputs else None,
                         rtol=rtol, atol=atol, backends=tuple(backends), sources=tuple(str(s) for s in sources),
                         max_memory=max_memory, grads=grads, loss=loss, grad_rtol=grad_rtol, grad_atol=grad_atol,
                         grads_training=_training(grads_mode))
    report = run(opts, progress=progress or (lambda s: None), pool=pool)
    if report_dir is not None:
        write(report, Path(report_dir))
    return ModelReport.from_dict(report)


@dataclass
class LintReport:
    """What `lint` returns: every finding (path, line, col, code, message, fixable, cell) and the totals."""

    findings: list[dict[str, Any]]
    files: int
    suppressed: int
    files_suppressed: int
    errors: list[str]

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def codes(self) -> dict[str, int]:
        """Finding counts per rule code."""
        out: dict[str, int] = {}
        for f in self.findings:
            out[f["code"]] = out.get(f["code"], 0) + 1
        return dict(sorted(out.items()))

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def _config(paths: list[Path], select: Sequence[str] | None, ignore: Sequence[str] | None) -> Any:
    from k2to3.errors import InputError
    from k2to3.source.files import load_config

    missing = [p for p in paths if not p.exists()]
    if missing:
        raise InputError(f"{missing[0]}: no such file or directory")
    if not paths:
        raise InputError("no paths given", hint="pass files or directories")
    cfg = load_config(paths[0])
    if select:
        cfg.select = [c.strip().upper() for c in select]
    if ignore:
        cfg.ignore = [c.strip().upper() for c in ignore]
    return cfg


def lint(paths: PathLike | Iterable[PathLike], *, select: Sequence[str] | None = None,
         ignore: Sequence[str] | None = None, cache: bool = False) -> LintReport:
    """`k2to3 lint` as a call (pyproject [tool.k2to3] config applies, as on the command line)."""
    from k2to3.source.files import Cache
    from k2to3.source.run import lint_paths

    ps = _paths(paths)
    res = lint_paths(ps, _config(ps, select, ignore), Cache() if cache else None)
    return LintReport(findings=[f.to_dict() for f in res.findings], files=res.files, suppressed=res.suppressed,
                      files_suppressed=res.files_suppressed, errors=list(res.errors))


@dataclass
class FixReport:
    """What `fix` returns: the new text of every file that changes (written when `write=True`)."""

    changed: dict[str, str]
    rewrites: int
    written: bool
    errors: list[str]
    kept: list[str]

    def diff(self) -> str:
        """A unified diff of every change (against the files as they were)."""
        from k2to3.source.run import unified_diff

        return "".join(unified_diff(p, self._old[p], new) for p, new in self.changed.items())

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if k != "_old"}, indent=2) + "\n"

    _old: dict[str, str] = field(default_factory=dict, repr=False)


def fix(paths: PathLike | Iterable[PathLike], *, write: bool = False) -> FixReport:
    """`k2to3 fix` as a call: a dry run unless `write=True` (each file replaced atomically)."""
    from k2to3.source.run import fix_paths

    ps = _paths(paths)
    res = fix_paths(ps, _config(ps, None, None))
    if write:
        for path, (_, new) in res.changed.items():
            tmp = Path(path + ".k2to3-tmp")
            tmp.write_text(new)
            tmp.replace(path)
    return FixReport(changed={p: new for p, (_, new) in res.changed.items()}, rewrites=res.rewrites, written=write,
                     errors=list(res.errors), kept=list(res.kept), _old={p: old for p, (old, _) in res.changed.items()})


class CallableModule(types.ModuleType):
    """`k2to3.convert` is also the name of the pipeline module (k2to3/convert.py); calling it runs the API."""

    def __call__(self, *args: Any, **kwargs: Any) -> ModelReport:
        return convert(*args, **kwargs)
