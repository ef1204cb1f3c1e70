"""`k2to3 rule CODE` and the reports' Rules sections (issue 26 item 7): every rule code's docs come from the rule data
shipped in the package (k2to3/rules/*.toml), never from docs/ (which only a checkout has), and the reports' rule
links are anchors inside the report itself."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BAD, ROOT
from doclinks import md_broken_links, no_checkout_doc_links

from k2to3.core import ruledocs
from k2to3.core.rules import rules_dir
from k2to3.pipeline.report import to_markdown


def k2to3(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    return subprocess.run([sys.executable, "-m", "k2to3", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)


def test_rule_prints_the_doc():
    r = k2to3("rule", "K2T401")
    assert r.returncode == 0 and r.stderr == ""
    d = ruledocs.lookup("K2T401")
    assert r.stdout.startswith("# K2T401: rnn-time-major\n")
    for part in (d.what, d.why, d.before, d.after, d.fix):
        assert part in r.stdout
    assert k2to3("rule", "k2t401").stdout == r.stdout  # case-insensitive


def test_rule_on_a_terminal_is_rendered(monkeypatch):
    import io

    from rich.console import Console
    from typer.testing import CliRunner

    from k2to3.interfaces import cli, cli_rule

    buf = io.StringIO()
    monkeypatch.setattr(cli_rule, "out", Console(file=buf, force_terminal=True, width=100))
    r = CliRunner().invoke(cli.app, ["rule", "k2t401"])
    assert r.exit_code == 0 and r.output == ""
    text = buf.getvalue()
    assert "\x1b[" in text and "K2T401: rnn-time-major" in text and "# K2T401" not in text  # rich Markdown


def test_unknown_rule_is_one_line_exit_2():
    r = k2to3("rule", "K2T9999")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["error: unknown rule K2T9999 (see k2to3 rule --all)"]
    assert k2to3("rule", "K2T401", "--format", "yaml").returncode == 2


def test_rule_list_and_json():
    docs = ruledocs.rule_docs()
    listed = k2to3("rule", "--all")
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert [x.split()[0] for x in lines] == list(docs) and all(docs[x.split()[0]].title in x for x in lines)
    assert k2to3("rule").stdout == listed.stdout
    one = json.loads(k2to3("rule", "K2T611", "--format", "json").stdout)
    assert one["code"] == "K2T611" and one["what"] and one["fix"] and one["more"] == "k2to3 rule K2T611"
    every = json.loads(k2to3("rule", "--all", "--format", "json").stdout)
    assert [d["code"] for d in every] == list(docs)
    h = k2to3("rule", "--help")
    assert h.returncode == 0 and "Examples" in h.stdout and "k2to3 rule K2T401" in h.stdout


def test_every_code_has_a_doc():
    """Every rule of every rules/*.toml, and every K2Txxx code the package mentions (findings it emits), has a doc
    with what, why and fix."""
    docs = ruledocs.rule_docs()
    assert {"K2T101", "K2T301", "K2T401", "K2T470", "K2T501", "K2T601", "K2T611", "K2T901"} <= set(docs)
    for d in docs.values():
        assert d.title and d.what and d.why and d.fix and d.where, d.code
    mentioned = {c for p in (ROOT / "src" / "k2to3").rglob("*.py") for c in ruledocs.CODE.findall(p.read_text())}
    assert mentioned - set(docs) == set()


def test_docs_come_from_the_rules_data_not_from_docs(monkeypatch, tmp_path):
    """The loader reads rules_dir() (k2to3/rules in a wheel), and nothing under docs/: pointed at a copy of the
    rule data, the docs follow the copy."""
    assert rules_dir().name == "rules" and "docs" not in rules_dir().parts
    copy = tmp_path / "rules"
    shutil.copytree(rules_dir(), copy)
    toml = copy / "layers.toml"
    toml.write_text(toml.read_text().replace('title = "rnn-time-major"', 'title = "rnn-time-major-from-the-copy"'))
    from k2to3.core import rules

    cached = (ruledocs.rule_docs, ruledocs.optimizer_rules, rules.layer_rules, rules.source_rules, rules.keras1_rules)
    monkeypatch.setattr(ruledocs, "rules_dir", lambda: copy)
    monkeypatch.setattr(rules, "rules_dir", lambda: copy)
    for f in cached:
        f.cache_clear()
    try:
        assert ruledocs.lookup("K2T401").title == "rnn-time-major-from-the-copy"
    finally:
        for f in cached:  # the next caller loads the real data again
            f.cache_clear()


def _wheel_layout(site: Path) -> None:
    """What the wheel installs (pyproject: packages src/k2to3, force-include rules -> k2to3/rules): no docs/."""
    shutil.copytree(ROOT / "src" / "k2to3", site / "k2to3", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "rules", site / "k2to3" / "rules", ignore=shutil.ignore_patterns("__pycache__"))


def test_rule_and_report_from_the_wheel_layout(tmp_path):
    """From an installed layout, away from the checkout: `k2to3 rule` reads k2to3/rules, and a real conversion's
    report.md links its findings to its own Rules section."""
    site, work = tmp_path / "site", tmp_path / "work"
    _wheel_layout(site)
    work.mkdir()
    env = {"PYTHONPATH": str(site)}
    probe = subprocess.run([sys.executable, "-c", "import k2to3, k2to3.core.rules as r; print(k2to3.__file__); "
                            "print(r.rules_dir())"], capture_output=True, text=True, env={**os.environ, **env},
                           cwd=work, check=True).stdout.split()
    assert probe == [str(site / "k2to3" / "__init__.py"), str(site / "k2to3" / "rules")]
    r = k2to3("rule", "K2T902", env=env, cwd=work)
    assert r.returncode == 0 and ruledocs.lookup("K2T902").what in r.stdout
    shutil.copy(BAD / "unknown_layer.h5", work / "m.h5")
    c = k2to3("convert", "m.h5", "-o", "m.keras", env=env, cwd=work)
    assert c.returncode == 3, c.stderr
    md = (work / "m.keras.report" / "report.md").read_text()
    assert "| [K2T902](#k2t902) | error | mystery |" in md and "\n## Rules\n" in md and "\n### K2T902\n" in md
    assert ruledocs.lookup("K2T902").fix in md and "More: `k2to3 rule K2T902`" in md
    assert md_broken_links(md) == [] and no_checkout_doc_links(md)


@pytest.fixture(scope="module")
def not_portable_report(tmp_path_factory) -> dict:
    """report.json of a real conversion (a file that stops at its unknown layer class: no backend starts)."""
    d = tmp_path_factory.mktemp("np")
    r = k2to3("convert", str(BAD / "unknown_layer.h5"), "-o", str(d / "o.keras"))
    assert r.returncode == 3, r.stderr
    return json.loads((d / "o.keras.report" / "report.json").read_text())


def test_report_rules_section_covers_every_cited_code(not_portable_report):
    rep = {**not_portable_report, "findings": [
        *not_portable_report["findings"],
        {"code": "K2T401", "severity": "info", "layer": "lstm", "message": "dropped time_major", "fix": None},
        {"code": "K2T999", "severity": "info", "layer": None, "message": "a code with no rule", "fix": None}],
        "workarounds": [{"backend": "jax", "jobs": "load", "what": "see K2T611", "why": "test", "fix": "none"}]}
    md = to_markdown(rep)
    assert "[K2T401](#k2t401)" in md and "| K2T999 |" in md and "(#k2t999)" not in md
    rules = md[md.index("\n## Rules\n"):]
    assert re.findall(r"^### (K2T\d+)$", rules, re.M) == ["K2T401", "K2T611", "K2T902"]  # K2T611: cited in text
    assert md_broken_links(md) == [] and no_checkout_doc_links(md)
