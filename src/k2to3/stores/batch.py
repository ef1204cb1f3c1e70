"""`k2to3 convert STORE/ -o OUT/`: every artifact of a store converted to the mirrored path under OUT/.

Planning (here, no backend import): discover artifacts by content, resolve each one's sources as `audit`
does (the store's own .py files and `--src-root`), map it to OUT/<same path>.keras, and skip what the cache
says is finished (content hash + tool version + options + output path). The work itself (`convert_item`) runs
on an executor (executors/: the local warm pool or Ray) and the results come back here, where the cache,
the progress bar and the store-level report are written, so a result is recorded exactly once."""

from __future__ import annotations

import hashlib
import json
import posixpath
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from k2to3.core.options import BACKENDS, ConvertOptions
from k2to3.errors import Exit, InputError, K2to3Error
from k2to3.stores import locations as store
from k2to3.stores.audit import audit_report
from k2to3.stores.cache import BATCH_CACHE, StoreCache
from k2to3.stores.discover import discover
from k2to3.stores.static import source_locations, static_rows
from k2to3.stores.targets import converted_targets
from k2to3.stores.verify_store import backend_summary, optimizer_summary
from k2to3.version import __version__

# Conversion verdicts from best to worst, and each one's exit code (docs/exit-codes.md: batch convert).
OUTCOMES = ("parity", "tf_only", "not_portable", "mismatch", "invalid", "error")
OUTCOME_EXIT = {"parity": Exit.PARITY, "tf_only": Exit.NOT_PORTABLE, "not_portable": Exit.NOT_PORTABLE,
                "mismatch": Exit.MISMATCH, "invalid": Exit.USAGE, "error": Exit.INTERNAL}


def settings_digest(settings: dict[str, Any]) -> str:
    """What every artifact of a batch is converted with, as part of the cache key (the store options of
    core/options.py; max_memory changes no result)."""
    d = {"backends": list(settings.get("backends", BACKENDS)), "rtol": settings.get("rtol"),
         "atol": settings.get("atol"), "trust": settings.get("trust_bytecode", False)}
    # the deployment options change what is written (the dialect, an exported file): absent, the key is unchanged
    d |= {k: str(settings[k]) for k in ("export", "target_keras", "target_python") if settings.get(k) is not None}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def check_settings(opts: ConvertOptions) -> None:
    """The store options' own problems (an unknown backend, --export torch without torch, --target-python without
    --target-keras or with another release), once before the scan rather than once per artifact."""
    from k2to3.pipeline.convert import check_options

    check_options(opts)


def _deployed(rep: dict[str, Any]) -> dict[str, Any]:
    """What a store's result keeps of an artifact's --export and --target-keras sections."""
    e, t = rep.get("export"), rep.get("target")
    return {"export": {k: e.get(k) for k in ("format", "path", "status", "written", "max_abs", "error")} if e else None,
            "target": {k: t.get(k) for k in ("keras", "keras_version", "status", "error")} if t else None}


def _under(inner: Path, outer: Path) -> bool:
    inner, outer = inner.resolve(), outer.resolve()
    return inner == outer or outer in inner.parents


def check_locations(inputs: list[str], out_root: str) -> None:
    """OUT must not be, hold or sit inside an input: a rerun would re-read outputs or overwrite inputs."""
    for src in inputs:
        if not store.is_url(src) and not Path(src).exists():
            raise InputError(f"{src}: no such file or directory", hint="check the path")
        if store.is_url(src) != store.is_url(out_root):
            continue
        if store.is_url(src):
            a, b = src.rstrip("/") + "/", out_root.rstrip("/") + "/"
            clash = a.startswith(b) or b.startswith(a)
        else:
            clash = _under(Path(out_root), Path(src)) or _under(Path(src), Path(out_root))
        if clash:
            raise InputError(f"{out_root}: the output store overlaps the input {src}",
                             hint="write the converted tree outside the store, e.g. -o ../converted/")
    if not store.is_url(out_root) and Path(out_root).exists() and not Path(out_root).is_dir():
        raise InputError(f"{out_root}: exists and is not a directory", hint="give a directory for a batch convert")


def _target(rel: str, taken: set[str]) -> str:
    """model.h5 -> model.keras; a SavedModel dir -> dir.keras (the store itself: saved_model.keras); a clash (m.h5
    and m.hdf5) keeps the suffix."""
    if rel.strip("/") in ("", "."):
        rel = "saved_model"
    stem, ext = posixpath.splitext(rel)
    name = (stem if ext else rel) + ".keras"
    if name in taken:
        name = rel + ".keras"
    taken.add(name)
    return name


def plan(inputs: list[str], out_root: str, settings: dict[str, Any], src_root: Path | None = None
         ) -> list[dict[str, Any]]:
    """One item per artifact: where it is read, where it goes, its sources and its cache key."""
    check_locations(inputs, out_root)
    items: list[dict[str, Any]] = []
    taken: set[str] = set()
    with store.Staging() as staging:
        for root in inputs:
            entries = discover(root)
            single = not store.is_url(root) and Path(root).is_file()
            for row in static_rows(entries, src_root, staging):
                rel = _target(row["rel"], taken)
                sources = row.get("src", [])
                src_digest = hashlib.sha256("".join(_file_digest(s) for s in sources).encode()).hexdigest()[:12]
                items.append({
                    "rel": row["rel"] if not single else Path(root).name, "input": row["path"],
                    "output": store.join(out_root, rel), "static": {k: row[k] for k in ("verdict", "reason")},
                    "row": row, "sources": source_locations(sources, entries, root, staging),
                    "key": f"{__version__}:{row['sha256']}:{settings_digest(settings)}:{src_digest}:{rel}",
                    "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
                })
    return items


