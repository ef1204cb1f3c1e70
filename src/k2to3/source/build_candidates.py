"""The candidate build functions of a weights-only file, found statically in the --src files (stdlib ast, nothing
run): module-level functions that call `Model(...)` or `Sequential(...)`, the argument values the sources
themselves give them (defaults, literal arguments at call sites, one hop through a caller's parameter default,
the keys of a dict the parameter indexes, literals it is compared with, a JSON config beside the weights), and a
static score: how many of the file's layer names the function's name literals and patterns ("conv%d" % l) give."""

from __future__ import annotations

import ast
import itertools
import json
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k2to3.source.builder_files import SourceFile as _File
from k2to3.source.builder_files import link
from k2to3.source.builder_files import literal as _literal
from k2to3.source.builder_sizes import MAX_DIMS, build_methods, objectlike, shape_dims, sizelike, unread
from k2to3.source.source_index import SourceIndex

BUILDS = frozenset({"Model", "Sequential"})
MAX_COMBOS = 32  # argument combinations per function
CONFIG_MAX_BYTES = 1 << 20


@dataclass
class Builder:
    fn: str
    where: str
    params: list[str]
    required: list[str]  # parameters without a default
    values: dict[str, list[Any]] = field(default_factory=dict)  # parameter -> candidate values, in order
    score: int = 0  # file layer names its name literals / patterns give
    patterns: list[str] = field(default_factory=list)
    config: tuple[str, dict[str, Any]] | None = None  # a class's JSON beside the weights: (file name, __init__ kwargs)
    how: dict[str, list[tuple[Any, str]]] = field(default_factory=dict)  # parameter -> (value, where it came from)
    # for values not written at a call site or as a default: weight shapes, a JSON file, a class attribute
    bound: list[str] = field(default_factory=list)  # module names the sources compute when they run (num_actions =
    # env.action_space.shape[0]): tried like required parameters, set on the module before the build
    why: dict[str, str] = field(default_factory=dict)  # a bound name -> why it is not a constant (K2T906's words)

    def origin(self, param: str, value: Any) -> str | None:
        return next((w for v, w in self.how.get(param, []) if type(v) is type(value) and v == value), None)

    def combos(self) -> list[dict[str, Any]]:
        """kwargs to try: every required parameter needs a value; optional ones are tried at their default first.
        A class configured by a JSON object beside the weights is tried with that object first."""
        first = [self.config[1]] if self.config else []
        names = [p for p in [*self.params, *self.bound] if p in self.required or self.values.get(p)]
        choices = [self.values.get(p, []) if p in self.required else [_DEFAULT, *self.values[p]] for p in names]
        if any(not c for c in choices):
            return first
        out = list(first)
        for vals in _by_rank(choices):
            combo = {n: v for n, v in zip(names, vals) if v is not _DEFAULT}
            if combo not in out:
                out.append(combo)
            if len(out) >= MAX_COMBOS:
                break
        return out

    def label(self, kwargs: dict[str, Any]) -> str | None:
        """BiLSTMCRF(params.json).build() when the build is the class configured by its JSON file."""
        if not self.config or kwargs != self.config[1]:
            return None
        cls, _, method = self.fn.partition(".")
        return f"{cls}({self.config[0]})" + (f".{method}()" if method else "")

    @property
    def missing(self) -> list[str]:
        return [p for p in self.required if not self.values.get(p)]


_DEFAULT = object()
MAX_ENUMERATED = 200_000  # index tuples ordered by rank (each parameter's candidates come likeliest first)


def _by_rank(choices: list[list[Any]]) -> list[tuple[Any, ...]]:
    """Every parameter's candidates combined, the combinations of likelier candidates first (the sum of their
    ranks), so that three parameters each with several candidates all get their first ones tried together."""
    sizes = [len(c) for c in choices]
    index_tuples = itertools.islice(itertools.product(*(range(n) for n in sizes)), MAX_ENUMERATED)
    ranked = sorted(index_tuples, key=lambda t: (sum(t), t))
    return [tuple(c[i] for c, i in zip(choices, t)) for t in ranked]


