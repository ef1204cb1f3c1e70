"""Every rule code's documentation (what, why, example, fix) from the reviewed rules/*.toml, as `k2to3 rule` prints
it and the reports carry it. rules/ ships inside the wheel as k2to3/rules (core.rules.rules_dir), so nothing here
reads docs/, which only a checkout has. Pure data: no keras, no numpy."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

import tomllib

from k2to3.core.keras_versions import export_stops, show, version_rules
from k2to3.core.rules import Rule, keras1_rules, layer_rules, rules_dir, source_rules

CODE = re.compile(r"\bK2T\d{3}\b")
OPTIMIZER_STATUSES = {"translated", "portable", "finding", "same"}


@cache
def optimizer_rules() -> tuple[dict[str, Any], ...]:
    """rules/optimizers.toml (the K2T6xx optimizer and training rules), validated."""
    path = rules_dir() / "optimizers.toml"
    with open(path, "rb") as fh:
        rules = tuple(tomllib.load(fh)["rule"])
    for r in rules:
        missing = {"code", "title", "optimizer", "status", "what", "why", "before", "after", "fix"} - set(r)
        if missing or r["status"] not in OPTIMIZER_STATUSES:
            raise ValueError(f"{path}: rule {r.get('code')}: missing {sorted(missing)} or bad status")
    if len({r["code"] for r in rules}) != len(rules):
        raise ValueError(f"{path}: duplicate rule codes")
    return rules


def where(r: Rule) -> str:
    """Which command reports or applies the rule (docs/rules.md's line under each heading)."""
    if r.action == "source":
        return "source: `k2to3 lint`" + (", fixed by `k2to3 fix`" if r.fixable else "")
    return f"artifact: `k2to3 convert`, {r.fm}"


@dataclass(frozen=True)
class RuleDoc:
    code: str
    title: str
    where: str  # the command that reports or applies it, and the failure mode
    safety: str  # fix safety (safe, conditional, manual); for optimizer rules their status
    what: str
    why: str
    before: str
    after: str
    fix: str
    unblock: str = ""  # what unblocks an artifact the rule blocks (audit)
    applies_to: tuple[str, ...] = ()  # layer classes
    file: str = ""  # the rules/*.toml file it comes from

    @property
    def safety_label(self) -> str:
        return "status" if self.file == "optimizers.toml" else "fix safety"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["applies_to"] = list(self.applies_to)
        d["more"] = f"k2to3 rule {self.code}"
        return d


def _from_rule(r: Rule, file: str) -> RuleDoc:
    return RuleDoc(r.code, r.title, where(r), r.safety, r.what, r.why, r.before, r.after, r.fix, r.unblock,
                   r.classes, file)


def _from_version(r: Any) -> RuleDoc:
    """A rules/keras_versions.toml rule (`convert --target-keras`); its full table is docs/keras-versions.md."""
    return RuleDoc(r.code, r.title, f"deployment: `k2to3 convert --target-keras 3.N` older than {show(r.added)}",
                   "safe" if r.action != "stop" else "manual", r.what, r.why, r.before, r.after, r.fix,
                   applies_to=r.classes, file="keras_versions.toml")


def _from_export(r: Any) -> RuleDoc:
    """A rules/keras_versions.toml `[[export_stop]]`: a stop `k2to3 audit` predicts for an export format."""
    return RuleDoc(r.code, r.title, f"deployment: `k2to3 export --format {r.format}` (predicted by `k2to3 audit`)",
                   "manual", r.what, r.why, r.before, r.after, r.fix, file="keras_versions.toml")


def _from_optimizer(r: dict[str, Any]) -> RuleDoc:
    return RuleDoc(r["code"], r["title"], f"optimizer and training: `k2to3 convert`, {r['optimizer']}", r["status"],
                   r["what"], r["why"], r["before"], r["after"], r["fix"], file="optimizers.toml")


@cache
def rule_docs() -> dict[str, RuleDoc]:
    """code -> doc for every rule of rules/{source,layers,keras1,optimizers,keras_versions}.toml, sorted by code."""
    docs = [*(_from_rule(r, "source.toml") for r in source_rules()),
            *(_from_rule(r, "layers.toml") for r in layer_rules()),
            *(_from_rule(r, "keras1.toml") for r in keras1_rules()),
            *(_from_optimizer(r) for r in optimizer_rules()),
            *(_from_version(r) for r in version_rules()),
            *(_from_export(r) for r in export_stops())]
    by = {d.code: d for d in docs}
    if len(by) != len(docs):
        raise ValueError(f"{rules_dir()}: a rule code is defined twice")
    return dict(sorted(by.items()))


def lookup(code: str) -> RuleDoc:
    """The doc of `code` (any case: k2t401 is K2T401); KeyError when no rule has it."""
    return rule_docs()[code.strip().upper()]


def cited(text: str) -> list[str]:
    """The documented rule codes `text` mentions, in code order."""
    docs = rule_docs()
    return sorted({c for c in CODE.findall(text) if c in docs})


def anchor(code: str) -> str:
    """The in-document anchor of a code's entry in a report's Rules section (a `### K2T401` heading's slug)."""
    return code.lower()


def markdown(d: RuleDoc) -> str:
    """The full entry, as `k2to3 rule CODE` prints it."""
    out = [f"# {d.code}: {d.title}", "", f"{d.where}; {d.safety_label}: {d.safety}", ""]
    if d.applies_to:
        out += ["Applies to: " + ", ".join(f"`{c}`" for c in d.applies_to) + ".", ""]
    out += [f"**What it does.** {d.what}", "", f"**Why.** {d.why}", ""]
    if d.before or d.after:
        out += ["**Before:**", "", "```", d.before, "```", "", "**After:**", "", "```", d.after, "```", ""]
    out += [f"**Fix.** {d.fix}"]
    if d.unblock:
        out += ["", f"**Unblock (audit).** {d.unblock}"]
    out += ["", f"From `rules/{d.file}` (shipped in the package as `k2to3/rules/{d.file}`)."]
    return "\n".join(out) + "\n"


def report_section(codes: list[str], level: int = 2) -> list[str]:
    """A report's self-contained Rules section (Markdown lines): one `### CODE` entry per cited code with its title,
    what, why and fix, so the report's `#k2t401` links resolve inside the report itself, wherever it is opened."""
    docs = rule_docs()
    codes = [c for c in codes if c in docs]
    if not codes:
        return []
    h = "#" * level
    lines = [f"{h} Rules", "", "The rules this report cites (from the rule data shipped with k2to3; the full entry "
             "with an example: `k2to3 rule CODE`)."]
    for c in codes:
        d = docs[c]
        lines += ["", f"{h}# {c}", "", f"**{d.title}** ({d.where})", "", f"**What.** {d.what}", "",
                  f"**Why.** {d.why}", "", f"**Fix.** {d.fix}", "", f"More: `k2to3 rule {c}`"]
    return lines
