"""The op table (rules/ops.toml): TensorFlow function or keras.backend (K.*) function -> keras.ops call,
plus the K.* functions that moved to keras.config. Pure data and translation; no keras or tensorflow import
(the caller applies the result with keras.ops)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from k2to3.core.paths import rules_dir

GETITEM = "__operators__.getitem"
SHAPE = "k2to3.portable.shape"  # tf.shape's translation: a rebuilt graph keeps it symbolic (rebuild.SymShape)


class Untranslatable(Exception):
    """The call has no keras.ops equivalent (or not with these arguments)."""


@dataclass(frozen=True)
class OpEntry:
    tf: tuple[str, ...]
    keras: str
    k: tuple[str, ...] = ()  # keras.backend names (K.mean); an entry has tf names or k names, not both
    params: tuple[str, ...] = ()  # the TF / K function's parameters in positional order
    first: str = "x"
    args: dict[str, str] = field(default_factory=dict)
    drop: tuple[str, ...] = ("name",)
    require: dict[str, Any] = field(default_factory=dict)
    require_none: tuple[str, ...] = ()  # keywords accepted only when None (TOML has no null)
    defaults: dict[str, Any] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    transform: str | None = None
    compose: str | None = None  # a k2to3.portable composition used instead of `keras` when a compose_args is true
    compose_args: tuple[str, ...] = ()
    graph: str | None = None  # a k2to3.portable composition a rebuilt model graph uses instead of `keras`
    safety: str = "safe"
    notes: str = ""
    cases: tuple[dict[str, Any], ...] = ()
    sums: bool = False  # the output sums products of the inputs (differential tolerance: tests/op_tolerance.py)
    known_failures: tuple[dict[str, Any], ...] = ()  # backend disagreements found by the differential test
    namespace: str = "ops"  # keras.<namespace>.<keras>: "ops", or "random" for a random op (keras.random.normal)
    random: str | None = None  # a random op: the distribution the differential test compares (normal, uniform, ...)

    @property
    def name(self) -> str:
        """Unique identifier (test results, known_failures): tf[0], or "backend." + k[0] for a K entry."""
        return self.tf[0] if self.tf else "backend." + self.k[0]

    @property
    def tensor_params(self) -> frozenset[str]:
        """The keywords that take tensors (the differential cases pass them as tensors): a TFOpLambda stores a
        constant tensor given there as a nested list, which becomes an array again before the keras.ops call."""
        kinds = ("tensors", "ints", "bools", "sorted_ids", "consts")
        return frozenset(k for c in self.cases for kind in kinds for k in c.get(kind, {}))

    @property
    def target(self) -> str:
        """The Keras 3 function, dotted from `keras`: keras.ops.mean, keras.random.normal, k2to3.portable.x."""
        return self.keras if self.keras.startswith("k2to3.") else f"keras.{self.namespace}.{self.keras}"

    @property
    def label(self) -> str:
        """The function as the user wrote it, for messages: tf.math.reduce_mean, K.mean."""
        return "tf." + self.tf[0] if self.tf else "K." + self.k[0]


TUPLE_FIELDS = ("tf", "k", "params", "compose_args", "drop", "require_none", "needs", "cases", "known_failures")


@cache
def raw_table() -> dict[str, Any]:
    import tomllib  # lint and fix read core.tables' JSON instead

    with open(rules_dir() / "ops.toml", "rb") as fh:
        return tomllib.load(fh)


@cache
def table() -> tuple[OpEntry, ...]:
    out = []
    names: set[str] = set()
    for e in raw_table()["op"]:
        e = dict(e)
        for k in TUPLE_FIELDS:
            if k in e:
                e[k] = tuple(e[k])
        entry = OpEntry(**e)
        if bool(entry.tf) == bool(entry.k):
            raise ValueError(f"rules/ops.toml: {entry.keras}: an entry needs tf names or k names (not both)")
        if entry.name in names:
            raise ValueError(f"rules/ops.toml: {entry.name} is listed twice")
        names.add(entry.name)
        out.append(entry)
    return tuple(out)


def _renames(section: str, key: str) -> dict[str, str]:
    """A section of name -> new name entries of rules/ops.toml, each name once."""
    out: dict[str, str] = {}
    for c in raw_table().get(section, []):
        if c[key] in out:
            raise ValueError(f"rules/ops.toml: [[{section}]] {c[key]} is listed twice")
        out[c[key]] = c["to"]
    return out


@cache
def config_aliases() -> dict[str, str]:
    """K.epsilon -> keras.config.epsilon etc.: keras.backend functions that moved (called the same way)."""
    return _renames("config", "k")


@cache
def tf_moved() -> dict[str, str]:
    """tf.random_uniform_initializer -> keras.initializers.RandomUniform etc. ([[moved]] in rules/ops.toml): TensorFlow
    names of what Keras 3 has under another name, called with the same arguments."""
    return _renames("moved", "tf")


@cache
def backend_obsolete() -> dict[str, tuple[str, str]]:
    """K functions with no Keras 3 function to call instead ([[obsolete]] in rules/ops.toml): name -> (finding
    code, the Keras 3 idiom to use)."""
    out: dict[str, tuple[str, str]] = {}
    for o in raw_table().get("obsolete", []):
        for k in o["k"]:
            if k in out:
                raise ValueError(f"rules/ops.toml: obsolete K.{k} is listed twice")
            out[k] = (o["code"], o["idiom"])
    return out


@cache
def backend_indexed() -> dict[str, str]:
    """Obsolete K functions whose result, when only indexed by integers, the keras.ops function `indexed` gives
    (K.shape: a tuple indexes as the tensor did): name -> keras.ops function (K2T210)."""
    return {k: o["indexed"] for o in raw_table().get("obsolete", []) if o.get("indexed") for k in o["k"]}


def _index(field: str, prefix: str) -> dict[str, OpEntry]:
    index: dict[str, OpEntry] = {}
    for e in table():
        for n in getattr(e, field):
            if n in index:
                raise ValueError(f"rules/ops.toml: {prefix}{n} is listed twice")
            index[n] = e
    return index


@cache
def by_tf_name() -> dict[str, OpEntry]:
    """TF function name (as TFOpLambda stores it, without "tf.") -> entry."""
    return _index("tf", "tf.")


@cache
def by_backend_name() -> dict[str, OpEntry]:
    """K (keras.backend) function name -> entry."""
    return _index("k", "K.")


@cache
def tf_aliases() -> dict[str, str]:
    """rules/tf_names.tsv (generated from TensorFlow's export table by rules/make_tf_names.py): every other
    name of a TF function (tf_export aliases, tf.compat.v1 names, tensorflow.python.ops module paths) -> its
    canonical name, the one TFOpLambda stores."""
    out: dict[str, str] = {}
    with open(rules_dir() / "tf_names.tsv", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#") or not line.strip():
                continue
            alias, canon, _ = line.rstrip("\n").split("\t")
            out[alias] = canon
    return out


def canonical_tf_name(name: str, aliases: dict[str, str] | None = None) -> str:
    """A TF function's name without "tf." (compat.v2.reverse, compat.v1.math.log1p, python.ops.math_ops.rsqrt)
    -> its canonical name (reverse, math.log1p, math.rsqrt); unknown names are returned unchanged. `aliases`:
    tf_aliases() as core.tables caches it."""
    if name.startswith("compat.v2."):
        name = name[len("compat.v2."):]
    aliases = tf_aliases() if aliases is None else aliases
    if name not in aliases and name.startswith("python.") and not name.startswith(("python.ops.", "python.framework.")):
        # TF1's tensorflow.python namespace held the ops modules themselves (tf.python.math_ops.sqrt)
        name = next((n for n in ("python.ops." + name[7:], "python.framework." + name[7:]) if n in aliases), name)
    return aliases.get(name, name)


KERAS_BACKEND = "keras.backend."  # a TFOpLambda of a K function (tf.keras.backend.binary_crossentropy)


def lookup(function: str) -> OpEntry:
    """TF function name (any alias) -> its table entry; `keras.backend.<name>`, as a TFOpLambda stores a call of
    tf.keras.backend.<name> on Keras tensors, -> the K entry."""
    if function.startswith(KERAS_BACKEND):
        return lookup_backend(function[len(KERAS_BACKEND):])
    table_ = by_tf_name()
    e = table_.get(function) or table_.get(canonical_tf_name(function))
    if e is None:
        raise Untranslatable(f"tf.{function} has no entry in rules/ops.toml")
    return e


def lookup_backend(function: str) -> OpEntry:
    e = by_backend_name().get(function)
    if e is None:
        raise Untranslatable(f"K.{function} has no entry in rules/ops.toml")
    return e


def positional_to_keywords(entry: OpEntry, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A call's positional and keyword arguments -> (first argument, keyword arguments), named by `params`
    (params[0] is the first argument), ready for translate()."""
    if not entry.params:
        raise Untranslatable(f"{entry.label} has no params in rules/ops.toml")
    star = next((i for i, p in enumerate(entry.params) if p.startswith("*")), None)
    if star is not None:  # `*inputs` (tf.einsum): the positionals from there on, as one list
        args = [*args[:star], list(args[star:])] if len(args) > star else list(args)
    if len(args) > len(entry.params):
        raise Untranslatable(f"{entry.label} takes at most {len(entry.params)} positional arguments "
                             f"({', '.join(entry.params)}), got {len(args)}")
    out = dict(kwargs)
    for p, v in zip(entry.params, args):
        if p in out:
            raise Untranslatable(f"{entry.label} got {p!r} both positionally and as a keyword")
        out[p] = v
    if entry.params[0] not in out:
        raise Untranslatable(f"{entry.label} called without its first argument {entry.params[0]!r}")
    first = out.pop(entry.params[0])
    return first, out


def _pad_mode(kw: dict[str, Any]) -> None:
    if "mode" in kw:
        kw["mode"] = str(kw["mode"]).lower()
    if kw.get("mode", "constant") != "constant":
        # TF records constant_values=0 for every mode; keras.ops.pad accepts it only for "constant".
        if kw.pop("constant_values", 0) not in (0, None):
            raise Untranslatable("tf.pad constant_values with a non-constant mode")


def _split_sizes(kw: dict[str, Any]) -> None:
    sizes = kw.get("indices_or_sections")
    if isinstance(sizes, list):  # TF sizes -> numpy split points
        if any(s == -1 for s in sizes):
            raise Untranslatable("split sizes with -1 need the static dimension")
        points, acc = [], 0
        for s in sizes[:-1]:
            acc += int(s)
            points.append(acc)
        kw["indices_or_sections"] = points


_METHODS = {"bilinear": "bilinear", "nearest": "nearest", "bicubic": "bicubic", "lanczos3": "lanczos3",
            "lanczos5": "lanczos5", "area": "area"}


def _resize_method(kw: dict[str, Any]) -> None:
    m = str(kw.get("interpolation", "bilinear")).lower()
    if m not in _METHODS:
        raise Untranslatable(f"resize method {m!r} has no keras.ops equivalent")
    kw["interpolation"] = _METHODS[m]


def _sqrt_epsilon(kw: dict[str, Any]) -> None:
    # TF bounds the squared norm (x * rsqrt(max(sum(x**2), eps))), keras.ops.normalize the norm
    # (x * min(rsqrt(sum(x**2)), 1 / eps)): the same result needs keras eps = sqrt(TF eps).
    eps = kw.get("epsilon")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise Untranslatable(f"l2_normalize epsilon={eps!r} is not a literal number")
    kw["epsilon"] = math.sqrt(eps)


def _k_clip(kw: dict[str, Any]) -> None:
    # K.clip raised max_value to min_value when both are Python numbers and max < min (keras.ops.clip
    # would return max everywhere).
    lo, hi = kw.get("x_min"), kw.get("x_max")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lo, hi))
    if numbers and hi < lo:
        kw["x_max"] = lo