def _file_digest(p: str) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def convert_item(item: dict[str, Any], pool: Any) -> dict[str, Any]:
    """Convert one planned artifact with a warm pool (runs wherever the executor puts it). Never raises for a
    problem of the artifact: the result says what happened."""
    from k2to3.pipeline.convert import convert
    from k2to3.pipeline.report import NotPortableReport, write

    t0 = time.perf_counter()
    settings = {k: tuple(v) if isinstance(v, list) else v for k, v in item["settings"].items()}
    out_loc = item["output"]
    result: dict[str, Any] = {"rel": item["rel"], "input": item["input"], "output": out_loc,
                              "report": out_loc + ".report"}
    with store.Staging() as staging:
        try:
            src = staging.local(item["input"])
            sources = tuple(str(staging.local(x, f"src/{i}/{posixpath.basename(x)}"))
                            for i, x in enumerate(item["sources"]))
            out = staging.output(out_loc)
            out.parent.mkdir(parents=True, exist_ok=True)
            rdir = out.with_name(out.name + ".report")
            opts = ConvertOptions(src=src, output=out, report_dir=rdir, force=True, sources=sources, **settings)
            try:
                rep = convert(opts, pool=pool)
                result.update(verdict=rep["verdict"], exit_code=rep["exit_code"],
                              weight_hash=rep.get("build", {}).get("weight_hash"),
                              backends=backend_summary(rep),
                              max_abs=max((o["max_abs"] for v in rep["backends"].values()
                                           for o in v.get("outputs", [])), default=None),
                              reason=None, module=(rep.get("output") or {}).get("module"),
                              optimizer=optimizer_summary(rep.get("optimizer")), **_deployed(rep),
                              targets=converted_targets(out, rep) if out.exists() else None)
            except NotPortableReport as exc:
                rep = exc.report
                result.update(verdict="not_portable", exit_code=int(Exit.NOT_PORTABLE), reason=exc.line())
            if store.is_url(item["input"]):  # the report names the store's object, not the staged copy
                rep["input"]["path"] = item["input"]
            if store.is_url(out_loc) and rep.get("output"):
                rep["output"]["path"] = out_loc
            write(rep, rdir)
            if store.is_url(out_loc):
                if out.exists():
                    store.publish(out, out_loc)
                if result.get("module"):
                    store.publish(Path(result["module"]), posixpath.join(posixpath.dirname(out_loc),
                                                                         Path(result["module"]).name))
                exported = result.get("export") or {}
                if exported.get("written"):  # beside the .keras, as for a local OUT/
                    url = posixpath.join(posixpath.dirname(out_loc), Path(exported["path"]).name)
                    store.publish(Path(exported["path"]), url)
                    exported["path"] = url
                store.publish(rdir, out_loc + ".report")
            result["module"] = None if not result.get("module") else (
                store.join(posixpath.dirname(out_loc) if store.is_url(out_loc) else str(Path(out_loc).parent),
                           Path(result["module"]).name))
        except K2to3Error as exc:  # a hostile or malformed file is "invalid" (exit 2), a k2to3 failure "error"
            result.update(verdict="invalid" if exc.code == Exit.USAGE else "error", exit_code=int(exc.code),
                          reason=exc.line())
        except OSError as exc:  # the store went away, a disk filled up: this artifact's error, not the batch's
            result.update(verdict="error", exit_code=int(Exit.INTERNAL), reason=f"{type(exc).__name__}: {exc}")
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def run_batch(inputs: list[str], items: list[dict[str, Any]], out_root: str, executor: Any,
              on_result: Callable[[dict[str, Any], dict[str, Any]], None] = lambda i, r: None) -> dict[str, Any]:
    """Convert what the cache lacks on `executor`; every item ends with a result (cached, new or error)."""
    cache = StoreCache(out_root, BATCH_CACHE)
    todo, results = [], {}
    for item in items:
        hit = cache.get(item["key"])
        if hit is not None and hit.get("verdict") != "error" and (hit.get("verdict") == "not_portable"
                                                                  or store.exists(item["output"])):
            results[item["key"]] = {**hit, "cached": True}
            on_result(item, results[item["key"]])
        else:
            todo.append(item)

    def done(item: dict[str, Any], result: dict[str, Any]) -> None:
        if item["key"] in results:  # a retried task whose first attempt also returned: report it once
            return
        results[item["key"]] = result
        if result["verdict"] != "error":  # an error is retried on the next run
            cache.put(item["key"], result)
        on_result(item, result)

    executor.run(convert_item, todo, done)
    return summary(inputs, items, results, out_root)


def summary(inputs: list[str], items: list[dict[str, Any]], results: dict[str, dict[str, Any]],
            out_root: str) -> dict[str, Any]:
    """The store-level report in the audit report's shape (auditreport renders it), plus `convert` totals."""
    artifacts = []
    for item in items:
        res = results.get(item["key"], {"verdict": "error", "reason": "not run"})
        artifacts.append({**item["row"], "path": item["input"], "verify": {
            **res, "converted": res.get("verdict") in ("parity", "mismatch", "tf_only")}})
    outcomes = Counter(a["verify"]["verdict"] for a in artifacts)
    worst_outcome = max(outcomes, key=OUTCOMES.index) if outcomes else None
    return {**audit_report(list(inputs), artifacts), "command": "convert", "output_store": out_root,
            "convert_totals": dict(outcomes), "worst_outcome": worst_outcome,
            "cached": sum(1 for a in artifacts if a["verify"].get("cached")),
            "exit_code": int(OUTCOME_EXIT[worst_outcome]) if worst_outcome else 0}
