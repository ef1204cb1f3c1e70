"""The facts of an audit report a migration lead acts on, derived from run_audit's rows (pure data, no keras):
summary counts, top blockers with the action that unblocks them, per-artifact next command and evidence,
per-source-file effort. The JSON, Markdown and HTML forms all render this one model."""

from __future__ import annotations

import os
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from k2to3.core import ruledocs
from k2to3.core import rules as rules_mod
from k2to3.stores import targets

SCHEMA = "k2to3.audit/2"
VERDICTS = ("portable", "portable with source", "tf-only", "blocked")

# Blocking causes that are not rules: what unblocks them (rule causes take `unblock` from rules/*.toml).
ACTIONS = {
    "with-source": "Run the artifact's convert command: it passes the tree's files that define its code with `--src`.",
    "weights-only": "Find the function that builds the model and run `k2to3 convert FILE -o OUT.keras "
                    "--src SCRIPT.py:FUNCTION`.",
    "archive-lambda": "Load the model in Keras 2 and save it as .h5 (`model.save('model.h5')`), then convert it "
                      "with the training script as `--src`.",
    "unreadable": "Copy the file again from its source (it is truncated, corrupt or not written by Keras).",
}
_CODE = re.compile(r"\b(K2T\d{3})\b")
_CLASS = re.compile(r"class '([^']+)'")


def audit_root(paths: list[str]) -> Path:
    """The directory artifact paths are shown relative to: the one audited directory, else their common parent."""
    dirs = [Path(p) if Path(p).is_dir() else Path(p).parent for p in paths] or [Path(".")]
    try:
        return Path(os.path.commonpath([os.path.abspath(d) for d in dirs]))
    except ValueError:  # different drives
        return Path(os.path.abspath(dirs[0]))


def relpath(path: str, root: Path) -> str:
    p = os.path.abspath(path)  # not resolve(): no symlink walk per row of a 10,000-artifact store
    r = str(root)
    return p[len(r):].lstrip(os.sep) if p.startswith(r.rstrip(os.sep) + os.sep) else str(path)


