"""--src resolution over several files (a repository, a directory): each file alone first, then all together; the
names a weights-only search binds; the warnings about files read as Python 2 or skipped."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

from k2to3.core import rules as rules_mod
from k2to3.core.findings import Finding
from k2to3.source.extract import imports_from, index_sources
from k2to3.source.hoist import resolve_sources
from k2to3.source.resolution import Resolution
from k2to3.source.source_index import Definition, SourceIndex
from k2to3.upgrade.needed_code import collect_needs


def _code_shape(code: str) -> dict[str, str]:
    """A generated module's top-level definitions by name, without comments or docstrings (where each came from):
    two files holding the same definitions give the same items."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {"": code}
    return {n.name: ast.dump(n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def resolve_in_files(index: SourceIndex, model_config: dict[str, Any] | None, training_config: dict[str, Any] | None,
                     module: str, build_fn: str | None = None,
                     required_layers: set[str | None] | None = None,
                     bound: dict[str, Any] | None = None) -> Resolution:
    """`_resolve_in_files`, and once, as a warning, which --src files were read as Python 2 or skipped. `bound`:
    module names the sources compute when they run, given the values the build search found (None while it
    probes: the worker sets them before each build)."""
    if bound:
        index = with_bound(index, bound)
    res = _resolve_in_files(index, model_config, training_config, module, build_fn, required_layers)
    file_warnings(index, res)
    return res


def with_bound(index: SourceIndex, bound: dict[str, Any]) -> SourceIndex:
    """The index with each bound name a module constant of the generated modules, saying where its value came
    from (the index itself is shared by every candidate of a search: it is not changed)."""
    defs = dict(index.defs)
    order = min((d.order for d in defs.values()), default=0) - len(bound)
    for i, (name, value) in enumerate(bound.items()):
        where = index.dynamic.get(name, "the --src files")
        defs[name] = Definition(name, "constant", Path(where.rsplit(":", 1)[0]), 0,
                                f"{name} = {value!r}  # computed by running code at {where}; the value the weights "
                                "were built with, found by k2to3's build search\n", order=order + i)
    return dataclasses.replace(index, defs=defs, dynamic={k: v for k, v in index.dynamic.items() if k not in bound})


def file_warnings(index: SourceIndex, res: Resolution) -> None:
    """A file that cannot be parsed blocks nothing the model does not need from it; where a needed name is
    missing, its error says which files were skipped."""
    code = rules_mod.builtin_code("source_not_py3")
    if index.py2:
        files = "; ".join(f"{p} ({why})" for p, why in list(index.py2.items())[:5])
        res.findings.append(Finding(code, "warning", f"{len(index.py2)} --src file(s) are Python 2, read after a "
                                    f"mechanical 2->3 step (print/exec statements, except X, e, ...): {files}"))
    if index.unparsed:
        files = "; ".join(list(index.unparsed.values())[:5])
        res.findings.append(Finding(code, "warning", f"{len(index.unparsed)} --src file(s) skipped, neither Python 3 "
                                    f"nor Python 2: {files}", None, "fix the syntax if the model needs them"))
        skipped = ", ".join(str(p) for p in list(index.unparsed)[:3])
        needed = {rules_mod.builtin_code("source_missing"), rules_mod.builtin_code("lambda")}
        res.findings = [dataclasses.replace(f, fix=f"{f.fix}; {skipped} could not be parsed and was skipped")
                        if f.severity == "error" and f.code in needed else f for f in res.findings]


def _resolve_in_files(index: SourceIndex, model_config: dict[str, Any] | None, training_config: dict[str, Any] | None,
                      module: str, build_fn: str | None = None,
                      required_layers: set[str | None] | None = None) -> Resolution:
    """Resolve from several files (a tree, a --src directory): first from each single file that could hold what
    the artifact needs (a training script usually builds one model; merged, the same inline lambdas or names in
    several scripts would be ambiguous), then from all of them together."""
    build_fn = build_fn.split(".")[0] if build_fn else None
    if len(index.texts) > 1:
        needs = collect_needs(model_config, training_config)
        names = {n.class_name or n.fn_name for n in needs} | ({build_fn} if build_fn else set())
        names.discard(None)
        wants_sites = any(n.kind in ("lambda", "activation_lambda") for n in needs)
        candidates = [p for p, text in index.texts.items() if (wants_sites and any(s.path == p for s in index.sites))
                      or any(f"def {n}" in text or f"class {n}" in text for n in names)]
        found = []
        for p in candidates[:50]:
            single = index_sources([p])
            if any(d.kind == "import" and any(imports_from(d.code, q) for q in index.texts if q != p)
                   for d in single.defs.values()):
                continue  # it imports from another of the files (anago's models.py from anago/layers.py): merged
            res = resolve_sources(single, model_config, training_config, module, build_fn, required_layers)
            if not res.errors:
                found.append((p, res))
        shapes = [_code_shape(res.k3_code) for _, res in found]
        widest = [i for i, mine in enumerate(shapes) if all(other.items() <= mine.items() for other in shapes)]
        if len(found) > 1 and widest:
            # the same definitions in several files (a notebook and the script exported from it), one of them
            # also giving an optional one (the loss): no competing definitions, so no ambiguity
            found = [found[widest[0]]]
        if len(found) == 1:
            return found[0][1]
        if len(found) > 1:  # several scripts could each have built it: a guess could pass against itself
            res = Resolution(module)
            optional = required_layers is not None and not any(n.layer in required_layers for n in needs)
            res.findings.append(Finding(rules_mod.builtin_code("lambda"), "warning" if optional else "error",
                                        "the Lambdas and custom objects "
                                        f"resolve from each of {', '.join(str(p) for p, _ in found[:4])}; k2to3 "
                                        "cannot tell which built the model" + (
                                            "; converted from the file's own config" if optional else ""), None,
                                        "pass the one file that built it with --src"))
            return res
    return resolve_sources(index, model_config, training_config, module, build_fn, required_layers)
