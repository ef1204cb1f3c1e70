"""The rule codes `lint --select/--ignore` (and [tool.k2to3] select/ignore) may name: a code lint reports, or a
prefix of one (K2T1, K2T20). Anything else is a typo that would silently select nothing."""

from __future__ import annotations

from k2to3.errors import InputError


def lint_codes() -> tuple[str, ...]:
    from k2to3.core.tables import lint_tables

    return lint_tables().codes


def parse_codes(text: str, flag: str) -> list[str]:
    """`K2T1, k2t203` -> ['K2T1', 'K2T203']; an unknown code or prefix is an InputError naming it."""
    codes = [c.strip().upper() for c in text.split(",") if c.strip()]
    check_codes(codes, flag)
    return codes


def check_codes(codes: list[str], flag: str) -> None:
    known = lint_codes()
    for c in codes:
        if c == "ALL" or not any(k.startswith(c) for k in known) or not c.startswith("K2T"):
            raise InputError(f"{flag} {c}: no lint rule has this code or prefix",
                             hint=f"lint codes are {known[0]}…{known[-1]}; see docs/lint.md or `k2to3 rule --all`")