def _called(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _pattern(node: ast.expr) -> str | None:
    """A layer name expression as a regex: "conv%d" % l, f"conv{l}", "conv{}".format(l), "a" + str(i)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
            and isinstance(node.left.value, str):
        return re.sub(r"%[-+ #0-9.]*[sdifr]", ".+?", re.escape(node.left.value).replace(r"\%", "%"))
    if isinstance(node, ast.JoinedStr):
        return "".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".+?" for v in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        return re.sub(r"\\\{[^}]*\\\}", ".+?", re.escape(node.func.value.value))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _pattern(node.left), _pattern(node.right)
        return (left or ".+?") + (right or ".+?") if left or right else None
    return None


def _add(values: dict[str, list[Any]], param: str, value: Any) -> None:
    got = values.setdefault(param, [])
    if not any(type(v) is type(value) and v == value for v in got):
        got.append(value)


def _inner_values(fn: ast.FunctionDef, file: _File, params: set[str], values: dict[str, list[Any]]) -> None:
    """Values a function's own body enumerates for a parameter: {..}[p] keys, p == lit, p in (lits)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and node.slice.id in params:
            if isinstance(node.value, ast.Dict):
                for k in node.value.keys:
                    ok, v = _literal(k) if k is not None else (False, None)
                    if ok:
                        _add(values, node.slice.id, v)
            elif isinstance(node.value, ast.Name) and node.value.id in file.dicts:
                for v in file.dicts[node.value.id]:
                    _add(values, node.slice.id, v)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id in params:
            for op, right in zip(node.ops, node.comparators):
                ok, v = _literal(right)
                if ok and isinstance(op, ast.Eq):
                    _add(values, node.left.id, v)
                elif ok and isinstance(op, ast.In) and isinstance(v, (list, tuple, set)):
                    for item in v:
                        _add(values, node.left.id, item)


def _defaults(fn: ast.FunctionDef) -> dict[str, Any]:
    args = fn.args.posonlyargs + fn.args.args
    out = {}
    for a, d in zip(args[len(args) - len(fn.args.defaults):], fn.args.defaults):
        ok, v = _literal(d)
        if ok:
            out[a.arg] = v
    for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
        ok, v = _literal(d) if d is not None else (False, None)
        if ok:
            out[a.arg] = v
    return out


def _call_site_values(name: str, params: list[str], files: list[_File], values: dict[str, list[Any]],
                      how: dict[str, list[tuple[Any, str]]] | None = None) -> None:
    """Literal arguments where the sources call `name`; a caller's parameter passed on gives its default."""
    for file in files:
        for caller in ast.walk(file.tree):
            if not isinstance(caller, (ast.FunctionDef, ast.Module)):
                continue
            defaults = _defaults(caller) if isinstance(caller, ast.FunctionDef) else {}
            if isinstance(caller, ast.FunctionDef):  # `Ty = 10` then create_model(Tx, Ty, ...) in the caller
                defaults = {**_local_literals(caller), **defaults}
            for node in ast.walk(caller):
                if not isinstance(node, ast.Call) or _called(node) != name:
                    continue
                bound = list(zip(params, node.args)) + [(k.arg, k.value) for k in node.keywords if k.arg in params]
                for param, arg in bound:
                    ok, v = file.value(arg)  # create_actor([STATE_LENGTH]) with STATE_LENGTH = 3 in that file
                    if ok:
                        _add(values, param, v)
                        if how is not None and isinstance(arg, ast.Name) and arg.id in file.imported:
                            where = (v, f"{file.imported[arg.id]} ({file.path.name}:{node.lineno})")
                            if where not in how.setdefault(param, []):
                                how[param].append(where)
                    elif isinstance(arg, ast.Name) and arg.id in defaults:
                        _add(values, param, defaults[arg.id])
        for cls in (s for s in ast.walk(file.tree) if isinstance(s, ast.ClassDef)):
            attrs = _class_literals(cls)  # textgenrnn_model(..., cfg=self.config): the class's `config = {...}`
            for node in ast.walk(cls):
                if not isinstance(node, ast.Call) or _called(node) != name or not attrs:
                    continue
                bound = list(zip(params, node.args)) + [(k.arg, k.value) for k in node.keywords if k.arg in params]
                for param, arg in bound:
                    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "self" \
                            and arg.attr in attrs:
                        _add(values, param, attrs[arg.attr])
                        if how is not None:
                            how.setdefault(param, []).append(
                                (attrs[arg.attr], f"{cls.name}.{arg.attr} ({file.path.name}:{node.lineno})"))


def _local_literals(fn: ast.FunctionDef) -> dict[str, Any]:
    """The literal values a function's own body gives its local names once (`Ty = 10`, `n_a = 32`): a name assigned
    twice, or otherwise, is not one value."""
    seen: dict[str, list[Any]] = {}
    for node in ast.walk(fn):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    ok, v = _literal(node.value) if isinstance(node, ast.Assign) and t is n else (False, None)
                    seen.setdefault(n.id, []).append(v if ok else _NOT_LITERAL)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and v[0] is not _NOT_LITERAL}


