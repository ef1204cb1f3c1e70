"""Decide what a call or a name in Keras 2 source is, from its qualified name and its arguments, using
rules/ops.toml (the table the TFOpLambda translator uses too)."""

from __future__ import annotations

import ast
import contextvars
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from k2to3.core import optable as ops
from k2to3.core.tables import lint_tables

TF = "tensorflow."
TF_KERAS = ("tensorflow.keras.", "tensorflow.python.keras.", "tensorflow.compat.v1.keras.",
            "tensorflow.compat.v2.keras.", "tf_keras.src.", "tf_keras.")
BACKEND = "keras.backend."
LAMBDA = "keras.layers.Lambda"
TF1_ONLY = {"Session", "InteractiveSession", "placeholder", "get_default_graph", "global_variables_initializer",
            "variable_scope", "get_variable", "placeholder_with_default", "reset_default_graph"}
BACKEND_TF1 = {"function", "gradients", "get_session", "set_session", "placeholder", "stop_gradient_graph",
               "learning_phase", "set_learning_phase", "get_graph", "update", "update_add", "batch_get_value",
               "batch_set_value", "get_value", "set_value", "eval", "variable", "constant"}
# Set while the source pass rewrites a generated module (source/hoist.py): every line of it runs inside the model,
# so tf.constant / tf.convert_to_tensor, which ordinary code uses outside a model (not reported there), are
# rewritten from the op table as any op is.
MODEL_CODE: contextvars.ContextVar[bool] = contextvars.ContextVar("model_code", default=False)
# TensorFlow namespaces that are not model ops (input pipelines, I/O, training loops): not reported.
TF_NOT_OPS = ("data.", "io.", "train.", "config.", "saved_model.", "summary.", "distribute.", "debugging.",
              "test.", "estimator.", "lite.", "profiler.", "sysconfig.", "version", "function", "print",
              "Variable", "TensorSpec", "GradientTape", "device", "name_scope", "autograph.", "experimental.",
              "random.set_seed", "get_logger", "constant", "convert_to_tensor", "shape", "compat.v1.shape",
              "TensorShape", "is_tensor", "executing_eagerly", "identity", "py_function", "numpy_function")
# Transforms that need the argument's value, not just its expression.
TRANSFORM_KEYS = {"split_sizes": ("indices_or_sections",), "pad_mode": ("mode", "constant_values"),
                  "resize_method": ("interpolation",), "data_format": ("data_format",),
                  "norm_ord": ("ord",)}


# TensorFlow 2's own names of tf.keras namespaces: tf.metrics is tf.keras.metrics (tf_export aliases)
TF_KERAS_NAMESPACES = ("metrics", "losses", "optimizers")
TF_KERAS_ALIASES = tuple(f"tensorflow.{n}." for n in TF_KERAS_NAMESPACES)


def keras_name(qname: str) -> str | None:
    """`tensorflow.keras.layers.Dense` / `tf_keras.layers.Dense` -> `keras.layers.Dense`; `tensorflow.metrics.AUC`
    (TF 2's alias of tf.keras.metrics) -> `keras.metrics.AUC`."""
    for prefix in TF_KERAS:
        if qname.startswith(prefix):
            return "keras." + qname[len(prefix):]
    for prefix in TF_KERAS_ALIASES:
        if qname.startswith(prefix):
            return "keras." + qname[len("tensorflow."):]
    if qname.startswith("keras."):
        return qname
    return None


@dataclass
class Expr:
    """An argument whose value is not a literal: kept as its expression (an ast or libcst node)."""

    node: Any

    def __repr__(self) -> str:  # a message shows the expression as written, not an address that changes every run
        return ast.unparse(self.node) if isinstance(self.node, ast.AST) else "<expression>"


SEED_CALL = "_k2to3_seed()"  # a generated module's random calls draw from their layer's SeedGenerator


@dataclass(frozen=True)
class Code:
    """An argument the rewrite writes as this expression (its repr is the code)."""

    text: str

    def __repr__(self) -> str:
        return self.text


@dataclass
class CallArgs:
    """A call's arguments, parser-neutral: literal values where static, Expr otherwise."""

    positional: list[Any]
    keywords: dict[str, Any]
    star: bool = False  # *args or **kwargs present
    raw: list[tuple[str | None, Any]] = field(default_factory=list)  # (keyword, node) in source order
    indexed: bool = False  # the result is only indexed by integers (`indexed_calls`)


@dataclass
class Verdict:
    code: str
    message: str
    fixable: bool = False
    target: str | None = None  # dotted replacement for the callee (keras.ops.mean, keras.config.epsilon)
    args: list[tuple[str | None, Any]] = field(default_factory=list)  # (keyword or None, Expr or literal)


