"""The k2to3 command line. Exit codes: docs/exit-codes.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from k2to3 import __version__
from k2to3.errors import K2to3Error

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Move legacy Keras 2 models to multi-backend Keras 3 and prove they compute the same thing.",
)
err = Console(stderr=True, log_path=False)
# Rich falls back to 80 columns when not on a terminal; the summary table needs more.
out = Console(width=None if Console().is_terminal else 140)


def _fail(exc: K2to3Error) -> None:
    err.print(f"[bold red]error:[/] {exc.line()}", highlight=False, soft_wrap=True)
    raise typer.Exit(int(exc.code))


GRADS_HELP = ("Also compare the loss gradient w.r.t. every trainable variable on each backend with tf_keras's, on "
              "a seeded batch (training=True, dropout and noise off): report section `gradients`.")
GRADS_MODE_HELP = ("train: BatchNormalization normalizes with the batch statistics (a training step); inference: "
                   "with its moving statistics (fine-tuning with frozen BatchNormalization)")
FIT_HELP = ("Also run N train_on_batch steps with tf_keras and on each backend and compare weights and losses "
            "(docs/optimizers.md) [default: 1 with --grads, else 0].")
TARGETS_HELP = "Targets for --fit-steps (.npz: y0, y1, ...); default: seeded, typed for the loss."
LOSS_HELP = ("The loss for --grads and --fit-steps (a Keras loss name) [default: the file's training_config; "
             "--grads falls back to mean_squared_error]")
MAX_MEMORY_HELP = ("Memory budget for all k2to3 processes, e.g. 4G or 1500M: backends verify side by side only "
                   "while their estimated peaks fit, else one after another. [default: 80% of MemAvailable]")


def _grads_training(mode: str) -> bool:
    if mode not in ("train", "inference"):
        from k2to3.errors import InputError

        _fail(InputError(f"--grads-mode {mode}: unknown mode", hint="choose train or inference"))
    return mode == "train"


def _max_memory(text: str | None) -> int | None:
    if text is None:
        return None
    from k2to3.errors import InputError
    from k2to3.workers.memory import parse_size

    try:
        return parse_size(text)
    except (ValueError, OverflowError, IndexError):
        _fail(InputError(f"--max-memory {text}: not a size", hint="give bytes or a number with K, M, G or T, "
                         "e.g. --max-memory 4G"))
    return None


@app.command(
    epilog=(
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
)
def convert(
    src: Annotated[list[str], typer.Argument(help="Legacy Keras 2 model: .h5/.hdf5 (model.save or save_weights), a "
                                             "tf.keras .keras archive or a SavedModel directory; or a model store: "
                                             "directories, several paths or fsspec URLs (s3://...), converted to "
                                             "a mirrored tree under OUTPUT (docs/convert.md#stores).")],
    output: Annotated[str, typer.Option("-o", "--output", help="The Keras 3 .keras file to write (a directory or "
                                        "URL for a store).")],
    report_dir: Annotated[Path | None, typer.Option(help="Where to write report.json and report.md "
                                                         "[default: OUTPUT's name + '.report/']")] = None,
    input_npz: Annotated[Path | None, typer.Option("--input", help="Inputs to compare on (.npz: in0, in1, ...) "
                                                   "instead of the seeded ones.")] = None,
    rtol: Annotated[float | None, typer.Option(help="Relative tolerance [default: 1e-5]")] = None,
    atol: Annotated[float | None, typer.Option(help="Absolute tolerance [default: 1e-6]")] = None,
    backends: Annotated[str, typer.Option(help="Backends to verify on, comma-separated.")] = "tensorflow,torch,jax",
    force: Annotated[bool, typer.Option("--force", help="Replace OUTPUT if it exists.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    src_files: Annotated[list[str] | None, typer.Option(
        "--src", help="Python source that defines the model's Lambda functions, custom layers, activations or "
        "losses (repeatable; never run, definitions are extracted). FILE.py:FUNCTION names the build function "
        "of a weights-only file.")] = None,
    trust_bytecode: Annotated[bool, typer.Option(
        "--trust-bytecode", help="Allow unmarshalling the file's Lambda bytecode: to show what it references "
        "and, if this Python wrote it, to compute the Keras 2 reference from it. Only for files you trust.")] = False,
    max_memory: Annotated[str | None, typer.Option("--max-memory", help=MAX_MEMORY_HELP)] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="The model.to_json() / to_yaml() architecture of a save_weights SRC (found alone when it "
        "sits beside SRC: x.json + x.h5 or x_weights.h5, model.json + weights.h5).")] = None,
    src_root: Annotated[Path | None, typer.Option("--src-root", help="Store: also look for each artifact's "
                                                  "Lambda/custom code in the .py files under this tree.")] = None,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="Store: artifacts converted at a time (local).")] = 1,
    executor: Annotated[str, typer.Option("--executor", help="Store: local or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Store with --executor ray: auto or "
                                                    "ray://host:10001 [default: a local Ray]")] = None,
    save_golden: Annotated[bool, typer.Option("--save-golden", help="Also write OUTPUT's name + '.golden.npz' "
                                              "(inputs, reference outputs, tolerances, versions) for "
                                              "`k2to3 verify --golden` after upgrading keras/torch/jax.")] = False,
    grads: Annotated[bool, typer.Option("--grads", help=GRADS_HELP)] = False,
    loss: Annotated[str | None, typer.Option("--loss", help=LOSS_HELP)] = None,
    grad_rtol: Annotated[float | None, typer.Option(help="Gradient relative tolerance [default: 1e-4]")] = None,
    grad_atol: Annotated[float | None, typer.Option(help="Gradient absolute tolerance [default: 1e-6]")] = None,
    grads_mode: Annotated[str, typer.Option("--grads-mode", help=GRADS_MODE_HELP)] = "train",
    fit_steps: Annotated[int | None, typer.Option("--fit-steps", min=0, help=FIT_HELP)] = None,
    targets: Annotated[Path | None, typer.Option("--targets", help=TARGETS_HELP)] = None,
) -> None:
    """Convert a legacy Keras 2 model to Keras 3 [bold].keras[/] and verify it on every backend."""
    from k2to3.store import is_url

    if len(src) > 1 or is_url(src[0]) or Path(src[0]).is_dir() or is_url(output):
        from k2to3.batchcli import convert_store

        convert_store(src, output, backends=backends, rtol=rtol, atol=atol, trust_bytecode=trust_bytecode,
                      max_memory=_max_memory(max_memory), src_root=src_root, jobs=jobs, executor=executor,
                      ray_address=ray_address, single_only={"--src": src_files, "--input": input_npz,
                                                            "--report-dir": report_dir, "--json": as_json,
                                                            "--config": config})
    src, output = Path(src[0]), Path(output)  # type: ignore[assignment]
    from k2to3.convert import NotPortableReport, Options
    from k2to3.convert import convert as run
    from k2to3.report import write

    opts = Options(src=src, out=output, report_dir=report_dir, input_npz=input_npz, rtol=rtol, atol=atol,
                   backends=tuple(b.strip() for b in backends.split(",") if b.strip()), force=force,
                   sources=tuple(src_files or ()), trust_bytecode=trust_bytecode,
                   max_memory=_max_memory(max_memory), config=config, save_golden=save_golden, grads=grads,
                   loss=loss, grad_rtol=grad_rtol, grad_atol=grad_atol, grads_training=_grads_training(grads_mode),
                   fit_steps=fit_steps, targets=targets)
    rdir = report_dir or output.with_name(output.name + ".report")
    try:
        with err.status("converting…", spinner="dots") as status:
            report = run(opts, progress=lambda s: (status.update(s), err.log(s)))
    except NotPortableReport as exc:
        write(exc.report, rdir)
        for f in exc.report["findings"]:
            if f["severity"] == "error":
                where = f"layer '{f['layer']}': " if f["layer"] else ""
                err.print(f"  {f['code']} {where}{f['message']}", highlight=False)
        _fail(exc)
    except K2to3Error as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err.print("[red]interrupted[/]; nothing written")
        raise typer.Exit(130) from None
    _emit(report, rdir, as_json)


def _emit(report: dict, rdir: Path, as_json: bool) -> None:
    """Write report.json/report.md, print the JSON or the summary, exit with the report's code."""
    from k2to3.report import write

    paths = write(report, rdir)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        _summary(report)
        out.print(f"report: {paths[0]}  {paths[1]}", highlight=False)
    raise typer.Exit(report["exit_code"])