def causes(a: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    """(cause key, rule code or None, label) of what stands between an artifact and `convert`."""
    verdict, reason = a["verdict"], a.get("reason", "")
    if verdict == "portable":
        return []
    if verdict == "portable with source":
        return [("with-source", "K2T907", "custom code found in the tree (convert with --src)")]
    if verdict == "tf-only":
        op = reason.split(" ")[0] if reason.startswith("tf.") else None
        return [(f"K2T904:{op or ''}", "K2T904", f"TF-only op {op}" if op else "TF-only op")]
    needs = a.get("needs") or []
    if a.get("kind") in ("zip", "savedmodel") and any(n.get("code") in ("K2T901", "K2T903") for n in needs):
        return [("archive-lambda", "K2T901", "Lambda in a .keras archive or SavedModel")]  # --src cannot help
    out: list[tuple[str, str | None, str]] = []
    for n in needs:
        code, obj = n.get("code"), n.get("object")
        label = {"K2T901": "Lambda bytecode with no matching source", "K2T902": f"unknown class {obj}",
                 "K2T903": f"custom function {obj}"}.get(code, _title(code))
        out.append((f"{code}:{obj or ''}", code, label))
    if out:
        return list(dict.fromkeys(out))
    if "weights-only" in reason:
        return [("weights-only", None, "weights-only file (no model config)")]
    if "Lambda" in reason and ("archive" in reason or "SavedModel" in reason):
        return [("archive-lambda", "K2T901", "Lambda in a .keras archive or SavedModel")]
    m = _CODE.match(reason)
    if m:
        cls = _CLASS.search(reason)
        return [(f"{m.group(1)}:{cls.group(1) if cls else ''}", m.group(1),
                 f"unknown class {cls.group(1)}" if m.group(1) == "K2T902" and cls else _title(m.group(1)))]
    return [("unreadable", None, "unreadable or not understood file")]


def _title(code: str | None) -> str:
    try:
        return rules_mod.rule(code).title if code else "?"
    except KeyError:
        return code or "?"


def _action(key: str, code: str | None) -> str:
    base = key.split(":", 1)[0]
    if base in ACTIONS:
        return ACTIONS[base]
    try:
        r = rules_mod.rule(code) if code else None
    except KeyError:
        r = None
    return (r.unblock or r.fix) if r else ACTIONS["unreadable"]


def _out_name(rel: str) -> str:
    p = Path(rel)
    return str(p.with_name(p.stem + "_k3.keras")) if p.suffix else str(p) + "_k3.keras"


def next_command(a: dict[str, Any], rel: str, root: Path) -> str | None:
    """The command that converts the artifact, run from the audited root; None while it is blocked."""
    base = f"k2to3 convert {shlex.quote(rel)} -o {shlex.quote(_out_name(rel))}"
    if a["verdict"] in ("portable", "tf-only"):
        return base
    if a["verdict"] == "portable with source":
        files = a.get("src") or sorted({n["source"].rsplit(":", 1)[0] for n in a.get("needs") or [] if n.get("source")})
        return base + "".join(f" --src {shlex.quote(relpath(f, root))}" for f in files)
    if "weights-only" in a.get("reason", ""):
        return base + " --src SCRIPT.py:BUILD_FUNCTION"
    return None


def custom_sources(a: dict[str, Any], root: Path) -> list[str]:
    """path:line (relative to the audited root) of each definition the artifact's custom objects come from."""
    found = [o.get("source") for o in a.get("source_objects") or []] + [n.get("source") for n in a.get("needs") or []]
    out = []
    for s in dict.fromkeys(s for s in found if s):
        path, _, line = s.rpartition(":")
        out.append(f"{relpath(path, root)}:{line}" if path and line.isdigit() else s)
    return out


def _worst_error(v: dict[str, Any]) -> float | None:
    errs = [b.get("max_abs") for b in (v.get("backends") or {}).values() if b.get("max_abs") is not None]
    return max(errs) if errs else None


def optimizer_state(a: dict[str, Any]) -> dict[str, Any] | None:
    """Whether the artifact's optimizer state travels: the verified `optimizer` section of its convert when
    --verify ran, else the static read of its optimizer_weights (full-model HDF5 only; None otherwise)."""
    found, evidence = (a.get("verify") or {}).get("optimizer"), "verified"
    if not found:
        found, evidence = a.get("optimizer"), "static"
    if not found:
        return None
    out = {**found, "evidence": evidence}
    if out.get("reason"):  # the report names the artifact already
        out["reason"] = out["reason"].removeprefix(f"{a['path']}: ")
    return out


def optimizer_text(o: dict[str, Any] | None) -> str:
    """One cell: `restored: Adam, step 3, 4/4 slots (verified)`, `none`, `dropped: <reason> (static)`."""
    if not o:
        return ""
    if o["status"] == "restored":
        cls = f"{o['class_name']} in a LossScaleOptimizer" if o.get("loss_scale") or o.get("keras3_class") == \
            "LossScaleOptimizer" else o.get("class_name")
        what = ", ".join(x for x in (cls, f"step {o['iteration']}" if o.get("iteration") is not None
                                     else None, f"{o['slots_restored']}/{o['slots_expected']} slots"
                                     if o.get("slots_expected") is not None else None) if x)
        return f"restored: {what} ({o['evidence']})"
    if o["status"] == "none":
        return "none"
    return f"{o['status']}: {o.get('reason') or '?'} ({o['evidence']})"


def cited_rules(blockers: list[dict[str, Any]], arts: list[dict[str, Any]], files: list[dict[str, Any]],
                rule_totals: dict[str, int]) -> list[dict[str, Any]]:
    """The docs (shipped rule data, core/ruledocs.py) of every rule code the report shows: blockers, per-artifact
    rules and reasons, per-file rules, totals. The report's `#k2t901` links point to these entries."""
    codes = {b["code"] for b in blockers if b["code"]} | set(rule_totals)
    codes |= {c for f in files for c in (r["code"] for r in f["rules"])}
    for a in arts:
        codes.update(a.get("rules") or {})
        codes.update(_CODE.findall(a.get("reason") or ""))
    docs = ruledocs.rule_docs()
    return [docs[c].to_dict() for c in sorted(codes) if c in docs]


def build(rep: dict[str, Any]) -> dict[str, Any]:
    """The report model: run_audit's report with the schema-2 fields added (summary, blockers, source_files and
    per-artifact relpath, evidence, worst_error, next, custom_sources, causes, effort, targets; rules: the docs of
    the codes it cites)."""
    documented = ruledocs.rule_docs()
    root = audit_root(rep["paths"])
    arts = []
    blockers: dict[str, dict[str, Any]] = {}
    for a in rep["artifacts"]:
        rel = relpath(a["path"], root)
        v = a.get("verify")
        cs = causes(a)
        row = {**a, "relpath": rel, "evidence": "verified" if v else "static",
               "worst_error": _worst_error(v) if v else None, "next": next_command(a, rel, root),
               "custom_sources": custom_sources(a, root), "causes": [k for k, _, _ in cs], "effort": len(cs),
               "optimizer_state": optimizer_state(a), "targets": targets.merged(a)}
        arts.append(row)
        for key, code, label in cs:
            b = blockers.setdefault(key, {"cause": key, "code": code, "label": label, "artifacts": 0,
                                          "docs": f"#{ruledocs.anchor(code)}" if code in documented else None,
                                          "action": _action(key, code), "examples": []})
            b["artifacts"] += 1
            if len(b["examples"]) < 3:
                b["examples"].append(rel)
    fixable_by_file = rep.get("sources_fixable", {})
    files = []
    for path, counts in rep["sources"].items():
        fx = fixable_by_file.get(path, {})
        n, nf = sum(counts.values()), sum(fx.values())
        files.append({"path": path, "relpath": relpath(path, root), "findings": n, "fixable": nf, "left": n - nf,
                      "rules": [{"code": c, "title": _title(c), "n": k, "fixable": fx.get(c, 0)}
                                for c, k in sorted(counts.items(), key=lambda x: (-x[1], x[0]))],
                      "command": f"k2to3 fix --diff {shlex.quote(relpath(path, root))}"})
    files.sort(key=lambda f: (-f["left"], -f["findings"], f["relpath"]))
    n_find = sum(f["findings"] for f in files)
    n_fix = sum(f["fixable"] for f in files)
    verdicts = Counter(a["verdict"] for a in arts)
    verified = [a for a in arts if a["evidence"] == "verified"]
    summary = {
        "artifacts": len(arts), "verdicts": {v: verdicts.get(v, 0) for v in VERDICTS},
        "verified": len(verified), "predicted": len(arts) - len(verified),
        "verified_verdicts": dict(Counter(a["verify"]["verdict"] for a in verified)),
        "source_files": rep["n_source_files"], "findings": n_find, "fixable": n_fix, "needs_person": n_find - n_fix,
        "files_to_touch": len(files), "files_left_after_fix": sum(1 for f in files if f["left"]),
        "findings_left_after_fix": n_find - n_fix, "noqa_debt": rep["noqa_debt"],
        "optimizer_states": dict(Counter(a["optimizer_state"]["status"] for a in arts if a["optimizer_state"])),
        "skipped": len(rep.get("skipped") or []),
    }
    ranked = sorted(blockers.values(), key=lambda b: (-b["artifacts"], b["cause"]))
    return {**rep, "schema": SCHEMA, "root": str(root), "summary": summary, "blockers": ranked,
            "artifacts": arts, "source_files": files, "rules": cited_rules(ranked, arts, files, rep["rule_totals"]),
            "skipped": [{**x, "relpath": relpath(x["path"], root)} for x in rep.get("skipped") or []]}
