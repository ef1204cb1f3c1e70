"""`k2to3 lint` from its parsed options to its output and exit code: one function that the full command line
(interfaces/cli.py) and the fast path of a pre-commit hook (interfaces/fastlint.py) both call, so their output
cannot differ."""

from __future__ import annotations

from pathlib import Path

from k2to3.errors import K2to3Error


def lint(paths: list[Path], fmt: str = "text", select: str | None = None, ignore: str | None = None,
         no_cache: bool = False) -> tuple[str, int]:
    """(what to print on stdout, exit code: 1 with findings, else 0); a bad option or path is a K2to3Error."""
    from k2to3.source.codes import check_codes, parse_codes
    from k2to3.source.files import Cache, load_config
    from k2to3.source.formats import FORMATS
    from k2to3.source.run import lint_paths

    paths = paths or [Path(".")]
    if fmt not in FORMATS:
        raise K2to3Error(f"--format {fmt}: unknown format", hint=f"choose from {', '.join(FORMATS)}")
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise K2to3Error(f"{missing[0]}: no such file or directory")
    cfg = load_config(paths[0])
    for key in ("select", "ignore"):  # a typo in [tool.k2to3] must not silently select nothing either
        check_codes([c.upper() for c in getattr(cfg, key)], f"{cfg.source} [tool.k2to3] {key} =")
    if select:
        cfg.select = parse_codes(select, "--select")
    if ignore:
        cfg.ignore = parse_codes(ignore, "--ignore")
    res = lint_paths(paths, cfg, None if no_cache else Cache())
    return FORMATS[fmt](res), 1 if res.findings else 0
