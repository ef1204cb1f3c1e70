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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k2to3 import __version__, store
from k2to3.errors import Exit, InputError, K2to3Error

# Conversion verdicts from best to worst, and each one's exit code (docs/exit-codes.md: batch convert).
OUTCOMES = ("parity", "tf_only", "not_portable", "mismatch", "invalid", "error")
OUTCOME_EXIT = {"parity": Exit.PARITY, "tf_only": Exit.NOT_PORTABLE, "not_portable": Exit.NOT_PORTABLE,
                "mismatch": Exit.MISMATCH, "invalid": Exit.USAGE, "error": Exit.INTERNAL}
BATCH_CACHE = ".k2to3-batch-cache.json"
AUDIT_CACHE = ".k2to3-audit-cache.json"  # audit.ResultCache's file and key format


@dataclass
class Settings:
    """What every artifact of a batch is converted with (part of the cache key)."""

    backends: tuple[str, ...] = ("tensorflow", "torch", "jax")
    rtol: float | None = None
    atol: float | None = None
    trust_bytecode: bool = False
    max_memory: int | None = None

    def digest(self) -> str:
        d = {"backends": list(self.backends), "rtol": self.rtol, "atol": self.atol, "trust": self.trust_bytecode}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


class StoreCache:
    """Finished results by key, one JSON file in the output store, rewritten atomically after each result."""

    def __init__(self, out_root: str, name: str):
        self.location = store.join(out_root, name)
        text = store.read_text(self.location)
        try:
            self.data: dict[str, Any] = json.loads(text) if text else {}
        except ValueError:
            self.data = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.data[key] = value
        store.write_text(self.location, json.dumps(self.data))


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
    """model.h5 -> model.keras; a SavedModel dir -> dir.keras; a clash (m.h5 and m.hdf5) keeps the suffix."""
    stem, ext = posixpath.splitext(rel)
    name = (stem if ext else rel) + ".keras"
    if name in taken:
        name = rel + ".keras"
    taken.add(name)
    return name


def _static_rows(entries: list[store.Entry], src_root: Path | None, staging: store.Staging) -> list[dict[str, Any]]:
    """audit's static verdict of each artifact, with the sources it resolves to (local paths, staged for URLs)."""
    from k2to3.audit import _definitions, static_verdict
    from k2to3.formats.artifact import file_sha256
    from k2to3.source.extract import index_sources

    src_files = [staging.local(e.location, "src/" + e.rel) for e in entries if e.kind == "source"]
    if src_root is not None:
        from k2to3.source.files import SKIP_DIRS

        src_files += [p for p in sorted(src_root.rglob("*.py")) if not SKIP_DIRS & set(p.parts)]
    index = index_sources(src_files, skip_bad=True) if src_files else None
    defs = _definitions(src_files)
    rows = []
    for e in (e for e in entries if e.kind == "artifact"):
        local = staging.local(e.location, "art/" + e.rel)
        try:
            row = static_verdict(local, defs, index)
            row["sha256"] = file_sha256(local) if local.is_file() else _dir_sha256(local)
        finally:
            if store.is_url(e.location):  # one artifact at a time on local disk
                _remove(local)
        row.update(path=e.location, rel=e.rel)
        rows.append(row)
    return rows


def _dir_sha256(d: Path) -> str:
    from k2to3.formats.artifact import file_sha256

    h = hashlib.sha256()
    for p in sorted(x for x in d.rglob("*") if x.is_file()):
        h.update(p.relative_to(d).as_posix().encode())
        h.update(bytes.fromhex(file_sha256(p)))
    return h.hexdigest()


def _remove(p: Path) -> None:
    import shutil

    if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)


