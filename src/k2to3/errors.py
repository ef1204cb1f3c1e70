"""User-facing errors and the documented exit codes (docs/exit-codes.md). A public module: `from k2to3.errors import
NotPortable` (docs/api.md); it imports nothing, so every layer may raise these."""

from __future__ import annotations

from enum import IntEnum

# What a generated module's stand-in raises for a definition k2to3 could not rewrite for Keras 3 (source/hoist.py):
# a build that calls it stops with that line (workers/build.py), one that does not is unaffected.
STAND_IN_MARK = "k2to3 could not rewrite"


class Exit(IntEnum):
    PARITY = 0  # converted, every backend matches the reference
    MISMATCH = 1  # converted, but some backend's outputs differ beyond tolerance
    USAGE = 2  # bad arguments or unreadable/invalid input; nothing written
    NOT_PORTABLE = 3  # the model cannot be converted without more input (source, TF-only ops)
    INTERNAL = 4  # a bug in k2to3 or a backend crash; the report/log says where
    EMPTY = 5  # nothing to work on: an audit or a store with no artifact and no source (a mistyped path)


class K2to3Error(Exception):
    """An error with a one-line message (what, where, how to fix) and an exit code."""

    def __init__(self, message: str, code: Exit = Exit.USAGE, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.hint = hint

    def line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class NotRunnableHere(K2to3Error):
    """A backend that cannot run the converted model on this machine (TensorFlow's CPU build has no channels_first
    Conv2D kernel): that backend is reported `not_runnable` with this reason and the others verify the model."""

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message, Exit.NOT_PORTABLE, hint=hint)


class InputError(K2to3Error):
    """The input artifact or an argument is unusable."""


class NotPortable(K2to3Error):
    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message, Exit.NOT_PORTABLE, hint=hint)
