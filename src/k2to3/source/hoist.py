"""`convert --src`: find, in the indexed source, the code an artifact needs (Lambda functions, custom layer
classes, functions stored by name as activations, losses or metrics, a weights-only file's build function),
and write it as two generated modules:

* the Keras 3 module (`<out>_k3.py`): the definitions rewritten to keras.ops by the source pass, each Lambda's
  function hoisted to a named function, everything registered with `keras.saving.register_keras_serializable`
  so the saved `.keras` loads with safe_mode=True wherever the module is imported;
* the Keras 2 module (golden only, a temporary file): the same definitions as written, imports pointed at
  tf_keras, so tf_keras computes the reference from the user's own code instead of the file's bytecode.

Nothing here imports keras or runs the source."""

from __future__ import annotations

import ast
import copy
import keyword
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from k2to3 import __version__
from k2to3.core import rules as rules_mod
from k2to3.core.findings import Finding
from k2to3.source.extract import Definition, Site, SourceIndex
from k2to3.source.fix import fix_source
from k2to3.source.lint import lint_source
from k2to3.upgrade import KERAS3_ACTIVATIONS, KERAS3_LOSSES, LOSS_ALIASES, METRIC_NAMES, MODEL_CLASSES, function_name

PORTABLE_LOSS_NAMES = KERAS3_LOSSES | set(LOSS_ALIASES) | METRIC_NAMES | {"acc", "accuracy", "loss"}


@dataclass
class Need:
    kind: str  # lambda | activation_lambda | class | function | build_fn
    layer: str | None
    key: str | None = None  # activation config key
    class_name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    has_output_shape: bool = False
    closure: list[Any] | None = None
    fn_name: str | None = None  # a function stored by name
    optional: bool = False  # a class a k2to3 rule also handles: the source's own definition wins if present


@dataclass
class Resolution:
    module: str
    k3_code: str = ""
    k2_code: str = ""
    lambdas: dict[str, dict[str, Any]] = field(default_factory=dict)  # layer -> {function, arguments}
    activations: dict[tuple[str, str], str] = field(default_factory=dict)  # (layer, key) -> object name
    classes: dict[str, str] = field(default_factory=dict)  # config class name -> object name
    functions: dict[str, str] = field(default_factory=dict)  # stored function name -> object name
    build_fn: str | None = None
    findings: list[Finding] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)  # for the report

    @property
    def package(self) -> str:
        return self.module

    def registered(self, name: str) -> str:
        return f"{self.package}>{name}"

    def function_config(self, name: str) -> dict[str, Any]:
        """How Keras 3 serializes a registered function."""
        return {"module": "builtins", "class_name": "function", "config": self.registered(name),
                "registered_name": "function"}

    @property
    def needed_at_load(self) -> bool:
        """Whether the saved .keras references objects of the generated module."""
        return any(o["kind"] != "build function" for o in self.objects)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def golden_config(self, model_config: dict[str, Any]) -> dict[str, Any]:
        """The artifact's model config with every Lambda and lambda activation pointing at the Keras 2 module's
        functions by name (tf_keras then never sees the file's bytecode)."""
        cfg = copy.deepcopy(model_config)
        for layer in walk_layers(cfg):
            lc = layer.get("config", {})
            name = lc.get("name")
            if layer.get("class_name") == "Lambda" and name in self.lambdas:
                lam = self.lambdas[name]
                # tf_keras's two deserializers treat a function name in a Lambda config differently (the legacy
                # one swaps it for the object first): the golden worker's GoldenLambda takes either.
                layer["class_name"] = "K2to3GoldenLambda"
                layer.pop("module", None)
                layer.pop("registered_name", None)
                lc.update(function=lam["function"], arguments=lam["arguments"])
                for key in ("function_type", "module", "output_shape", "output_shape_type", "output_shape_module"):
                    lc.pop(key, None)
            cls = layer.get("class_name")
            if isinstance(cls, str) and self.classes.get(cls.split(">")[-1], cls.split(">")[-1]) != cls.split(">")[-1]:
                layer["class_name"] = self.classes[cls.split(">")[-1]]  # renamed: custom_objects={"Old": New}
                layer.pop("registered_name", None)
                layer.pop("module", None)
            for key in ACTIVATION_KEYS:
                if (name, key) in self.activations:
                    lc[key] = self.activations[(name, key)]
                elif isinstance(lc.get(key), dict) and lc[key].get("class_name") == "function" \
                        and lc[key].get("config") in self.functions:
                    lc[key] = self.functions[lc[key]["config"]]
        return cfg


