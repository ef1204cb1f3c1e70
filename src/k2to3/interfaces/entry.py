"""The `k2to3` program (and `python -m k2to3`): `lint` for a pre-commit hook and `--help` start without the full
command line (importing typer, rich and the options model would be most of their start-up), everything else goes
to it (interfaces/cli.py). Both shortcuts hand over to the full command line whenever they cannot answer exactly as
it would."""

from __future__ import annotations

import sys


def _full() -> None:
    from k2to3.interfaces.cli import main

    main()


def main() -> None:
    args = sys.argv[1:]
    from k2to3.interfaces import helpcache

    if helpcache.cacheable(args):
        code = helpcache.replay(args)
        if code is not None:
            sys.exit(code)
        helpcache.render(args, _full)
    if args[:1] == ["lint"]:
        from k2to3.interfaces import fastlint

        code = fastlint.run(args[1:])
        if code is not None:
            sys.exit(code)
    _full()
