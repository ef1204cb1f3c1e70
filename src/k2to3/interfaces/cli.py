"""The k2to3 command line. Exit codes: docs/exit-codes.md."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from k2to3.core.options import MAX_MEMORY_HELP, CheckOptions, LintOptions
from k2to3.core.writable import write_atomic
from k2to3.errors import K2to3Error
from k2to3.interfaces import cli_options, cli_rule
from k2to3.interfaces.cli_help import Command, Group
from k2to3.interfaces.console import err, out
from k2to3.interfaces.console import fail as _fail
from k2to3.version import __version__

app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Move legacy Keras 2 models to multi-backend Keras 3 and prove they compute the same thing.",
    epilog="Run `k2to3 COMMAND --help` for a command's options, examples and exit codes.",
)


def _version(value: bool) -> None:
    if value:
        out.print(f"k2to3 {__version__}", highlight=False)
        raise typer.Exit(0)


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", help="Print the version and exit.",
                                                callback=_version, is_eager=True)] = False) -> None:
    """Move legacy Keras 2 models to multi-backend Keras 3 and prove they compute the same thing."""


CONVERT_EPILOG = (
    "Examples:\n\n"
    "  k2to3 convert legacy.h5 -o model.keras\n\n"
    "  k2to3 convert legacy.h5 -o model.keras --backends tensorflow,jax --report-dir reports/\n\n"
    "  k2to3 convert legacy.h5 -o model.keras --input batch.npz --rtol 1e-4 --atol 1e-5 --json\n\n"
    "  k2to3 convert lambdas.h5 --src train.py -o model.keras   (Lambda / custom code from the source; "
    "writes model_k3.py beside model.keras)\n\n"
    "  k2to3 convert weights.h5 --src model.py:build_model -o model.keras   (a save_weights file)\n\n"
    "Exit codes: 0 parity on every backend, 1 mismatch, 2 usage or input error, 3 not portable (or "
    "TensorFlow-only: written, verified on tensorflow only), 4 internal error."
)
VERIFY_EPILOG = (
    "Examples:\n\n"
    "  k2to3 verify model.keras --reference legacy.h5\n\n"
    "  k2to3 verify model.keras --golden model.golden.npz   (after upgrading keras, torch or jax)\n\n"
    "Exit codes: as convert: 0 parity, 1 mismatch (or drift from the golden file), 2 usage or input error, "
    "3 not portable, 4 internal error."
)
KW = inspect.Parameter.KEYWORD_ONLY
SourcePaths = Annotated[list[Path] | None, typer.Argument(
    metavar="PATH", help="Files or directories (.py and .ipynb) \\[default: the current directory]")]
STORE = "Model store (SRC is a directory, several paths or a URL)"
JSON = inspect.Parameter("as_json", KW, default=False, annotation=Annotated[bool, typer.Option(
    "--json", help="Print the report as JSON on stdout.", rich_help_panel="Output")])
CONVERT_HEAD = [
    inspect.Parameter("src", KW, annotation=Annotated[list[str], typer.Argument(
        metavar="LEGACY", help="Legacy Keras 2 model: .h5/.hdf5 (model.save or save_weights), a tf.keras .keras "
        "archive or a SavedModel directory; or a model store: directories, several paths or fsspec URLs "
        "(s3://...), converted to a mirrored tree under OUTPUT (docs/convert.md#stores).")]),
    inspect.Parameter("output", KW, annotation=Annotated[str, typer.Option(
        "-o", "--output", metavar="PATH", help="The Keras 3 .keras file to write (a directory or URL for a store).",
        rich_help_panel="Output")]),
    JSON,
    inspect.Parameter("src_root", KW, default=None, annotation=Annotated[Path | None, typer.Option(
        "--src-root", help="Store: also look for each artifact's Lambda/custom code in the .py files under this "
        "tree.", rich_help_panel=STORE)]),
    inspect.Parameter("jobs", KW, default=1, annotation=Annotated[int, typer.Option(
        "--jobs", min=1, help="Store: artifacts converted at a time (local).", rich_help_panel=STORE)]),
    inspect.Parameter("executor", KW, default="local", annotation=Annotated[str, typer.Option(
        "--executor", metavar="local|ray", help="Store: where artifacts run.", rich_help_panel=STORE)]),
    inspect.Parameter("ray_address", KW, default=None, annotation=Annotated[str | None, typer.Option(
        "--ray-address", metavar="ADDRESS", help="Store with --executor ray: auto or ray://host:10001 "
        "\\[default: a local Ray]", rich_help_panel=STORE)]),
]
VERIFY_HEAD = [
    inspect.Parameter("model", KW, annotation=Annotated[Path, typer.Argument(
        metavar="MODEL", help="The Keras 3 .keras file to verify (loaded with safe_mode=True, never written).")]),
    JSON,
]


def convert(src: list[str], output: str, as_json: bool, src_root: Path | None, jobs: int, executor: str,
            ray_address: str | None, **options: Any) -> None:
    """Convert a legacy Keras 2 model to Keras 3 [bold].keras[/] and verify it on every backend."""
    from k2to3.core.options import ConvertOptions
    from k2to3.stores.locations import is_url

    # a TF checkpoint's directory, and a SavedModel directory, are one model (its file output, --src, --force)
    one_model = any((Path(src[0]) / marker).is_file() for marker in ("checkpoint", "saved_model.pb"))
    if len(src) > 1 or is_url(src[0]) or (Path(src[0]).is_dir() and not one_model) or is_url(output):
        from k2to3.interfaces.cli_store import convert_store
        from k2to3.stores.executors import ExecutorSettings

        single = cli_options.single_model_flags(ConvertOptions, "convert", options) + (["--json"] if as_json else [])
        try:
            settings = cli_options.values(ConvertOptions, "convert", options)
        except K2to3Error as exc:
            _fail(exc)
        convert_store(src, output, settings=settings, src_root=src_root,
                      where=ExecutorSettings(executor, jobs, ray_address), single_only=single)
    from k2to3.pipeline.convert import convert as run

    try:
        opts = ConvertOptions(src=Path(src[0]), output=Path(output),
                              **cli_options.values(ConvertOptions, "convert", options))
    except K2to3Error as exc:
        _fail(exc)
    rdir = opts.report_dir or opts.output.with_name(opts.output.name + ".report")
    rflag = "--report-dir" if opts.report_dir else "report directory"
    _run("converting", run, opts, rdir, as_json, "; nothing written", rflag)


EXPORT_HEAD = [
    inspect.Parameter("model", KW, annotation=Annotated[Path, typer.Argument(
        metavar="MODEL", help="The Keras 3 .keras file to export (loaded with safe_mode=True, never written).")]),
    inspect.Parameter("format", KW, annotation=Annotated[str, typer.Option(
        "--format", metavar="onnx|litert|savedmodel|torch", help="The format: ONNX (.onnx), LiteRT/TFLite "
        "(.tflite), a TF SavedModel (a directory) or a torch ExportedProgram (.pt2).", rich_help_panel="Output")]),
    inspect.Parameter("output", KW, annotation=Annotated[Path, typer.Option(
        "-o", "--output", metavar="PATH", help="Where the exported file goes (written only once it ran).",
        rich_help_panel="Output")]),
    JSON,
]
EXPORT_EPILOG = (
    "Examples:\n\n"
    "  k2to3 export model.keras --format onnx -o model.onnx --reference legacy.h5\n\n"
    "  k2to3 export model.keras --format litert -o model.tflite --golden model.golden.npz\n\n"
    "Exit codes: as convert: 0 the exported file matches the Keras 2 reference, 1 mismatch, 2 usage or input "
    "error, 3 the format cannot take the model (one line names the op or layer), 4 internal error."
)


def export(model: Path, format: str, output: Path, as_json: bool, **options: Any) -> None:
    """Export a Keras 3 [bold].keras[/] to ONNX, LiteRT, a SavedModel or torch .pt2, checked against Keras 2.

    The exported file runs in its own runtime (onnxruntime, LiteRT, TensorFlow, torch) on the seeded inputs."""
    from k2to3.core.options import ExportOptions
    from k2to3.pipeline.export import export as run

    try:
        opts = ExportOptions(model=model, format=format, output=output,
                             **cli_options.values(ExportOptions, "export", options))
    except K2to3Error as exc:
        _fail(exc)
    rdir = opts.report_dir or output.with_name(output.name + ".report")
    _run("exporting", run, opts, rdir, as_json, "; nothing written",
         "--report-dir" if opts.report_dir else "report directory")


def verify(model: Path, as_json: bool, **options: Any) -> None:
    """Verify an existing Keras 3 [bold].keras[/] on every backend against its Keras 2 original or a golden file."""
    from k2to3.core.options import VerifyOptions
    from k2to3.pipeline.verify import verify as run

    try:
        opts = VerifyOptions(model=model, **cli_options.values(VerifyOptions, "verify", options))
    except K2to3Error as exc:
        _fail(exc)
    rdir = opts.report_dir or model.with_name(model.name + ".verify")
    _run("verifying", run, opts, rdir, as_json, "", "--report-dir" if opts.report_dir else "report directory")


def _run(doing: str, run: Callable[..., dict[str, Any]], opts: CheckOptions, rdir: Path, as_json: bool,
         interrupted: str, rflag: str) -> None:
    """Run a pipeline with a spinner, its progress logged; any K2to3Error is one line and its exit code (a model
    that is not portable gets its report and its error findings first). The report directory is checked first:
    a run that could not write its report does not start."""
    from k2to3.core.findings import grouped_lines
    from k2to3.core.writable import check_dir
    from k2to3.pipeline.report import NotPortableReport, write

    try:
        check_dir(rdir, rflag)
        with err.status(f"{doing}…", spinner="dots") as status:
            report = run(opts, progress=lambda s: (status.update(s), err.log(s)))
    except NotPortableReport as exc:
        try:
            write(exc.report, rdir)
        except K2to3Error as wexc:
            _fail(wexc)
        lines = grouped_lines([f for f in exc.report["findings"] if f["severity"] == "error"])
        for line in lines if len(lines) > 1 else ():  # one problem: the error line says it all
            err.print(f"  {line}", highlight=False, soft_wrap=True)
        _fail(exc)
    except K2to3Error as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err.print(f"[red]interrupted[/]{interrupted}")
        raise typer.Exit(130) from None
    _emit(report, rdir, as_json)


def _register() -> None:
    from k2to3.core.options import ConvertOptions, ExportOptions, VerifyOptions

    cli_options.command(app, "convert", CONVERT_HEAD, ConvertOptions, convert, epilog=CONVERT_EPILOG)
    cli_options.command(app, "verify", VERIFY_HEAD, VerifyOptions, verify, epilog=VERIFY_EPILOG)
    cli_options.command(app, "export", EXPORT_HEAD, ExportOptions, export, epilog=EXPORT_EPILOG)


_register()


def _emit(report: dict, rdir: Path, as_json: bool) -> None:
    """Write report.json/report.md, print the JSON or the summary, exit with the report's code."""
    from k2to3.interfaces.summary import print_summary
    from k2to3.pipeline.report import write

    try:
        paths = write(report, rdir)
    except K2to3Error as exc:
        _fail(exc)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        print_summary(out, report)
        out.print(f"report: {paths[0]}  {paths[1]}", highlight=False)
    raise typer.Exit(report["exit_code"])