_NOT_LITERAL = object()


def _class_literals(cls: ast.ClassDef) -> dict[str, Any]:
    """A class body's NAME = literal assignments (textgenrnn's `config = {'rnn_layers': 2, ...}`)."""
    out = {}
    for s in cls.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            ok, v = _literal(s.value)
            if ok:
                out[s.targets[0].id] = v
    return out


def subscript_keys(fn: ast.FunctionDef, params: list[str]) -> dict[str, set[Any]]:
    """The literal keys a function reads from each parameter (cfg['max_length']): what a config object must hold."""
    out: dict[str, set[Any]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in params:
            ok, v = _literal(node.slice)
            if ok and isinstance(v, (str, int)):
                out.setdefault(node.value.id, set()).add(v)
    return out


def shape_values(bodies: list[ast.FunctionDef], missing: list[str], groups: list[dict[str, Any]],
                 values: dict[str, list[Any]], how: dict[str, list[tuple[Any, str]]]) -> None:
    """A required parameter no source gives a value, passed as an argument of a layer call whose name= matches a
    weight group of the file (textgenrnn's Embedding(num_classes, ..., name='embedding') and Dense(num_classes,
    name='output'), where the caller passes len(vocab) + 1): each dimension of those groups' weights, the ones
    more of them share first. The tf_keras build confirms which."""
    counts: dict[str, dict[int, int]] = {}
    layers: dict[str, list[str]] = {}
    for body in bodies:
        for node in ast.walk(body):
            if not isinstance(node, ast.Call):
                continue
            pat = next((_pattern(k.value) for k in node.keywords if k.arg == "name"), None)
            passed = {a.id for a in node.args if isinstance(a, ast.Name)} | {
                k.value.id for k in node.keywords if k.arg != "name" and isinstance(k.value, ast.Name)}
            hit = [g for g in groups if pat and re.fullmatch(pat, g["name"])] if passed & set(missing) else []
            for p in passed & set(missing):
                for g in hit:
                    for d in {int(d) for s in g["shapes"] for d in s}:
                        counts.setdefault(p, {})[d] = counts.get(p, {}).get(d, 0) + 1
                    layers.setdefault(p, []).append(g["name"])
    for p, by_dim in counts.items():
        for d, _ in sorted(by_dim.items(), key=lambda kv: -kv[1]):
            _add(values, p, d)
            how.setdefault(p, []).append((d, "the weight shapes of " + ", ".join(dict.fromkeys(layers[p]))))


def config_values(weights: Path, params: list[str], required: list[str], keys: dict[str, set[Any]] | None = None,
                  how: dict[str, list[tuple[Any, str]]] | None = None) -> dict[str, list[Any]]:
    """JSON objects beside the weights: keys that name parameters give their values; a required parameter no key
    gives takes each object that names no parameter (textgenrnn's cfg) and holds every key the function reads from
    it (`keys`: cfg['max_length'], ...; so a vocabulary beside the weights is not taken for the config)."""
    out: dict[str, list[Any]] = {}
    whole = []
    where: list[tuple[str, str, Any]] = []  # (parameter or "", file name, value)
    for cand in sorted(weights.parent.glob("*.json"))[:20]:
        try:
            if cand.stat().st_size > CONFIG_MAX_BYTES:
                continue
            data = json.loads(cand.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict) or "class_name" in data:  # a Keras model config is a pair, not arguments
            continue
        named = [p for p in params if p in data]
        for p in named:
            _add(out, p, data[p])
            where.append((p, cand.name, data[p]))
        if not named:
            whole.append((cand.name, data))
    for p in required:
        if not out.get(p):
            for name, data in whole:
                if not (keys or {}).get(p) or keys[p] <= set(data):  # type: ignore[index]
                    _add(out, p, data)
                    where.append((p, name, data))
    for p, name, v in where if how is not None else []:
        how.setdefault(p, []).append((v, f"{name} beside the weights"))  # type: ignore[union-attr]
    return out


class _DataOnly(pickle.Unpickler):
    """A pickle of plain data only (lists, tuples, dicts, numbers, strings): any class or function it names is
    refused before it is looked up, so reading it runs nothing."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}: not plain data")


def data_pickle(path: Path) -> Any:
    """The plain data a hyper-parameter pickle holds (an autoencoder's `parameters.pkl`), or None."""
    try:
        if path.stat().st_size > CONFIG_MAX_BYTES:
            return None
        with path.open("rb") as f:
            return _DataOnly(f).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, MemoryError, RecursionError):
        return None


def config_object(weights: Path, params: list[str], required: list[str]) -> tuple[str, dict[str, Any]] | None:
    """The JSON object (or plain-data pickle) beside the weights that configures a class: every key one of its
    __init__ parameters, and every required parameter given (anago's params.json for BiLSTMCRF(**params)); a pickled
    list or tuple gives the parameters in order (an autoencoder's parameters.pkl of its constructor arguments)."""
    for cand in sorted([*weights.parent.glob("*.json"), *weights.parent.glob("*.pkl"),
                        *weights.parent.glob("*.pickle")])[:20]:
        if cand.suffix == ".json":
            try:
                data = json.loads(cand.read_text()) if cand.stat().st_size <= CONFIG_MAX_BYTES else None
            except (OSError, ValueError, UnicodeDecodeError):
                continue
        else:
            data = data_pickle(cand)
            if isinstance(data, (list, tuple)) and required and len(required) <= len(data) <= len(params):
                data = dict(zip(params, data))
        if isinstance(data, dict) and data and set(data) <= set(params) and set(required) <= set(data):
            return cand.name, data
    return None


def _is_build(fn: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Call) and _called(n) in BUILDS for n in ast.walk(fn))


