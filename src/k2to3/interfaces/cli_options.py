"""The command line's options, derived from the options model (core/options.py): a typer parameter per field a
command takes (its flag, help and panel from the field's metadata), and back from the parsed values to the model's
types (comma lists, sizes, choices)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from k2to3.core.options import fields_of, flags
from k2to3.errors import InputError
from k2to3.interfaces.cli_help import Command


def _help(f: dataclasses.Field, command: str) -> str:
    h = f.metadata["help"]
    return (h.get(command) or h["verify"]) if isinstance(h, dict) else h  # export reads as verify


def _cli_type(f: dataclasses.Field) -> tuple[Any, Any]:
    """(annotation, default) of the field on the command line."""
    cli, kind = f.metadata["cli"], str(f.type)
    if cli == "csv":
        return str, ",".join(f.default)
    if cli == "size":
        return str | None, None
    if cli == "list":
        return list[str] | None, None
    if cli == "choice":
        return str, f.default
    types = {"Path | None": Path | None, "float | None": float | None, "int | None": int | None, "bool": bool,
             "str | None": str | None, "str": str}
    return types[kind], f.default


def metavar(f: dataclasses.Field) -> str | None:
    """How --help names the value (None: from its type, interfaces/cli_help.py)."""
    cli = f.metadata["cli"]
    if f.metadata["metavar"]:
        return f.metadata["metavar"]
    if cli == "choice":
        return "|".join(f.metadata["choices"])
    return {"csv": "LIST", "size": "SIZE", "list": "FILE"}.get(cli or "")


def parameters(cls: type, command: str) -> list[inspect.Parameter]:
    """A typer parameter for every option of `command`."""
    out = []
    for f in fields_of(cls, command):
        annotation, default = _cli_type(f)
        extra = {} if f.metadata["minimum"] is None else {"min": f.metadata["minimum"]}
        opt = typer.Option(*flags(f), help=escape(_help(f, command)), rich_help_panel=f.metadata["group"],
                           metavar=metavar(f), **extra)
        out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                     annotation=Annotated[annotation, opt]))
    return out


def values(cls: type, command: str, given: dict[str, Any]) -> dict[str, Any]:
    """The parsed command line as the options model's keyword arguments (unknown keys: left out)."""
    kw: dict[str, Any] = {}
    for f in fields_of(cls, command):
        if f.name not in given:
            continue
        v, cli = given[f.name], f.metadata["cli"]
        if cli == "csv":
            v = tuple(b.strip() for b in v.split(",") if b.strip())
        elif cli == "size":
            v = parse_size(flags(f)[0], v)
        elif cli == "list":
            v = tuple(v or ())
        elif cli == "choice" and v is not None and v not in f.metadata["choices"]:
            what = "format" if f.name == "export" else "mode"
            raise InputError(f"{flags(f)[0]} {v}: unknown {what}", hint=f"choose {' or '.join(f.metadata['choices'])}")
        kw[f.name] = v
    return kw


def single_model_flags(cls: type, command: str, parsed: dict[str, Any]) -> list[str]:
    """The flags the user set (to something other than their default) that apply to one model only: `convert
    STORE/` passes on the `store` options alone (core/options.py)."""
    return [flags(f)[0] for f in fields_of(cls, command) if not f.metadata.get("store") and f.name in parsed
            and parsed[f.name] not in (None, False, (), [], _cli_type(f)[1])]


def parse_size(flag: str, text: str | None) -> int | None:
    if text is None:
        return None
    from k2to3.workers.memory import parse_size as parse

    try:
        return parse(text)
    except (ValueError, OverflowError, IndexError):
        raise InputError(f"{flag} {text}: not a size", hint="give bytes or a number with K, M, G or T, "
                         "e.g. --max-memory 4G") from None


def command(app: typer.Typer, name: str, head: list[inspect.Parameter], cls: type, body: Callable[..., None],
            **kw: Any) -> None:
    """Register `body(**values)` as the command `name`, with `head` (its arguments) and the options of `cls`."""
    params = [*head, *parameters(cls, name)]

    def run(**values: Any) -> None:
        body(**values)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    run.__name__ = name
    run.__doc__ = body.__doc__
    app.command(name=name, cls=Command, **kw)(run)