LINT_EPILOG = (
    "Examples:\n\n"
    "  k2to3 lint                    # the current directory\n\n"
    "  k2to3 lint src/\n\n"
    "  k2to3 lint model.py notebooks/ --format sarif > k2to3.sarif\n\n"
    "  k2to3 lint . --select K2T1,K2T2 --ignore K2T103\n\n"
    "Suppress one line with `# noqa: K2T101`, a whole file with `# k2to3: noqa`; configure with \\[tool.k2to3] "
    "select/ignore/exclude in pyproject.toml. Exit codes: 0 clean, 1 findings, 2 error."
)


def lint(paths: list[Path] | None, **options: Any) -> None:
    """Report non-portable Keras 2 / TensorFlow code (tf.*, K.*, Lambda, tf.keras) with stable rule codes."""
    from k2to3.source.command import lint as run  # interfaces/fastlint.py runs the same function

    try:
        text, code = run(paths or [], **options)
    except K2to3Error as exc:
        _fail(exc)
    sys.stdout.write(text)
    raise typer.Exit(code)


cli_options.command(app, "lint", [inspect.Parameter("paths", KW, default=None, annotation=SourcePaths)], LintOptions,
                    lint, epilog=LINT_EPILOG)  # its options: core/options.py LintOptions, as fastlint reads them