def classify_call(qname: str, call: CallArgs) -> Verdict | None:
    kname = keras_name(qname)
    if kname is not None and kname.startswith(BACKEND):
        return _backend(kname[len(BACKEND):], call)
    if kname is not None:
        return None  # keras.layers.X etc.: the namespace rule handles tf.keras prefixes
    if not qname.startswith(TF):
        return None
    name = qname[len(TF):]
    tables = lint_tables()
    table = tables.by_tf
    if name not in table:  # tf.compat.v2.x, tf.python.ops.math_ops.x, tf.compat.v1 aliases: the canonical name
        name = ops.canonical_tf_name(name, tables.tf_aliases)
    last = name.split(".")[-1]
    v2 = _tf2_name(name) if name.startswith("compat.v1.") and name not in table and last not in TF1_ONLY else None
    if v2 is not None:  # TF1's form of a plain op (compat.v1.math.argmax): not a graph API, say which op it is
        entry = table.get(v2)
        if entry is not None:
            return Verdict("K2T103", f"tf.{name} is TensorFlow 1's signature of tf.{v2} (keras.ops.{entry.keras}); "
                                     f"only the TF2 form is in rules/ops.toml: call tf.{v2} (then `fix` rewrites it)")
        return Verdict("K2T103", f"tf.{name} is TensorFlow 1's signature of tf.{v2}, which has no keras.ops "
                                 "equivalent; it ties the model to TensorFlow")
    if name in TF1_ONLY or (name.startswith("compat.v1.") and (last in TF1_ONLY or name not in table)):
        return Verdict("K2T204", f"tf.{name} is a TensorFlow 1 graph API")
    if name in tables.tf_moved:
        return Verdict("K2T104", f"tf.{name} is {tables.tf_moved[name]} in Keras 3", True, tables.tf_moved[name],
                       [(kw, Expr(node)) for kw, node in call.raw])
    entry = table.get(name)
    if entry is not None and entry.keras == ops.SHAPE and call.indexed and not call.star and call.raw \
            and call.raw[0][0] in (None, "input") and call.keywords.get("out_type", "int32") in ("int32", "int64"):
        # tf.shape(x)[0] as K.shape(x)[0] (K2T210): a size Keras 3 takes where a shape is due (keras.random.normal's
        # on jax must be concrete), not an element of a tensor
        return Verdict("K2T210", f"tf.{name} -> keras.ops.shape ({SIZES})", True,
                       "keras.ops.shape", [(None, Expr(call.raw[0][1]))])
    if (name.startswith(TF_NOT_OPS) or name in TF_NOT_OPS) and not (MODEL_CODE.get() and name in table):
        return None
    if entry is None:
        return Verdict("K2T103", f"tf.{name} has no keras.ops equivalent; it ties the model to TensorFlow")
    return _translate(entry, f"tf.{name}", call, "K2T101", "K2T102")


def _tf2_name(v1: str) -> str | None:
    """compat.v1.math.argmax -> math.argmax: the TF2 function a TF1 name is a form of, None if TF2 has no such
    function (compat.v1.placeholder) or it is not a model op."""
    tables = lint_tables()
    name = ops.canonical_tf_name(v1[len("compat.v1."):], tables.tf_aliases)
    if name.startswith("compat.") or name not in tables.tf_known or name.startswith(TF_NOT_OPS) or name in TF_NOT_OPS:
        return None
    return name


def _backend(name: str, call: CallArgs) -> Verdict | None:
    tables = lint_tables()
    if name in tables.k_removed:  # Keras 2.2's K.slice, which called tf.slice with its arguments
        return classify_call(TF + tables.k_removed[name], call)
    if name.startswith("tf."):  # Keras 2.2's backend module imported tensorflow as tf: K.tf.slice is tf.slice
        return classify_call(TF + name[3:], call)
    if name == "backend" and MODEL_CODE.get() and not call.positional and not call.keywords:
        # `if K.backend() == "tensorflow": <TF code> else: raise NotImplementedError` (keras-contrib's CRF): the
        # model ran on TensorFlow, and its TensorFlow branch is the one the rewrite made portable
        return Verdict("K2T202", "K.backend() is 'tensorflow' in a generated module: the branch the model ran and the "
                                 "rewrite made portable", True, "k2to3.portable.keras2_backend", [])
    aliases = tables.config
    if name in aliases:
        return Verdict("K2T202", f"K.{name} moved to {aliases[name]}", True, aliases[name],
                       [(kw, Expr(node)) for kw, node in call.raw])
    obsolete = tables.obsolete
    if name in obsolete and call.indexed and name in tables.indexed and not call.star:
        target = "keras.ops." + tables.indexed[name]
        return Verdict("K2T210", f"K.{name} -> {target} ({SIZES})", True, target,
                       [(kw, Expr(node)) for kw, node in call.raw])
    if name in obsolete:
        return Verdict(obsolete[name][0], f"K.{name} has no Keras 3 equivalent: {obsolete[name][1]}")
    if name in BACKEND_TF1 and name not in tables.by_k:
        return Verdict("K2T204", f"K.{name} is a TensorFlow 1 graph API with no Keras 3 equivalent")
    entry = tables.by_k.get(name)
    if entry is None:
        return Verdict("K2T203", f"K.{name} has no keras.ops equivalent")
    return _translate(entry, f"K.{name}", call, "K2T201", "K2T203")