def _class_targets(cls: ast.ClassDef) -> list[tuple[str, ast.FunctionDef | None]]:
    """A keras.Model subclass (built by its __init__) and every method that builds a model and takes no argument
    but self (Builder(config).build()), each with the __init__ that configures it."""
    methods = {s.name: s for s in cls.body if isinstance(s, ast.FunctionDef)}
    init = methods.get("__init__")
    out: list[tuple[str, ast.FunctionDef | None]] = []
    if any(ast.unparse(b).split(".")[-1] in ("Model", "Sequential") for b in cls.bases):  # keras.Model, tf.keras...
        out.append((cls.name, init))
    for name, m in methods.items():
        required = len(m.args.args) - len(m.args.defaults)
        if name != "__init__" and _is_build(m) and required <= 1 and not m.args.kwonlyargs:
            out.append((f"{cls.name}.{name}", init))
    if not out and init is not None and _builds_in_init(init, methods):
        out.append((cls.name, init))  # an agent whose __init__ builds self.model (self._make_model(n, m), inline)
    return out


def _builds_in_init(init: ast.FunctionDef, methods: dict[str, ast.FunctionDef]) -> bool:
    """__init__ makes a model itself, or calls a method of the class that does (self._build(...))."""
    if _is_build(init):
        return True
    called = {n.func.attr for n in ast.walk(init) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"}
    return any(m in methods and _is_build(methods[m]) for m in called)


def _class_builders(file: _File, files: list[_File], layer_names: list[str], weights: Path | None,
                    only: str | None, index: SourceIndex | None = None,
                    groups: list[dict[str, Any]] | None = None) -> list[Builder]:
    found = []
    for cls in file.classes.values():
        for name, init in _class_targets(cls):
            if only and only != name:
                continue
            params = [a.arg for a in (init.args.posonlyargs + init.args.args + init.args.kwonlyargs)][1:] if init \
                else []
            required = [p for p in params if init is not None and not _has_default(init, p)]
            b = Builder(name, f"{file.path}:{cls.lineno}", params, required)
            if init is not None:
                _inner_values(init, file, set(params), b.values)
            _call_site_values(cls.name, params, files, b.values, b.how)
            b.config = config_object(weights, params, required) if weights is not None else None
            b.patterns = list(dict.fromkeys(p for n in ast.walk(cls) if isinstance(n, ast.Call) for k in n.keywords
                                            if k.arg == "name" for p in [_pattern(k.value)] if p))
            b.score = sum(any(re.fullmatch(pat, n) for pat in b.patterns) for n in layer_names)
            if index is not None:
                b.why = {g: w for g, w in _computed_globals(index, cls.name).items() if g not in params}
                b.bound = list(b.why)
                if init is not None:  # before the sizes: a value the build never reads is no size
                    _stand_ins(b, init, build_methods(cls, ["__init__", name.partition(".")[2]]))
                _size_values(b, [cls, file.tree], groups)
            found.append(b)
    return found


def _size_values(b: Builder, trees: list[ast.AST], groups: list[dict[str, Any]] | None) -> None:
    """A required parameter (or a module name the sources compute when they run) that nothing else gives a value
    and that is used as a number: the file's weight dimensions, the likeliest first (the tf_keras build says which)."""
    dims = shape_dims(groups or [])[:MAX_DIMS]
    for p in [*b.required, *b.bound]:
        if b.values.get(p) or not dims or objectlike(p, trees) or not sizelike(p, trees):
            continue
        for d in dims:
            _add(b.values, p, d)
        b.how.setdefault(p, []).extend((d, "the file's weight shapes") for d in dims)


STAND_IN = "as a stand-in: the build never reads it"


def _stand_ins(b: Builder, entry: ast.FunctionDef, callables: dict[str, ast.FunctionDef]) -> None:
    """A required parameter nothing gives a value and the build never reads (only stores it on the instance for
    later: DDQN's `n_states`, a `batch_size`) is tried with None: the model cannot depend on it."""
    for p in b.required:
        if not b.values.get(p) and unread(p, entry, callables):
            b.values[p] = [None]
            b.how.setdefault(p, []).append((None, STAND_IN))


def _computed_globals(index: SourceIndex, name: str) -> dict[str, str]:
    """Module names the build needs that the sources assign by running code (num_actions =
    env.action_space.shape[0]), each with why: sizes the search may bind from the weight shapes."""
    _, missing = index.closure({name})
    return {n: why for n, why in sorted(missing.items()) if why.startswith("is assigned by running code")}


def find_builders(index: SourceIndex, layer_names: list[str], weights: Path | None = None,
                  only: str | None = None, groups: list[dict[str, Any]] | None = None) -> list[Builder]:
    """Every function of the --src files that builds a Keras model (or `only` that one), and every class that does
    (a keras.Model subclass, a builder class's method), best static score first. `groups`: the file's weight
    groups with their shapes (a required parameter nothing else gives may be a dimension of them)."""
    files = [_File(p, t) for p, t in index.texts.items()]
    link(files)  # constants a file imports from another (`from parameters import *`) are its own
    found = []
    for file in files:
        found += _class_builders(file, files, layer_names, weights, only, index, groups)
        for name, fn in file.functions.items():
            if (only and name != only) or not (only or any(isinstance(n, ast.Call) and _called(n) in BUILDS
                                                           for n in ast.walk(fn))):
                continue
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
            defaults = _defaults(fn)
            required = [p for p in params if p not in defaults and not _has_default(fn, p)]
            b = Builder(name, f"{file.path}:{fn.lineno}", params, required)
            _inner_values(fn, file, set(params), b.values)
            _call_site_values(name, params, files, b.values, b.how)
            keys = subscript_keys(fn, params)
            if groups:
                shape_values(_bodies(fn, file, index), [p for p in required if not b.values.get(p)], groups,
                             b.values, b.how)
            if weights is not None:  # a JSON config beside the weights is this file's: tried before the defaults
                whole = [p for p in required if not b.values.get(p) or keys.get(p)]
                for p, vs in config_values(weights, params, whole, keys, b.how).items():
                    b.values[p] = vs + [v for v in b.values.get(p, []) if v not in vs]
            b.patterns = _name_patterns(fn, file, index)
            b.score = sum(any(re.fullmatch(pat, n) for pat in b.patterns) for n in layer_names)
            b.why = {g: w for g, w in _computed_globals(index, name).items() if g not in params}
            b.bound = list(b.why)
            _stand_ins(b, fn, {f.name: f for f in _bodies(fn, file, index)})
            _size_values(b, [*_bodies(fn, file, index), file.tree], groups)
            found.append(b)
    return sorted(found, key=lambda b: -b.score)


def _has_default(fn: ast.FunctionDef, param: str) -> bool:
    args = fn.args.posonlyargs + fn.args.args
    with_default = {a.arg for a in args[len(args) - len(fn.args.defaults):]}
    with_default |= {a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None}
    return param in with_default


def _bodies(fn: ast.FunctionDef, file: _File, index: SourceIndex) -> list[ast.FunctionDef]:
    """The function and the module-level functions of its file it calls."""
    return [fn] + [file.functions[n] for n in index.reachable(fn.name) - {fn.name} if n in file.functions]


def _name_patterns(fn: ast.FunctionDef, file: _File, index: SourceIndex) -> list[str]:
    """name= expressions of the calls in the function and the module-level functions it calls."""
    bodies = _bodies(fn, file, index)
    pats = []
    for body in bodies:
        for node in ast.walk(body):
            if isinstance(node, ast.Call):
                for k in node.keywords:
                    if k.arg == "name":
                        pat = _pattern(k.value)
                        if pat:
                            pats.append(pat)
    return list(dict.fromkeys(pats))
