"""`k2to3 fix`: rewrite fixable findings with libcst, keeping comments and formatting elsewhere.
tf.* / K.* -> keras.ops (rules/ops.toml), K config -> keras.config, tf.keras -> keras; imports added and
removed with libcst's codemod helpers. A call that cannot be rewritten safely stays as it is."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from k2to3.core.tables import lint_tables
from k2to3.source import keras3api
from k2to3.source.classify import (
    LAMBDA,
    TF_KERAS_NAMESPACES,
    Aliases,
    CallArgs,
    Expr,
    add_weight_keywords,
    arg_kind,
    classify_call,
    indexed_calls,
    keras_name,
)
from k2to3.source.fiximports import add_imports, attribute_uses
from k2to3.source.lint import RELEVANT


def _dotted(name: str) -> cst.BaseExpression:
    parts = name.split(".")
    node: cst.BaseExpression = cst.Name(parts[0])
    for p in parts[1:]:
        node = cst.Attribute(value=node, attr=cst.Name(p))
    return node


def dotted_name(node: cst.BaseExpression) -> str | None:
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def _module_name(node: cst.BaseExpression | None) -> str:
    return dotted_name(node) or "" if node is not None else ""


class _ImportCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.aliases = Aliases()
        self.tf_imports: list[tuple[str, str | None]] = []
        self.from_tf_keras: dict[str, str] = {}  # name bound by a `from` import the rewrite switches -> its module

    def visit_Import(self, node: cst.Import) -> None:
        for a in node.names:
            name = _module_name(a.name)
            asname = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None
            self.aliases.add_import(name, asname)
            if name == "tensorflow" or name.startswith("tensorflow."):
                self.tf_imports.append((name, asname))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        mod = _module_name(node.module)
        for a in node.names:
            if isinstance(a.name, cst.Name):
                asname = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None
                self.aliases.add_from(mod, a.name.value, asname)
                q = f"{mod}.{a.name.value}"
                if _switched(q) is not None:
                    self.from_tf_keras[asname or a.name.value] = q


def _literal(value: object) -> cst.BaseExpression:
    return cst.parse_expression(repr(value))


class _Chains(_ImportCollector):
    """The imports, and every maximal name chain (`keras.backend.shape`, `K`, `tf.keras.layers.Dense`) outside
    them, in one walk of the tree."""

    def __init__(self) -> None:
        super().__init__()
        self.chains: list[tuple[cst.BaseExpression, str, cst.Name]] = []  # (node, dotted, root Name)
        self.calls: list[cst.Call] = []
        self._inner: set[int] = set()

    def visit_Import(self, node: cst.Import) -> bool:
        super().visit_Import(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        super().visit_ImportFrom(node)
        return False

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._inner.add(id(node.attr))
        if id(node) in self._inner:
            return
        name = dotted_name(node)
        if name is None:
            return
        inner: cst.BaseExpression = node
        while isinstance(inner, cst.Attribute):
            self._inner.add(id(inner.value))
            inner = inner.value
        assert isinstance(inner, cst.Name)
        self.chains.append((node, name, inner))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._inner:
            self.chains.append((node, node.value, node))


def _switched(qname: str | None) -> str | None:
    """The Keras 3 name a tf.keras / tf_keras qualified name is switched to by the rewrite, else None."""
    if qname is None or qname.startswith("keras"):
        return None
    return "keras" if qname in ("tensorflow.keras", "tensorflow.python.keras", "tf_keras") else keras_name(qname)


def _fresh(taken: set[str], base: str = "tfk") -> str:
    name, i = base, 2
    while name in taken:
        name, i = f"{base}{i}", i + 1
    return name


_EQ = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))


def _same_literal(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


class FixCommand(cst.CSTTransformer):
    """Rewrite Keras 2 / tf.* source to multi-backend Keras 3 (keras.ops). A plain transformer (no matcher
    dispatch on every node) that schedules libcst's import helpers in a codemod context, as a codemod would."""

    def __init__(self, context: CodemodContext):
        super().__init__()
        self.context = context
        self.changed = 0
        self.aliases = Aliases()
        self.tf_imports: list[tuple[str, str | None]] = []
        self.kept: list[tuple[cst.CSTNode, str]] = []  # (node, message): what stays on tf.keras, Keras 3 lacks it
        self._verdicts: dict[int, Any] = {}
        self.indexed: set[int] = set()  # ids of the calls whose result is only indexed (classify.indexed_calls)
        self._bad_roots: set[str] = set()  # import-bound names with a use Keras 3 does not have
        self._keep_tf_keras: set[int] = set()  # `tf.keras` nodes whose chain Keras 3 does not have
        self._rename: dict[int, str] = {}  # root Name node -> alias of the tf.keras import kept for it
        self._tfk_alias: str | None = None
        self._code_for_node = cst.Module([]).code_for_node

    def visit_Module(self, node: cst.Module) -> None:
        chains = c = _Chains()
        node.visit(chains)
        self.aliases, self.tf_imports = c.aliases, c.tf_imports
        self._code_for_node = node.code_for_node
        rewritten = {id(call.func) for call in chains.calls if self._verdict(call) is not None}
        from_tf_keras = set(c.from_tf_keras)
        bad: list[tuple[cst.BaseExpression, str, cst.Name]] = []
        unbound = self._unbound(chains.calls, rewritten)
        for chain, name, root in chains.chains:
            if id(chain) in rewritten:
                continue
            target = _switched(self.aliases.resolve(name))
            if target is None or (keras3api.exists(target) and id(chain) not in unbound):
                continue
            if self.aliases.resolve(root.value) == "tensorflow" and "." in name:
                keep: cst.BaseExpression = chain
                while isinstance(keep, cst.Attribute) and dotted_name(keep) != root.value + ".keras":
                    keep = keep.value
                self._keep_tf_keras.add(id(keep))
            elif root.value in from_tf_keras:
                self._bad_roots.add(root.value)
            else:
                continue  # `import tensorflow.keras...`: the rewrite does not switch those imports
            bad.append((chain, target, root))
        if "keras" in self._bad_roots and c.from_tf_keras.get("keras") == "tensorflow.keras":
            # `from tensorflow import keras`: `keras` becomes Keras 3; the uses it lacks keep tf.keras under
            # their own alias
            self._tfk_alias = _fresh({n for _, n, _ in chains.chains} | set(self.aliases.names))
            self._bad_roots.discard("keras")
        for chain, target, root in bad:
            if root.value == "keras" and self._tfk_alias:
                self._rename[id(root)] = self._tfk_alias
            self.kept.append((chain, f"K2T209 {target}(...) {unbound[id(chain)]} in Keras 3: kept on tf.keras "
                                     "(rewrite it by hand)" if id(chain) in unbound else
                              f"K2T501 {target} does not exist in Keras 3: kept on tf.keras (rewrite it by hand)"))

    def _unbound(self, calls: list[cst.Call], rewritten: set[int]) -> dict[int, str]:
        """K2T209: func node id -> why a call the switch to Keras 3 would write does not bind to Keras 3's
        signature (after the K2T207/K2T208 keyword rules); such a call stays on tf.keras."""
        out: dict[int, str] = {}
        for call in calls:
            if id(call.func) in rewritten or any(a.star for a in call.args):
                continue
            target = _switched(self.aliases.resolve(dotted_name(call.func)))
            if target is None or not keras3api.exists(target):
                continue
            rule = lint_tables().calls.get(target, {"rename": {}, "drop": []})
            keywords = [rule["rename"].get(a.keyword.value, a.keyword.value) for a in call.args
                        if a.keyword is not None and a.keyword.value not in rule["drop"]]
            why = keras3api.binds(target, sum(a.keyword is None for a in call.args), keywords)
            if why:
                out[id(call.func)] = why
        return out

    def _verdict(self, call: cst.Call) -> Any:
        """The op-table verdict for a call the rewrite translates (None if it is left alone)."""
        if id(call) in self._verdicts:
            return self._verdicts[id(call)]
        v = None
        q = self.aliases.resolve(dotted_name(call.func))
        if q is not None and keras_name(q) != LAMBDA:
            v = classify_call(q, self._call_args(call))
            if v is None or not v.fixable or v.target is None:
                v = None
        self._verdicts[id(call)] = v
        return v

    def _literal_value(self, node: cst.BaseExpression) -> Any:
        try:
            return ast.literal_eval(self._code_for_node(node).strip())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return Expr(node)

    def _call_args(self, call: cst.Call) -> CallArgs:
        val = self._literal_value
        star = any(a.star for a in call.args)
        return CallArgs(
            positional=[val(a.value) for a in call.args if a.keyword is None],
            keywords={a.keyword.value: val(a.value) for a in call.args if a.keyword is not None},
            star=star,
            raw=[(a.keyword.value if a.keyword else None, a.value) for a in call.args],
            indexed=id(call) in self.indexed,
        )

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        alias = self._rename.get(id(original))
        return updated.with_changes(value=alias) if alias else updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = original.func
        if isinstance(func, cst.Attribute) and func.attr.value == "add_weight" and dotted_name(func.value) == "self":
            return self._add_weight(updated)
        updated = self._keyword_rules(original, updated)
        v = self._verdict(original)
        if v is None:
            return updated
        new = updated.with_changes(func=_dotted(v.target), args=self._args_in_place(original, updated, v))
        if new.deep_equals(updated):  # already Keras 3 (keras.backend.is_keras_tensor): not a rewrite
            return updated
        if v.target.startswith("k2to3."):  # a keras.ops composition k2to3 ships (k2to3.portable)
            AddImportsVisitor.add_needed_import(self.context, v.target.rsplit(".", 1)[0])
        else:
            AddImportsVisitor.add_needed_import(self.context, "keras")
        self.changed += 1
        return new

    def _add_weight(self, updated: cst.Call) -> cst.Call:
        """K2T205: positionals become keywords in the Keras 2 order their values point at; left alone where that
        would repeat a keyword the call gives (lint reports it)."""
        positional = [a for a in updated.args if a.keyword is None and not a.star]
        if not positional or any(a.star for a in updated.args):
            return updated
        kinds = []
        for a in positional:
            try:
                kinds.append(arg_kind(ast.parse(self._code_for_node(a.value).strip(), mode="eval").body))
            except SyntaxError:
                kinds.append("other")
        names = add_weight_keywords(kinds, {a.keyword.value for a in updated.args if a.keyword is not None})
        if names is None:
            return updated
        args = [a.with_changes(keyword=cst.Name(names[i]), equal=_EQ) if i < len(names) else a
                for i, a in enumerate(updated.args)]
        self.changed += 1
        return updated.with_changes(args=args)

    def _keyword_rules(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """K2T207/K2T208: keywords Keras 3 renamed (renamed in place) or removed and tf.keras ignored (dropped)."""
        rule = lint_tables().calls.get(keras_name(self.aliases.resolve(dotted_name(original.func)) or "") or "")
        if rule is None or not any(a.keyword is not None and (a.keyword.value in rule["rename"] or
                                                                  a.keyword.value in rule["drop"])
                                   for a in updated.args):
            return updated
        args = [a.with_changes(keyword=cst.Name(rule["rename"].get(a.keyword.value, a.keyword.value)))
                if a.keyword is not None else a for a in updated.args
                if a.keyword is None or a.keyword.value not in rule["drop"]]
        self.changed += 1
        return updated.with_changes(args=_layout(updated.args, args))

    def _args_in_place(self, original: cst.Call, updated: cst.Call, v: Any) -> list[cst.Arg]:
        """The translated arguments written into the call's own layout: each argument keeps its node (and the
        comments and line breaks around it) where it maps to one; positionals stay positional where Keras's
        signature has the same parameter at that position; defaults equal to Keras's own are not written."""
        values = {i: self._literal_value(a.value) for i, a in enumerate(original.args)}
        used: set[int] = set()
        keras_pos = keras3api.positional(v.target)
        items: list[tuple[str | None, cst.Arg | None, Any, bool]] = []  # (keyword, source arg, literal, positional)
        for kw, val in v.args:
            src = None
            for i, a in enumerate(original.args):
                if i in used:
                    continue
                if (val.node is a.value) if isinstance(val, Expr) else _same_literal(val, values[i]):
                    src = i
                    break
            if src is None and not isinstance(val, Expr) and kw is not None and keras_pos is not None \
                    and _same_literal(keras3api.default(v.target, kw), val):
                continue  # a default made explicit that Keras's own default already equals
            j = len(items)
            if src is not None:
                used.add(src)
                was_positional = original.args[src].keyword is None
            else:  # a value the translation changed (split sizes): positional if the source argument there was
                was_positional = j < len(original.args) and j not in used and original.args[j].keyword is None \
                    and not isinstance(values[j], Expr)
            items.append((kw, updated.args[src] if src is not None else None, val, was_positional))
        out: list[cst.Arg] = []
        positional = True
        for j, (kw, arg, val, was_positional) in enumerate(items):
            if kw is None:
                keep_pos = True
            elif keras_pos is None:
                keep_pos = False
            else:
                keep_pos = was_positional and j < len(keras_pos) and keras_pos[j] == kw
            positional = positional and keep_pos
            node = arg.value if arg is not None else _literal(val)
            if positional:
                new = cst.Arg(value=node)
            else:
                equal = arg.equal if arg is not None and arg.keyword is not None else _EQ
                new = cst.Arg(value=node, keyword=cst.Name(kw or ""), equal=equal)
            out.append(new)
        return _layout(original.args, out)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        attr = original.attr.value  # tf.keras -> keras; tf.metrics (TF 2's name of tf.keras.metrics) -> keras.metrics
        if attr in ("keras", *TF_KERAS_NAMESPACES) and id(original) not in self._keep_tf_keras and \
                self.aliases.resolve(dotted_name(original.value)) == "tensorflow":
            AddImportsVisitor.add_needed_import(self.context, "keras")
            self.changed += 1
            return cst.Name("keras") if attr == "keras" else cst.Attribute(cst.Name("keras"), cst.Name(attr))
        return updated

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> Any:
        if updated.relative or updated.module is None or isinstance(updated.names, cst.ImportStar):
            return updated
        mod = _module_name(updated.module)
        new = keras_name(mod + ".")
        if new is not None and not mod.startswith("keras"):
            target = new.rstrip(".")
            move, keep = [], []
            for a in updated.names:
                local = _local(a)
                ok = keras3api.exists(f"{target}.{_module_name(a.name)}") and local not in self._bad_roots
                (move if ok else keep).append(a)
            for a in keep:
                name = f"{target}.{_module_name(a.name)}"
                why = "has a use Keras 3 lacks" if keras3api.exists(name) else "does not exist in Keras 3"
                self.kept.append((original, f"K2T501 {name} {why}: import kept on tf.keras"))
            if not move:
                return updated
            self.changed += 1
            for a in move:
                if isinstance(a.name, cst.Name) and a.name.value == "backend":
                    RemoveImportsVisitor.remove_unused_import(self.context, target, "backend", _local_as(a))
            if not keep:
                return updated.with_changes(module=_dotted(target))
            # split: the names Keras 3 has move, the others stay on tf.keras
            return self._split(updated, target, move, keep)
        if mod == "tensorflow":
            keep = [a for a in updated.names if not (isinstance(a.name, cst.Name) and a.name.value == "keras")]
            if len(keep) != len(updated.names):
                k = next(a for a in updated.names if a not in keep)
                asname = _local_as(k)
                if (asname or "keras") in self._bad_roots:
                    return updated  # a use Keras 3 lacks: the import stays as it is
                self.changed += 1
                AddImportsVisitor.add_needed_import(self.context, "keras", asname=asname)
                if self._tfk_alias and asname is None:  # `keras` is Keras 3 now; tf.keras stays for what it lacks
                    return updated.with_changes(names=[*keep, k.with_changes(
                        asname=cst.AsName(name=cst.Name(self._tfk_alias)), comma=cst.MaybeSentinel.DEFAULT)])
                if not keep:
                    return cst.RemoveFromParent()
                return updated.with_changes(names=_no_trailing_comma(keep))
        return updated

    def _split(self, node: cst.ImportFrom, target: str, move: list[cst.ImportAlias],
               keep: list[cst.ImportAlias]) -> cst.ImportFrom:
        # The statement keeps the names Keras 3 lacks on tf.keras; the others are imported from keras.
        for a in move:
            AddImportsVisitor.add_needed_import(self.context, target, _module_name(a.name), _local_as(a))
        return node.with_changes(names=_no_trailing_comma(keep))

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if self.changed:  # only imports this run made unused go; libcst checks every remaining use
            # libcst's check is a scope analysis of the whole module (on tf_keras's sources, half of fix's time);
            # a name still used as `tf.attr` is not unused, and needs none
            used = attribute_uses(updated.code, {asname or module.split(".")[0] for module, asname in self.tf_imports})
            for module, asname in self.tf_imports:
                if (asname or module.split(".")[0]) not in used:
                    RemoveImportsVisitor.remove_unused_import(self.context, module, asname=asname)
        return updated


def _local_as(a: cst.ImportAlias) -> str | None:
    return a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None


def _local(a: cst.ImportAlias) -> str:
    return _local_as(a) or _module_name(a.name).split(".")[0]


def _no_trailing_comma(names: list[cst.ImportAlias]) -> list[cst.ImportAlias]:
    return [*names[:-1], names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]


def _layout(old: Sequence[cst.Arg], new: list[cst.Arg]) -> list[cst.Arg]:
    """Put `new` into the separators of `old` by position: the comma and whitespace (line breaks,
    comments, a trailing comma) after argument j stay after argument j."""
    if not new:
        return new
    seps = [a.comma for a in old[:-1] if isinstance(a.comma, cst.Comma)]
    spare = seps[-1] if seps else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    out = []
    for j, a in enumerate(new):
        if j == len(new) - 1:
            last = old[-1] if old else None
            out.append(a.with_changes(comma=last.comma if last else cst.MaybeSentinel.DEFAULT,
                                      whitespace_after_arg=last.whitespace_after_arg if last else
                                      cst.SimpleWhitespace("")))
        else:
            ws = old[j].whitespace_after_arg if j < len(old) - 1 else cst.SimpleWhitespace("")
            out.append(a.with_changes(comma=seps[j] if j < len(seps) else spare, whitespace_after_arg=ws))
    return out


def fix_module(code: str, path: str = "<string>") -> tuple[str, int, list[str]]:
    """Returns (new code, number of rewrites, what was kept on tf.keras as "line:col: message")."""
    if not RELEVANT.search(code):
        return code, 0, []
    context = CodemodContext(filename=path, full_module_name=None)
    cmd = FixCommand(context)
    module = cst.parse_module(code)
    if "shape(" in code:
        cmd.indexed = _indexed_ids(code, module)
    # The passes run as libcst's CodemodCommand.transform_module runs them, without its deep copy of the tree
    # (this tree is our own), and with the imports added on the module's head only: libcst's AddImportsVisitor
    # reads and changes nothing below the first statement after the top imports, but walks the whole tree (a
    # quarter of fix's time on tf_keras's sources). tests/test_fix_layout.py checks the pipelines agree.
    tree = module.visit(cmd)
    if AddImportsVisitor.CONTEXT_KEY in context.scratch:
        tree = add_imports(context, tree)
    if RemoveImportsVisitor.CONTEXT_KEY in context.scratch:
        tree = RemoveImportsVisitor(context).transform_module(tree)  # a scope analysis: needs the whole tree
    kept = []
    if cmd.kept:  # positions only when there is something to say
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        for node, message in cmd.kept:
            start = positions[node].start
            kept.append(f"{start.line}:{start.column + 1}: {message}")
    return tree.code, cmd.changed, kept


def _indexed_ids(code: str, module: cst.Module) -> set[int]:
    """The libcst Call nodes at the positions classify.indexed_calls finds (ast columns are UTF-8 bytes)."""
    try:
        found = indexed_calls(ast.parse(code), code)
    except SyntaxError:
        return set()
    if not found:
        return set()
    lines = code.splitlines()
    chars = {(ln, len(lines[ln - 1].encode()[:col].decode(errors="ignore"))) for ln, col in found if ln <= len(lines)}
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return {id(n) for n, r in positions.items() if isinstance(n, cst.Call) and (r.start.line, r.start.column) in chars}


def fix_source(code: str, path: str = "<string>") -> tuple[str, int]:
    """Returns (new code, number of rewrites)."""
    new, n, _ = fix_module(code, path)
    return new, n