def plan(inputs: list[str], out_root: str, settings: Settings, src_root: Path | None = None
         ) -> list[dict[str, Any]]:
    """One item per artifact: where it is read, where it goes, its sources and its cache key."""
    check_locations(inputs, out_root)
    items: list[dict[str, Any]] = []
    taken: set[str] = set()
    with store.Staging() as staging:
        for root in inputs:
            entries = store.discover(root)
            single = not store.is_url(root) and Path(root).is_file()
            for row in _static_rows(entries, src_root, staging):
                rel = _target(row["rel"], taken)
                sources = row.get("src", [])
                src_digest = hashlib.sha256("".join(_file_digest(s) for s in sources).encode()).hexdigest()[:12]
                items.append({
                    "rel": row["rel"] if not single else Path(root).name, "input": row["path"],
                    "output": store.join(out_root, rel), "static": {k: row[k] for k in ("verdict", "reason")},
                    "row": row, "sources": _source_locations(sources, entries, root, staging),
                    "key": f"{__version__}:{row['sha256']}:{settings.digest()}:{src_digest}:{rel}",
                    "settings": settings.__dict__,
                })
    return items


def _file_digest(p: str) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def _source_locations(sources: list[str], entries: list[store.Entry], root: str, staging: store.Staging) -> list[str]:
    """Staged copies of a URL store's sources map back to their URLs (an executor node stages its own)."""
    if not store.is_url(root):
        return list(sources)
    back = {str(staging.dir / "in" / ("src/" + e.rel)): e.location for e in entries if e.kind == "source"}
    return [back.get(s, s) for s in sources]


def convert_item(item: dict[str, Any], pool: Any) -> dict[str, Any]:
    """Convert one planned artifact with a warm pool (runs wherever the executor puts it). Never raises for a
    problem of the artifact: the result says what happened."""
    from k2to3.audit import optimizer_summary
    from k2to3.convert import NotPortableReport, Options, convert
    from k2to3.report import write

    t0 = time.perf_counter()
    s = Settings(**{**item["settings"], "backends": tuple(item["settings"]["backends"])})
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
            opts = Options(src=src, out=out, report_dir=rdir, rtol=s.rtol, atol=s.atol, backends=s.backends,
                           force=True, sources=sources, trust_bytecode=s.trust_bytecode, max_memory=s.max_memory)
            try:
                rep = convert(opts, pool=pool)
                result.update(verdict=rep["verdict"], exit_code=rep["exit_code"],
                              weight_hash=rep.get("build", {}).get("weight_hash"),
                              backends={b: {"status": v["status"],  # audit --verify's shape
                                            "max_abs": max((o["max_abs"] for o in v.get("outputs", [])),
                                                           default=None),
                                            "min_atol": max((o["min_atol"] for o in v.get("outputs", [])),
                                                            default=None),
                                            "first_divergent_layer": (v.get("first_divergent_layer") or {}
                                                                      ).get("layer")}
                                        for b, v in rep["backends"].items()},
                              max_abs=max((o["max_abs"] for v in rep["backends"].values()
                                           for o in v.get("outputs", [])), default=None),
                              reason=None, module=(rep.get("output") or {}).get("module"),
                              optimizer=optimizer_summary(rep.get("optimizer")))
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
    from k2to3.audit import VERDICTS, WORST

    outcomes = Counter(a["verify"]["verdict"] for a in artifacts)
    worst_outcome = max(outcomes, key=OUTCOMES.index) if outcomes else None
    worst = max((WORST[a["verdict"]] for a in artifacts), default=0)
    return {
        "schema": "k2to3.audit/1", "k2to3_version": __version__, "command": "convert",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "paths": list(inputs), "output_store": out_root,
        "artifacts": artifacts, "sources": {}, "rule_totals": {}, "noqa_debt": {"lines": 0, "files": 0},
        "n_source_files": 0, "worst_verdict": VERDICTS[worst] if artifacts else None,
        "totals": dict(Counter(a["verdict"] for a in artifacts)),
        "convert_totals": dict(outcomes), "worst_outcome": worst_outcome,
        "cached": sum(1 for a in artifacts if a["verify"].get("cached")),
        "exit_code": int(OUTCOME_EXIT[worst_outcome]) if worst_outcome else 0,
    }


# -- audit: the same executors and stores for `audit --verify` -------------------------------------------------

