"""`k2to3 rule CODE`: a rule's documentation (what, why, example, fix) from the rule data shipped in the package
(k2to3/rules/*.toml, core/ruledocs.py), so it works from an installed wheel, where docs/ does not exist. Imports
nothing heavy (no keras, numpy or h5py): it answers in the time the interpreter and typer take to start."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from k2to3.errors import K2to3Error
from k2to3.interfaces.cli_help import Command
from k2to3.interfaces.console import fail, out

EPILOG = (
    "Examples:\n\n"
    "  k2to3 rule K2T401              # what it does, why, an example, the fix\n\n"
    "  k2to3 rule k2t901              # codes are case-insensitive\n\n"
    "  k2to3 rule --all               # every code with its title\n\n"
    "  k2to3 rule K2T401 --format json\n\n"
    "On a terminal the entry is rendered; piped, it is printed as Markdown text. "
    "Exit codes: 0 found, 2 unknown code or bad option."
)
FORMATS = ("text", "json")


def rule(
    code: Annotated[str | None, typer.Argument(help="A rule code such as K2T401 (any case). Omit it to list every "
                                               "rule.", metavar="CODE", show_default=False)] = None,
    show_all: Annotated[bool, typer.Option("--all", help="List every rule code with its one-line title.")] = False,
    fmt: Annotated[str, typer.Option("--format", metavar="text|json", help="Output format.")] = "text",
) -> None:
    """Print a rule's documentation: what it does, why, an example and the fix (also offline, from the package)."""
    from k2to3.core.ruledocs import lookup, markdown, rule_docs

    if fmt not in FORMATS:
        fail(K2to3Error(f"unknown format '{fmt}'", hint=f"choose from {', '.join(FORMATS)}"))
    if code is not None and show_all:
        fail(K2to3Error("give a rule code or --all, not both", hint="k2to3 rule --all lists the codes"))
    if code is None:
        docs = rule_docs().values()
        if fmt == "json":
            sys.stdout.write(json.dumps([d.to_dict() for d in docs], indent=2) + "\n")
        else:
            width = max(len(d.title) for d in docs)
            sys.stdout.write("".join(f"{d.code}  {d.title:<{width}}  {d.where.replace('`', '')}\n" for d in docs))
        return
    try:
        doc = lookup(code)
    except KeyError:
        fail(K2to3Error(f"unknown rule {code.strip().upper()}", hint="see k2to3 rule --all"))
    if fmt == "json":
        sys.stdout.write(json.dumps(doc.to_dict(), indent=2) + "\n")
    elif out.is_terminal:
        from rich.markdown import Markdown

        out.print(Markdown(markdown(doc)))
    else:
        sys.stdout.write(markdown(doc))


def register(app: typer.Typer) -> None:
    app.command("rule", epilog=EPILOG, cls=Command)(rule)
