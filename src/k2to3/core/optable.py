"""The op table (rules/ops.toml): TensorFlow function or keras.backend (K.*) function -> keras.ops call,
plus the K.* functions that moved to keras.config. Pure data and translation; no keras or tensorflow import
(the caller applies the result with keras.ops)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from k2to3.core.op_transforms import TRANSFORMS, Untranslatable
from k2to3.core.paths import rules_dir

GETITEM = "__operators__.getitem"
SHAPE = "k2to3.portable.shape"  # tf.shape's translation: a rebuilt graph keeps it symbolic (rebuild.SymShape)


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
def backend_removed() -> dict[str, str]:
    """Keras 2.2's K functions that tf_keras dropped ([[k_removed]]): name -> the TF function they called, with the
    same arguments in the same order (K.slice was tf.slice)."""
    return {r["k"]: r["tf"] for r in raw_table().get("k_removed", [])}


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


# TF 1's deprecated spellings of keywords, which TF 1.x functions (and tf.compat.v1) took beside the TF 2 ones:
# Keras 2.0-2.2 era Lambdas call tf.reduce_mean(x, axis=1, keep_dims=True). Each names the TF 2 keyword.
TF1_KEYWORDS = {"keep_dims": "keepdims", "reduction_indices": "axis", "squeeze_dims": "axis", "dim": "axis",
                "dimension": "axis"}


def tf1_keywords(entry: OpEntry, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A TF function's TF 1 keyword spellings (TF1_KEYWORDS) as its TF 2 keywords, where the entry takes the TF 2
    keyword and not the TF 1 one, and the call does not give both."""
    if not entry.tf:
        return kwargs
    out = {}
    for k, v in kwargs.items():
        new = TF1_KEYWORDS.get(k)
        if new and k not in entry.args and k not in entry.params and new in entry.args and new not in kwargs:
            k = new
        out[k] = v
    return out


def translate(entry: OpEntry, first: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """TF or K call (first argument, keyword arguments) -> keras.ops keyword arguments. Positional arguments
    must be named first (positional_to_keywords)."""
    out: dict[str, Any] = dict(entry.defaults)
    kwargs = tf1_keywords(entry, kwargs)
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
