"""Layer arguments whose default changed between standalone Keras 2.0-2.3 and tf_keras, written into the --src texts
of a file those releases saved, so both the tf_keras reference and the Keras 3 module build what the source built
when it ran.

`GRU(units)` was `reset_after=False` in standalone Keras up to 2.3 (a bias of 3 * units); tf.keras 2 and Keras 3
default to `reset_after=True` (a (2, 3 * units) bias), so the same source line builds another layer with other
weights today. A file's config records the key (rule K2T492 fills it for Keras 2.0-2.1 configs), but a model built
from source (a weights-only file's build function, a custom layer that makes a GRU) has only the call. The
edit is textual (an argument before the call's closing parenthesis, so every line number stays), ast only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from k2to3.source.source_index import SourceIndex

# class name -> (keyword, the value standalone Keras <= 2.3 used when the call leaves it out)
DEFAULTS: dict[str, tuple[str, str]] = {"GRU": ("reset_after", "False"), "GRUCell": ("reset_after", "False")}
_STANDALONE = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?$")  # "2.1.6"; tf.keras writes "2.2.4-tf"


def standalone_before_tf2(keras_version: str | None) -> bool:
    """A file standalone Keras 2.0-2.3 wrote (not tf.keras, whose versions carry "-tf", nor Keras 2.4+, which is
    tf.keras under another name)."""
    m = _STANDALONE.match(keras_version or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) < (2, 4) and int(m.group(1)) == 2


def _class(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def with_old_defaults(text: str) -> tuple[str, list[int]]:
    """`text` with each `GRU(...)` call that leaves `reset_after` out given the old default, and the lines of the
    calls changed; unchanged when there is none or the edit would not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text, []
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (line, byte column of the closing parenthesis, text to insert)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _class(node) not in DEFAULTS or node.end_lineno is None:
            continue
        key, value = DEFAULTS[_class(node)]
        if any(k.arg in (key, None) for k in node.keywords):  # given, or passed through **kwargs
            continue
        last = max([*node.args, *node.keywords], key=lambda a: (a.end_lineno, a.end_col_offset), default=None)
        between = _segment(lines, (last.end_lineno, last.end_col_offset) if last else None,
                           (node.end_lineno, node.end_col_offset - 1))  # type: ignore[operator]
        sep = "" if last is None else " " if "," in re.sub(r"#[^\n]*", "", between) else ", "
        edits.append((node.end_lineno, node.end_col_offset - 1, f"{sep}{key}={value}"))  # type: ignore[operator]
    if not edits:
        return text, []
    for line, col, arg in sorted(edits, reverse=True):
        raw = lines[line - 1].encode()
        lines[line - 1] = (raw[:col] + arg.encode() + raw[col:]).decode()
    out = "".join(lines)
    try:
        ast.parse(out)
    except SyntaxError:
        return text, []
    return out, sorted(line for line, _, _ in edits)


def _segment(lines: list[str], start: tuple[int, int] | None, end: tuple[int, int]) -> str:
    """The text between two (line, byte column) positions ("" without a start)."""
    if start is None:
        return ""
    data = [ln.encode() for ln in lines]
    if start[0] == end[0]:
        return data[start[0] - 1][start[1]:end[1]].decode()
    return b"".join([data[start[0] - 1][start[1]:], *data[start[0]:end[0] - 1],
                     data[end[0] - 1][:end[1]]]).decode()


def with_standalone_defaults(index: SourceIndex) -> tuple[SourceIndex, list[str]]:
    """The index read again with the old defaults written in, and where (the same index and [] when no text
    changes)."""
    from k2to3.source.extract import index_texts

    texts: dict[Path, str] = {}
    where: list[str] = []
    for p, text in index.texts.items():
        texts[p], lines = with_old_defaults(text)
        where += [f"{p.name}:{line}" for line in lines]
    if not where:
        return index, []
    again = index_texts(index.paths, texts)
    again.py2.update(index.py2)
    again.unparsed.update(index.unparsed)
    again.notes[:0] = index.notes
    return again, where
