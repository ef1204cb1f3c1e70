"""--build-args: the arguments of a build function, written as a call's argument list of Python literals and parsed
with ast.literal_eval (never eval: nothing in them runs)."""

from __future__ import annotations

import ast
from typing import Any

from k2to3.errors import InputError

EXAMPLE = "--build-args \"model_capacity='tiny'\""


def parse_build_args(text: str | None) -> dict[str, Any] | None:
    """ "'tiny', depth=3" -> {"args": ["tiny"], "kwargs": {"depth": 3}}; None for no --build-args."""
    if text is None:
        return None
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        raise InputError(f"--build-args {text!r}: not a call's argument list",
                         hint=f"write Python literals as in a call, e.g. {EXAMPLE}") from None
    assert isinstance(call, ast.Call)
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise InputError(f"--build-args {text!r}: * and ** are not accepted", hint=f"name each value, e.g. {EXAMPLE}")
    try:
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {str(k.arg): ast.literal_eval(k.value) for k in call.keywords}
    except ValueError:
        raise InputError(f"--build-args {text!r}: only Python literals (strings, numbers, tuples, lists, dicts, "
                         "True/False/None) are accepted", hint=f"e.g. {EXAMPLE}") from None
    return {"args": args, "kwargs": kwargs}


SHORT = 60  # a value's repr longer than this is abbreviated in messages (a vocabulary JSON: thousands of keys)


def _short(value: Any, full: bool) -> str:
    text = repr(value)
    if full or len(text) <= SHORT:
        return text
    if isinstance(value, dict):
        return f"{{...{len(value)} keys: {', '.join(repr(k) for k in list(value)[:3])}, ...}}"
    if isinstance(value, (list, tuple)):
        return f"[...{len(value)} items]"
    return text[:SHORT] + "..."


def call_text(fn: str, build_args: dict[str, Any] | None, full: bool = False) -> str:
    """How the build is called, for messages: build_and_load_model(model_capacity='tiny') (long values abbreviated
    unless `full`)."""
    if not build_args:
        return f"{fn}()"
    parts = [_short(a, full) for a in build_args.get("args", [])]
    parts += [f"{k}={_short(v, full)}" for k, v in build_args.get("kwargs", {}).items()]
    cls, dot, method = fn.partition(".")  # a builder class's method: its arguments are the constructor's
    text = f"{cls}({', '.join(parts)}).{method}()" if dot else f"{fn}({', '.join(parts)})"
    pick = build_args.get("pick")  # one of several models the build makes
    if pick is not None:
        text += f"[{pick}]" if isinstance(pick, int) else f".{pick}"
    bound = build_args.get("globals") or {}
    if bound:  # module names the sources compute when they run (sizes from the environment)
        text += " with " + ", ".join(f"{k}={_short(v, full)}" for k, v in bound.items())
    return text


def cli_text(build_args: dict[str, Any] | None) -> str:
    """The --build-args value that reproduces the call's arguments (a pick among several models, and module names
    bound by the search, are found again by the search)."""
    plain = {k: v for k, v in (build_args or {}).items() if k in ("args", "kwargs")}
    return call_text("", plain, full=True)[1:-1]
