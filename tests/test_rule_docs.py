"""`k2to3 rule CODE` (issue 26 item 7): every rule code's docs come from the rule data shipped in the package
(k2to3/rules/*.toml), never from docs/ (which only a checkout has)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from conftest import ROOT

from k2to3.core import ruledocs
from k2to3.core.rules import rules_dir


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

