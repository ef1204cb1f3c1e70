"""The layers of docs/architecture.md hold in the code: the import-linter contracts of pyproject.toml pass, the
package's import graph has no cycle (type-checking imports included) and every module belongs to a layer.

Sizes are a smell, not a gate: a module over 500 lines or a function over 80 is listed in a report (printed by
test_size_report, or `python tests/test_architecture.py`) for a reviewer to judge whether it holds more than one
responsibility; only a module over 800 lines or a function over 150 fails, as a guard against a file nobody can read.
Split by responsibility, never to get under a number."""

from __future__ import annotations

import ast
import subprocess
import sys

import grimp
import pytest
import tomllib
from conftest import ROOT

SRC = ROOT / "src" / "k2to3"
SOFT_MODULE_LINES, SOFT_FUNCTION_LINES = 500, 80  # reported: worth a look
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 800, 150  # failed: a guard, not a target


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


def sizes() -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Every module's line count and every function's (`path:line name`), largest first."""
    modules, functions = [], []
    for p in sorted(SRC.rglob("*.py")):
        text = p.read_text()
        modules.append((str(p.relative_to(SRC)), len(text.splitlines())))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.append((f"{p.relative_to(SRC)}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1))
    return sorted(modules, key=lambda x: -x[1]), sorted(functions, key=lambda x: -x[1])


def size_report() -> str:
    """The modules over SOFT_MODULE_LINES and the functions over SOFT_FUNCTION_LINES: a list to review, not a
    failure."""
    modules, functions = sizes()
    lines = [f"modules over {SOFT_MODULE_LINES} lines:"] + \
        [f"  {n:5d}  {m}" for m, n in modules if n > SOFT_MODULE_LINES] + \
        [f"functions over {SOFT_FUNCTION_LINES} lines:"] + \
        [f"  {n:5d}  {f}" for f, n in functions if n > SOFT_FUNCTION_LINES]
    return "\n".join(lines)


def test_module_and_function_sizes_under_the_hard_ceiling():
    modules, functions = sizes()
    assert [m for m in modules if m[1] > MAX_MODULE_LINES] == []
    assert [f for f in functions if f[1] > MAX_FUNCTION_LINES] == []


def test_size_report(capsys):
    """Prints what is over the soft limits (shown with -s, or under the test's captured output on a failure)."""
    report = size_report()
    assert report.startswith("modules over")
    with capsys.disabled():
        print("\n" + report)


def test_size_report_lists_what_is_over():
    modules, functions = sizes()
    listed = {line.split(maxsplit=1)[1] for line in size_report().splitlines() if line.startswith("  ")}
    assert listed == {m for m, n in modules if n > SOFT_MODULE_LINES} | \
        {f for f, n in functions if n > SOFT_FUNCTION_LINES}


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


if __name__ == "__main__":
    print(size_report())