@app.command(
    cls=Command,
    epilog=(
        "Examples:\n\n"
        "  k2to3 fix model.py            # dry run: says what would change\n\n"
        "  k2to3 fix src/ --diff         # print a unified diff\n\n"
        "  k2to3 fix src/ --write        # rewrite the files\n\n"
        "Exit codes: 0 nothing to change (or written), 1 changes pending (dry run), 2 error."
    )
)
def fix(
    paths: SourcePaths = None,
    write: Annotated[bool, typer.Option("--write", help="Rewrite the files in place.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print a unified diff of the changes.")] = False,
) -> None:
    """Rewrite tf.* / K.* calls to keras.ops, K config to keras.config and tf.keras to keras (dry run by default)."""
    from k2to3.core.text import plural
    from k2to3.source.files import load_config
    from k2to3.source.run import fix_paths, unified_diff

    paths = paths or [Path(".")]
    missing = [p for p in paths if not p.exists()]
    if missing:
        _fail(K2to3Error(f"{missing[0]}: no such file or directory"))
    res = fix_paths(paths, load_config(paths[0]))
    for path, (old, new) in res.changed.items():
        if diff:
            sys.stdout.write(unified_diff(path, old, new))
        if write:
            write_atomic(Path(path), new)
    for e in res.errors + res.kept:
        err.print(e, highlight=False, soft_wrap=True)
    verb = "rewrote" if write else "would rewrite"
    err.print(f"{verb} {plural(res.rewrites, 'call or import', 'calls and imports')} in "
              f"{plural(len(res.changed), 'file')}", highlight=False)
    raise typer.Exit(0 if write or not res.changed else 1)


