"""audit --verify and convert STORE/ share one verify path: an artifact converted and verified with a warm worker
pool (wherever the executor runs it, staged first when it lives behind a URL), its result in the audit's shape, and
a whole store's rows verified on an executor through the one result cache (cache.py)."""

from __future__ import annotations

import hashlib
import posixpath
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from k2to3.core.options import ConvertOptions
from k2to3.errors import K2to3Error
from k2to3.stores import locations
from k2to3.stores.cache import AUDIT_CACHE, StoreCache, content_key
from k2to3.stores.targets import converted_targets

CONVERTIBLE = ("hdf5", "zip", "savedmodel")


def optimizer_summary(opt: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verified `optimizer` section of a convert report, as the audit keeps it (no slot table)."""
    if not opt:
        return None
    led = opt.get("ledger") or {}
    return {k: v for k, v in {"status": opt.get("status"), "reason": opt.get("reason"),
                              "class_name": opt.get("class_name"), "layout": opt.get("layout"),
                              "keras3_class": opt.get("keras3_class"), "iteration": opt.get("iteration"),
                              "slots_restored": led.get("slots_restored"),
                              "slots_expected": led.get("slots_expected")}.items() if v is not None}


def backend_summary(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each backend's row of a convert report, as the audit and the store report keep it."""
    return {b: {"status": v["status"],
                "max_abs": max((o["max_abs"] for o in v.get("outputs", [])), default=None),
                "min_atol": max((o["min_atol"] for o in v.get("outputs", [])), default=None),
                "first_divergent_layer": (v.get("first_divergent_layer") or {}).get("layer")}
            for b, v in report["backends"].items()}


def verify_one(path: Path, out_dir: Path, pool: Any, sources: tuple[str, ...] = ()) -> dict[str, Any]:
    from k2to3.pipeline.convert import convert
    from k2to3.pipeline.report import NotPortableReport

    target = out_dir / "converted" / (hashlib.sha1(str(path).encode()).hexdigest()[:10] + "-" + path.stem + ".keras")
    target.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        rep = convert(ConvertOptions(src=path, output=target, force=True, sources=sources), pool=pool)
    except NotPortableReport as exc:
        return {"converted": False, "verdict": "not_portable", "reason": exc.line(),
                "seconds": time.perf_counter() - t0}
    except K2to3Error as exc:
        return {"converted": False, "verdict": "error", "reason": exc.line(), "seconds": time.perf_counter() - t0}
    layer_errors = {b: v.get("layer_errors", []) for b, v in rep["backends"].items() if v.get("layer_errors")}
    return {"converted": True, "verdict": rep["verdict"], "output": str(target),
            "targets": converted_targets(target, rep), "reference": rep["reference"].get("kind"),
            "optimizer": optimizer_summary(rep.get("optimizer")),
            "backends": backend_summary(rep), "layer_errors": layer_errors, "seconds": time.perf_counter() - t0}


def verify_item(item: dict[str, Any], pool: Any) -> dict[str, Any]:
    """verify_one of a planned row wherever the executor runs it, staged if remote."""
    with locations.Staging() as staging:
        try:
            local = staging.local(item["input"])
            sources = tuple(str(staging.local(x, f"src/{i}/{posixpath.basename(x)}"))
                            for i, x in enumerate(item["sources"]))
        except OSError as exc:
            return {"converted": False, "verdict": "error", "reason": f"{type(exc).__name__}: {exc}"}
        return verify_one(local, Path(item["out_dir"]), pool, sources)


def verify_rows(rows: list[dict[str, Any]], out_dir: Path, executor: Any,
                progress: Callable[[int, int, str], None] | None = None) -> None:
    """Set row["verify"] for every audit row: from the cache (OUT/.k2to3-audit-cache.json, keyed by tool version
    and content hash, whichever executor filled it) or by running verify_item on `executor`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cache = StoreCache(str(out_dir), AUDIT_CACHE)
    todo, n = [], len(rows)
    for row in rows:
        key = content_key(row["sha256"]) if row.get("sha256") else None
        hit = cache.get(key) if key else None
        if hit is not None:
            row["verify"] = {**hit, "cached": True}
        elif row["kind"] not in CONVERTIBLE:
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
