"""The two consoles of the command line (results on stdout, progress and errors on stderr) and the one way a command
fails: one line, the documented exit code (docs/exit-codes.md)."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

from k2to3.errors import K2to3Error

err = Console(stderr=True, log_path=False)
# Rich falls back to 80 columns when not on a terminal; the summary table needs more.
out = Console(width=None if Console().is_terminal else 140)


def fail(exc: K2to3Error) -> NoReturn:
    err.print(f"[bold red]error:[/] {exc.line()}", highlight=False, soft_wrap=True)
    raise typer.Exit(int(exc.code))