@app.command(
    cls=Command,
    epilog=(
        "Examples:\n\n"
        "  k2to3 audit models/ src/ -o audit/\n\n"
        "  k2to3 audit models/ --verify -o audit/    # convert + verify each artifact; resumable\n\n"
        "Exit codes: 0 every artifact portable (and at parity with --verify), 1 a verified mismatch, "
        "2 usage error, 3 an artifact that needs source, is TF-only or blocked."
    )
)
def audit(
    paths: Annotated[list[str], typer.Argument(metavar="PATH", help="Directories or files: model stores, "
                                               "repositories; or fsspec URLs (s3://bucket/models/, gs://..., "
                                               "file://...).")],
    out_dir: Annotated[Path, typer.Option("-o", "--output", help="Where the reports go.")] = Path("k2to3-audit"),
    fmt: Annotated[str, typer.Option("--format", metavar="LIST",
                                     help="Comma-separated: md, html, json.")] = "md,html,json",
    verify: Annotated[bool, typer.Option("--verify", help="Convert and verify every artifact (warm workers, "
                                                          "results cached by content hash: resumable).")] = False,
    max_memory: Annotated[str | None, typer.Option("--max-memory", metavar="SIZE",
                                                   help=escape(MAX_MEMORY_HELP) + " With --verify.")] = None,
    executor: Annotated[str, typer.Option("--executor", metavar="local|ray", help="With --verify: local (warm "
                                          "workers on this machine) or ray (docs/scale.md).")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", metavar="ADDRESS", help="With --executor "
                                                    "ray: auto or ray://host:10001 \\[default: a local Ray]")] = None,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="With --verify --executor local: artifacts at a "
                                      "time.")] = 1,
) -> None:
    """Migration audit of a tree: legacy artifacts (by content) with predicted verdicts; source findings."""
    from rich.progress import Progress

    from k2to3.core.writable import check_dir
    from k2to3.stores.audit import audit_urls, run_audit
    from k2to3.stores.locations import is_url

    urls = [p for p in paths if is_url(p)]
    paths = [Path(p) for p in paths if not is_url(p)]  # type: ignore[misc]

    formats = [f.strip() for f in fmt.split(",") if f.strip()]
    bad = [f for f in formats if f not in ("md", "html", "json")]
    if bad:
        _fail(K2to3Error(f"unknown report format '{bad[0]}'", hint="choose from md, html, json"))
    missing = [p for p in paths if not p.exists()]
    if missing:
        _fail(K2to3Error(f"{missing[0]}: no such file or directory"))
    ex = None
    try:
        check_dir(out_dir, "-o")  # before the scan: a run that cannot write its report does not start
        budget = cli_options.parse_size("--max-memory", max_memory)
        if verify and (executor != "local" or jobs > 1 or urls):
            from k2to3.stores import executors

            ex = executors.make(executor, jobs=jobs, max_memory=budget, ray_address=ray_address)
    except K2to3Error as exc:
        _fail(exc)
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("auditing", total=None)

        def progress(i: int, n: int, path: str) -> None:
            what = f"verified {Path(path).name}" if path else "done" if i >= n else \
                "starting workers (tensorflow, torch, jax: ~20 s of imports)"
            bar.update(task, total=n, completed=i, description=what)

        try:
            if urls:
                if paths:
                    _fail(K2to3Error("audit takes either local paths or URLs, not both",
                                     hint="audit them in two runs"))
                rep = audit_urls(urls, out_dir, verify=verify, executor=ex, progress=progress)
            else:
                rep = run_audit(paths, out_dir, verify=verify, progress=progress, max_memory=budget, executor=ex)
        except K2to3Error as exc:
            _fail(exc)
        except KeyboardInterrupt:
            err.print("[red]interrupted[/]; finished models are cached: run the same command to resume")
            raise typer.Exit(130) from None
    _finish_audit(rep, [str(p) for p in paths] or urls, out_dir, formats)


