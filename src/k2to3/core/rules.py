"""Load the reviewed rule tables in rules/*.toml (pure data, no keras)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from k2to3.core.paths import rules_dir


@dataclass(frozen=True)
class Rule:
    code: str
    title: str
    action: str
    fm: str = ""
    classes: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    require: dict[str, Any] = field(default_factory=dict)
    to: str | None = None
    portable: bool = False
    set: dict[str, Any] = field(default_factory=dict)
    from_: str | None = None
    to_portable: str | None = None
    builtin: str | None = None
    rename: dict[str, Any] = field(default_factory=dict)  # keras1.toml: old key -> new key
    fixable: bool = False
    safety: str = "safe"
    fixture: str | None = None
    what: str = ""
    why: str = ""
    before: str = ""
    after: str = ""
    fix: str = ""
    unblock: str = ""  # the one action that unblocks an artifact this rule blocks (the audit's top blockers)
    warning: str = ""  # rename_class: what the rename changes, said as a warning on every layer it applies to


_ACTIONS = {"drop_keys", "keep_keys", "rename_class", "map_value", "builtin", "source", "keras1"}


def _rule(raw: dict[str, Any], source: Path) -> Rule:
    data = dict(raw)
    if "from" in data:
        data["from_"] = data.pop("from")
    for key in ("classes", "keys"):
        if key in data:
            data[key] = tuple(data[key])
    try:
        rule = Rule(**data)
    except TypeError as exc:
        raise ValueError(f"{source}: rule {raw.get('code')}: {exc}") from None
    if rule.action not in _ACTIONS:
        raise ValueError(f"{source}: rule {rule.code}: unknown action {rule.action!r}")
    return rule


@cache
def layer_rules() -> tuple[Rule, ...]:
    path = rules_dir() / "layers.toml"
    import tomllib  # lint and fix read core.tables' JSON instead

    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    rules = tuple(_rule(r, path) for r in raw["rule"])
    codes = [r.code for r in rules]
    if len(codes) != len(set(codes)):
        raise ValueError(f"{path}: duplicate rule codes")
    return rules


@cache
def source_rules() -> tuple[Rule, ...]:
    path = rules_dir() / "source.toml"
    import tomllib  # lint and fix read core.tables' JSON instead

    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    return tuple(_rule(r, path) for r in raw["rule"])


@cache
def keras_calls() -> dict[str, dict[str, Any]]:
    """rules/source.toml [[call]]: Keras 3 name -> {"rename": {old: new}, "drop": [keywords]}."""
    import tomllib

    with open(rules_dir() / "source.toml", "rb") as fh:
        raw = tomllib.load(fh)
    return {c["name"]: {"rename": dict(c.get("rename", {})), "drop": list(c.get("drop", []))}
            for c in raw.get("call", [])}


@cache
def add_weight_orders() -> dict[str, tuple[str, ...]]:
    """rules/source.toml [add_weight]: "keras_2_0" and "keras_2" positional orders of Layer.add_weight."""
    import tomllib

    with open(rules_dir() / "source.toml", "rb") as fh:
        return {k: tuple(v) for k, v in tomllib.load(fh)["add_weight"].items()}


@cache
def keras1_rules() -> tuple[Rule, ...]:
    """Keras 1.x -> Keras 2 layer-config translation (rules/keras1.toml)."""
    path = rules_dir() / "keras1.toml"
    import tomllib  # lint and fix read core.tables' JSON instead

    with open(path, "rb") as fh:
        raw = tomllib.load(fh)
    return tuple(_rule(r, path) for r in raw["rule"])


def rule(code: str) -> Rule:
    for r in (*layer_rules(), *source_rules(), *keras1_rules()):
        if r.code == code:
            return r
    raise KeyError(code)


def builtin_code(name: str) -> str:
    for r in layer_rules():
        if r.builtin == name:
            return r.code
    raise KeyError(name)


@cache
def library_classes() -> dict[str, tuple[tuple[str, str], ...]]:
    """rules/libraries.toml: a class name a Keras 2 layer library defines -> ((pip package, import name), ...)."""
    import tomllib

    with open(rules_dir() / "libraries.toml", "rb") as fh:
        raw = tomllib.load(fh)
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for lib in raw["library"]:
        for cls in lib["classes"]:
            out[cls] = (*out.get(cls, ()), (lib["package"], lib["module"]))
    return out


def library_hint(cls: str) -> str | None:
    """What to pass for a class a known library defines: "CRF is keras-contrib's (pass its source: --src
    keras_contrib, ...)"; None for a class no listed library defines."""
    libs = library_classes().get(cls)
    if not libs:
        return None
    names = " or ".join(p for p, _ in libs)
    return (f"{cls} is {names}'s: pass that library's source with --src ({', '.join(f'--src {m}' for _, m in libs)}"
            " when it is installed, or the folder of its checkout)")


@cache
def keras3_layer_required() -> dict[str, frozenset[str]]:
    """keras.layers.<Class> -> the constructor parameters it requires (rules/keras3_layer_required.txt)."""
    out: dict[str, frozenset[str]] = {}
    for line in (rules_dir() / "keras3_layer_required.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, params = line.split("\t")
            out[name] = frozenset(params.split(","))
    return out


@cache
def keras3_layer_params() -> dict[str, frozenset[str]]:
    """keras.layers.<Class> -> the keywords its constructor names (rules/keras3_signatures.txt), for classes whose
    constructor takes **kwargs only for the base Layer's."""
    out: dict[str, frozenset[str]] = {}
    for line in (rules_dir() / "keras3_signatures.txt").read_text().splitlines():
        if line.startswith("keras.layers.") and line.count("\t") == 3:
            name, pos, kw, _ = line.split("\t")
            out[name.removeprefix("keras.layers.")] = frozenset(
                ([] if pos == "-" else pos.split(",")) + ([] if kw == "-" else kw.split(",")))
    return out


@cache
def keras3_layers() -> frozenset[str]:
    """Class names of keras.layers in the Keras 3 version the rules were reviewed against."""
    lines = (rules_dir() / "keras3_layers.txt").read_text().splitlines()
    return frozenset(x.strip() for x in lines if x.strip() and not x.startswith("#"))
