"""The rule tables `lint` and `fix` read on every run, built once from rules/ and cached as JSON in
K2TO3_CACHE_DIR/tables (default ~/.cache/k2to3/tables). Parsing rules/ops.toml with tomllib and indexing it costs a
pre-commit run more than linting a file; loading one JSON file costs a few milliseconds. The cache is keyed by a
hash of every file the tables come from (the rules data and the code that reads it), so an edited rule or a new
release rebuilds it; an unwritable or damaged cache only means the tables are built in memory."""

from __future__ import annotations

import dataclasses
import json
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from k2to3.core import optable
from k2to3.core.paths import PACKAGE_DIR, cache_dir, rules_dir, store_json
from k2to3.version import __version__

SOURCES = ("ops.toml", "source.toml", "tf_names.tsv", "keras3_ops_signatures.json")
CODE = ("core/optable.py", "core/rules.py", "core/tables.py", "core/paths.py")  # how the tables are built and read
# Fields lint and fix never read: the differential cases are most of ops.toml and only tests/test_ops.py runs them.
UNUSED = ("cases", "known_failures", "notes")


@dataclass(frozen=True)
class LintTables:
    by_tf: dict[str, optable.OpEntry]  # TF function name without "tf." -> entry (optable.by_tf_name)
    by_k: dict[str, optable.OpEntry]  # K function name -> entry (optable.by_backend_name)
    tf_aliases: dict[str, str]  # every other name of a TF function -> its canonical name (optable.tf_aliases)
    tf_known: frozenset[str]  # the TF2 functions a compat.v1 name may be a form of
    config: dict[str, str]  # optable.config_aliases
    tf_moved: dict[str, str]  # optable.tf_moved
    obsolete: dict[str, tuple[str, str]]  # optable.backend_obsolete
    indexed: dict[str, str]  # optable.backend_indexed
    positional: dict[str, tuple[str, ...]]  # keras.ops function -> the parameters it takes positionally
    rules: tuple[dict[str, str], ...]  # rules/source.toml: code, title, what, why, fix (lint's codes, SARIF)
    calls: dict[str, dict[str, Any]]  # rules/source.toml [[call]]: Keras 3 name -> rename / drop (rules.keras_calls)
    add_weight: dict[str, tuple[str, ...]]  # rules/source.toml [add_weight] (rules.add_weight_orders)
    k_removed: dict[str, str] = dataclasses.field(default_factory=dict)  # optable.backend_removed

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(sorted(r["code"] for r in self.rules))


@cache
def key() -> str:
    """A digest of the tables' sources: the rules data, the code that builds them, the version. CRC-32 and
    Adler-32 (zlib is loaded at start-up already, hashlib's OpenSSL is not): enough to notice an edit."""
    data = [__version__.encode()]
    for path in (*(rules_dir() / n for n in SOURCES), *(PACKAGE_DIR / n for n in CODE)):
        try:
            data.append(path.read_bytes())
        except OSError:
            data.append(b"-")
    return digest(b"\0".join(data))


def digest(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{len(data) & 0xFFFF:04x}"


def build() -> dict[str, Any]:
    """The tables as JSON-ready data, from rules/ (validated by optable as it indexes them)."""
    from k2to3.core.rules import add_weight_orders, keras_calls, source_rules

    optable.by_tf_name(), optable.by_backend_name()  # duplicate names raise here, not in a cached copy
    ops = [{k: v for k, v in e.items() if k not in UNUSED} for e in optable.raw_table()["op"]]
    sigs = json.loads((rules_dir() / "keras3_ops_signatures.json").read_text())["ops"]
    return {
        "ops": ops,
        "tf_aliases": optable.tf_aliases(),
        "config": optable.config_aliases(),
        "tf_moved": optable.tf_moved(),
        "obsolete": optable.backend_obsolete(),
        "k_removed": optable.backend_removed(),
        "indexed": optable.backend_indexed(),
        "positional": {name: s["positional"] for name, s in sigs.items()},
        "rules": [{"code": r.code, "title": r.title, "what": r.what, "why": r.why, "fix": r.fix}
                  for r in source_rules()],
        "calls": keras_calls(),
        "add_weight": add_weight_orders(),
    }


def _index(entries: list[optable.OpEntry], field: str) -> dict[str, optable.OpEntry]:
    return {n: e for e in entries for n in getattr(e, field)}


def from_data(data: dict[str, Any]) -> LintTables:
    entries = []
    for raw in data["ops"]:
        e = dict(raw)
        for k in optable.TUPLE_FIELDS:
            if k in e:
                e[k] = tuple(e[k])
        entries.append(optable.OpEntry(**e))
    by_tf = _index(entries, "tf")
    aliases = data["tf_aliases"]
    return LintTables(
        by_tf=by_tf, by_k=_index(entries, "k"), tf_aliases=aliases,
        tf_known=frozenset(by_tf.keys() | set(aliases.values())), config=data["config"],
        tf_moved=data.get("tf_moved", {}),
        obsolete={k: (v[0], v[1]) for k, v in data["obsolete"].items()}, indexed=data.get("indexed", {}),
        positional={k: tuple(v) for k, v in data["positional"].items()},
        rules=tuple(data["rules"]), calls=data["calls"],
        add_weight={k: tuple(v) for k, v in data["add_weight"].items()}, k_removed=data.get("k_removed", {}))


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("key") == path.stem else None




@cache
def lint_tables() -> LintTables:
    k = key()
    path = cache_dir() / "tables" / f"{k}.json"
    data = _load(path)
    if data is None:
        data = {"key": k, **build()}
        store_json(path, data)
    return from_data(data)
