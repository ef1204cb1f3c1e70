"""The k2to3 command line. Exit codes: docs/exit-codes.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from . import __version__
from .errors import Exit, K2to3Error

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


@app.command(
    epilog=(
        "Examples:\n\n"
        "  k2to3 convert legacy.h5 -o model.keras\n\n"
        "  k2to3 convert legacy.h5 -o model.keras --backends tensorflow,jax --report-dir reports/\n\n"
        "  k2to3 convert legacy.h5 -o model.keras --input batch.npz --rtol 1e-4 --atol 1e-5 --json\n\n"
        "Exit codes: 0 parity on every backend, 1 mismatch, 2 usage or input error, 3 not portable, "
        "4 internal error."
    )
)
def convert(
    src: Annotated[Path, typer.Argument(help="Legacy Keras 2 model (.h5/.hdf5 written by model.save).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The Keras 3 .keras file to write.")],
    report_dir: Annotated[Path | None, typer.Option(help="Where to write report.json and report.md "
                                                         "[default: OUTPUT's name + '.report/']")] = None,
    input_npz: Annotated[Path | None, typer.Option("--input", help="Inputs to compare on (.npz: in0, in1, ...) "
                                                   "instead of the seeded ones.")] = None,
    rtol: Annotated[float | None, typer.Option(help="Relative tolerance [default: 1e-5]")] = None,
    atol: Annotated[float | None, typer.Option(help="Absolute tolerance [default: 1e-6]")] = None,
    backends: Annotated[str, typer.Option(help="Backends to verify on, comma-separated.")] = "tensorflow,torch,jax",
    force: Annotated[bool, typer.Option("--force", help="Replace OUTPUT if it exists.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
) -> None:
    """Convert a legacy Keras 2 HDF5 model to Keras 3 [bold].keras[/] and verify it on every backend."""
    from .convert import NotPortableReport, Options
    from .convert import convert as run
    from .report import write

    opts = Options(src=src, out=output, report_dir=report_dir, input_npz=input_npz, rtol=rtol, atol=atol,
                   backends=tuple(b.strip() for b in backends.split(",") if b.strip()), force=force)
    rdir = report_dir or output.with_name(output.name + ".report")
    try:
        with err.status("converting…", spinner="dots") as status:
            report = run(opts, progress=lambda s: (status.update(s), err.log(s)))
    except NotPortableReport as exc:
        write(exc.report, rdir)
        for f in exc.report["findings"]:
            if f["severity"] == "error":
                err.print(f"  {f['code']} layer '{f['layer']}': {f['message']}", highlight=False)
        _fail(exc)
    except K2to3Error as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err.print("[red]interrupted[/]; nothing written")
        raise typer.Exit(130) from None
    paths = write(report, rdir)
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2, default=str) + "\n")
    else:
        _summary(report)
        out.print(f"report: {paths[0]}  {paths[1]}", highlight=False)
    raise typer.Exit(report["exit_code"])


def _summary(report: dict) -> None:
    from .report import _fmt

    ref = report["reference"]
    t = Table(title=f"{report['input']['path']} → {report['output']['path']}  "
                    f"(reference: {ref.get('kind')}, rtol={report['tolerance']['rtol']:g}, "
                    f"atol={report['tolerance']['atol']:g})")
    for col in ("backend", "status", "params", "weights sha256", "max abs", "max rel", "min rtol", "argmax",
                "first divergent layer"):
        t.add_column(col)
    for b, v in report["backends"].items():
        if v["status"] == "error":
            t.add_row(b, "[red]error[/]", "", "", "", "", "", "", v["error"][:60])
            continue
        outs = v["outputs"]
        agree = [o["argmax_agreement"] for o in outs if o["argmax_agreement"] is not None]
        color = "green" if v["status"] == "parity" else "red"
        t.add_row(b, f"[{color}]{v['status']}[/]", f"{v['params_trainable'] + v['params_non_trainable']:,}",
                  v["weight_hash"][:12], _fmt(max(o["max_abs"] for o in outs)),
                  _fmt(max(o["max_rel"] for o in outs)), _fmt(max(o["min_rtol"] for o in outs)),
                  f"{min(agree):.0f}%" if agree else "n/a", (v.get("first_divergent_layer") or {}).get("layer", ""))
    out.print(t)
    changed = [f for f in report["findings"] if f["severity"] != "info"]
    n_info = len(report["findings"]) - len(changed)
    out.print(f"{n_info} config fixes applied; {len(changed)} warnings", highlight=False)
    for f in changed:
        out.print(f"  {f['code']} {f['severity']}: {f['message']}", highlight=False)
    led = report["ledger"]
    out.print(f"weights: {led['tensors_restored']}/{led['tensors_expected']} tensors restored; "
              f"verdict: [bold]{report['verdict']}[/]; load with: {report['output']['load']}", highlight=False)


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


_ = Exit  # re-exported for documentation of exit codes
