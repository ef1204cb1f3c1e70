"""The layers of docs/architecture.md hold in the code: the import-linter contracts of pyproject.toml pass, the
package's import graph has no cycle (type-checking imports included), every module belongs to a layer, and no module
is over 500 lines or function over 80."""

from __future__ import annotations

import ast
import subprocess
import sys

import grimp
import pytest
import tomllib
from conftest import ROOT

SRC = ROOT / "src" / "k2to3"
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 80


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("k2to3", cache_dir=None)


def cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    mods = sorted(graph.modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in mods:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def test_the_import_graph_has_no_cycle(graph):
    assert len(graph.modules) > 100
    assert cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    g = grimp.ImportGraph()
    for m in ("a", "a.x", "a.y", "a.z"):
        g.add_module(m)
    g.add_import(importer="a.x", imported="a.y")
    g.add_import(importer="a.y", imported="a.x")
    g.add_import(importer="a.z", imported="a.x")
    assert cycles(g) == [["a.x", "a.y"]]


def test_every_module_is_in_a_layer(graph):
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in cfg if c["type"] == "layers")["layers"]
    names = {n.strip() for layer in layers for n in layer.split("|")}
    outside = sorted(m for m in graph.modules if m != "k2to3" and m.split(".")[1] not in names)
    assert outside == []


def test_import_contracts_pass():
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and "0 broken" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_module_and_function_sizes():
    big_modules, big_functions = [], []
    for p in sorted(SRC.rglob("*.py")):
        text = p.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            big_modules.append((str(p.relative_to(SRC)), len(text.splitlines())))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    big_functions.append((f"{p.relative_to(SRC)}:{node.lineno} {node.name}", n))
    assert big_modules == [] and big_functions == []


def test_the_check_example_of_the_architecture_map_works():
    """docs/architecture.md shows how a check is written: the example runs as a check would (its section, its
    report.md lines, its outcome)."""
    import re
    from types import SimpleNamespace

    from k2to3.checks.base import Check

    code = re.search(r"```python\n(# checks/params.py.*?)```", (ROOT / "docs" / "architecture.md").read_text(),
                     re.S)
    assert code
    ns: dict = {}
    exec(compile(code.group(1), "architecture.md", "exec"), ns)
    check = ns["CHECK"]
    assert isinstance(check, Check) and check.key == "params"
    report = {"input": {"n_params": 10}, "backends": {"torch": {"params_trainable": 8, "params_non_trainable": 2},
                                                      "jax": {"status": "skipped"}}}
    check.collect(SimpleNamespace(report=report), {})
    assert report["params"]["status"] == "parity" and check.outcome(report) is None
    report["backends"]["torch"]["params_trainable"] = 9
    check.collect(SimpleNamespace(report=report), {})
    assert check.outcome(report) == "mismatch" and check.markdown(report)[0].startswith("mismatch")