def _summary(report: dict) -> None:
    from k2to3.report import _fmt, noise_cell

    ref = report["reference"]
    t = Table(title=f"{report['input']['path']} → {report['output']['path']}  "
                    f"(reference: {ref.get('kind')}, rtol={report['tolerance']['rtol']:g}, "
                    f"atol={report['tolerance']['atol']:g})")
    for col in ("backend", "status", "params", "weights sha256", "max abs", "max rel", "min rtol", "argmax",
                "float32 noise", "first divergent layer"):
        t.add_column(col)
    for b, v in report["backends"].items():
        if v["status"] == "error":
            t.add_row(b, "[red]error[/]", "", "", "", "", "", "", "", v["error"][:60])
            continue
        if v["status"] == "skipped":
            t.add_row(b, "[yellow]skipped[/]", "", "", "", "", "", "", "", v["reason"][:60])
            continue
        outs = v["outputs"]
        agree = [o["argmax_agreement"] for o in outs if o["argmax_agreement"] is not None]
        noise = v.get("noise") or {}
        color = "green" if v["status"] == "parity" else "yellow" if noise.get("verdict") == "within_float32_noise" \
            else "red"
        t.add_row(b, f"[{color}]{v['status']}[/]", f"{v['params_trainable'] + v['params_non_trainable']:,}",
                  v["weight_hash"][:12], _fmt(max(o["max_abs"] for o in outs)),
                  _fmt(max(o["max_rel"] for o in outs)), _fmt(max(o["min_rtol"] for o in outs)),
                  f"{min(agree):.0f}%" if agree else "n/a", noise_cell(v.get("noise"))[:40],
                  (v.get("first_divergent_layer") or {}).get("layer", ""))
    out.print(t)
    from k2to3.report import output_notes

    for note in output_notes(report):
        out.print(f"[yellow]note[/]: {note}", highlight=False)
    changed = [f for f in report["findings"] if f["severity"] != "info"]
    n_info = len(report["findings"]) - len(changed)
    applied = "config fixes convert applies" if report.get("command") == "verify" else "config fixes applied"
    out.print(f"{n_info} {applied}; {len(changed)} warnings", highlight=False)
    for f in changed:
        where = f"layer '{f['layer']}': " if f.get("layer") else ""
        out.print(f"  {f['code']} {f['severity']}: {where}{f['message']}", highlight=False)
    for b, v in (report.get("gradients") or {}).get("backends", {}).items():
        out.print(f"gradients {b}: {v['status']}" + (f": {v.get('error')}" if v["status"] == "error" else
                  f", max rel L2 {v['max_rel_l2']:.3g}, min cosine {v['min_cosine']:.6f}, first divergent "
                  f"{v['first_divergent_variable'] or 'none'}"), highlight=False)
    from k2to3.precision import summary_lines  # mixed precision: which comparison decided the verdict

    for line in summary_lines(report):
        out.print(line, highlight=False)
    led = report.get("ledger")  # absent from `k2to3 verify` reports: nothing was restored
    nv = report.get("numeric_verdict")
    numeric = f" (numerically: {nv})" if nv not in (None, "parity") else ""
    restored = f"weights: {led['tensors_restored']}/{led['tensors_expected']} tensors restored; " if led else ""
    out.print(f"{restored}verdict: [bold]{report['verdict']}[/]{numeric}; load with: {report['output']['load']}",
              highlight=False)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  k2to3 verify model.keras --reference legacy.h5\n\n"
        "  k2to3 verify model.keras --golden model.golden.npz   (after upgrading keras, torch or jax)\n\n"
        "Exit codes: as convert: 0 parity, 1 mismatch (or drift from the golden file), 2 usage or input error, "
        "3 not portable, 4 internal error."
    )
)
def verify(
    model: Annotated[Path, typer.Argument(help="The Keras 3 .keras file to verify (loaded with safe_mode=True, "
                                          "never written).")],
    reference: Annotated[Path | None, typer.Option("--reference", help="The Keras 2 .h5 it came from: tf_keras "
                                                   "computes the golden output.")] = None,
    golden: Annotated[Path | None, typer.Option("--golden", help="A golden file from `convert --save-golden` "
                                                "instead of --reference.")] = None,
    report_dir: Annotated[Path | None, typer.Option(help="Where to write report.json and report.md "
                                                         "[default: MODEL's name + '.verify/']")] = None,
    input_npz: Annotated[Path | None, typer.Option("--input", help="Inputs (.npz: in0, in1, ...) instead of the "
                                                   "seeded ones (with --reference).")] = None,
    rtol: Annotated[float | None, typer.Option(help="Relative tolerance [default: 1e-5, or the golden file's]")] = None,
    atol: Annotated[float | None, typer.Option(help="Absolute tolerance [default: 1e-6, or the golden file's]")] = None,
    backends: Annotated[str, typer.Option(help="Backends to verify on, comma-separated.")] = "tensorflow,torch,jax",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    src_files: Annotated[list[str] | None, typer.Option(
        "--src", help="Python source of the model's Lambda functions / custom objects (as for convert).")] = None,
    max_memory: Annotated[str | None, typer.Option("--max-memory", help=MAX_MEMORY_HELP)] = None,
    grads: Annotated[bool, typer.Option("--grads", help=GRADS_HELP + " With --reference.")] = False,
    loss: Annotated[str | None, typer.Option("--loss", help=LOSS_HELP)] = None,
    grad_rtol: Annotated[float | None, typer.Option(help="Gradient relative tolerance [default: 1e-4]")] = None,
    grad_atol: Annotated[float | None, typer.Option(help="Gradient absolute tolerance [default: 1e-6]")] = None,
    grads_mode: Annotated[str, typer.Option("--grads-mode", help=GRADS_MODE_HELP)] = "train",
    fit_steps: Annotated[int | None, typer.Option("--fit-steps", min=0, help=FIT_HELP + " With --reference.")] = None,
    targets: Annotated[Path | None, typer.Option("--targets", help=TARGETS_HELP)] = None,
) -> None:
    """Verify an existing Keras 3 [bold].keras[/] on every backend against its Keras 2 original or a golden file."""
    from k2to3.verification import VerifyOptions
    from k2to3.verification import verify as run

    opts = VerifyOptions(keras=model, reference=reference, golden=golden, input_npz=input_npz, rtol=rtol, atol=atol,
                         backends=tuple(b.strip() for b in backends.split(",") if b.strip()),
                         sources=tuple(src_files or ()), max_memory=_max_memory(max_memory), grads=grads, loss=loss,
                         grad_rtol=grad_rtol, grad_atol=grad_atol, grads_training=_grads_training(grads_mode),
                         fit_steps=fit_steps, targets=targets)
    rdir = report_dir or model.with_name(model.name + ".verify")
    try:
        with err.status("verifying…", spinner="dots") as status:
            report = run(opts, progress=lambda s: (status.update(s), err.log(s)))
    except K2to3Error as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err.print("[red]interrupted[/]")
        raise typer.Exit(130) from None
    _emit(report, rdir, as_json)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  k2to3 lint src/\n\n"
        "  k2to3 lint model.py notebooks/ --format sarif > k2to3.sarif\n\n"
        "  k2to3 lint . --select K2T1,K2T2 --ignore K2T103\n\n"
        "Suppress one line with `# noqa: K2T101`, a whole file with `# k2to3: noqa`; configure with [tool.k2to3] "
        "select/ignore/exclude in pyproject.toml. Exit codes: 0 clean, 1 findings, 2 error."
    )
)
def lint(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (.py and .ipynb).")],
    fmt: Annotated[str, typer.Option("--format", help="text, json, sarif or github.")] = "text",
    select: Annotated[str | None, typer.Option(help="Only these codes or prefixes (comma-separated).")] = None,
    ignore: Annotated[str | None, typer.Option(help="Skip these codes or prefixes (comma-separated).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the result cache.")] = False,
) -> None:
    """Report non-portable Keras 2 / TensorFlow code (tf.*, K.*, Lambda, tf.keras) with stable rule codes."""
    from k2to3.source.files import Cache, load_config
    from k2to3.source.formats import FORMATS
    from k2to3.source.run import lint_paths

    if fmt not in FORMATS:
        _fail(K2to3Error(f"unknown format '{fmt}'", hint=f"choose from {', '.join(FORMATS)}"))
    missing = [p for p in paths if not p.exists()]
    if missing:
        _fail(K2to3Error(f"{missing[0]}: no such file or directory"))
    cfg = load_config(paths[0])
    if select:
        cfg.select = [c.strip().upper() for c in select.split(",") if c.strip()]
    if ignore:
        cfg.ignore = [c.strip().upper() for c in ignore.split(",") if c.strip()]
    res = lint_paths(paths, cfg, None if no_cache else Cache())
    sys.stdout.write(FORMATS[fmt](res))
    raise typer.Exit(1 if res.findings else 0)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  k2to3 fix model.py            # dry run: says what would change\n\n"
        "  k2to3 fix src/ --diff         # print a unified diff\n\n"
        "  k2to3 fix src/ --write        # rewrite the files\n\n"
        "Exit codes: 0 nothing to change (or written), 1 changes pending (dry run), 2 error."
    )
)
def fix(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (.py and .ipynb).")],
    write: Annotated[bool, typer.Option("--write", help="Rewrite the files in place.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print a unified diff of the changes.")] = False,
) -> None:
    """Rewrite tf.* / K.* calls to keras.ops, K config to keras.config and tf.keras to keras (dry run by default)."""
    from k2to3.source.files import load_config
    from k2to3.source.run import fix_paths, unified_diff

    missing = [p for p in paths if not p.exists()]
    if missing:
        _fail(K2to3Error(f"{missing[0]}: no such file or directory"))
    res = fix_paths(paths, load_config(paths[0]))
    for path, (old, new) in res.changed.items():
        if diff:
            sys.stdout.write(unified_diff(path, old, new))
        if write:
            tmp = Path(path + ".k2to3-tmp")
            tmp.write_text(new)
            tmp.replace(path)
    for e in res.errors + res.kept:
        err.print(e, highlight=False, soft_wrap=True)
    verb = "rewrote" if write else "would rewrite"
    err.print(f"{verb} {res.rewrites} calls/imports in {len(res.changed)} files", highlight=False)
    raise typer.Exit(0 if write or not res.changed else 1)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  k2to3 audit models/ src/ -o audit/\n\n"
        "  k2to3 audit models/ --verify -o audit/    # convert + verify each artifact; resumable\n\n"
        "Exit codes: 0 every artifact portable (and at parity with --verify), 1 a verified mismatch, "
        "2 usage error, 3 an artifact that needs source, is TF-only or blocked."
    )
)
def audit(
    paths: Annotated[list[str], typer.Argument(help="Directories or files: model stores, repositories; or fsspec "
                                               "URLs (s3://bucket/models/, gs://..., file://...).")],
    out_dir: Annotated[Path, typer.Option("-o", "--output", help="Where the reports go.")] = Path("k2to3-audit"),
    fmt: Annotated[str, typer.Option("--format", help="Comma-separated: md, html, json.")] = "md,html,json",
    verify: Annotated[bool, typer.Option("--verify", help="Convert and verify every artifact (warm workers, "
                                                          "results cached by content hash: resumable).")] = False,
    max_memory: Annotated[str | None, typer.Option("--max-memory", help=MAX_MEMORY_HELP + " With --verify.")] = None,
    executor: Annotated[str, typer.Option("--executor", help="With --verify: local (warm workers on this machine) "
                                          "or ray (docs/scale.md).")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="With --executor ray: auto or "
                                                    "ray://host:10001 [default: a local Ray]")] = None,
    jobs: Annotated[int, typer.Option("--jobs", min=1, help="With --verify --executor local: artifacts at a "
                                      "time.")] = 1,
) -> None:
    """Migration audit of a tree: legacy artifacts (by content) with predicted verdicts; source findings."""
    from rich.progress import Progress

    from k2to3.audit import VERDICTS, run_audit
    from k2to3.auditreport import write
    from k2to3.store import is_url

    urls = [p for p in paths if is_url(p)]
    paths = [Path(p) for p in paths if not is_url(p)]  # type: ignore[misc]

    formats = [f.strip() for f in fmt.split(",") if f.strip()]
    bad = [f for f in formats if f not in ("md", "html", "json")]
    if bad:
        _fail(K2to3Error(f"unknown report format '{bad[0]}'", hint="choose from md, html, json"))
    missing = [p for p in paths if not p.exists()]
    if missing:
        _fail(K2to3Error(f"{missing[0]}: no such file or directory"))
    budget = _max_memory(max_memory)
    ex = None
    if verify and (executor != "local" or jobs > 1 or urls):
        from k2to3 import executors

        try:
            ex = executors.make(executor, jobs=jobs, max_memory=budget, ray_address=ray_address)
        except K2to3Error as exc:
            _fail(exc)
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("auditing", total=None)

        def progress(i: int, n: int, path: str) -> None:
            bar.update(task, total=n, completed=i, description=f"verify {Path(path).name}" if path else "done")

        try:
            if urls:
                from k2to3.batch import audit_urls

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
    written = write(rep, out_dir, formats)
    for verdict in VERDICTS:
        n = rep["totals"].get(verdict, 0)
        if n:
            out.print(f"{n:4d} {verdict}", highlight=False)
    out.print(f"reports: {'  '.join(str(p) for p in written)}", highlight=False)
    verified = [a["verify"]["verdict"] for a in rep["artifacts"] if "verify" in a]
    if rep["worst_verdict"] not in (None, "portable"):
        raise typer.Exit(3)
    raise typer.Exit(1 if "mismatch" in verified else 0)


@app.command()
def version() -> None:
    """Print the k2to3 version."""
    out.print(__version__)


def main() -> None:
    try:
        app()
    except K2to3Error as exc:  # pragma: no cover - commands handle their own errors
        err.print(f"error: {exc.line()}")
        sys.exit(int(exc.code))

