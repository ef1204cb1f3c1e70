"""The fast start-up paths (interfaces/entry.py) answer exactly as the full command line: `k2to3 lint` through
fastlint (byte for byte, same exit code, for every option combination, falling back where it must; its parse is
click's for every lint option), `--help` of every command from the help cache (invalidated by the version and the
terminal width), without importing typer, rich, pydantic or libcst; the prefilter and the process pool never
change a finding; the cached rule tables are the op table's."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from conftest import FIXTURES

import k2to3
from k2to3.core import optable, tables
from k2to3.core.options import LINT_FORMATS, LintOptions, fields_of, flags
from k2to3.interfaces import fastlint
from k2to3.interfaces.cli import app
from k2to3.source.files import Config
from k2to3.source.run import lint_paths

FAST = [sys.executable, "-m", "k2to3"]
FULL = [sys.executable, "-c", "from k2to3.interfaces.cli import main; main()"]
HEAVY = ("typer", "rich", "pydantic", "libcst", "click")
BUDGET = """
import json, runpy, sys
sys.argv = ["k2to3", *sys.argv[2:]]
try:
    runpy.run_module("k2to3", run_name="__main__")
except SystemExit as exc:
    code = exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
open(OUT, "w").write(json.dumps({"code": code, "heavy": heavy}))
"""


SRC = str(Path(k2to3.__file__).resolve().parents[1])  # the k2to3 under test, whatever the subprocess's cwd


def environ(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([SRC, *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "3", **extra}


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    return environ(K2TO3_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """Files with findings of every family, one with a syntax error, a notebook, and one with noqa."""
    d = tmp_path_factory.mktemp("tree")
    for name in ("k2_zoo.py", "k_attention.py", "k2_backend_mix.py"):
        shutil.copy(FIXTURES / "src" / name, d / name)
    (d / "broken.py").write_text("import tensorflow as tf\ndef f(:\n")
    (d / "quiet.py").write_text("import tensorflow as tf\ny = tf.reduce_sum(x)  # noqa: K2T101\n")
    (d / "clean.py").write_text("import keras\ny = keras.ops.sum(x)\n")
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ["%matplotlib inline\n", "import tensorflow as tf\n", "y = tf.reduce_mean(x, 1)\n"]}
    (d / "nb.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    configs = {"configured": 'select = ["K2T2"]\nexclude = ["*skip*"]', "misconfigured": 'ignore = ["K2T9"]'}
    for name, conf in configs.items():
        (d / name).mkdir()
        (d / name / "pyproject.toml").write_text(f"[tool.k2to3]\n{conf}\n")
        shutil.copy(FIXTURES / "src" / "k2_zoo.py", d / name / "model.py")
        shutil.copy(FIXTURES / "src" / "k2_zoo.py", d / name / "skip_me.py")
    return d


def run(cmd: list[str], args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*cmd, *args], capture_output=True, env=env, cwd=cwd, timeout=300)


LINT_ARGS = [
    [],  # the current directory
    ["."],
    ["k2_zoo.py"],
    ["k2_zoo.py", "--no-cache"],
    ["--format", "json", "."],
    ["--format=sarif", "k2_zoo.py", "nb.ipynb"],
    ["--format", "github", "--select", "K2T2", "."],
    ["--select", "K2T1,k2t203", "--ignore=K2T103", "k2_zoo.py", "k_attention.py"],
    ["clean.py"],  # exit 0
    ["broken.py", "quiet.py"],  # a syntax error is listed, the file skipped
    ["--select", "K2T9999", "."],  # unknown code: exit 2, one line
    ["--ignore", "K2T", "."],
    ["--select", "ALL", "."],
    ["--format", "xml", "."],
    ["missing.py"],
    ["--select", ""],
    ["configured"],  # [tool.k2to3] select and exclude
    ["configured/model.py", "--format", "json"],
    ["misconfigured"],  # an unknown code in [tool.k2to3]: exit 2, naming the file
    # left to the full command line: a repeated option, an unknown one, `--`, --help, a missing value
    ["--select", "K2T1", "--select", "K2T2", "."],
    ["--frobnicate", "."],
    ["--", "k2_zoo.py"],
    ["--help"],
    ["--format"],
    ["--select", "--no-cache"],
]


@pytest.mark.parametrize("args", LINT_ARGS, ids=[" ".join(a) or "(none)" for a in LINT_ARGS])
def test_fast_lint_prints_what_the_full_cli_prints(args, env, tree):
    fast = run(FAST, ["lint", *args], env, tree)
    full = run(FULL, ["lint", *args], env, tree)
    assert (fast.stdout, fast.stderr, fast.returncode) == (full.stdout, full.stderr, full.returncode)
    assert full.returncode in (0, 1, 2) and b"Traceback" not in full.stderr


def test_the_combinations_cover_every_outcome(env, tree):
    """The cases above are worth comparing: findings, clean, errors, and each output format."""
    codes = {tuple(a): run(FAST, ["lint", *a], env, tree).returncode for a in LINT_ARGS[:19]}
    assert set(codes.values()) == {0, 1, 2}
    unknown = run(FAST, ["lint", "--select", "K2T9999", "."], env, tree)
    assert unknown.stderr.decode().count("\n") == 1 and b"K2T9999: no lint rule" in unknown.stderr


def _budget(args: list[str], env: dict[str, str], cwd: Path, tmp_path: Path) -> dict:
    out = tmp_path / "budget.json"
    code = BUDGET.replace("HEAVY", repr(HEAVY)).replace("OUT", repr(str(out)))
    subprocess.run([sys.executable, "-c", code, "-", *args], capture_output=True, env=env, cwd=cwd, timeout=300)
    return json.loads(out.read_text())


@pytest.mark.parametrize("args", [["lint", "k2_zoo.py", "--no-cache"], ["lint", "--format", "sarif"],
                                  ["lint", "--select", "K2T9999", "."], ["--help"], ["lint", "--help"]])
def test_fast_paths_import_nothing_heavy(args, env, tree, tmp_path):
    run(FAST, args, env, tree)  # the help cache is filled by a first run
    got = _budget(args, env, tree, tmp_path)
    assert got["heavy"] == [], got
    assert got["code"] in (0, 1, 2)


def test_fallback_imports_the_full_cli(env, tree, tmp_path):
    """The budget check can fail: the full command line imports typer (here for an option fastlint leaves to it)."""
    got = _budget(["lint", "--frobnicate"], env, tree, tmp_path)
    assert "typer" in got["heavy"] and got["code"] == 2


def _lint_cases() -> list[list[str]]:
    """Every lint option (from the options model), alone and with paths around it, in each spelling click takes."""
    cases: list[list[str]] = [[], ["a.py", "b/"]]
    for f in fields_of(LintOptions, "lint"):
        for flag in flags(f):
            spelled = [[flag]] if f.type == "bool" else [[flag, "K2T1,json"], [f"{flag}=K2T1,json"]]
            cases += [[*s] for s in spelled] + [["a.py", *s, "b/"] for s in spelled]
    every = [w for f in fields_of(LintOptions, "lint") for w in ([flags(f)[0]] if f.type == "bool"
                                                                  else [flags(f)[0], "x"])]
    return [*cases, ["a.py", *every], [*every, "a.py"]]


@pytest.mark.parametrize("args", _lint_cases(), ids=" ".join)
def test_fast_lint_parses_every_option_as_click_does(args):
    """fastlint's parse is click's (the full command line's) for every option of lint: same paths, same values,
    the same defaults where an option is not given."""
    click_lint = typer.main.get_command(app).commands["lint"]
    params = click_lint.make_context("lint", list(args)).params
    parsed = fastlint.parse(list(args))
    assert parsed is not None, "fastlint takes every option of lint (the full command line is a fallback)"
    paths, opts = parsed
    defaults = {f.name: f.default for f in fields_of(LintOptions, "lint")}
    assert [Path(p) for p in params.pop("paths") or ()] == paths
    assert params == {**defaults, **opts}


def test_lint_formats_are_the_formatters():
    from k2to3.source.formats import FORMATS

    assert LINT_FORMATS == tuple(FORMATS)


# every command's help (and the top level's): the cache replays what typer and rich render
COMMANDS = sorted(typer.main.get_command(app).commands)
HELP_ARGS = [["--help"], [], ["-h"], *([c, "--help"] for c in COMMANDS), ["rule", "-h"], ["nosuch", "--help"]]


@pytest.mark.parametrize("args", HELP_ARGS, ids=[" ".join(a) or "(none)" for a in HELP_ARGS])
def test_help_is_replayed_as_rendered(args, env, tree):
    full = run(FULL, args, env, tree)
    first, second = run(FAST, args, env, tree), run(FAST, args, env, tree)
    for r in (first, second):
        assert (r.stdout, r.stderr, r.returncode) == (full.stdout, full.stderr, full.returncode)
    assert full.stdout or full.stderr


def _entry(env: dict[str, str], args: list[str], cwd: Path) -> Path:
    code = f"from k2to3.interfaces import helpcache; print(helpcache._path({args!r}))"
    return Path(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
                               check=True).stdout.strip())


def test_help_cache_is_keyed_by_version_and_width(tmp_path, tree):
    env = environ(K2TO3_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="90")
    wide = {**env, "COLUMNS": "130"}
    run(FAST, ["--help"], env, tree)
    path = _entry(env, ["--help"], tree)
    assert path.is_file() and _entry(wide, ["--help"], tree) != path
    # what is replayed is the cache entry: change it and the next run prints the change
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, "stdout": "cached help\n"}))
    assert run(FAST, ["--help"], env, tree).stdout == b"cached help\n"
    # another width or another version does not see that entry
    wide_help = run(FAST, ["--help"], wide, tree)
    assert wide_help.stdout == run(FULL, ["--help"], wide, tree).stdout != entry["stdout"].encode()
    assert max(map(len, wide_help.stdout.decode().splitlines())) > 90
    bumped = [sys.executable, "-c", "import sys, k2to3.version as v; v.__version__ = '99.0'; "
              "from k2to3.interfaces.entry import main; sys.argv[0] = 'k2to3'; main()"]
    assert run(bumped, ["--help"], env, tree).stdout == entry["stdout"].encode()


def tf_keras_dir() -> Path:
    spec = importlib.util.find_spec("tf_keras")
    assert spec and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def _same(a, b) -> None:
    assert a.findings == b.findings and a.errors == b.errors
    assert (a.files, a.suppressed, a.files_suppressed) == (b.files, b.suppressed, b.files_suppressed)


@pytest.mark.slow
def test_prefilter_and_pool_never_change_a_finding():
    """tf_keras (586 files, ~10,000 findings): every file parsed one after another, against the prefiltered run
    on two processes."""
    for root in (tf_keras_dir(), FIXTURES / "src"):
        serial = lint_paths([root], Config(), prefilter=False, jobs=1)
        pooled = lint_paths([root], Config(), prefilter=True, jobs=2)
        _same(serial, pooled)
        assert serial.findings
    assert serial.files < 48  # fixtures/src ran serially in both: the pool path is the tf_keras one


def test_prefilter_keeps_a_file_whose_only_finding_needs_no_import(tmp_path):
    (tmp_path / "layer.py").write_text("class Scale(Base):\n    def build(self, shape):\n"
                                       "        self.w = self.add_weight('w', (shape[-1],))\n")
    (tmp_path / "plain.py").write_text("def f(x):\n    return x.mean()\n")
    _same(lint_paths([tmp_path], Config()), lint_paths([tmp_path], Config(), prefilter=False))
    assert [f.code for f in lint_paths([tmp_path], Config()).findings] == ["K2T205"]


# The pool forks, which it refuses in a process with other threads (a started backend pool, pytest-xdist): these
# run in a fresh interpreter of their own, so they run in every suite, not only when collected first.
POOL_SCRIPT = r"""
import os, sys, time
from pathlib import Path
from k2to3.source.parallel import _can_fork, map_items

assert _can_fork(), "a fresh interpreter can fork"
PARENT = os.getpid()


def slow(x):
    time.sleep(0.005)  # long enough that the parent cannot claim every chunk before the child starts
    return x, os.getpid()


def die(x):
    if os.getpid() != PARENT:
        Path(sys.argv[1]).touch()
        os._exit(3)  # a worker killed in the middle of a chunk
    time.sleep(0.002)
    return x * x


got = map_items(slow, list(range(200)), jobs=2)
assert [x for x, _ in got] == list(range(200)), "order"
assert len({pid for _, pid in got}) == 2, "a second process"
assert map_items(die, list(range(200)), jobs=2) == [x * x for x in range(200)], "a dead worker's chunks"
assert Path(sys.argv[1]).exists(), "the child did take a chunk, and died with it"
print("ok")
"""


def test_pool_uses_other_processes_keeps_the_order_and_redoes_a_dead_workers_chunks(tmp_path):
    r = subprocess.run([sys.executable, "-c", POOL_SCRIPT, str(tmp_path / "died")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_cached_tables_are_the_op_tables(tmp_path, monkeypatch):
    monkeypatch.setenv("K2TO3_CACHE_DIR", str(tmp_path))
    tables.lint_tables.cache_clear()
    try:
        built = tables.lint_tables()  # no cache yet: built from rules/ and written
        path = tmp_path / "tables" / f"{tables.key()}.json"
        assert path.is_file()
        tables.lint_tables.cache_clear()
        cached = tables.lint_tables()
        assert cached == built
        strip = {k: () for k in ("cases", "known_failures")} | {"notes": ""}
        assert cached.by_tf == {n: dataclasses.replace(e, **strip) for n, e in optable.by_tf_name().items()}
        assert cached.by_k == {n: dataclasses.replace(e, **strip) for n, e in optable.by_backend_name().items()}
        assert (cached.tf_aliases, cached.config) == (optable.tf_aliases(), optable.config_aliases())
        path.write_text("{not json")  # a damaged cache is rebuilt, not trusted
        tables.lint_tables.cache_clear()
        assert tables.lint_tables() == built and json.loads(path.read_text())["key"] == tables.key()
    finally:
        tables.lint_tables.cache_clear()
