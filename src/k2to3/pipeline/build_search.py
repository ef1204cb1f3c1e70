"""Which --src function builds a weights-only file, and with which arguments: the candidates found statically
(source/build_candidates.py, best layer-name score first), each confirmed by building it with tf_keras in the tensorflow
worker and comparing the model's weight groups (layer order, shapes, names) with the file's. One full match is
taken and reported ("build_and_load_model(model_capacity='tiny') matched 13/13 weight groups"); several
functions matching, or none, stop with the candidates listed and the exact options that pick one (exit 2)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k2to3.errors import InputError, NotPortable
from k2to3.formats.artifact import LegacyArtifact
from k2to3.pipeline.sources import Sources
from k2to3.source.build_candidates import Builder, find_builders
from k2to3.source.buildargs import call_text, cli_text
from k2to3.source.script_builds import with_script_builds
from k2to3.upgrade.needed_code import module_name_for
from k2to3.workers.pool import Pool
from k2to3.workers.process import WorkerError
from k2to3.workers.protocol import ProbeBuildsRequest


@dataclass
class Chosen:
    fn: str
    build_args: dict[str, Any] | None
    match: dict[str, Any] | None  # report.json source.match; None when the user named function and arguments


def weight_groups(artifact: LegacyArtifact) -> list[dict[str, Any]]:
    """The file's layers with weights in order, each with its weights' shapes (the safe h5 reader's view)."""
    return [{"name": n, "shapes": [list(e.shape) for e in artifact.weights[n]]}
            for n in artifact.layer_names if artifact.weights.get(n)]


def add_script_builds(sources: Sources) -> None:
    """A weights-only file's --src scripts that build models with top-level statements: each such model becomes a
    build function of the index (source/script_builds.py), found, named and confirmed like any other."""
    if sources.index is None or sources.scripts:
        return
    sources.index, found = with_script_builds(sources.index)
    sources.scripts = {b.fn: b.label for b in found}


def needs_search(sources: Sources, artifact: LegacyArtifact | None) -> bool:
    """A weights-only file (None: a TF checkpoint) with --src but no function named, or a named one whose
    arguments are not given, or --build-args (confirmed before the build: a wrong value is one clear line)."""
    if (artifact is not None and artifact.model_config is not None) or sources.index is None:
        return False
    if sources.build_fn is None or sources.build_args is not None:
        return True
    found = find_builders(sources.index, [], None, only=sources.build_fn)
    return bool(found and found[0].required)


@dataclass(frozen=True)
class WeightFile:
    """A weights-only file as the build search matches it: its path and weight groups (`weight_groups`, or a TF
    checkpoint's, whose shapes are sorted within a group: `order_free`)."""

    path: Path
    groups: list[dict[str, Any]]
    order_free: bool = False


def choose(sources: Sources, file: WeightFile, output: Path, work: Path, get_pool: Callable[[], Pool],
           progress: Callable[[str], None]) -> Chosen:
    """The build function (and arguments) of the --src files whose model has `file`'s weight groups."""
    assert sources.index is not None
    weights, groups, order_free = file.path, file.groups, file.order_free
    found = find_builders(sources.index, [g["name"] for g in groups], weights, only=sources.build_fn, groups=groups)
    if not found:
        raise NotPortable(f"{weights}: a weights-only file and no function of the --src files builds a Keras model "
                          "(calls Model(...) or Sequential(...))",
                          hint="pass the source of the model's build function: --src FILE.py:FUNCTION")
    unextracted: list[str] = []
    candidates = _candidates(found, sources, output, work, unextracted)
    tried: list[dict[str, Any]] = []
    for score in sorted({b.score for b in found}, reverse=True):  # a better name score is probed first
        batch = [c for c in candidates if c["score"] == score]
        if not batch:
            continue
        progress(f"building {len(batch)} candidate(s) with tf_keras to match the file's {len(groups)} weight groups")
        try:
            reply = get_pool().get("tensorflow").call(ProbeBuildsRequest(candidates=batch, groups=groups,
                                                                         order_free=order_free))
        except WorkerError as exc:
            raise NotPortable(f"{weights}: building the candidates failed: {exc.message}",
                              hint="pass --src FILE.py:FUNCTION --build-args ...") from None
        tried += reply["tried"]
        full = [t for t in reply["tried"] if t["full"]]
        if len(full) > 1 and len({(t["fn"].split(".")[0], repr(t["build_args"])) for t in full}) == 1:
            # methods of one class whose __init__ already built the model: the same arguments and the same model
            # picked from the instance, so one builder, the class itself
            cls = full[0]["fn"].split(".")[0]
            label = full[0].get("label")
            full = [{**full[0], "fn": cls, "label": label.split(").")[0] + ")" if label else None}]
        if len(full) == 1:
            return Chosen(full[0]["fn"], full[0]["build_args"], _match(full[0], len(tried)))
        if len(full) > 1:
            raise InputError(f"{weights}: {len(full)} build functions match its {len(groups)} weight groups: "
                             + "; ".join(f"{_pick(t)} ({t['where']})" for t in full),
                             hint="pick one with the --src and --build-args shown")
    _stop_on_missing_import(weights, tried)
    raise InputError(f"{weights}: no candidate build matches its {len(groups)} weight groups; tried "
                     + "; ".join([*unextracted[:2], _tried_text(tried, found if sources.build_args is None else [])]),
                     hint="pass --src FILE.py:FUNCTION --build-args \"NAME=VALUE, ...\" with the values it was "
                     "saved with")


# the stand-in source.imports.stand_in writes for a name imported from a package that is not installed
_STAND_IN = re.compile(r"(\w+) \(imported from ([\w.]+) at (.+?)\) is needed by this build")


def _stop_on_missing_import(weights: Path, tried: list[dict[str, Any]]) -> None:
    """A build that ran into a stand-in (anago's CRF with use_crf=True, `from anago.layers import CRF` without
    anago): the one thing to say is which name it needs and where it comes from."""
    for t in tried:
        m = _STAND_IN.search(t.get("error", ""))
        if m:
            name, module, where = m.groups()
            raise InputError(f"{weights}: {_call(t)} calls {name}, imported from {module} ({where}), which is "
                             "neither installed nor in the --src files",
                             hint=f"pass the file that defines {name} as another --src")


def _candidates(found: list[Builder], sources: Sources, output: Path, work: Path,
                unextracted: list[str]) -> list[dict[str, Any]]:
    """One Keras 2 module per function (its closure hoisted from the --src files), one entry per argument set."""
    from k2to3.source.resolve_files import resolve_in_files  # libcst: only a search pays for it

    assert sources.index is not None
    out = []
    for i, b in enumerate(found):
        combos = [sources.build_args] if sources.build_args is not None else b.combos()
        if not combos:
            continue
        res = resolve_in_files(sources.index, None, None, module_name_for(output.stem), b.fn,
                               bound=dict.fromkeys(b.bound))  # set by the worker before each build
        if res.errors:  # said in the no-match line: the builder may be the right one
            unextracted.append(f"{b.fn} at {b.where} (its names give {b.score} of the groups) cannot be extracted: "
                               f"{res.errors[0].message}")
            continue
        unextracted += [f.message for f in res.findings if f.severity == "warning" and STAND_IN_WORDS in f.message
                        and f.message not in unextracted]
        k2 = work / f"_k2to3_probe{i}_{res.module}.py"
        k2.write_text(res.k2_code)
        out += [{"fn": b.fn, "where": b.where, "score": b.score, "k2_module": str(k2),
                 "src": b.where.rsplit(":", 1)[0],
                 "label": None if sources.build_args is not None else b.label(c) or sources.scripts.get(b.fn),
                 "build_args": c if sources.build_args is not None else _split(c, b.bound),
                 "unvalued": [] if sources.build_args is not None else [f"{g} {b.why[g]}" for g in b.bound
                                                                          if g not in c],  # left None
                 "how": {} if b.label(c) else {p: o for p, v in c.items()
                                               if sources.build_args is None and (o := b.origin(p, v))}}
                for c in combos]
    return out


STAND_IN_WORDS = "is not rewritten for Keras 3"  # source/hoist.py's warning for a stand-in definition


def _split(combo: dict[str, Any], bound: list[str]) -> dict[str, Any]:
    """A combination of values as build_args: the function's arguments, and the module names set before the call."""
    out: dict[str, Any] = {"args": [], "kwargs": {k: v for k, v in combo.items() if k not in bound}}
    if any(k in bound for k in combo):
        out["globals"] = {k: v for k, v in combo.items() if k in bound}
    return out


def _pick(t: dict[str, Any]) -> str:
    args = cli_text(t["build_args"])
    return f"--src {t['src']}:{t['fn']}" + (f" --build-args \"{args}\"" if args else "")


def _call(t: dict[str, Any]) -> str:
    return t.get("label") or call_text(t["fn"], t["build_args"])


def _match(t: dict[str, Any], n_tried: int) -> dict[str, Any]:
    call = _call(t)
    kwargs = {**t["build_args"].get("kwargs", {}), **(t["build_args"].get("globals") or {})}
    how = "".join(f"; {p}{'=' + repr(kwargs[p]) if isinstance(kwargs.get(p), (int, float, str, type(None))) else ''}"
                  f"{'' if w.startswith('as ') else ' from'} {w}" for p, w in (t.get("how") or {}).items())
    cudnn = f"; {t['cudnn']} in the cuDNN layout" if t.get("cudnn") else ""
    return {"call": call, "values_from": t.get("how") or {}, "cudnn_layout": t.get("cudnn") or None,
            "source": t["where"], "groups": t["groups"], "shapes_match": t["shapes_match"],
            "names_match": t["names_match"], "builds_tried": n_tried,
            "summary": f"{call} matched {t['shapes_match']}/{t['groups']} weight groups "
                       f"({t['names_match']} by name too; {n_tried} build(s) tried{how}{cudnn})"}


def _tried_text(tried: list[dict[str, Any]], found: list[Builder]) -> str:
    """What was tried; a builder no value was found for comes first when its name score is as good as the tried
    ones' (it may be the one that built the file)."""
    best = max((t["score"] for t in tried), default=-1)
    unvalued = [b for b in found if b.missing]
    ahead = [b for b in unvalued if b.score >= best][:3]
    parts = [_missing_text(b) for b in ahead]
    for t in tried[:6]:
        got = _failed(t) if "error" in t else (f"{t['shapes_match']}/{t['groups']} groups match, {t['built_groups']} "
                                               "built" + (f" (first: {t['first_difference']})"
                                                          if t.get("first_difference") else ""))
        parts.append(f"{_call(t)}: {got}")
    parts += [_missing_text(b) for b in unvalued if b not in ahead][:2]
    return "; ".join(parts[:6]) or "nothing"


def _failed(t: dict[str, Any]) -> str:
    """A build that raised: first what the search could not give it (a module name the sources compute when they
    run, left None: K2T906), the build's own error after (`outputs * upper_bound` fails inside a TFOpLambda)."""
    if not t.get("unvalued"):
        return t["error"]
    return (f"{'; '.join(t['unvalued'])} (K2T906) and no value was found for it (it is not a size the weight shapes "
            f"give), so the build failed: {t['error']}")


def _missing_text(b: Builder) -> str:
    return (f"{b.fn}({', '.join(b.params)}) at {b.where} (its names give {b.score} of the groups): no value found "
            f"for {', '.join(b.missing)}")
