"""Imports a worker defers until something uses them (start-up is most of a small conversion's wall time).

Keras imports two packages at start-up that a worker almost never uses:
  IPython        keras.saving's notebook check (CPU in every worker's start-up); a worker has no notebook.
  torch._dynamo  keras.src.backend.torch marks two seed functions `@dynamo.disable()` and clear_session() calls
                 `dynamo.reset()` (a large share of the torch worker's start); a verify never touches
                 dynamo. A backward pass does not use it either, but its first call of a function torch marks
                 `_disable_dynamo` (torch/_compile.py: an op's wrapper, the optimizers' steps) imports it to
                 wrap the function, CPU added to the first training step whatever the model's size.
While keras is imported, while clear_session runs, and while a training step or a differentiation runs
(`dynamo_scope`), `torch._dynamo` is a stand-in whose `disable` is deferred and whose `reset` has nothing to
reset: untraced, a dynamo-disabled function is the function itself. Outside those scopes the name is free, so a
job that does use dynamo (torch.compile, torch.export) imports the real package the ordinary way, paid then, and
the deferred `disable` hands its functions to the real one from then on.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from k2to3.workers.protocol import LoadedRequest

DYNAMO = "torch._dynamo"


def block_ipython() -> None:
    # `import IPython` then raises ImportError, which keras (and tf_keras) already handle as "not a notebook"
    sys.modules.setdefault("IPython", None)  # type: ignore[arg-type]


def _real_dynamo() -> Any:
    """The real torch._dynamo when it has been imported, else None."""
    mod = sys.modules.get(DYNAMO)
    return None if mod is None or mod is _STAND_IN else mod


def _disable(fn: Callable[..., Any] | None = None, *args: Any, **kwargs: Any) -> Any:
    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def call(*a: Any, **k: Any) -> Any:
            # dynamo.disable only matters while dynamo traces, and tracing means the real package is loaded:
            # then this is exactly the disabled function, else the plain one
            if (mod := _real_dynamo()) is not None:
                return mod.disable(f, *args, **kwargs)(*a, **k)
            return f(*a, **k)

        return call

    return mark(fn) if fn is not None else mark


def _reset() -> None:
    if (mod := _real_dynamo()) is not None:
        mod.reset()


def _getattr(name: str) -> Any:
    """Anything else the stand-in is asked for comes from the real package (imported now)."""
    if name.startswith("__"):
        raise AttributeError(name)
    if sys.modules.get(DYNAMO) is _STAND_IN:
        del sys.modules[DYNAMO]
    return getattr(importlib.import_module(DYNAMO), name)


_STAND_IN = types.ModuleType(DYNAMO, "k2to3's stand-in for torch._dynamo while keras imports "
                                     "(workers/deferred_imports.py)")
_STAND_IN.disable = _disable  # type: ignore[attr-defined]
_STAND_IN.reset = _reset  # type: ignore[attr-defined]
_STAND_IN.__getattr__ = _getattr  # type: ignore[attr-defined]


@contextmanager
def dynamo_stand_in() -> Iterator[None]:
    """torch._dynamo is the stand-in inside the block unless the real package is already loaded (or torch has
    no dynamo)."""
    if DYNAMO in sys.modules or importlib.util.find_spec("torch") is None:
        yield
        return
    import torch  # noqa: F401  first, whole: torch itself must never see the stand-in

    sys.modules[DYNAMO] = _STAND_IN
    try:
        yield
    finally:
        if sys.modules.get(DYNAMO) is _STAND_IN:
            del sys.modules[DYNAMO]


def dynamo_scope(keras: Any) -> AbstractContextManager[None]:
    """dynamo_stand_in on the torch backend (clear_session, training steps and backward passes never trace), else
    nothing."""
    return dynamo_stand_in() if keras.backend.backend() == "torch" else nullcontext()


def op_loaded(req: LoadedRequest) -> dict[str, Any]:
    """Which of `req.names` this worker has really imported (the stand-in does not count): for the tests and a
    user's diagnosis of a slow start."""
    return {"loaded": {name: (_real_dynamo() if name == DYNAMO else sys.modules.get(name)) is not None
                       for name in req.names}}
