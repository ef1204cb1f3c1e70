"""`k2to3 convert STORE/ -o OUT/` on the command line: plan, one progress bar, summary table, store report."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from k2to3.errors import Exit, InputError, K2to3Error
from k2to3.interfaces.console import err, out
from k2to3.interfaces.console import fail as _fail
from k2to3.stores.executors import ExecutorSettings

REPORT_FORMATS = ("md", "html", "json")


class RateColumn(ProgressColumn):
    """Artifacts per second over the whole batch so far (cached ones count: they are finished work)."""

    def render(self, task: Any) -> Text:
        rate = task.completed / task.elapsed if task.elapsed else 0.0
        return Text(f"{rate:.2f} artifacts/s")


def _first_line(reason: str | None) -> str:
    return (reason or "").strip().splitlines()[0] if (reason or "").strip() else ""


def _relative(output: str | None, out_root: str) -> str:
    """An output location as the table shows it: relative to the output directory (a URL stays whole)."""
    import posixpath

    if not output:
        return ""
    root = out_root.rstrip("/") + "/"
    return output[len(root):] if output.startswith(root) else posixpath.relpath(output, out_root) \
        if "://" not in output and "://" not in out_root else output


def write_store_report(rep: dict[str, Any], out_root: str) -> list[str]:
    """The audit report's three forms (auditreport renders them) as OUT/store-report.{md,html,json}."""
    import json

    from k2to3.stores import locations as store
    from k2to3.stores.auditreport import build, to_html, to_markdown

    model = build(rep)  # the audit's report model (schema k2to3.audit/2) plus the convert totals
    render = {"json": lambda: json.dumps(model, indent=2, default=str) + "\n", "md": lambda: to_markdown(model),
              "html": lambda: to_html(model)}
    written = []
    for fmt in REPORT_FORMATS:
        loc = store.join(out_root, f"store-report.{fmt}")
        store.write_text(loc, render[fmt]())
        written.append(loc)
    return written


def convert_store(inputs: list[str], out_root: str, *, settings: dict[str, Any], src_root: Path | None,
                  where: ExecutorSettings, single_only: list[str]) -> None:
    """`settings`: the options given, as the options model's values; only its store options reach the artifacts.
    `single_only`: the flags given that apply to one model only (an error here)."""
    from k2to3.core.options import ConvertOptions, store_settings
    from k2to3.core.writable import check_dir
    from k2to3.stores import batch, executors
    from k2to3.stores.locations import is_url

    try:
        if single_only:
            raise InputError(f"{single_only[0]} applies to one model, not to a store",
                             hint="convert that model on its own, or use --src-root for a store's sources")
        if where.executor not in executors.NAMES:
            raise InputError(f"--executor {where.executor}: unknown executor", hint="choose local or ray")
        # src and output stand for each artifact's: only the store options are read from it
        opts = ConvertOptions(src=Path(out_root), output=Path(out_root), **{
            k: v for k, v in settings.items() if k in store_settings(ConvertOptions(src=Path(), output=Path()))})
        batch.check_settings(opts)
        per_artifact = store_settings(opts)
        if not is_url(out_root):  # before the scan: a store that cannot be written is not converted
            check_dir(Path(out_root), "-o")
        with err.status("finding artifacts…"):
            items = batch.plan(inputs, out_root, per_artifact, src_root)
        if not items:
            raise K2to3Error(f"nothing to convert in {' '.join(inputs)}: no Keras artifact found", Exit.EMPTY,
                             hint="check the path; `k2to3 audit PATH` lists what it finds and skips")
        ex = executors.make(where.executor, jobs=where.jobs, backends=opts.backends, max_memory=opts.max_memory,
                            ray_address=where.ray_address)
    except K2to3Error as exc:
        _fail(exc)
    counts: Counter = Counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("converting", total=len(items))

        def on_result(item: dict[str, Any], result: dict[str, Any]) -> None:
            counts[result["verdict"]] += 1
            bar.update(task, advance=1, description=" ".join(f"{k} {v}" for k, v in sorted(counts.items())))

        try:
            rep = batch.run_batch(inputs, items, out_root, ex, on_result)
        except KeyboardInterrupt:
            err.print("[red]interrupted[/]; finished artifacts are cached: run the same command to resume")
            raise typer.Exit(130) from None
        except K2to3Error as exc:
            _fail(exc)
    table = Table(title=f"{len(items)} artifacts → {out_root} ({rep['cached']} already done)")
    for col in ("artifact", "predicted", "result", "max abs", "attempts"):
        table.add_column(col)
    table.add_column("output / reason", overflow="fold")  # wrapped whole, never cut
    for a in rep["artifacts"]:
        v = a["verify"]
        color = {"parity": "green", "tf_only": "yellow", "not_portable": "yellow"}.get(v["verdict"], "red")
        mabs = v.get("max_abs")
        table.add_row(a["rel"], a["verdict"], f"[{color}]{v['verdict']}[/]" + (" (cached)" if v.get("cached") else ""),
                      "" if mabs is None else f"{mabs:.3g}", str(v.get("attempts", "")),
                      _first_line(v.get("reason")) or _relative(v.get("output"), out_root))
    out.print(table)
    written = write_store_report(rep, out_root)
    out.print(f"reports: {'  '.join(written)}", highlight=False)
    raise typer.Exit(rep["exit_code"])
