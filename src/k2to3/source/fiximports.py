"""The import passes of `k2to3 fix` around libcst's helpers: which imports a rewrite left unused (a token scan
before libcst's scope analysis) and AddImportsVisitor run on the module's head only."""

from __future__ import annotations

import io
import tokenize
from collections.abc import Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor


def attribute_uses(code: str, names: set[str]) -> set[str]:
    """The names of `names` used as `name.attr` outside import statements (strings and comments do not count;
    a use this misses, e.g. inside an f-string, only leaves the decision to libcst's scope analysis)."""
    skip = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    used: set[str] = set()
    start, in_import, last = True, False, ("", "")  # statement start; inside `import`/`from`; last two tokens
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or tok.string == ";":
            start, in_import, last = True, False, ("", "")
            continue
        if tok.type in skip:
            continue
        if start:
            start, in_import = False, tok.type == tokenize.NAME and tok.string in ("import", "from")
        if not in_import and tok.string == "." and last[1] in names and last[0] != ".":
            used.add(last[1])
        last = (last[1], tok.string)
    return used


def _head_length(body: Sequence[cst.BaseStatement]) -> int:
    """How many statements AddImportsVisitor may read or change: a docstring or `__strict__` flag, the top
    import block, and the statement after it (which may get a blank line before it). The same test as libcst's."""
    def one(i: int, kinds: tuple[type, ...]) -> cst.BaseSmallStatement | None:
        s = body[i] if i < len(body) else None
        return s.body[0] if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 \
            and isinstance(s.body[0], kinds) else None

    first = one(0, (cst.Expr, cst.Assign))
    docstring = isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString)
    strict = isinstance(first, cst.Assign) and len(first.targets) == 1 \
        and isinstance(first.targets[0].target, cst.Name) and first.targets[0].target.value == "__strict__"
    i = int(docstring or strict)
    while one(i, (cst.Import, cst.ImportFrom)) is not None:
        i += 1
    return i + 1


def add_imports(context: CodemodContext, tree: cst.Module) -> cst.Module:
    body = list(tree.body)
    n = _head_length(body)
    if n > len(body):
        return AddImportsVisitor(context).transform_module(tree)
    # the statement after the head is stood in for by an empty one with its leading lines
    stand_in = cst.SimpleStatementLine([cst.Pass()], leading_lines=body[n - 1].leading_lines)
    head = AddImportsVisitor(context).transform_module(tree.with_changes(body=[*body[:n - 1], stand_in]))
    *new_head, after = head.body
    return tree.with_changes(body=[*new_head, body[n - 1].with_changes(leading_lines=after.leading_lines), *body[n:]])