def verify_item(item: dict[str, Any], pool: Any) -> dict[str, Any]:
    """audit --verify of one artifact (audit.verify_one) wherever the executor runs it, staged if remote."""
    from k2to3.audit import verify_one

    with store.Staging() as staging:
        try:
            local = staging.local(item["input"])
            sources = tuple(str(staging.local(x, f"src/{i}/{posixpath.basename(x)}"))
                            for i, x in enumerate(item["sources"]))
        except OSError as exc:
            return {"converted": False, "verdict": "error", "reason": f"{type(exc).__name__}: {exc}"}
        return verify_one(local, Path(item["out_dir"]), pool, sources)


def verify_rows(rows: list[dict[str, Any]], out_dir: Path, executor: Any,
                progress: Callable[[int, int, str], None] | None = None) -> None:
    """Set row["verify"] for every audit row: from audit's cache (.k2to3-audit-cache.json, keyed by tool version
    and content hash, whichever executor filled it) or by running verify_item on `executor`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cache = StoreCache(str(out_dir), AUDIT_CACHE)
    todo, n = [], len(rows)
    for row in rows:
        key = f"{__version__}:{row['sha256']}" if row.get("sha256") else None
        hit = cache.get(key) if key else None
        if hit is not None:
            row["verify"] = {**hit, "cached": True}
        elif row["kind"] not in ("hdf5", "zip", "savedmodel"):
            row["verify"] = {"converted": False, "verdict": "not_portable", "reason": row.get("reason")}
        else:
            todo.append({"rel": row.get("rel", row["path"]), "input": row["path"], "key": key, "row": row,
                         "sources": list(row.get("src", ())), "out_dir": str(out_dir)})
    finished = n - len(todo)

    def done(item: dict[str, Any], result: dict[str, Any]) -> None:
        nonlocal finished
        if "verify" in item["row"]:  # reported once
            return
        item["row"]["verify"] = result
        if item["key"] and result.get("verdict") != "error":
            cache.put(item["key"], result)
        finished += 1
        if progress:
            progress(finished, n, item["input"])

    if progress:
        progress(finished, n, "")
    executor.run(verify_item, [{k: v for k, v in i.items() if k != "row"} | {"_id": j} for j, i in enumerate(todo)],
                 lambda it, res: done(todo[it["_id"]], res))


def audit_urls(urls: list[str], out_dir: Path, verify: bool = False, executor: Any = None,
               progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """`audit s3://...`: audit's report for stores behind URLs, each artifact staged alone while it is read."""
    from k2to3.audit import VERDICTS, WORST
    from k2to3.source.files import Config
    from k2to3.source.run import lint_paths

    with store.Staging() as staging:
        artifacts: list[dict[str, Any]] = []
        lint = None
        for url in urls:
            entries = store.discover(url)
            artifacts += _static_rows(entries, None, staging)
            for row in artifacts:  # staged source paths back to their URLs (a worker stages its own copy)
                if row.get("src"):
                    row["src"] = _source_locations(row["src"], entries, url, staging)
            staged = staging.dir / "in" / "src"
            py = sorted(staged.rglob("*.py")) if staged.is_dir() else []
            lint = lint_paths(py, Config()) if py else lint
        sources: dict[str, Counter] = {}
        if lint:
            for f in lint.findings:
                name = store.join(urls[0], Path(f.path).relative_to(staged).as_posix())
                sources.setdefault(name, Counter())[f.code] += 1
    report: dict[str, Any] = {
        "schema": "k2to3.audit/1", "k2to3_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "paths": list(urls),
        "artifacts": artifacts, "sources": {p: dict(c) for p, c in sorted(sources.items())},
        "rule_totals": dict(Counter(f.code for f in lint.findings).most_common()) if lint else {},
        "noqa_debt": {"lines": lint.suppressed, "files": lint.files_suppressed} if lint else {"lines": 0, "files": 0},
        "n_source_files": lint.files if lint else 0,
    }
    if verify:
        if executor is None:
            from k2to3.executors.local import LocalExecutor

            executor = LocalExecutor()
        verify_rows(artifacts, out_dir, executor, progress)
    worst = max((WORST[a["verdict"]] for a in artifacts), default=0)
    report["worst_verdict"] = VERDICTS[worst] if artifacts else None
    report["totals"] = dict(Counter(a["verdict"] for a in artifacts))
    return report
