"""The Python API (docs/api.md): `k2to3.convert`, `k2to3.verify`, `k2to3.lint`, `k2to3.fix` return typed reports
and raise the documented K2to3Error subclasses (errors.py) instead of exiting. Light on import: the pipelines
are imported when called, and only convert/verify start backend worker processes (lint/fix never import
keras, tensorflow, torch or jax)."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from k2to3.core.options import CheckOptions
    from k2to3.errors import K2to3Error

PathLike = str | Path
Opts = TypeVar("Opts", bound="CheckOptions")
Err = TypeVar("Err", bound="K2to3Error")


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
        from k2to3.pipeline.report import write

        return write(self.data, Path(directory))


def _paths(paths: PathLike | Iterable[PathLike]) -> list[Path]:
    return [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]


def _options(cls: type[Opts], given: dict[str, Any], api: str) -> Opts:
    """The options model from API keywords: the same names as its fields (core/options.py), paths and sequences
    as the caller has them; an unknown keyword is a TypeError, as for any Python function."""
    from k2to3.core.options import CheckOptions

    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"{api}() got an unexpected keyword argument {unknown[0]!r}")
    kw: dict[str, Any] = {}
    for name, value in given.items():
        kind = str(names[name].type)
        if value is not None and "Path" in kind:
            value = Path(value)
        elif value is not None and kind.startswith("tuple"):
            value = tuple(str(v) for v in value)
        kw[name] = value
    opts = cls(**kw)
    assert isinstance(opts, CheckOptions)
    opts.checked()
    return opts


def _api_words(exc: Err, cls: type) -> Err:
    """The error with the command line's flags in it said as this API's keywords (`--src model.py` ->
    `sources=['model.py']`, `--force` -> `force=True`): a Python caller has no flags. Same exception, same code."""
    import re

    from k2to3.core.options import fields_of

    names = {f.name for f in dataclasses.fields(cls)}
    command = "export" if "format" in names else "convert" if "output" in names else "verify"

    def value(name: str, wrap: str, sep: str | None, word: str | None) -> str:
        """`name=<the value>` when the word after the flag is one (a path, a number, a list, a placeholder such as
        N), else the keyword's name and the sentence goes on."""
        if word and word.isupper():  # a placeholder: fit_steps=N
            return f"{name}={word}"
        if word and re.search(r"[./\d,_]", word):
            return f"{name}={wrap.format(word)}"
        return name + (f"{sep}{word}" if word else "")

    def said(text: str | None) -> str | None:
        if not text:
            return text
        for f in fields_of(cls, command):
            for flag in f.metadata["flags"] or ("--" + f.name.replace("_", "-"),):
                if not flag.startswith("--"):
                    continue
                if str(f.type) == "bool":
                    text = re.sub(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", f"{f.name}=True", text)
                    continue
                wrap = "[{!r}]" if f.metadata["cli"] == "list" else "{!r}"
                text = re.sub(rf"(?<![\w-]){re.escape(flag)}(?:([ =])([^\s);]+?)(?=[,.]?:?(?:[\s);]|$)))?(?![\w-])",
                              lambda m, n=f.name, w=wrap: value(n, w, m.group(1), m.group(2)), text)
        return text

    exc.message, exc.hint = said(exc.message), said(exc.hint)
    exc.args = (exc.message,)
    return exc


def _signature(cls: type, head: list[inspect.Parameter], tail: list[inspect.Parameter],
               command: str | None = None) -> inspect.Signature:
    """The API function's signature, derived from the options model: `head`, every option (of `command` when
    given) as keyword-only with its default, then `tail` (progress, pool)."""
    from k2to3.core.options import fields_of

    names = {p.name for p in head}
    fields = fields_of(cls, command) if command else dataclasses.fields(cls)
    opts = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                              annotation=str(f.type)) for f in fields if f.name not in names]
    return inspect.Signature([*head, *opts, *tail], return_annotation="ModelReport")


_TAIL = [inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=None,
                           annotation="Callable[[str], None] | None"),
         inspect.Parameter("pool", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="Any")]


