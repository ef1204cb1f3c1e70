"""Layer and model classes of a generated Keras 3 module, adapted where Keras 3 calls them differently from Keras 2.

* `build(input_shape)` gets a shape as Keras 2 gave it. Keras 2 passed a single input's shape as a TensorShape and
  several inputs' as a list of them, and layer code tells the two apart with `isinstance(input_shape, list)`
  (keras-multi-head's MultiHeadAttention, most attention layers). Keras 3 rebuilds a loaded layer with
  `build(config["input_shape"])`, read back from JSON: a single shape arrives as a list of ints, which that code
  takes for several inputs. Each layer class that defines `build` is wrapped so that a flat list of sizes arrives
  as a tuple (and each shape in a list of shapes too); shapes Keras 3 passes itself go through unchanged.
* A keras.Model subclass used as a layer (a siamese network's shared tower) was saved by Keras 2 with the config {},
  and Keras 3 rebuilds it with cls(**config) including name, trainable and dtype, which an `__init__(self)` rejects:
  it gets a from_config that passes what `__init__` takes and sets the name after; one whose `__init__` takes
  arguments and that defines no get_config gets one returning the plain arguments from_config built it with (Keras 3
  records none for a Model subclass, and the .keras could not be saved).

Nothing here imports keras."""

from __future__ import annotations

import ast

PREAMBLE = '''

def _k2to3_shape(shape):
    # a shape read back from JSON ([None, 7, 8]) as Keras 2 passed it: a tuple, not a list of inputs
    if isinstance(shape, list) and all(d is None or isinstance(d, int) for d in shape):
        return tuple(shape)
    if isinstance(shape, list):
        return [_k2to3_shape(s) for s in shape]
    return shape


def _k2to3_build_shapes(cls):
    # build(input_shape) with the shape as Keras 2 gave it (source/class_adapters.py)
    if not (isinstance(cls, type) and issubclass(cls, keras.layers.Layer)) or "build" not in vars(cls):
        return cls
    build = cls.build

    @_k2to3_functools.wraps(build)
    def shaped_build(self, input_shape, *args, **kwargs):
        return build(self, _k2to3_shape(input_shape), *args, **kwargs)

    cls.build = shaped_build
    return cls

'''


def decorated(code: str, tree: ast.Module, classes: list[str], decorator: str, preamble: str) -> str:
    """`code` with `Cls = decorator(Cls)` for each of `classes` before K2TO3_OBJECTS (which then registers the
    decorated class), and `preamble` (which defines the decorator) after `import keras`."""
    if not classes:
        return code
    lines = code.splitlines(keepends=True)
    objects = next((n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "K2TO3_OBJECTS" for t in n.targets)), None)
    at = (objects.lineno - 1) if objects is not None else len(lines)
    lines[at:at] = ["".join(f"{c} = {decorator}({c})\n" for c in classes) + "\n"]
    keras_import = next((n for n in tree.body if isinstance(n, ast.Import)
                         and any(a.name == "keras" and a.asname is None for a in n.names)), None)
    after = keras_import.end_lineno if keras_import is not None else 0
    lines[after:after] = [("" if keras_import is not None else "import keras\n") + preamble]
    return "".join(lines)


def with_build_shapes(code: str) -> str:
    """`code` (a generated Keras 3 module) with every top-level class that defines `build` wrapped."""
    tree = ast.parse(code)
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
               and any(isinstance(b, ast.FunctionDef) and b.name == "build" for b in n.body)]
    return decorated(code, tree, classes, "_k2to3_build_shapes",
                     "import functools as _k2to3_functools\n" + PREAMBLE)


MODEL_PREAMBLE = '''

def _k2to3_model_config(cls):
    # a keras.Model subclass used as a layer: Keras 2 saved its config as {} and Keras 3 calls cls(**config) with
    # name, trainable and dtype, which an __init__(self) rejects; keep what __init__ takes, set the name after
    if not (isinstance(cls, type) and issubclass(cls, keras.Model)) or "from_config" in vars(cls):
        return cls
    params = _k2to3_inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())

    @classmethod
    def from_config(klass, config, custom_objects=None):
        config = dict(config)
        name = config.get("name")
        kept = config if takes_any else {k: v for k, v in config.items() if k in params}
        obj = klass(**kept)
        obj._k2to3_init_config = {k: v for k, v in kept.items() if k not in ("name", "trainable", "dtype")
                                  and _k2to3_plain(v)}
        if name and not takes_any and "name" not in params:
            obj._name = name
        return obj

    cls.from_config = from_config
    if "get_config" not in vars(cls):
        _k2to3_recorded_config(cls)
    return cls


def _k2to3_recorded_config(cls):
    # Keras 3 records no config for a Model subclass whose __init__ takes arguments (get_config raises), so the
    # .keras could not be saved: the plain arguments from_config built it with are its config, as tf.keras kept them
    base = cls.get_config

    def get_config(self):
        recorded = getattr(self, "_k2to3_init_config", None)
        try:
            config = base(self)  # (with this override in place Keras returns its base keys, not auto-config)
        except NotImplementedError:
            if recorded is None:
                raise
            config = {"name": self.name, "trainable": self.trainable}
        return {**config, **(recorded or {})}

    cls.get_config = get_config


def _k2to3_plain(value):
    if isinstance(value, (list, tuple)):
        return all(_k2to3_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _k2to3_plain(v) for k, v in value.items())
    return value is None or isinstance(value, (bool, int, float, str))

'''


def with_model_configs(code: str) -> str:
    """`code` with every top-level keras.Model subclass given a from_config that takes a Keras 2 config."""
    tree = ast.parse(code)
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)
               and any(ast.unparse(b).split(".")[-1] == "Model" for b in n.bases)
               and not any(isinstance(b, ast.FunctionDef) and b.name == "from_config" for b in n.body)]
    return decorated(code, tree, classes, "_k2to3_model_config",
                     "import inspect as _k2to3_inspect\n" + MODEL_PREAMBLE)