def _translate(entry: ops.OpEntry, shown: str, call: CallArgs, ok: str, bad: str) -> Verdict:
    if call.star:
        return Verdict(bad, f"{shown} called with *args/**kwargs: arguments cannot be checked statically")
    positional, keywords = call.positional, call.keywords
    try:
        first, kwargs = ops.positional_to_keywords(entry, positional, keywords)
        for key in TRANSFORM_KEYS.get(entry.transform or "", ()):
            src = next((k for k, v in entry.args.items() if v == key), key)
            if isinstance(kwargs.get(src), Expr):
                raise ops.Untranslatable(f"{src}= is not a literal, so its translation cannot be checked")
        name, out = ops.call_target(entry, ops.translate(entry, first, kwargs))
        if name == entry.compose:  # source is not rewritten to depend on k2to3
            flags = ", ".join(f"{k}=" for k in entry.compose_args if k in out)
            raise ops.Untranslatable(f"keras.ops.{entry.keras} has no {flags} argument; write it with "
                                     f"keras.ops.swapaxes (as {entry.compose} does)")
    except ops.Untranslatable as exc:
        return Verdict(bad, f"{shown}: {exc}")
    target = name if name.startswith("k2to3.") else f"keras.{entry.namespace}.{name}"
    keras_pos = lint_tables().positional.get(name) if target.startswith("keras.ops.") else None
    # the first argument goes by keyword where Keras's first positional parameter is another one (in_top_k)
    first_kw = entry.first if keras_pos is not None and keras_pos[:1] != (entry.first,) else None
    args: list[tuple[str | None, Any]] = [(first_kw, out.pop(entry.first))]
    order = [*entry.params[1:len(positional)], *keywords]
    for k in order:  # the caller's arguments in their order, then the defaults made explicit
        mapped = entry.args.get(k)
        if mapped in out and mapped.startswith("*"):  # tf.einsum's operands: positional, after the first
            args += [(None, v) for v in out.pop(mapped)]
        elif mapped in out:
            args.append((mapped, out.pop(mapped)))
    args += list(out.items())
    if entry.random and MODEL_CODE.get():  # the SeedGenerator of the layer that runs it (generated_module.py)
        args.append(("seed", Code(SEED_CALL)))
    return Verdict(ok, f"{shown} -> {target}", True, target, args)


class Aliases:
    """Import-alias resolution (every import style, in any scope): `import tensorflow as tf`, `from
    tensorflow.keras import backend as K`, `import keras.backend as K`, ... A local variable that shadows an
    import alias is not tracked: name resolution is by import, not by full scope analysis (which costs several
    times the parse)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def add_import(self, dotted: str, asname: str | None) -> None:
        if asname:
            self.names[asname] = dotted
        else:
            root = dotted.split(".")[0]
            self.names.setdefault(root, root)

    def add_from(self, module: str, name: str, asname: str | None) -> None:
        self.names[asname or name] = f"{module}.{name}"

    def resolve(self, dotted: str | None) -> str | None:
        if not dotted:
            return None
        root, _, rest = dotted.partition(".")
        base = self.names.get(root)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base


def arg_kind(node: ast.expr) -> str:
    """What a positional of self.add_weight is by its value: "shape" (a tuple or list), "name" (a string, an
    f-string, a .format or % of a string literal) or "other"."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return "shape"
    if (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(node, ast.JoinedStr):
        return "name"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        return "name"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
            and isinstance(node.left.value, str):
        return "name"
    return "other"


def add_weight_keywords(kinds: list[str], keywords: set[str]) -> tuple[str, ...] | None:
    """The keywords self.add_weight's positionals (of `kinds`) stand for, in the Keras 2 order their values
    point at (rules/source.toml [add_weight]); None when that would repeat a keyword the call already gives."""
    orders = lint_tables().add_weight
    first = kinds[0] if kinds else "other"
    old = first == "shape" or (first == "other" and "name" in keywords and "shape" not in keywords)
    order = orders["keras_2_0" if old else "keras_2"]
    if len(kinds) > len(order):
        return None
    names = order[: len(kinds)]
    return None if set(names) & keywords else names


def _int_index(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and type(node.value) is int) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _int_index(node.operand))


