"""How --help spells values: `FILE`, `FLOAT`, `train|inference` as click and ruff do, nothing after a flag, and the
usage line without braces (`k2to3 convert [OPTIONS] LEGACY...`). typer 0.29 prints `<bool>` after every flag and
`<list[str]>` for a repeatable option; its commands take a `cls`, so the spelling is set here, per parameter."""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup

_WORDS = {"str": "TEXT", "int range": "N", "int": "N", "float": "FLOAT", "path": "PATH", "list[str]": "TEXT",
          "float range": "FLOAT"}


def tidy(param: Any, ctx: Any = None) -> None:
    """Give `param` a metavar unless the command set one: none for a flag, else its type as one upper-case word."""
    if param is None:
        return
    if param.param_type_name == "argument":  # its name is its metavar; no type column beside it
        param.display_type_rich = lambda ctx: None
    if param.metavar is not None:
        return
    if getattr(param, "is_flag", False):
        param.metavar = ""
        return
    try:
        shown = param.display_type(ctx).strip("<>")
    except Exception:  # a type typer cannot name without a context: keep typer's own spelling
        return
    param.metavar = _WORDS.get(shown, shown.upper())


class _Tidy:
    """Every parameter of the command (and its --help) tidied once it exists."""

    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for p in self.params:
            tidy(p)

    def get_help_option(self, ctx: Any) -> Any:
        opt = super().get_help_option(ctx)  # type: ignore[misc]
        tidy(opt)
        return opt


class Command(_Tidy, TyperCommand):
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [p.replace("{", "").replace("}", "") for p in super().collect_usage_pieces(ctx)]


class Group(_Tidy, TyperGroup):
    pass
