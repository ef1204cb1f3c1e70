"""The config dialect of an older Keras 3 (`convert --target-keras 3.N`), from rules/keras_versions.toml: which keys
a release after 3.N writes, and whether a file for 3.N drops them (their value is what 3.N computes) or stops (3.N
cannot express them). Pure data: no keras import."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any

import tomllib

from k2to3.core.rules import rules_dir
from k2to3.errors import InputError, NotPortable

Version = tuple[int, int]


def parse_version(text: str) -> Version:
    m = re.fullmatch(r"3\.(\d+)(?:\.\d+)?", text.strip())
    if not m:
        raise InputError(f"--target-keras {text}: not a Keras 3 release", hint="e.g. --target-keras 3.8")
    return 3, int(m.group(1))


def current_version() -> Version:
    """The Keras k2to3 writes with (read from its metadata: the parent never imports keras)."""
    return parse_version(".".join(metadata.version("keras").split(".")[:2]))


def show(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def check_target(text: str) -> Version:
    target, now = parse_version(text), current_version()
    if target > now:
        raise InputError(f"--target-keras {text}: newer than the Keras k2to3 writes with ({show(now)})",
                         hint=f"choose 3.0 ... {show(now)}")
    return target


@dataclass(frozen=True)
class VersionRule:
    code: str
    title: str
    scope: str
    classes: tuple[str, ...]
    keys: tuple[str, ...]
    added: Version
    action: str
    defaults: dict[str, Any]
    to: str | None
    what: str
    why: str
    before: str
    after: str
    fix: str


@dataclass(frozen=True)
class ExportStop:
    """What an export format is known not to take, as the audit predicts it from a config (`[[export_stop]]`)."""
    code: str
    title: str
    format: str
    when: str  # op | dtype_policy | variable_length_rnn
    values: tuple[str, ...]
    measured: str
    what: str
    why: str
    before: str
    after: str
    fix: str


@dataclass(frozen=True)
class EnvSpec:
    backend: str
    packages: tuple[str, ...]


def _table() -> dict[str, Any]:
    return tomllib.loads((rules_dir() / "keras_versions.toml").read_text())


@cache
def version_rules() -> tuple[VersionRule, ...]:
    out = []
    for r in _table()["rule"]:
        keys = tuple(r["keys"])
        raw = r.get("default")
        defaults = ({k: json.loads(raw[k]) for k in keys} if isinstance(raw, dict)
                    else {k: json.loads(raw) for k in keys} if raw is not None else {})
        out.append(VersionRule(code=r["code"], title=r["title"], scope=r["scope"], classes=tuple(r["classes"]),
                               keys=keys, added=parse_version(r["added"]), action=r["action"], defaults=defaults,
                               to=r.get("to"),
                               what=r["what"], why=r["why"], before=r["before"], after=r["after"], fix=r["fix"]))
    return tuple(out)


@cache
def export_stops() -> tuple[ExportStop, ...]:
    return tuple(ExportStop(code=r["code"], title=r["title"], format=r["format"], when=r["when"],
                            values=tuple(r["values"]), measured=r["measured"], what=r["what"], why=r["why"],
                            before=r["before"], after=r["after"], fix=r["fix"]) for r in _table()["export_stop"])


def candidate_targets(now: Version) -> list[Version]:
    """The releases a lowest target can be: 3.0, each release a rule names and each release whose layer keywords
    rules/keras_layer_params.json lists (between two of them the dialect does not change), up to `now`."""
    listed = {parse_version(r) for r in layer_params()["releases"]}
    return sorted(v for v in {(3, 0), *(r.added for r in version_rules()), *listed} if v <= now)


def env_spec(target: Version) -> EnvSpec:
    for e in _table()["env"]:
        if parse_version(e["min"]) <= target <= parse_version(e["max"]):
            return EnvSpec(backend=e["backend"], packages=tuple(e["packages"]))
    raise InputError(f"--target-keras {show(target)}: no worker environment is known for it",
                     hint="pass --target-python with an interpreter that has that keras")


@dataclass
class Change:
    code: str
    layer: str
    cls: str
    key: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "layer": self.layer, "class": self.cls, "key": self.key}


def downgrade_config(config: Any, target: Version) -> tuple[Any, list[Change]]:
    """config.json in the dialect `target` reads; the keys dropped. A key `target` cannot express stops."""
    rules = [r for r in version_rules() if r.scope == "config" and target < r.added]
    op_rules = [r for r in version_rules() if r.scope == "op" and target < r.added]
    changes: list[Change] = []

    def walk(node: Any, layer: str) -> Any:
        if isinstance(node, list):
            return [walk(v, layer) for v in node]
        if not isinstance(node, dict):
            return node
        inner = node.get("config")
        name = inner.get("name") if isinstance(inner, dict) and isinstance(inner.get("name"), str) else None
        here = name if name and "class_name" in node and not _is_object(node) else layer
        out = {k: walk(v, here) for k, v in node.items()}
        if isinstance(out.get("config"), dict) and isinstance(node.get("class_name"), str):
            out["config"] = _apply(out["config"], node["class_name"], here, rules, target, changes)
            if str(node.get("module", "")) == "keras.layers":
                out["config"] = _release_keys(out["config"], node["class_name"], here, target, changes)
            if str(node.get("module", "")).startswith("keras.src.ops"):
                out["config"] = _drop_op_keys(out["config"], here, node["class_name"], op_rules, changes)
            for r in rules:  # K2T707: a class an older release knows by another name
                if r.action == "rename-class" and node["class_name"] in r.classes and r.to:
                    changes.append(Change(r.code, here, node["class_name"], "class_name"))
                    out["class_name"] = r.to
        return out

    return walk(config, "model"), changes


def _is_object(node: dict[str, Any]) -> bool:
    """An initializer, regularizer, dtype policy ... rather than a layer: it names no layer of its own."""
    return str(node.get("module", "")).split(".")[-1] in {"initializers", "regularizers", "constraints", "keras"}


def _apply(config: dict[str, Any], cls: str, layer: str, rules: list[VersionRule], target: Version,
           changes: list[Change]) -> dict[str, Any]:
    for r in rules:
        if cls not in r.classes or r.action == "rename-class":
            continue
        for key in r.keys:
            if key not in config:
                continue
            if r.action == "translate":
                new = _translate(r, key, config[key], layer, target)
                if new != config[key]:
                    config = {**config, key: new}
                    changes.append(Change(r.code, layer, cls, key))
                continue
            if r.action == "drop-if-default" and config[key] == r.defaults.get(key):
                config = {k: v for k, v in config.items() if k != key}
                changes.append(Change(r.code, layer, cls, key))
                continue
            raise NotPortable(f"{r.code}: layer '{layer}' ({cls}) sets {key}={json.dumps(config[key])}, which Keras "
                              f"{show(target)} cannot express", hint=f"target Keras {show(r.added)} or later")
    return config


RELEASE_KEYS = "K2T709"  # a layer keyword a release does not take yet (rules/keras_layer_params.json)


@cache
def layer_params() -> dict[str, Any]:
    """rules/keras_layer_params.json (rules/make_keras_layer_params.py): each release's layer keywords, the newest
    release's defaults."""
    return json.loads((rules_dir() / "keras_layer_params.json").read_text())