def convert(src: PathLike, output: PathLike, *, progress: Callable[[str], None] | None = None, pool: Any = None,
            **options: Any) -> ModelReport:
    """`k2to3 convert` as a call. Returns the report (a mismatch is `verdict == "mismatch"`, not an exception);
    raises InputError (exit code 2), NotPortable (3) or K2to3Error (4) where the CLI would exit with that code.
    Every option of the command line is a keyword here, named as in report.json's options model
    (core/options.py: `inputs` for --input, `sources` for --src, `max_memory` in bytes, `grads_mode`,
    `fit_steps`, `targets`, `config`, ...). `report_dir`: also write report.json/report.md there (the NotPortable
    report too, before raising). `pool`: a warm k2to3.workers.pool.Pool to reuse across calls (else one is
    started and closed per call)."""
    from k2to3.core.options import ConvertOptions
    from k2to3.errors import K2to3Error
    from k2to3.pipeline.convert import convert as run
    from k2to3.pipeline.report import NotPortableReport, write

    try:
        opts = _options(ConvertOptions, {"src": src, "output": output, **options}, "convert")
        report = run(opts, progress=progress or (lambda s: None), pool=pool)
    except NotPortableReport as exc:
        if opts.report_dir is not None:
            write(exc.report, opts.report_dir)
        raise _api_words(exc, ConvertOptions) from None
    except K2to3Error as exc:
        raise _api_words(exc, ConvertOptions) from None
    if opts.report_dir is not None:
        write(report, opts.report_dir)
    return ModelReport.from_dict(report)


def verify(model: PathLike, *, progress: Callable[[str], None] | None = None, pool: Any = None,
           **options: Any) -> ModelReport:
    """`k2to3 verify` as a call: check an existing .keras against its Keras 2 original (`reference`) or a golden
    file (`golden`); every option of the command line is a keyword, as for `convert`; the same report and
    exceptions."""
    from k2to3.core.options import VerifyOptions
    from k2to3.errors import K2to3Error
    from k2to3.pipeline.report import write
    from k2to3.pipeline.verify import verify as run

    try:
        opts = _options(VerifyOptions, {"model": model, **options}, "verify")
        report = run(opts, progress=progress or (lambda s: None), pool=pool)
    except K2to3Error as exc:
        raise _api_words(exc, VerifyOptions) from None
    if opts.report_dir is not None:
        write(report, opts.report_dir)
    return ModelReport.from_dict(report)


def export(model: PathLike, format: str, output: PathLike, *, progress: Callable[[str], None] | None = None,
           pool: Any = None, **options: Any) -> ModelReport:
    """`k2to3 export` as a call: export a .keras to `format` (onnx, litert, savedmodel, torch) at `output` and check
    the exported file in its own runtime against `reference` (the Keras 2 .h5) or `golden`; the report's `export`
    section holds the figures (a format that cannot take the model: verdict not_portable, exit_code 3)."""
    from k2to3.core.options import ExportOptions
    from k2to3.errors import K2to3Error
    from k2to3.pipeline.export import export as run
    from k2to3.pipeline.report import write

    try:
        opts = _options(ExportOptions, {"model": model, "format": format, "output": output, **options}, "export")
        report = run(opts, progress=progress or (lambda s: None), pool=pool)
    except K2to3Error as exc:
        raise _api_words(exc, ExportOptions) from None
    if opts.report_dir is not None:
        write(report, opts.report_dir)
    return ModelReport.from_dict(report)


def _derive_signatures() -> None:
    from k2to3.core.options import ConvertOptions, ExportOptions, VerifyOptions

    pos = inspect.Parameter.POSITIONAL_OR_KEYWORD
    convert.__signature__ = _signature(  # type: ignore[attr-defined]
        ConvertOptions, [inspect.Parameter("src", pos, annotation="PathLike"),
                         inspect.Parameter("output", pos, annotation="PathLike")], _TAIL)
    verify.__signature__ = _signature(  # type: ignore[attr-defined]
        VerifyOptions, [inspect.Parameter("model", pos, annotation="PathLike")], _TAIL)
    export.__signature__ = _signature(  # type: ignore[attr-defined]
        ExportOptions, [inspect.Parameter(n, pos, annotation=a) for n, a in (("model", "PathLike"),
                                                                              ("format", "str"),
                                                                              ("output", "PathLike"))], _TAIL,
        "export")


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
    from k2to3.core.writable import write_atomic
    from k2to3.source.run import fix_paths

    ps = _paths(paths)
    res = fix_paths(ps, _config(ps, None, None))
    if write:
        for path, (_, new) in res.changed.items():
            write_atomic(Path(path), new)
    return FixReport(changed={p: new for p, (_, new) in res.changed.items()}, rewrites=res.rewrites, written=write,
                     errors=list(res.errors), kept=list(res.kept), _old={p: old for p, (old, _) in res.changed.items()})


_derive_signatures()
