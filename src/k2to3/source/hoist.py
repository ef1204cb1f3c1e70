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
import contextvars
import re
from collections import Counter
from typing import Any

from k2to3.core import rules as rules_mod
from k2to3.core.findings import Finding
from k2to3.source import generated_module
from k2to3.source.imports import missing_package
from k2to3.source.resolution import Resolution
from k2to3.source.source_index import Definition, Site, SourceIndex, label
from k2to3.upgrade.keras1.translate import is_keras1
from k2to3.upgrade.needed_code import FOREIGN, Need, auto_named, collect_needs, foreign_needs, walk_layers
from k2to3.upgrade.plan import MODEL_CLASSES

MIN_CLASS_MATCH = 0.9  # a builder chosen by its layer calls alone must reproduce the model's layer classes
# Where the Keras that saved the file started numbering automatic layer names (1: standalone Keras's `lambda_1`,
# 0: tf.keras's `lambda`, `lambda_1`); None when unknown. Set by the caller that knows the file (pipeline/sources.py).
AUTO_NAMES_FROM: contextvars.ContextVar[int | None] = contextvars.ContextVar("auto_names_from", default=None)


def auto_names_from(keras_version: str | None) -> int | None:
    """1 for standalone Keras 1.x-2.3.x (`K.get_uid`), 0 for tf.keras (`-tf` versions, and 2.4+, where standalone
    Keras became tf.keras); None when the file does not say."""
    m = re.match(r"(\d+)\.(\d+)", keras_version or "")
    if m is None:
        return None
    if "-tf" in (keras_version or "") or (int(m.group(1)), int(m.group(2))) >= (2, 4):
        return 0
    return 1