SIZES = "its result is only used as sizes: indexed by integers, or the shape of a random draw"
# random ops -> (position, keyword) of their shape argument
RANDOM_DRAWS = {**dict.fromkeys(("normal", "uniform", "truncated_normal", "random_normal", "random_uniform"),
                                (0, "shape")), "dropout": (2, "noise_shape")}


def _named(call: ast.expr, names: frozenset[str]) -> bool:
    f = call.func if isinstance(call, ast.Call) else None
    return (isinstance(f, ast.Attribute) and f.attr in names) or (isinstance(f, ast.Name) and f.id in names)


def _holding(body: list[ast.stmt], lines: list[int]) -> Iterator[ast.AST]:
    """The statements of `body` that span one of `lines`, a class's own statements instead of the whole class."""
    for st in body:
        if not any(st.lineno <= ln <= (st.end_lineno or st.lineno) for ln in lines):
            continue
        if isinstance(st, ast.ClassDef):
            yield from st.decorator_list + st.bases + [k.value for k in st.keywords]
            yield from _holding(st.body, lines)
        else:
            yield st


def indexed_calls(tree: ast.AST, code: str | None = None) -> set[tuple[int, int]]:
    """(line, column) of every call of a function named as an `indexed` entry (shape) whose result is only indexed
    by integer literals: `K.shape(x)[0]`, or `s = K.shape(x)` in a function whose every other use of `s` is `s[0]`,
    `s[-1]` (K2T210: K.shape(x) becomes keras.ops.shape(x); classify_call decides which callee is K)."""
    names = frozenset(lint_tables().indexed)
    out: set[tuple[int, int]] = set()
    lines: list[int] = []  # where a `s = shape(...)` stands
    fns: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    roots: Iterable[ast.AST] = [tree]
    if code is not None and isinstance(tree, ast.Module):  # lint: read only the statements that mention shape(
        found = [i for i, line in enumerate(code.splitlines(), 1) if "shape(" in line]
        roots = list(_holding(tree.body, found))
    for node in (n for root in roots for n in ast.walk(root)):
        if isinstance(node, ast.Subscript) and _named(node.value, names) and _int_index(node.slice):
            out.add((node.value.lineno, node.value.col_offset))
        elif isinstance(node, ast.Call) and _named(node, frozenset(RANDOM_DRAWS)):
            # the shape a random op draws (tf.random.normal(tf.shape(x)), K.dropout(h, r, K.shape(h))): keras.random
            # takes a tuple of sizes
            at, keyword = RANDOM_DRAWS[node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id]
            shape = node.args[at] if len(node.args) > at else \
                next((k.value for k in node.keywords if k.arg == keyword), None)
            if shape is not None and _named(shape, names):
                out.add((shape.lineno, shape.col_offset))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and _named(node.value, names):
            lines.append(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fns.append(node)
    for fn in fns:  # only the functions holding such a statement are read again
        if any(fn.lineno <= ln <= (fn.end_lineno or fn.lineno) for ln in lines):
            out |= _indexed_locals(fn, names)
    return out


def _indexed_locals(fn: ast.FunctionDef | ast.AsyncFunctionDef, names: frozenset[str]) -> set[tuple[int, int]]:
    """The `s = shape(...)` statements of `fn` whose name is assigned once and only ever read as `s[int]`. One walk
    of the function: a name-by-name walk for each assignment made lint quadratic in the size of a function."""
    candidates: dict[str, ast.Assign] = {}
    assigned: dict[str, int] = {}
    loads: dict[str, list[int]] = {}
    indexed_uses: set[int] = set()
    declared: set[str] = set()
    counted: set[int] = set()  # any rebinding or mutation disqualifies: `s += ...`, `for s in ...`, `s[0] = ...`
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and id(n) not in counted:
            counted.add(id(n))
            assigned[n.id] = assigned.get(n.id, 0) + 1
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name) and id(name) not in counted:
                        counted.add(id(name))
                        assigned[name.id] = assigned.get(name.id, 0) + 1
            if len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and _named(n.value, names):
                candidates[n.targets[0].id] = n
        elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and isinstance(n.value.ctx, ast.Load) \
                and _int_index(n.slice):
            indexed_uses.add(id(n.value))
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads.setdefault(n.id, []).append(id(n))
    out: set[tuple[int, int]] = set()
    for name, st in candidates.items():
        uses = loads.get(name, [])
        if assigned.get(name) == 1 and name not in declared and uses and all(u in indexed_uses for u in uses):
            out.add((st.value.lineno, st.value.col_offset))
    return out