def _data_format(kw: dict[str, Any]) -> None:
    fmt = kw.pop("data_format", None)
    if fmt in (None, "NHWC", "channels_last"):
        kw["data_format"] = "channels_last"
    elif fmt in ("NCHW", "channels_first"):
        kw["data_format"] = "channels_first"
    else:
        raise Untranslatable(f"data_format {fmt!r}")


def _norm_ord(kw: dict[str, Any]) -> None:
    # TF's "euclidean" is keras' default (None): the 2-norm of the flattened axes, Frobenius over two axes.
    _axes_tuple(kw)
    if isinstance(kw.get("axis"), int):  # keras' Norm keeps an int axis as a list, which jax cannot hash
        kw["axis"] = (kw["axis"],)
    order = kw.pop("ord", "euclidean")
    if order in ("euclidean", None):
        return
    axis = kw.get("axis")
    if order == "fro" or not isinstance(axis, tuple) or len(axis) != 1:
        raise Untranslatable(f"norm ord={order!r} over several axes differs between TF and keras.ops")
    kw["ord"] = order


def _axes_tuple(kw: dict[str, Any]) -> None:
    # tf.reverse takes a list of axes; keras.ops.flip an int or a tuple (jax rejects lists).
    if isinstance(kw.get("axis"), list):
        kw["axis"] = tuple(kw["axis"])