def _nth(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _ident(layer: str) -> str:
    name = re.sub(r"\W", "_", layer)
    return ("l_" + name) if not name or name[0].isdigit() else name


class Resolver:
    def __init__(self, index: SourceIndex, module: str):
        self.index = index
        self.res = Resolution(module)
        self.roots: set[str] = set()
        # root -> whether a need the file alone cannot meet uses it (a root only optional needs use is dropped,
        # with a warning, when its definitions are incomplete: the file's own translation stays)
        self.required_root: dict[str, bool] = {}
        self.need: Need | None = None  # the need being resolved: its errors are warnings when it is optional
        self.scope_how = ""  # how the build function's scope was chosen, when not by name
        self.defaults: dict[str, list[Any]] = {}  # hoisted function -> its default values, from the file
        self.hoisted: dict[tuple[Any, ...], tuple[str, Site]] = {}  # site identity -> (function name, site)
        self.exports: dict[str, dict[str, Any]] = {}  # object name -> report record
        self.how: dict[str, str] = {}  # layer -> how its Lambda was matched to a call site

    def error(self, code: str, message: str, layer: str | None, fix: str) -> None:
        if self.need is not None and self.need.optional:  # sources only add: the file alone converts this
            self.res.findings.append(Finding(code, "warning", f"{message}; converted from the file's own config",
                                             layer, fix))
            return
        self.res.findings.append(Finding(code, "error", message, layer, fix))

    def add_roots(self, names: set[str] | frozenset[str]) -> None:
        required = self.need is None or not self.need.optional
        for n in names:
            self.roots.add(n)
            self.required_root[n] = self.required_root.get(n, False) or required

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

    def scope(self, build_fn: str | None, layer_names: set[str], layer_classes: list[str] | None = None
              ) -> set[str] | None:
        """The functions that built this model: what `FILE:FUNCTION` reaches, else what the function whose
        name="..." literals best match the artifact's layer names reaches, else (auto-named layers) what the one
        function whose layer calls best match the artifact's layer classes reaches; None when nothing says."""
        if build_fn:
            return self.index.reachable(build_fn)
        score = {f: len(names & layer_names) for f, names in self.index.literal_names.items()}
        best = max(score.values(), default=0)
        if best == 0:
            return self.scope_by_classes(layer_classes or [])
        tops = [f for f, v in score.items() if v == best]
        return set().union(*(self.index.reachable(f) for f in tops))

    def scope_by_classes(self, layer_classes: list[str]) -> set[str] | None:
        """Several builders in one file (a CarND repository's nvidia(), comma_ai(), lenet(), ...), none naming its
        layers: the function (with what it calls) whose layer-class calls are closest to the model's layer classes
        as a multiset (intersection over union); None when no single function is closest."""
        want = Counter(c for c in layer_classes if c not in ("InputLayer",))
        owners = {s.owner for s in self.index.sites if s.owner is not None}
        if not want or len(owners) < 2:
            return None
        score = {}
        for f in owners:
            got = Counter(c for g in self.index.reachable(f) for c in self.index.class_calls.get(g, [])
                          if c not in MODEL_CLASSES)
            union = sum((got | want).values())
            score[f] = sum((got & want).values()) / union if union else 0.0
        best = max(score.values())
        tops = [f for f, v in score.items() if v == best]
        if len(tops) != 1 or best < MIN_CLASS_MATCH:
            return None
        self.scope_how = f"{tops[0]}(), whose layer calls match the model's layer classes ({best:.2f})"
        return self.index.reachable(tops[0])

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
                f" in {self.scope_how or 'the build function'}" if scoped else ""))  # type: ignore[index]
            if not cands:
                self.need = need
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
        # Several candidate call sites: the layer's automatic name when it says which, else in order of creation
        # when the counts agree.
        groups: dict[tuple[int, ...], list[tuple[Need, list[Site]]]] = {}
        for need, cands in pending:
            site = self.by_auto_name(need, cands)
            if site is not None:
                out[need.layer] = site  # type: ignore[index]
                continue
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
                self.need = need
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
                    self.need = next((n for n in needs if n.layer == layer), None)
                    self.error(rules_mod.builtin_code("lambda"),
                               f"its match, the call at {site.where}, runs once at module level but {len(layers)} "
                               "Lambda layers would come from it: not the source of this model", layer,
                               "pass the file that built the model with --src")
        self.need = None
        return out

    def by_auto_name(self, need: Need, cands: list[Site]) -> Site | None:
        """A Lambda Keras named itself (`lambda_2`) is the N-th Lambda the process created. When every Lambda call
        of the script holding the candidates is at its module level, outside loops and functions, the script
        creates them in line order, and N picks one: counted from 1 by standalone Keras, from 0 (`lambda`,
        `lambda_1`) by tf.keras (AUTO_NAMES_FROM, set from the file's keras_version)."""
        start = AUTO_NAMES_FROM.get()
        m = re.fullmatch(r"lambda(?:_(\d+))?", str(need.layer))
        if start is None or m is None or len({s.path for s in cands}) != 1:
            return None
        script = sorted((s for s in self.index.sites if s.path == cands[0].path and s.kind == "Lambda"),
                        key=lambda s: s.order)
        if any(s.owner is not None or s.in_loop for s in script):
            return None
        at = int(m.group(1) or 0) - start
        if not 0 <= at < len(script) or script[at] not in cands:
            return None
        self.how[need.layer] = (f"its automatic name: the {_nth(at + 1)} Lambda {cands[0].path.name} creates at "  # type: ignore[index]
                                f"module level ({script[at].where})")
        return script[at]

    def hoist_site(self, site: Site, need: Need) -> tuple[str, dict[str, Any]] | None:
        """(function name in the generated modules, extra arguments binding its closure)."""
        if isinstance(site.func, ast.Name):
            d = self.index.defs.get(site.func.id)
            if d is None or d.kind not in ("function", "lambda"):
                self.error(rules_mod.builtin_code("lambda"),
                           f"its function '{site.func.id}' ({site.where}) is not a module-level function of the "
                           "--src files", need.layer, "move the function to module level")
                return None
            self.add_roots({d.name})
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
            if need.defaults is not None and isinstance(site.func, ast.Lambda) \
                    and len(need.defaults) == len(site.func.args.defaults):
                # `lambda x, mean=mean_list: ...` inside the build function: mean_list is a local there, but the
                # file stores the values the defaults had (Keras 2's func_dump); the hoisted function takes them
                self.defaults[fname] = need.defaults
            self.add_roots(site.globals_)
            self.export(fname, "lambda function", site.where, need.layer)
        else:
            self.exports[self.hoisted[key][0]]["layers"].append(need.layer)
        return self.hoisted[key][0], bound

    def export(self, name: str, kind: str, where: str, layer: str | None) -> None:
        rec = self.exports.setdefault(name, {"name": name, "kind": kind, "source": label(where), "layers": []})
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
        self.add_roots({d.name})
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
            if d is not None and d.kind == "import":  # from keras_contrib.layers import CRF: a library's class
                module = d.code.split()[1] if d.code.startswith("from ") else d.code.split()[1].split(".")[0]
                self.error(code, f"{label} '{name}'{where} is imported from {module} ({d.where}), whose source is "
                           "not among the --src files", need.layer,
                           f"pass {module.split('.')[0]}'s source with --src (its package directory)")
                return None
            self.error(code, f"{label} '{name}'{where} is not defined at module level in the --src files"
                       + (f" ({self.index.dynamic[name]})" if name in self.index.dynamic else ""), need.layer,
                       "pass the file that defines it with --src")
            return None
        self.add_roots({d.name})
        self.export(d.name, "class" if d.kind == "class" else (need.key or "function"), d.where, need.layer)
        return d.name

    def resolve(self, needs: list[Need], build_fn: str | None, layer_names: set[str],
                weights_only: bool = False, layer_classes: list[str] | None = None) -> Resolution:
        mapped = self.index.custom_objects.get("<lambda>")
        if mapped:  # load_model(..., custom_objects={"<lambda>": fn}): what Keras 2 itself used for "<lambda>"
            for need in [n for n in needs if n.kind == "activation_lambda" and not n.closure]:
                got_name = self.by_custom_objects(need, "<lambda>", ("function", "lambda"))
                if got_name:
                    self.res.activations[(need.layer, need.key)] = got_name  # type: ignore[index]
                needs = [n for n in needs if n is not need]
        lambda_needs = [n for n in needs if n.kind in ("lambda", "activation_lambda")]
        sites = self.match(lambda_needs, self.scope(build_fn, layer_names, layer_classes))
        for need in lambda_needs:
            site = sites.get(need.layer)  # type: ignore[arg-type]
            if site is None:
                continue
            self.need = need
            got = self.hoist_site(site, need)
            if got is None:
                continue
            fname, bound = got
            if need.kind == "lambda":
                self.res.lambdas[need.layer] = {"function": fname, "arguments": {**need.arguments, **bound},
                                                "source": label(site.where),
                                                "matched_by": self.how.get(need.layer)}  # type: ignore[index]
            elif bound:
                self.error(rules_mod.builtin_code("activation_lambda"),
                           f"its activation lambda ({site.where}) closes over {', '.join(bound)}", need.layer,
                           "use a module-level function as the activation")
            else:
                self.res.activations[(need.layer, need.key)] = fname  # type: ignore[index]
        for need in needs:
            self.need = need
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
        self.need = None
        if build_fn and weights_only:  # the build function makes the model
            d = self.index.defs.get(build_fn)
            if d is None or d.kind not in ("function", "class"):  # a class: MyModel(config) or Builder(cfg).build()
                self.error(rules_mod.builtin_code("source_missing"),
                           f"build function '{build_fn}' is not a module-level function or class of the --src files",
                           None, "pass --src FILE.py:FUNCTION naming a function that returns the model")
            else:
                self.add_roots({build_fn})
                self.res.build_fn = build_fn
                self.export(build_fn, "build function", d.where, None)
        self.drop_incomplete_optional()
        defs, _ = self.index.closure(self.roots)
        missing = self.incomplete(self.roots)
        if self.res.build_fn:  # the Keras classes the build function makes (textgenrnn's AttentionWeightedAverage):
            classes = {d.name: d for d in defs if d.kind == "class"}  # the saved model names them, so they are
            for d in classes.values():  # registered like a file config's custom classes
                if d.name != build_fn and _keras_class(d, classes):
                    self.export(d.name, "class", d.where, None)
        for name, why in sorted(missing.items()):
            self.error(rules_mod.builtin_code("source_missing"), f"name '{name}' needed by the model's source {why}",
                       None, "define or import it at module level in a --src file (k2to3 never runs top-level code)")
        self.res.objects = list(self.exports.values())
        if not self.res.errors:
            generated_module.write(self, defs)
        return self.res

    def incomplete(self, roots: set[str]) -> dict[str, str]:
        """Names the definitions of `roots` need that the sources cannot give: undefined, or imported from a
        package that is not installed (a weights-only build gets stand-ins for those instead)."""
        defs, missing = self.index.closure(roots)
        if not self.res.build_fn:
            for d in defs:
                if d.kind == "import" and (mod := missing_package(d.code)):
                    missing[d.name] = f"is imported from {mod} ({d.where}), which is neither installed nor " \
                                      "among the --src files"
        return missing

    def drop_incomplete_optional(self) -> None:
        """A definition only optional needs use (a loss the compile config keeps by name, a class a k2to3 rule
        translates) whose own definitions are incomplete in the sources (a loss needing `K` imported in a way k2to3
        does not follow) is left out with one warning: what the file alone converts stays converted."""
        optional = [r for r in sorted(self.roots) if not self.required_root.get(r, True)]
        if not optional or not self.incomplete(self.roots):
            return
        for root in optional:
            miss = self.incomplete({root})
            if not miss:
                continue
            self.roots.discard(root)
            rec = self.exports.pop(root, None)
            for table in (self.res.classes, self.res.functions):
                for key in [k for k, v in table.items() if v == root]:
                    del table[key]
            for layer in [k for k, v in self.res.lambdas.items() if v["function"] == root]:
                del self.res.lambdas[layer]
            for key in [k for k, v in self.res.activations.items() if v == root]:
                del self.res.activations[key]
            name, why = next(iter(sorted(miss.items())))
            where = rec["source"] if rec else (self.index.defs[root].where if root in self.index.defs else "")
            self.res.findings.append(Finding(
                rules_mod.builtin_code("source_missing"), "warning",
                f"'{root}' ({where}) is not taken from the --src files: name '{name}' it needs {why}; the file's "
                "own config is converted without it", None,
                "define or import that name at module level in a --src file"))