def _finish_audit(rep: dict[str, Any], given: list[str], out_dir: Path, formats: list[str]) -> None:
    """Say what was skipped, refuse an audit that found nothing (exit 5), write the reports, print the summary and
    exit with the audit's code."""
    from k2to3.core.text import plural
    from k2to3.errors import Exit
    from k2to3.interfaces.summary import print_audit_summary
    from k2to3.stores.auditreport import build, write

    model = build(rep)
    for x in model["skipped"]:
        err.print(f"skipped {x['relpath']}: {x['reason']}", highlight=False, soft_wrap=True, markup=False)
    if not rep["artifacts"] and not rep["n_source_files"]:
        skipped = f"; {plural(len(model['skipped']), 'file')} named like a model skipped" if model["skipped"] else ""
        _fail(K2to3Error(f"nothing to audit in {' '.join(given)}: no Keras artifact and no Python "
                         f"source{skipped}", Exit.EMPTY, hint="check the path"))
    try:
        written = write(rep, out_dir, formats, model)
    except OSError as exc:
        _fail(K2to3Error(f"-o {out_dir}: cannot write the report ({exc.strerror or exc})",
                         hint="check the disk space and permissions"))
    print_audit_summary(out, model, written)
    verified = [a["verify"]["verdict"] for a in rep["artifacts"] if "verify" in a]
    if rep["worst_verdict"] not in (None, "portable"):
        raise typer.Exit(3)
    raise typer.Exit(1 if "mismatch" in verified else 0)


cli_rule.register(app)  # k2to3 rule CODE (interfaces/cli_rule.py)


@app.command(cls=Command)
def version() -> None:
    """Print the k2to3 version."""
    out.print(__version__)


def main() -> None:
    try:
        app(prog_name="k2to3")  # also under `python -m k2to3`
    except K2to3Error as exc:  # pragma: no cover - commands handle their own errors
        err.print(f"error: {exc.line()}")
        sys.exit(int(exc.code))