def _repeats_int(kw: dict[str, Any]) -> None:
    if isinstance(kw.get("repeats"), (list, tuple)):
        raise Untranslatable("repeat with a list of repeats (keras.ops.repeat takes one count or a tensor)")


def _float_uniform(kw: dict[str, Any]) -> None:
    # keras.random.uniform draws floats only; TF's integer form needs maxval and is keras.random.randint
    dtype = kw.get("dtype")
    if dtype is not None and "float" not in str(dtype):
        raise Untranslatable(f"uniform with dtype={dtype!r}: keras.random.uniform draws floats (keras.random.randint "
                             "draws integers)")
    if kw.get("maxval", 1.0) is None:
        kw.pop("maxval")  # TF's None is 1 for floats, keras's default


def _qr_mode(kw: dict[str, Any]) -> None:  # tf.linalg.qr's full_matrices flag -> keras.ops.qr's mode
    if not isinstance(kw.get("mode", False), bool):
        raise Untranslatable(f"qr full_matrices={kw['mode']!r} is not a literal True/False")
    kw["mode"] = "complete" if kw.get("mode") else "reduced"


_TF_FORMATS = ("NWC", "NHWC", "NDHWC", "CHANNELS_LAST", "NCW", "NCHW", "NCDHW", "CHANNELS_FIRST")  # 4 last, 4 first


