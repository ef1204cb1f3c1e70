"""`k2to3 fix`: rewrite fixable findings with libcst, keeping comments and formatting elsewhere.
tf.* / K.* -> keras.ops (rules/ops.toml), K config -> keras.config, tf.keras -> keras; imports added and
removed with libcst's codemod helpers. A call that cannot be rewritten safely stays as it is."""

from __future__ import annotations

import ast
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

from .classify import ADD_WEIGHT_KERAS2, LAMBDA, Aliases, CallArgs, Expr, classify_call, keras_name
from .lint import RELEVANT


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


def _literal(value: object) -> cst.BaseExpression:
    return cst.parse_expression(repr(value))


class FixCommand(VisitorBasedCodemodCommand):
    DESCRIPTION = "Rewrite Keras 2 / tf.* source to multi-backend Keras 3 (keras.ops)."

    def __init__(self, context: CodemodContext):
        super().__init__(context)
        self.changed = 0
        self.aliases = Aliases()
        self.tf_imports: list[tuple[str, str | None]] = []

    def visit_Module(self, node: cst.Module) -> None:
        c = _ImportCollector()
        node.visit(c)
        self.aliases, self.tf_imports = c.aliases, c.tf_imports

    def _call_args(self, call: cst.Call) -> CallArgs:
        def val(node: cst.BaseExpression) -> Any:
            try:
                return ast.literal_eval(self.module.code_for_node(node).strip())
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return Expr(node)

        star = any(a.star for a in call.args)
        return CallArgs(
            positional=[val(a.value) for a in call.args if a.keyword is None],
            keywords={a.keyword.value: val(a.value) for a in call.args if a.keyword is not None},
            star=star,
            raw=[(a.keyword.value if a.keyword else None, a.value) for a in call.args],
        )

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = original.func
        if isinstance(func, cst.Attribute) and func.attr.value == "add_weight" and dotted_name(func.value) == "self":
            positional = [a for a in updated.args if a.keyword is None and not a.star]
            if positional and len(positional) <= len(ADD_WEIGHT_KERAS2) and not any(a.star for a in updated.args):
                eq = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
                args = [a.with_changes(keyword=cst.Name(ADD_WEIGHT_KERAS2[i]), equal=eq) if i < len(positional)
                        else a for i, a in enumerate(updated.args)]
                self.changed += 1
                return updated.with_changes(args=args)
        q = self.aliases.resolve(dotted_name(original.func))
        if q is None or keras_name(q) == LAMBDA:
            return updated
        v = classify_call(q, self._call_args(original))
        if v is None or not v.fixable or v.target is None:
            return updated
        by_id = {id(o.value): u.value for o, u in zip(original.args, updated.args)}
        args = []
        for kw, val in v.args:
            node = by_id.get(id(val.node), val.node) if isinstance(val, Expr) else _literal(val)
            eq = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
            args.append(cst.Arg(value=node) if kw is None else cst.Arg(value=node, keyword=cst.Name(kw), equal=eq))
        if v.target.startswith("k2to3."):  # a keras.ops composition k2to3 ships (k2to3.portable)
            AddImportsVisitor.add_needed_import(self.context, v.target.rsplit(".", 1)[0])
        else:
            AddImportsVisitor.add_needed_import(self.context, "keras")
        self.changed += 1
        return updated.with_changes(func=_dotted(v.target), args=args)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if original.attr.value == "keras" and self.aliases.resolve(dotted_name(original.value)) == "tensorflow":
            AddImportsVisitor.add_needed_import(self.context, "keras")
            self.changed += 1
            return cst.Name("keras")
        return updated

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> Any:
        if updated.relative or updated.module is None or isinstance(updated.names, cst.ImportStar):
            return updated
        mod = _module_name(updated.module)
        new = keras_name(mod + ".")
        if new is not None and not mod.startswith("keras"):
            self.changed += 1
            target = new.rstrip(".")
            for a in updated.names:
                if isinstance(a.name, cst.Name) and a.name.value == "backend":
                    asname = a.asname.name.value if a.asname and isinstance(a.asname.name, cst.Name) else None
                    RemoveImportsVisitor.remove_unused_import(self.context, target, "backend", asname)
            return updated.with_changes(module=_dotted(target))
        if mod == "tensorflow":
            keep = [a for a in updated.names if not (isinstance(a.name, cst.Name) and a.name.value == "keras")]
            if len(keep) != len(updated.names):
                self.changed += 1
                k = next(a for a in updated.names if a not in keep)
                asname = k.asname.name.value if k.asname and isinstance(k.asname.name, cst.Name) else None
                AddImportsVisitor.add_needed_import(self.context, "keras", asname=asname)
                if not keep:
                    return cst.RemoveFromParent()
                keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated.with_changes(names=keep)
        return updated

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if self.changed:  # only imports this run made unused go; libcst checks every remaining use
            for module, asname in self.tf_imports:
                RemoveImportsVisitor.remove_unused_import(self.context, module, asname=asname)
        return updated


def fix_source(code: str, path: str = "<string>") -> tuple[str, int]:
    """Returns (new code, number of rewrites)."""
    if not RELEVANT.search(code):
        return code, 0
    context = CodemodContext(filename=path, full_module_name=None)
    cmd = FixCommand(context)
    new = cmd.transform_module(cst.parse_module(code))
    return new.code, cmd.changed