def _release_keys(config: dict[str, Any], cls: str, layer: str, target: Version,
                  changes: list[Change]) -> dict[str, Any]:
    """K2T709: each key of a Keras layer's config that release `target` does not take: dropped when it holds the
    default the newest release computes (older releases compute that), else a stop naming the release that added
    it. Releases the data does not describe are left to the explicit rules."""
    data = layer_params()
    takes = data["releases"].get(show(target), {})
    if cls not in takes:
        return config
    accepted = set(takes[cls]) | set(takes.get("Layer", ()))
    for key in [k for k in config if k not in accepted and "*" not in accepted]:
        default = data["defaults"].get(cls, {}).get(key)
        try:
            at_default = default is not None and config[key] == ast.literal_eval(default)
        except (ValueError, SyntaxError):
            at_default = False
        if at_default:
            config = {k: v for k, v in config.items() if k != key}
            changes.append(Change(RELEASE_KEYS, layer, cls, key))
            continue
        added = next((r for r in sorted(data["releases"], key=parse_version)
                      if key in data["releases"][r].get(cls, ())), None)
        raise NotPortable(f"{RELEASE_KEYS}: layer '{layer}' ({cls}) sets {key}={json.dumps(config[key])}, which Keras "
                          f"{show(target)} does not take" + (f" (added in Keras {added})" if added else ""),
                          hint=f"target Keras {added} or later" if added else "re-save the model without it")
    return config


def _drop_op_keys(config: dict[str, Any], layer: str, cls: str, rules: list[VersionRule],
                  changes: list[Change]) -> dict[str, Any]:
    for r in rules:
        for key in r.keys:
            if key in config:
                config = {k: v for k, v in config.items() if k != key}
                changes.append(Change(r.code, layer, cls, key))
    return config


def _is_leaf(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 3 and isinstance(v[0], str)


def _translate(r: VersionRule, key: str, value: Any, layer: str, target: Version) -> Any:
    """K2T706: Keras <= 3.3 reads a list or dict of tensor references, never a bare one or a nested structure."""
    if _is_leaf(value):
        return [value]
    leaves = value.values() if isinstance(value, dict) else value
    if all(_is_leaf(v) for v in leaves):
        return value
    raise NotPortable(f"{r.code}: model '{layer}' has a nested {key} structure, which Keras {show(target)} cannot "
                      "express", hint=f"target Keras {show(r.added)} or later")


def check_weight_paths(paths: list[str], target: Version) -> None:
    """Weights Keras `target` would not load (it skips their group) stop the conversion."""
    for r in version_rules():
        if r.scope != "weights" or target >= r.added:
            continue
        for p in paths:
            if any(part in r.keys or (part.rsplit("_", 1)[0] in r.keys and part.rsplit("_", 1)[-1].isdigit())
                   for part in p.split("/")):
                raise NotPortable(f"{r.code}: weights at '{p}' are of sublayers in a nested container, which Keras "
                                  f"{show(target)} does not load", hint=f"target Keras {show(r.added)} or later")