def _tf_window(kw: dict[str, Any], key: str, last: bool, n: int | None, full: bool) -> None:
    """TF's ksize/strides/dilations/rates: an int, or 1, N or N + 2 entries (ones on the batch and channel axes; N + 2
    when the rank says so or, unknown, a list of 3 or more with ones at both ends; `full`: always) -> keras's."""
    if (v := kw.get(key)) is None or v == []:  # TF's default (ones; tf.conv's []), keras's too
        kw.pop(key, None)
    elif not isinstance(v, int) or isinstance(v, bool) or full:
        if not isinstance(v, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
            raise Untranslatable(f"{key}={v!r} is not a literal int or list of ints")
        if full or (len(v) == n + 2 if n is not None else len(v) >= 3 and v[0] == v[-1 if last else 1] == 1):
            if ([v[0], v[-1]] if last else list(v[:2])) != [1, 1]:
                raise Untranslatable(f"{key}={v!r}: a window over the batch or channel axis has no keras.ops form")
            v = v[1:-1] if last else v[2:]
        elif n is not None and len(v) not in (1, n):
            raise Untranslatable(f"{key}={v!r} for {n} spatial axes")
        kw[key] = v[0] if len(v) == 1 and not full else tuple(v)


def _tf_spatial(kw: dict[str, Any], keys: tuple[str, ...], first: str = "inputs", full: bool = False) -> int | None:
    """A TF windowed op's data_format (NHWC, NCW, CHANNELS_LAST, None), per-axis `keys` and padding -> keras.ops'; N."""
    given = kw.get("data_format")
    if given is not None and (not isinstance(given, str) or given.upper() not in _TF_FORMATS):
        raise Untranslatable(f"data_format {given!r}")
    kw["data_format"] = "channels_first" if given and _TF_FORMATS.index(given.upper()) > 3 else "channels_last"
    rank = len(getattr(kw.get(first), "shape", ()))  # 0: not a tensor (source code: an expression)
    n = len(given) - 2 if given and given.upper().startswith("N") else rank - 2 if rank else None
    for key in keys:
        _tf_window(kw, key, kw["data_format"] == "channels_last", n, full)
    if not isinstance(kw.get("padding"), str) or kw["padding"].upper() not in ("SAME", "VALID"):
        raise Untranslatable(f"padding={kw.get('padding')!r} (keras.ops takes \"same\" or \"valid\")")
    kw["padding"] = kw["padding"].lower()
    return n


def _tf_conv_transpose(kw: dict[str, Any]) -> None:
    # TF takes the output shape; only the one keras.ops.conv_transpose derives (output_padding=None) translates
    n, out = _tf_spatial(kw, ("strides", "dilation_rate")), kw.pop("output_shape", None)
    shape, kshape = getattr(kw["inputs"], "shape", None), getattr(kw.get("kernel"), "shape", None)
    if not isinstance(out, (list, tuple)) or shape is None or kshape is None or n is None:
        raise Untranslatable("conv_transpose output_shape= needs a literal shape and static input and kernel shapes "
                             "(keras.ops.conv_transpose takes output_padding instead)")
    at = 1 if kw["data_format"] == "channels_last" else 2
    for i in range(n):
        s, d = (v if isinstance(v, int) else v[i] for v in (kw.get("strides", 1), kw.get("dilation_rate", 1)))
        k, size = (int(kshape[i]) - 1) * d + 1, shape[at + i]
        if size is None or out[at + i] != (size * s if kw["padding"] == "same" else (size - 1) * s + max(k, s)):
            raise Untranslatable(f"conv_transpose output_shape {list(out)}: keras.ops derives another (output_padding)")


def _slice_size(kw: dict[str, Any]) -> None:
    if isinstance(kw.get("shape"), (list, tuple)) and any(isinstance(s, int) and s < 0 for s in kw["shape"]):
        raise Untranslatable("slice size -1 (to the end) needs the static dimension: keras.ops.slice takes sizes")


TRANSFORMS = {"qr_mode": _qr_mode, "tf_conv_transpose": _tf_conv_transpose,
              "tf_conv": lambda kw: _tf_spatial(kw, ("strides", "dilation_rate"), full=True),  # N + 2 entries
              "tf_pool": lambda kw: _tf_spatial(kw, ("pool_size", "strides")), "slice_size": _slice_size,
              "tf_patches": lambda kw: _tf_spatial(kw, ("size", "strides", "dilation_rate"), "images", True),
              "rot90_axes": lambda kw: kw.update(axes=(-3, -2)),  # an image's or a batch's (height, width)
              "float_uniform": _float_uniform,
              "repeats_int": _repeats_int, "norm_ord": _norm_ord, "axes_tuple": _axes_tuple, "pad_mode": _pad_mode,
              "split_sizes": _split_sizes, "resize_method": _resize_method,
              "data_format": _data_format, "sqrt_epsilon": _sqrt_epsilon, "k_clip": _k_clip}


def translate(entry: OpEntry, first: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """TF or K call (first argument, keyword arguments) -> keras.ops keyword arguments. Positional arguments
    must be named first (positional_to_keywords)."""
    out: dict[str, Any] = dict(entry.defaults)
    out[entry.first] = first
    for need in entry.needs:
        if kwargs.get(need) is None:
            raise Untranslatable(f"{entry.label} without {need}= has no keras.ops equivalent")
    for k, v in kwargs.items():
        if (k in entry.require and v != entry.require[k]) or (k in entry.require_none and v is not None):
            raise Untranslatable(f"{entry.label}({k}={v!r}) has no keras.ops equivalent")
        if k in entry.drop or k in entry.require or k in entry.require_none:
            continue
        if k not in entry.args:
            raise Untranslatable(f"{entry.label} argument {k!r} is not in rules/ops.toml")
        if v is None and entry.args[k] in entry.defaults:
            if entry.k:  # K.argmax(x, axis=None) is TF's axis 0, not K's default -1: no general rule
                raise Untranslatable(f"{entry.label}({k}=None) has no checked keras.ops equivalent")
            continue  # TF's None means "its default", which defaults already spells out
        out[entry.args[k]] = v
    if entry.transform:
        TRANSFORMS[entry.transform](out)
    return out


def call_arguments(entry: OpEntry, out: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Translated keyword arguments -> (positional, keyword) for the call: the first argument positionally,
    then a `*operands` list (keras.ops.einsum) spread after it; with no such list, everything by keyword."""
    kw = dict(out)
    star = next((k for k in kw if k.startswith("*")), None)
    if star is None:
        return [], kw
    return [kw.pop(entry.first), *kw.pop(star)], kw


def call_target(entry: OpEntry, out: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The function a translated call uses (dotted: "matmul", "image.resize", "k2to3.portable.matmul") and its
    keyword arguments: the entry's `compose` when one of its compose_args is true (tf.matmul(transpose_b=True)),
    else its keras.ops function without the compose_args."""
    kw = dict(out)
    flags = {k: kw.pop(k) for k in entry.compose_args if k in kw}
    if entry.compose and any(v is not False and v is not None for v in flags.values()):
        return entry.compose, {**kw, **flags}
    return entry.keras, kw


def slice_index(spec: list[Any]) -> tuple[Any, ...]:
    """SlicingOpLambda slice_spec -> a Python index: dicts are slices, None is newaxis."""
    out: list[Any] = []
    for s in spec if isinstance(spec, list) else [spec]:
        if isinstance(s, dict) and s.get("class_name") == "__ellipsis__":
            out.append(Ellipsis)
        elif isinstance(s, dict):
            out.append(slice(s.get("start"), s.get("stop"), s.get("step")))
        else:
            out.append(s)  # int index or None (newaxis)
    return tuple(out)


def flips_for_negative_steps(index: tuple[Any, ...], rank: int) -> tuple[list[int], tuple[Any, ...]]:
    """torch tensors cannot be sliced with a negative step. x[::-k] along an axis equals flip(x)[::k] there:
    returns the input axes to flip first and the index with positive steps."""
    consuming = [i for i in index if i is not None and i is not Ellipsis]
    axes, out, axis = [], [], 0
    for item in index:
        if item is Ellipsis:
            axis += rank - len(consuming)
            out.append(item)
            continue
        if isinstance(item, slice) and item.step is not None and item.step < 0:
            if item.start is not None or item.stop is not None:
                raise Untranslatable("a slice with a negative step and bounds has no portable form")
            axes.append(axis)
            item = slice(None, None, -item.step)
        if item is not None:
            axis += 1
        out.append(item)
    return axes, tuple(out)


def check(function: str, kwargs: dict[str, Any]) -> str | None:
    """Static check (no tensors): None if translatable, else the reason."""
    if not isinstance(function, str):  # an untrusted config: the op name must be a string
        return f"op function {str(function)[:40]!r} is not a name"
    if function == GETITEM:
        return None
    try:
        entry = lookup(function)
        if entry.random:
            # a rebuilt graph has no layer to own the op's SeedGenerator (and would trace one sample into it)
            raise Untranslatable(f"tf.{function} is a random op: in a saved graph it has no layer to own its "
                                 "keras.random seed (rebuild the layer from its source with --src)")
        translate(entry, None, {k: v for k, v in kwargs.items()})
    except Untranslatable as exc:
        return str(exc)
    return None
