"""The two consoles of the command line (results on stdout, progress and errors on stderr) and the one way a command
fails: one line, the documented exit code (docs/exit-codes.md)."""

from __future__ import annotations

import os
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from k2to3.errors import K2to3Error

err = Console(stderr=True, log_path=False)
# A terminal's width, or COLUMNS; piped with neither, 140 (Rich's 80 would squeeze the table into a log).
out = Console(width=None if Console().is_terminal or os.environ.get("COLUMNS", "").isdigit() else 140)


def fail(exc: K2to3Error) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(exc.line())}", highlight=False, soft_wrap=True)  # [tool.k2to3] is text
    raise typer.Exit(int(exc.code))