ACTIVATION_KEYS = ("activation", "recurrent_activation")


def walk_layers(model_config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every layer dict of a model config, nested models included, in config order."""
    cfg = model_config.get("config")
    layers = cfg if isinstance(cfg, list) else (cfg or {}).get("layers", [])
    for layer in layers:
        yield layer
        if layer.get("class_name") in MODEL_CLASSES:
            yield from walk_layers(layer)
        for inner_key in ("layer", "backward_layer", "cell"):
            inner = layer.get("config", {}).get(inner_key)
            if isinstance(inner, dict) and "class_name" in inner:
                yield inner


def _is_lambda_activation(value: Any) -> bool:
    return function_name(value) == "<lambda>"


def _known_classes() -> frozenset[str]:
    return rules_mod.keras3_layers() | MODEL_CLASSES | {"TFOpLambda", "SlicingOpLambda", "InputLayer"}


def _rule_classes() -> frozenset[str]:
    """Classes a rename rule maps (library layers, Keras 2 aliases)."""
    return frozenset(c for r in rules_mod.layer_rules() if r.action == "rename_class" for c in r.classes)


def collect_needs(model_config: dict[str, Any] | None, training_config: dict[str, Any] | None) -> list[Need]:
    needs: list[Need] = []
    known, by_rule = _known_classes(), _rule_classes()
    for layer in walk_layers(model_config or {}):
        cls, lc = layer.get("class_name"), layer.get("config", {})
        name = lc.get("name") or layer.get("name")
        if cls == "Lambda":
            fn = lc.get("function")
            if lc.get("function_type") == "function" and isinstance(fn, str):  # stored by name (Keras 2.0-2.1)
                needs.append(Need("lambda_named", name, fn_name=fn, key="function",
                                  arguments=dict(lc.get("arguments") or {})))
                continue
            needs.append(Need("lambda", name, arguments=dict(lc.get("arguments") or {}),
                              has_output_shape=lc.get("output_shape") is not None,
                              closure=fn[2] if isinstance(fn, list) and len(fn) == 3 else None))
        elif cls not in known:
            needs.append(Need("class", name, class_name=str(cls).split(">")[-1], optional=cls in by_rule))
        for key in ACTIVATION_KEYS:
            value = lc.get(key)
            if _is_lambda_activation(value):
                closure = value["value"][2] if isinstance(value, dict) and isinstance(value.get("value"), list) \
                    and len(value["value"]) == 3 else None
                needs.append(Need("activation_lambda", name, key=key, class_name=cls, closure=closure))
            else:
                fname = function_name(value)
                if fname and fname not in KERAS3_ACTIVATIONS and not re.fullmatch(r"[\w.]+>[\w.]+", fname) \
                        and fname not in (
                        "softmax_v2", "hard_sigmoid", "swish", "gelu", "linear"):
                    needs.append(Need("function", name, key=key, fn_name=fname))
    tc = training_config or {}
    for what in ("loss", "metrics", "weighted_metrics"):
        for fname in _names_in(tc.get(what)):
            if fname not in PORTABLE_LOSS_NAMES:  # optional: the compile config is kept without it, with a warning
                needs.append(Need("function", None, key=what, fn_name=fname, optional=True))
    return needs


def _names_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) and value.get("class_name") == "MeanMetricWrapper":  # tf.keras >= 2.4 metrics
        fn = value.get("config", {}).get("fn")
        return [fn] if isinstance(fn, str) else []
    if isinstance(value, list):
        return [n for v in value for n in _names_in(v)]
    if isinstance(value, dict) and "class_name" not in value:
        return [n for v in value.values() for n in _names_in(v)]
    return []


def _snake(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


def _auto_named(layer: dict[str, Any]) -> bool:
    """A name Keras made up (dense_3, input_1): no evidence of which source function built the model."""
    name = str(layer.get("config", {}).get("name") or layer.get("name") or "")
    return bool(re.fullmatch(rf"{_snake(str(layer.get('class_name', '')))}(_\d+)?|input_\d+", name))


def module_name_for(stem: str) -> str:
    name = re.sub(r"\W", "_", stem) + "_k3"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = "m_" + name
    return name


def _ident(layer: str) -> str:
    name = re.sub(r"\W", "_", layer)
    return ("l_" + name) if not name or name[0].isdigit() else name


class Resolver:
    def __init__(self, index: SourceIndex, module: str):
        self.index = index
        self.res = Resolution(module)
        self.roots: set[str] = set()
        self.hoisted: dict[tuple[Any, ...], tuple[str, Site]] = {}  # site identity -> (function name, site)
        self.exports: dict[str, dict[str, Any]] = {}  # object name -> report record
        self.how: dict[str, str] = {}  # layer -> how its Lambda was matched to a call site

    def error(self, code: str, message: str, layer: str | None, fix: str) -> None:
        self.res.findings.append(Finding(code, "error", message, layer, fix))

    def note(self, code: str, severity: str, message: str, layer: str | None = None) -> None:
        self.res.findings.append(Finding(code, severity, message, layer))  # type: ignore[arg-type]

    # -- matching Lambda layers (and lambda activations) to call sites ----------------------------------
    def compatible(self, site: Site, need: Need) -> bool:
        if site.name is not None and site.name != need.layer:
            return False
        if need.kind == "activation_lambda":
            return site.kind == "activation" and (site.layer_class in (None, "", need.class_name))
        if site.kind != "Lambda":
            return False
        if site.arguments_static and (site.argument_keys or frozenset()) != frozenset(need.arguments):
            return False
        return site.has_output_shape == need.has_output_shape

    def scope(self, build_fn: str | None, layer_names: set[str]) -> set[str] | None:
        """The functions that built this model: what `FILE:FUNCTION` reaches, else what the function whose
        name="..." literals best match the artifact's layer names reaches; None when nothing says."""
        if build_fn:
            return self.index.reachable(build_fn)
        score = {f: len(names & layer_names) for f, names in self.index.literal_names.items()}
        best = max(score.values(), default=0)
        if best == 0:
            return None
        tops = [f for f, v in score.items() if v == best]
        return set().union(*(self.index.reachable(f) for f in tops))

    def match(self, needs: list[Need], scope: set[str] | None = None) -> dict[str, Site]:
        sites = self.index.sites
        out: dict[str, Site] = {}
        pending: list[tuple[Need, list[Site]]] = []
        for need in needs:
            named = [s for s in sites if s.name == need.layer and self.compatible(s, need)]
            cands = named or [s for s in sites if self.compatible(s, need)]
            scoped = [s for s in cands if scope is not None and s.owner in scope]
            cands = scoped or cands
            self.how[need.layer] = ("name=" if named else "the only compatible call" + (
                " in the build function's scope" if scoped else ""))  # type: ignore[index]
            if not cands:
                what = "lambda activation" if need.kind == "activation_lambda" else "Lambda layer"
                self.error(rules_mod.builtin_code("lambda" if need.kind == "lambda" else "activation_lambda"),
                           f"no {what} in the --src files matches it (arguments={sorted(need.arguments)}, "
                           f"output_shape={'set' if need.has_output_shape else 'none'})", need.layer,
                           "pass the file that builds the model with --src, or give the call name='"
                           f"{need.layer}'")
            elif len({s.identity for s in cands}) == 1:
                out[need.layer] = cands[0]  # type: ignore[index]
            else:
                pending.append((need, cands))
        # Several candidate call sites: match in order of creation when the counts agree.
        groups: dict[tuple[int, ...], list[tuple[Need, list[Site]]]] = {}
        for need, cands in pending:
            groups.setdefault(tuple(s.order for s in cands), []).append((need, cands))
        for _, members in groups.items():
            cands = members[0][1]
            if len(members) == len(cands) and not any(s.loop_vars for s in cands):
                for (need, _), site in zip(members, sorted(cands, key=lambda s: s.order)):
                    out[need.layer] = site  # type: ignore[index]
                    self.how[need.layer] = "order of creation"  # type: ignore[index]
                continue
            where = ", ".join(s.where for s in cands)
            for need, _ in members:
                self.error(rules_mod.builtin_code("lambda"),
                           f"{len(cands)} source call sites ({where}) could have built the {len(members)} "
                           "Lambda layers like this one; k2to3 cannot tell which", need.layer,
                           f"pass --src FILE:FUNCTION naming the function that builds the model, or give the "
                           f"call name='{need.layer}' in the source")
        # A call at module level outside any loop runs once: it made at most one layer.
        per_site: dict[tuple[Any, ...], list[str]] = {}
        for layer, site in out.items():
            if site.owner is None and not site.in_loop:
                per_site.setdefault((str(site.path), site.line, site.func.col_offset), []).append(layer)
        for layers in per_site.values():
            if len(layers) > 1:
                site = out[layers[0]]
                for layer in layers:
                    del out[layer]
                    self.error(rules_mod.builtin_code("lambda"),
                               f"its match, the call at {site.where}, runs once at module level but {len(layers)} "
                               "Lambda layers would come from it: not the source of this model", layer,
                               "pass the file that built the model with --src")
        return out

    def hoist_site(self, site: Site, need: Need) -> tuple[str, dict[str, Any]] | None:
        """(function name in the generated modules, extra arguments binding its closure)."""
        if isinstance(site.func, ast.Name):
            d = self.index.defs.get(site.func.id)
            if d is None or d.kind not in ("function", "lambda"):
                self.error(rules_mod.builtin_code("lambda"),
                           f"its function '{site.func.id}' ({site.where}) is not a module-level function of the "
                           "--src files", need.layer, "move the function to module level")
                return None
            self.roots.add(d.name)
            self.export(d.name, "lambda function", d.where, need.layer)
            return d.name, {}
        if not isinstance(site.func, ast.Lambda):
            self.error(rules_mod.builtin_code("lambda"),
                       f"its function `{site.func_code}` ({site.where}) is neither a lambda nor a function name",
                       need.layer, "pass a module-level function to the Lambda in the source")
            return None
        bound: dict[str, Any] = {}
        if site.frees:
            if need.closure is None or len(need.closure) != len(site.frees):
                self.error(rules_mod.builtin_code("lambda"),
                           f"its lambda ({site.where}) closes over {', '.join(site.frees)} but the file stores no "
                           "closure values for it", need.layer,
                           "pass the values with arguments= in the source and re-save, or make them module constants")
                return None
            bound = dict(zip(site.frees, need.closure))
        for var in sorted(site.loop_vars):
            value = bound.get(var, self.index.defs[var].value if var in self.index.defs else None)
            self.note(rules_mod.builtin_code("lambda_late_binding"), "warning",
                      f"its lambda ({site.where}) reads the loop variable '{var}' when the model runs, not when the "
                      f"layer was made: Keras 2 computed it with {var}={value!r} for every layer built in that loop, "
                      "and so does the converted model", need.layer)
        key = site.identity
        if key not in self.hoisted:
            fname = _ident(need.layer or "lambda") + "_fn"
            while fname in self.index.defs or fname in {n for n, _ in self.hoisted.values()}:
                fname += "_"
            self.hoisted[key] = (fname, site)
            self.roots |= set(site.globals_)
            self.export(fname, "lambda function", site.where, need.layer)
        else:
            self.exports[self.hoisted[key][0]]["layers"].append(need.layer)
        return self.hoisted[key][0], bound

    def export(self, name: str, kind: str, where: str, layer: str | None) -> None:
        rec = self.exports.setdefault(name, {"name": name, "kind": kind, "source": where, "layers": []})
        if layer and layer not in rec["layers"]:
            rec["layers"].append(layer)

    def by_custom_objects(self, need: Need, key: str, kinds: tuple[str, ...]) -> str | None:
        """The definition a custom_objects={key: obj} mapping in the source names, noted as how it matched."""
        target, where = self.index.custom_objects[key]
        d = self.index.defs.get(target)
        code = rules_mod.builtin_code("unknown_class" if need.kind == "class" else "activation_lambda")
        if d is None or d.kind not in kinds:
            self.error(code, f"custom_objects= at {where} maps '{key}' to '{target}', which is not a module-level "
                       f"{'class' if need.kind == 'class' else 'function'} of the --src files", need.layer,
                       "define it at module level in a --src file")
            return None
        self.note(code, "info", f"'{key}' is {target} ({d.where}): matched by custom_objects= at {where}", need.layer)
        if d.kind == "lambda":  # Keras 3 serializes a lambda by its source, not by a registered name: a def
            lam = ast.parse(d.code).body[0].value  # type: ignore[attr-defined]
            body = ast.get_source_segment(d.code, lam.body) or ast.unparse(lam.body)
            d.code = f"def {d.name}({ast.unparse(lam.args)}):  # {d.where}: a lambda in the source\n" \
                     f"    return ({body})\n"
            d.kind = "function"
        self.roots.add(d.name)
        kind = "class" if d.kind == "class" else (need.key or "function")
        self.export(d.name, kind, d.where, need.layer)
        return d.name

    def named(self, need: Need, kinds: tuple[str, ...]) -> str | None:
        name = need.fn_name or need.class_name or ""
        d = self.index.defs.get(name)
        # a function or class stored by another name (custom_objects={"OldName": NewClass}; golden_config points
        # the Keras 2 reference at it too)
        if (d is None or d.kind not in kinds) and need.kind in ("function", "class") \
                and name in self.index.custom_objects:
            return self.by_custom_objects(need, name, kinds)
        if need.optional and (d is None or d.kind not in kinds):
            return None  # a k2to3 rule handles it
        if d is None or d.kind not in kinds:
            label = {"class": "layer class", "function": "function", "lambda_named": "Lambda function"}[need.kind]
            where = f" as {need.key}" if need.key and need.kind == "function" else ""
            code = rules_mod.builtin_code("unknown_class" if need.kind == "class" else "activation_lambda")
            self.error(code, f"{label} '{name}'{where} is not defined at module level in the --src files"
                       + (f" ({self.index.dynamic[name]})" if name in self.index.dynamic else ""), need.layer,
                       "pass the file that defines it with --src")
            return None
        self.roots.add(d.name)
        self.export(d.name, "class" if d.kind == "class" else (need.key or "function"), d.where, need.layer)
        return d.name

    def resolve(self, needs: list[Need], build_fn: str | None, layer_names: set[str],
                weights_only: bool = False) -> Resolution:
        mapped = self.index.custom_objects.get("<lambda>")
        if mapped:  # load_model(..., custom_objects={"<lambda>": fn}): what Keras 2 itself used for "<lambda>"
            for need in [n for n in needs if n.kind == "activation_lambda" and not n.closure]:
                got_name = self.by_custom_objects(need, "<lambda>", ("function", "lambda"))
                if got_name:
                    self.res.activations[(need.layer, need.key)] = got_name  # type: ignore[index]
                needs = [n for n in needs if n is not need]
        lambda_needs = [n for n in needs if n.kind in ("lambda", "activation_lambda")]
        sites = self.match(lambda_needs, self.scope(build_fn, layer_names))
        for need in lambda_needs:
            site = sites.get(need.layer)  # type: ignore[arg-type]
            if site is None:
                continue
            got = self.hoist_site(site, need)
            if got is None:
                continue
            fname, bound = got
            if need.kind == "lambda":
                self.res.lambdas[need.layer] = {"function": fname, "arguments": {**need.arguments, **bound},
                                                "source": site.where,
                                                "matched_by": self.how.get(need.layer)}  # type: ignore[index]
            elif bound:
                self.error(rules_mod.builtin_code("activation_lambda"),
                           f"its activation lambda ({site.where}) closes over {', '.join(bound)}", need.layer,
                           "use a module-level function as the activation")
            else:
                self.res.activations[(need.layer, need.key)] = fname  # type: ignore[index]
        for need in needs:
            if need.kind == "class":
                got_name = self.named(need, ("class",))
                if got_name:
                    self.res.classes[need.class_name] = got_name  # type: ignore[index]
            elif need.kind == "function":
                got_name = self.named(need, ("function", "lambda"))
                if got_name:
                    self.res.functions[need.fn_name] = got_name  # type: ignore[index]
            elif need.kind == "lambda_named":
                got_name = self.named(need, ("function", "lambda"))
                if got_name:
                    d = self.index.defs[got_name]
                    self.res.lambdas[need.layer] = {"function": got_name, "arguments": need.arguments,  # type: ignore
                                                    "source": d.where}
        if build_fn and weights_only:  # the build function makes the model
            d = self.index.defs.get(build_fn)
            if d is None or d.kind != "function":
                self.error(rules_mod.builtin_code("source_missing"),
                           f"build function '{build_fn}' is not a module-level function of the --src files", None,
                           "pass --src FILE.py:FUNCTION naming a function that returns the model")
            else:
                self.roots.add(build_fn)
                self.res.build_fn = build_fn
                self.export(build_fn, "build function", d.where, None)
        defs, missing = self.index.closure(self.roots)
        for name, why in sorted(missing.items()):
            self.error(rules_mod.builtin_code("source_missing"), f"name '{name}' needed by the model's source {why}",
                       None, "define or import it at module level in a --src file (k2to3 never runs top-level code)")
        self.res.objects = list(self.exports.values())
        if not self.res.errors:
            self.generate(defs)
        return self.res

    # -- generated modules -----------------------------------------------------------------------------------
    def hoisted_code(self, fname: str, site: Site) -> str:
        lam = site.func
        assert isinstance(lam, ast.Lambda)
        params = ast.unparse(lam.args)
        if site.frees:
            params += (", " if params else "") + ("" if lam.args.vararg or lam.args.kwonlyargs else "*, ") \
                + ", ".join(site.frees)
        body = ast.get_source_segment(self.index.texts[site.path], lam.body) or ast.unparse(lam.body)
        return f"def {fname}({params}):  # {site.where}: {site.func_code.splitlines()[0][:80]}\n" \
               f"    return ({body})\n"

    def generate(self, defs: list[Definition]) -> None:
        srcs = ", ".join(str(p) for p in self.index.paths)
        imports = [d for d in defs if d.kind == "import"]
        body = [d for d in defs if d.kind != "import"]
        hoisted = [self.hoisted_code(n, s) for n, s in self.hoisted.values()]
        exported = sorted(self.exports)
        defs_code = "\n".join(d.code.rstrip() + "\n" for d in body)
        imp_code = "".join(d.code for d in imports)

        registered = [n for n in exported if self.exports[n]["kind"] != "build function"]
        objects = "".join(f"    {n!r}: {n},\n" for n in registered)
        k2_objects = "".join(f"    {n!r}: {n},\n" for n in exported)
        k3 = (f'"""Generated by k2to3 {__version__} from {srcs}: the definitions the converted model needs,\n'
              f"rewritten to keras.ops. Import it before keras.saving.load_model(...): it registers them under\n"
              f'the package {self.res.package!r}. Do not edit by hand; re-run k2to3 convert --src."""\n\n'
              f"import keras\n{imp_code}\n{defs_code}\n" + "\n".join(hoisted)
              + f"\n\nK2TO3_OBJECTS = {{\n{objects}}}\n"
              f"for _name, _obj in K2TO3_OBJECTS.items():\n"
              f"    keras.saving.register_keras_serializable(package={self.res.package!r}, name=_name)(_obj)\n")
        k3, _ = fix_source(k3, f"{self.res.module}.py")
        findings, _ = lint_source(k3, f"{self.res.module}.py", prefilter=False)
        tree = ast.parse(k3)
        for f in findings:
            owner = next((s for s in tree.body if s.lineno <= f.line <= (s.end_lineno or s.lineno)), None)
            name = getattr(owner, "name", None)
            where = self.exports.get(name, {}).get("source") or (self.index.defs[name].where if name in
                                                                  self.index.defs else "the generated module")
            self.error(f.code, f"{f.message} (in {name or 'module'} from {where})", None,
                       "replace it with a keras.ops call in the source, then convert again")
        self.res.k3_code = k3
        k2 = (f'"""Generated by k2to3 {__version__} from {srcs} for the Keras 2 (tf_keras) reference: the user\'s\n'
              f'code as written, imports pointed at tf_keras."""\n\n'
              "import tensorflow as _k2to3_tensorflow\n\n\n"
              "class _K2to3TF:\n"
              "    # Keras 2.2-era source calls TF1 names (tf.fake_quant_with_min_max_vars) that TF 2 moved to\n"
              "    # tf.compat.v1; look there when TF 2 lacks the name.\n"
              "    def __getattr__(self, name):\n"
              "        try:\n"
              "            return getattr(_k2to3_tensorflow, name)\n"
              "        except AttributeError:\n"
              "            return getattr(_k2to3_tensorflow.compat.v1, name)\n\n\n"
              "_K2TO3_TF = _K2to3TF()\n"
              f"{imp_code}\n{defs_code}\n" + "\n".join(hoisted)
              + f"\n\nK2TO3_OBJECTS = {{\n{k2_objects}}}\n")
        self.res.k2_code = cst.parse_module(k2).visit(_ToTfKeras()).code


def _tf_keras_module(mod: str) -> str | None:
    for prefix in ("tensorflow.python.keras", "tensorflow.keras", "keras"):
        if mod == prefix or mod.startswith(prefix + "."):
            return "tf_keras" + mod[len(prefix):]
    return None


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _as_expr(dotted: str) -> cst.Attribute | cst.Name:
    return cst.parse_expression(dotted)  # type: ignore[return-value]


class _ToTfKeras(cst.CSTTransformer):
    """Keras 2 imports -> tf_keras (standalone keras 2, tensorflow.keras); `import tensorflow as tf` -> the TF1
    fallback object, in every scope (Keras 2.2-era Lambdas import tensorflow inside the function)."""

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> Any:
        if len(updated.names) != 1:
            return updated
        alias = updated.names[0]
        mod = _dotted(alias.name)
        asname = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None
        if mod == "tensorflow" and asname != "_k2to3_tensorflow":
            return cst.Assign([cst.AssignTarget(cst.Name(asname or "tensorflow"))], cst.Name("_K2TO3_TF"))
        new = _tf_keras_module(mod)
        if new is None:
            return updated
        if asname is None and "." not in mod:
            asname = mod
        if asname is None:  # `import keras.backend` binds `keras`: bind it to tf_keras instead
            return cst.Import([cst.ImportAlias(cst.Name("tf_keras"), asname=cst.AsName(name=cst.Name("keras")))])
        return cst.Import([cst.ImportAlias(_as_expr(new), asname=cst.AsName(name=cst.Name(asname)))])

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> Any:
        if updated.relative or updated.module is None:
            return updated
        mod = _dotted(updated.module)
        if mod == "tensorflow" and not isinstance(updated.names, cst.ImportStar) and all(
                isinstance(a.name, cst.Name) and a.name.value == "keras" for a in updated.names):
            a = updated.names[0]
            asname = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else "keras"
            return cst.Import([cst.ImportAlias(cst.Name("tf_keras"), asname=cst.AsName(name=cst.Name(asname)))])
        new = _tf_keras_module(mod)
        return updated if new is None else updated.with_changes(module=_as_expr(new))


def resolve_sources(index: SourceIndex, model_config: dict[str, Any] | None,
                    training_config: dict[str, Any] | None, module: str, build_fn: str | None = None) -> Resolution:
    layer_names = {(lay.get("config", {}).get("name") or lay.get("name")) for lay in walk_layers(model_config or {})
                   if not _auto_named(lay)}
    if build_fn and build_fn not in index.defs:
        res = Resolution(module)
        res.findings.append(Finding(rules_mod.builtin_code("source_missing"), "error",
                                    f"build function '{build_fn}' is not a module-level function of the --src files",
                                    None, "pass --src FILE.py:FUNCTION naming the function that builds the model"))
        return res
    return Resolver(index, module).resolve(collect_needs(model_config, training_config), build_fn,
                                           layer_names - {None}, weights_only=model_config is None)


def resolve_in_files(index: SourceIndex, model_config: dict[str, Any] | None, training_config: dict[str, Any] | None,
                     module: str, build_fn: str | None = None) -> Resolution:
    """Resolve from several files (a tree, a --src directory): first from each single file that could hold what
    the artifact needs (a training script usually builds one model; merged, the same inline lambdas or names in
    several scripts would be ambiguous), then from all of them together."""
    if len(index.texts) > 1:
        from k2to3.source.extract import index_sources

        needs = collect_needs(model_config, training_config)
        names = {n.class_name or n.fn_name for n in needs} | ({build_fn} if build_fn else set())
        names.discard(None)
        wants_sites = any(n.kind in ("lambda", "activation_lambda") for n in needs)
        candidates = [p for p, text in index.texts.items() if (wants_sites and any(s.path == p for s in index.sites))
                      or any(f"def {n}" in text or f"class {n}" in text for n in names)]
        found = []
        for p in candidates[:50]:
            res = resolve_sources(index_sources([p]), model_config, training_config, module, build_fn)
            if not res.errors:
                found.append((p, res))
        if len(found) == 1:
            return found[0][1]
        if len(found) > 1:  # several scripts could each have built it: a guess could pass against itself
            res = Resolution(module)
            res.findings.append(Finding(rules_mod.builtin_code("lambda"), "error", "the Lambdas and custom objects "
                                        f"resolve from each of {', '.join(str(p) for p, _ in found[:4])}; k2to3 "
                                        "cannot tell which built the model", None,
                                        "pass the one file that built it with --src"))
            return res
    return resolve_sources(index, model_config, training_config, module, build_fn)