_KERAS_BASES = ("Layer", "Model", "Wrapper", "RNN", "Constraint", "Initializer", "Regularizer", "Loss", "Metric")


def _keras_class(d: Definition, classes: dict[str, Definition], depth: int = 0) -> bool:
    """A class whose bases are Keras serializables (Layer, ..., or such a class of the sources): one Keras 3 can
    register (a plain helper class, such as anago's BiLSTMCRF builder, has no get_config)."""
    try:
        node = ast.parse(d.code).body[0]
    except (SyntaxError, IndexError):
        return False
    if not isinstance(node, ast.ClassDef) or depth > 10:
        return False
    for b in node.bases:
        name = ast.unparse(b).split(".")[-1]
        if name.endswith(_KERAS_BASES) or (name in classes and _keras_class(classes[name], classes, depth + 1)):
            return True
    return False


def resolve_sources(index: SourceIndex, model_config: dict[str, Any] | None,
                    training_config: dict[str, Any] | None, module: str, build_fn: str | None = None,
                    required_layers: set[str | None] | None = None) -> Resolution:
    """`required_layers`: the layers the file alone cannot convert (None: all of them). What the others need is
    taken from the sources when they define it and left to the file's own translation otherwise."""
    layer_names = {(lay.get("config", {}).get("name") or lay.get("name")) for lay in walk_layers(model_config or {})
                   if not auto_named(lay)}
    build_fn = build_fn.split(".")[0] if build_fn else None  # Builder.build: the class is what the module exports
    if build_fn and build_fn not in index.defs:
        res = Resolution(module)
        res.findings.append(Finding(rules_mod.builtin_code("source_missing"), "error",
                                    f"build function '{build_fn}' is not a module-level function or class of the "
                                    "--src files",
                                    None, "pass --src FILE.py:FUNCTION naming the function that builds the model"))
        return res
    needs = collect_needs(model_config, training_config)
    if not is_keras1(model_config):
        needs += foreign_needs(model_config)
    if required_layers is not None:
        for need in needs:  # a class named like a Keras layer is needed when the file alone stops on it
            need.optional = need.layer not in required_layers if need.key == FOREIGN else \
                need.optional or need.layer not in required_layers
    classes = [str(lay.get("class_name")) for lay in walk_layers(model_config or {})]
    return Resolver(index, module).resolve(needs, build_fn, layer_names - {None}, weights_only=model_config is None,
                                           layer_classes=classes)
