"""Run lint / fix over paths: files, notebooks, config, cache, suppression totals."""

from __future__ import annotations

import gc
import json
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from k2to3.source.files import Cache, Config, discover, notebook_cells
from k2to3.source.lint import SourceFinding, lint_source
from k2to3.source.parallel import map_items
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


@dataclass
class _File:
    """One file's outcome: an error, or its findings and noqa count (and the cache entry to add, on a miss); `py2`
    says where a Python 2 file failed to parse as Python 3 (it was checked after the 2->3 step)."""

    error: str | None = None
    findings: list[SourceFinding] = field(default_factory=list)
    suppressed: int = 0
    new: tuple[str, dict] | None = None
    py2: str | None = None


def _lint_or_py2(text: str, path: str, prefilter: bool) -> tuple[list[SourceFinding], int, str | None]:
    """Lint the file; a Python 2 file (not a notebook) is checked as read by the 2->3 step, which keeps every
    statement on its line, so the findings point at the file's own lines."""
    try:
        found, supp = _lint_text(text, path, prefilter)
        return found, supp, None
    except SyntaxError as exc:
        py2 = None if path.endswith(".ipynb") else to_py3(text, exc)
        if py2 is None:
            raise
        found, supp = lint_source(py2.text, path, prefilter)
        # fix leaves a Python 2 file alone: nothing in it is fixable
        return [replace(f, fixable=False) for f in found], supp, f"{exc.lineno}:{exc.offset}: {exc.msg}"


def _lint_file(p: Path, cache: Cache | None, prefilter: bool) -> _File:
    try:
        data = p.read_bytes()
    except OSError as exc:
        return _File(f"{p}: cannot read ({exc.strerror})")
    path = str(p)
    hit = cache.get(data) if cache else None
    if hit is not None:
        return _File(None, [SourceFinding(**{**d, "path": path}) for d in hit["findings"]], hit["suppressed"],
                     py2=hit.get("py2"))
    try:
        found, supp, py2 = _lint_or_py2(data.decode("utf-8", errors="replace"), path, prefilter)
    except SyntaxError as exc:
        return _File(f"{p}:{exc.lineno}:{exc.offset}: syntax error, not checked")
    except (ValueError, RecursionError) as exc:
        return _File(f"{p}: not checked ({type(exc).__name__})")
    entry = {"findings": [f.to_dict() for f in found], "suppressed": supp, **({"py2": py2} if py2 else {})}
    return _File(None, found, supp, (Cache.key(data), entry) if cache else None, py2)


def lint_paths(paths: list[Path], cfg: Config, cache: Cache | None = None, prefilter: bool = True,
               jobs: int = 0) -> LintResult:
    """Lint every file under `paths`; a big tree on every core (`jobs` processes, 0: one per core)."""
    files = list(discover(paths, cfg))
    if cache:
        cache.load()  # before the workers fork: each reads the index it inherits
    # The cyclic collector's passes over every new syntax tree were a quarter of a tree's lint time, and linting
    # leaves next to no cycles: off while it runs (the children inherit that), back on after.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        outcomes = map_items(partial(_lint_file, cache=cache, prefilter=prefilter), files, jobs)
    finally:
        if was_enabled:
            gc.enable()
    res = LintResult(files=len(files))
    for out, p in zip(outcomes, files):
        if out.error is not None:
            res.errors.append(out.error)
            continue
        if out.new is not None and cache:
            cache.put_key(*out.new)
        if out.py2:
            where, _, msg = out.py2.partition(": ")
            res.errors.append(f"{p}:{where}: Python 2 syntax error ({msg}), checked after a mechanical 2->3 step "
                              "(`k2to3 fix` leaves the file alone: port it to Python 3 first)")
        if out.suppressed == -1:
            res.files_suppressed += 1
        else:
            res.suppressed += out.suppressed
        res.findings += [f for f in out.findings if cfg.wants(f.code)]
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
    import difflib  # only fix --diff needs it

    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{path}", f"b/{path}"))
