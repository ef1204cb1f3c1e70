"""Random ops in a generated Keras 3 module draw from a SeedGenerator their layer owns.

Keras 3 draws random numbers from a `keras.random.SeedGenerator`; on jax an unseeded draw inside a compiled function
raises, and a seed generator must be tracked with a layer's state to advance between calls. The op table rewrites a
random call in a generated module to `keras.random.normal(..., seed=_k2to3_seed())` (source/classify.py); this module
adds what makes `_k2to3_seed()` the SeedGenerator of the layer whose call is running:

* every layer class of the module that reaches a random call (itself or through module-level helpers) is decorated
  so each instance owns one, set as the current one around its `call`;
* a Lambda whose function reaches a random call becomes a `K2to3RandomLambda`: a Lambda that owns one.

Outside a layer (`_k2to3_seed()` is None) the draw is unseeded, as the source wrote it. Nothing here imports keras."""

from __future__ import annotations

import ast

from k2to3.source.classify import SEED_CALL
from k2to3.upgrade.plan import RANDOM_LAMBDA

PREAMBLE = '''
import contextvars as _k2to3_contextvars
import functools as _k2to3_functools
import inspect as _k2to3_inspect

_K2TO3_SEED = _k2to3_contextvars.ContextVar("k2to3_seed", default=None)


def _k2to3_seed():
    # the SeedGenerator of the layer whose call is running (None outside a layer: an unseeded draw)
    return _K2TO3_SEED.get()


def _k2to3_seeded(cls):
    # each instance owns a keras.random.SeedGenerator (tracked with the layer's state, as Keras 3 needs on jax),
    # the current one while its call runs
    if not (isinstance(cls, type) and issubclass(cls, keras.layers.Layer)) or "_k2to3_seeded" in vars(cls):
        return cls
    init, call = cls.__init__, cls.call

    @_k2to3_functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if getattr(self, "_k2to3_seed_generator", None) is None:
            self._k2to3_seed_generator = keras.random.SeedGenerator()

    # Keras reads the constructor's parameters with getfullargspec, which honours __signature__ (not __wrapped__)
    __init__.__signature__ = _k2to3_inspect.signature(init)

    @_k2to3_functools.wraps(call)
    def seeded_call(self, *args, **kwargs):
        token = _K2TO3_SEED.set(getattr(self, "_k2to3_seed_generator", None))
        try:
            return call(self, *args, **kwargs)
        finally:
            _K2TO3_SEED.reset(token)

    cls.__init__, cls.call, cls._k2to3_seeded = __init__, seeded_call, True
    return cls


@_k2to3_seeded
class K2to3RandomLambda(keras.layers.Lambda):
    """A Lambda whose function draws random numbers: it owns the SeedGenerator they draw from."""

'''


def random_reach(code: str) -> set[str]:
    """The module-level names of `code` that reach a random call: a definition calling `_k2to3_seed()`, or one
    naming such a definition (a helper it calls), to a fixed point."""
    tree = ast.parse(code)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for n in tree.body:  # `sampling = lambda args: ...` at module level
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            defs.setdefault(n.targets[0].id, n)
    seed_name = SEED_CALL.removesuffix("()")
    uses = {name: {x.id for x in ast.walk(node) if isinstance(x, ast.Name)} for name, node in defs.items()}
    reach = {name for name, names in uses.items() if seed_name in names}
    while True:
        more = {name for name, names in uses.items() if name not in reach and names & reach}
        if not more:
            return reach
        reach |= more


def with_seed_generators(code: str, package: str) -> tuple[str, set[str]]:
    """`code` (a generated Keras 3 module after the rewrite) with the seed machinery when a random call is in it;
    returns the new code and the module-level names that reach a random call (empty: `code` unchanged)."""
    if SEED_CALL not in code:
        return code, set()
    reach = random_reach(code)
    tree = ast.parse(code)
    keras_import = next((n for n in tree.body if isinstance(n, ast.Import)
                         and any(a.name == "keras" and a.asname is None for a in n.names)), None)
    lines = code.splitlines(keepends=True)
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name in reach]
    objects = next((n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "K2TO3_OBJECTS" for t in n.targets)), None)
    decorate = "".join(f"{c} = _k2to3_seeded({c})\n" for c in classes)
    register = (f"keras.saving.register_keras_serializable(package={package!r}, name={RANDOM_LAMBDA!r})"
                f"({RANDOM_LAMBDA})\n")
    at = (objects.lineno - 1) if objects is not None else len(lines)
    lines[at:at] = [decorate + register + "\n"]
    after = keras_import.end_lineno if keras_import is not None else 0
    lines[after:after] = [("" if keras_import is not None else "import keras\n") + PREAMBLE]
    return "".join(lines), reach
