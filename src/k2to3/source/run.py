"""Run lint / fix over paths: files, notebooks, config, cache, suppression totals."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k2to3.source.files import Cache, Config, discover, notebook_cells
from k2to3.source.lint import SourceFinding, lint_source
from k2to3.source.py2 import to_py3


@dataclass
class LintResult:
    findings: list[SourceFinding] = field(default_factory=list)
    files: int = 0
    suppressed: int = 0
    files_suppressed: int = 0
    errors: list[str] = field(default_factory=list)  # unreadable or unparsable files


def _lint_text(text: str, path: str, prefilter: bool = True) -> tuple[list[SourceFinding], int]:
    if path.endswith(".ipynb"):
        found, supp = [], 0
        for cell, code in notebook_cells(text):
            fs, s = lint_source(code, path, prefilter)
            found += [SourceFinding(f.path, f.line, f.col, f.code, f.message, f.fixable, cell) for f in fs]
            supp += max(s, 0)
        return found, supp
    return lint_source(text, path, prefilter)


def _lint_or_py2(text: str, path: str, prefilter: bool) -> dict[str, Any]:
    """Lint the file; a Python 2 file (not a notebook) is checked as read by the 2->3 step, which keeps every
    statement on its line, so the findings point at the file's own lines."""
    try:
        found, supp = _lint_text(text, path, prefilter)
        return {"findings": [f.to_dict() for f in found], "suppressed": supp}
    except SyntaxError as exc:
        py2 = None if path.endswith(".ipynb") else to_py3(text, exc)
        if py2 is None:
            raise
        found, supp = lint_source(py2.text, path, prefilter)
        # fix leaves a Python 2 file alone: nothing in it is fixable
        return {"findings": [{**f.to_dict(), "fixable": False} for f in found], "suppressed": supp,
                "py2": f"{exc.lineno}:{exc.offset}: {exc.msg}"}


def lint_paths(paths: list[Path], cfg: Config, cache: Cache | None = None, prefilter: bool = True) -> LintResult:
    res = LintResult()
    for p in discover(paths, cfg):
        res.files += 1
        try:
            data = p.read_bytes()
        except OSError as exc:
            res.errors.append(f"{p}: cannot read ({exc.strerror})")
            continue
        hit = cache.get(data) if cache else None
        if hit is None:
            try:
                hit = _lint_or_py2(data.decode("utf-8", errors="replace"), str(p), prefilter)
            except SyntaxError as exc:
                res.errors.append(f"{p}:{exc.lineno}:{exc.offset}: syntax error, not checked")
                continue
            except (ValueError, RecursionError) as exc:
                res.errors.append(f"{p}: not checked ({type(exc).__name__})")
                continue
            if cache:
                cache.put(data, hit)
        if hit.get("py2"):
            where, _, msg = hit["py2"].partition(": ")
            res.errors.append(f"{p}:{where}: Python 2 syntax error ({msg}), checked after a mechanical 2->3 step "
                              "(`k2to3 fix` leaves the file alone: port it to Python 3 first)")
        if hit["suppressed"] == -1:
            res.files_suppressed += 1
        else:
            res.suppressed += hit["suppressed"]
        for d in hit["findings"]:
            f = SourceFinding(**{**d, "path": str(p)})
            if cfg.wants(f.code):
                res.findings.append(f)
    if cache:
        cache.flush()
    return res


@dataclass
class FixResult:
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new)
    rewrites: int = 0
    errors: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # "path:line:col: K2T501 ..." uses left on tf.keras


def fix_paths(paths: list[Path], cfg: Config) -> FixResult:
    import libcst as cst  # only fix needs libcst; lint reads with ast

    from k2to3.source.fix import fix_module

    res = FixResult()
    for p in discover(paths, cfg):
        if p.suffix == ".ipynb":
            try:
                new_nb, n = _fix_notebook(p.read_text())
            except (cst.ParserSyntaxError, ValueError) as exc:
                res.errors.append(f"{p}: not fixed ({type(exc).__name__})")
                continue
            if n:
                res.changed[str(p)] = (p.read_text(), new_nb)
                res.rewrites += n
            continue
        try:
            old = p.read_text()
            new, n, kept = fix_module(old, str(p))
        except (cst.ParserSyntaxError, UnicodeDecodeError, RecursionError) as exc:
            res.errors.append(_not_fixed(p, old) if isinstance(exc, cst.ParserSyntaxError) else
                              f"{p}: not fixed ({type(exc).__name__})")
            continue
        res.kept += [f"{p}:{k}" for k in kept]
        if n and new != old and not _compiles(new):  # never write a file Python would reject
            res.errors.append(_not_fixed(p, old) if not _compiles(old) else
                              f"{p}: not fixed (the rewrite would not compile; please report it)")
            continue
        if n and new != old:
            res.changed[str(p)] = (old, new)
            res.rewrites += n
    return res


def _compiles(code: str) -> bool:
    """compile(), not ast.parse: the compiler also rejects a repeated keyword argument."""
    try:
        compile(code, "<fix>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _not_fixed(p: Path, old: str) -> str:
    """Why a file that is not Python 3 is left alone, precisely: a Python 2 file is named as one."""
    try:
        compile(old, str(p), "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{p}:{exc.lineno}:{exc.offset}"
        if to_py3(old, exc) is not None:
            return f"{where}: Python 2 syntax error ({exc.msg}), not fixed: port it to Python 3 first (2to3 -w)"
        return f"{where}: syntax error ({exc.msg}), not fixed"
    except ValueError as exc:
        return f"{p}: not fixed ({exc})"
    return f"{p}: not fixed (libcst cannot parse it)"


def _fix_notebook(text: str) -> tuple[str, int]:
    from k2to3.source.fix import fix_source

    nb = json.loads(text)
    total = 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        if any(ln.lstrip().startswith(("%", "!", "?")) for ln in src.splitlines()):
            continue  # magics are not Python: leave the cell alone
        new, n = fix_source(src)
        if n and new != src:
            cell["source"] = new.splitlines(keepends=True)
            total += n
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n", total


def unified_diff(path: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}"))
