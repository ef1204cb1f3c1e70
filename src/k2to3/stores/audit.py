"""`k2to3 audit`: a migration audit of a tree or store (a repository, a model store; local paths or fsspec URLs).

Static (no backend import): legacy artifacts found by content, each with the verdict its config predicts
(static.py); Python sources and notebooks with their lint findings. `--verify` converts and verifies every artifact
on an executor (verify_store.py: one warm worker pool locally, or Ray), caching each result by the artifact's content
hash so an interrupted audit resumes where it stopped. One report builder serves the audit and `convert STORE/`
(batch.py); auditreport/ renders it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from k2to3.formats.artifact import file_sha256
from k2to3.source.extract import index_sources
from k2to3.source.files import Config
from k2to3.source.run import LintResult, lint_paths
from k2to3.stores import locations
from k2to3.stores.discover import discover, walk
from k2to3.stores.executors.local import LocalExecutor
from k2to3.stores.static import VERDICTS, WORST, definitions, source_locations, static_rows, static_verdict
from k2to3.stores.verify_store import verify_rows
from k2to3.version import __version__

Progress = Callable[[int, int, str], None]


def audit_report(paths: list[str], artifacts: list[dict[str, Any]], lint: LintResult | None = None,
                 name: Callable[[str], str] = lambda p: p, skipped: list[dict[str, str]] | None = None
                 ) -> dict[str, Any]:
    """The audit's report (schema k2to3.audit/1; auditreport/ renders it): the artifacts' rows, the lint
    findings per source file (`name` maps a linted path to the one the report shows), the files named like
    models that are not (`skipped`: path and reason), totals and the worst verdict."""
    sources: dict[str, Counter] = {}
    fixable: dict[str, Counter] = {}
    for f in lint.findings if lint else ():
        sources.setdefault(name(f.path), Counter())[f.code] += 1
        if f.fixable:
            fixable.setdefault(name(f.path), Counter())[f.code] += 1
    worst = max((WORST[a["verdict"]] for a in artifacts), default=0)
    return {
        "schema": "k2to3.audit/1", "k2to3_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "paths": list(paths),
        "artifacts": artifacts,
        "sources": {p: dict(c) for p, c in sorted(sources.items())},
        "sources_fixable": {p: dict(c) for p, c in sorted(fixable.items())},
        "rule_totals": dict(Counter(f.code for f in lint.findings).most_common()) if lint else {},
        "noqa_debt": {"lines": lint.suppressed, "files": lint.files_suppressed} if lint else {"lines": 0, "files": 0},
        "n_source_files": lint.files if lint else 0,
        "skipped": list(skipped or []),
        "worst_verdict": VERDICTS[worst] if artifacts else None,
        "totals": dict(Counter(a["verdict"] for a in artifacts)),
    }


def run_audit(paths: list[Path], out_dir: Path, verify: bool = False, progress: Progress | None = None,
              max_memory: int | None = None, executor: Any = None) -> dict[str, Any]:
    """Audit local trees; with `verify`, every artifact is converted on `executor` (default: one warm pool here)."""
    tree = walk(paths)
    defs = definitions(tree.sources)
    py = [p for p in tree.sources if p.suffix == ".py"]
    index = index_sources(py, skip_bad=True) if py else None
    artifacts = []
    memo: dict[str, Any] = {}
    for p in tree.artifacts:
        row = static_verdict(p, defs, index, memo)
        row["sha256"] = file_sha256(p) if p.is_file() else None
        artifacts.append(row)
    lint = lint_paths(tree.sources, Config()) if tree.sources else None
    if verify:
        _verify(artifacts, out_dir, executor, max_memory, progress)
    skipped = [{"path": str(p), "reason": why} for p, why in tree.skipped]
    return audit_report([str(p) for p in paths], artifacts, lint, skipped=skipped)


def audit_urls(urls: list[str], out_dir: Path, verify: bool = False, executor: Any = None,
               progress: Progress | None = None) -> dict[str, Any]:
    """`audit s3://...`: the same audit for stores behind URLs, each artifact staged alone while it is read."""
    with locations.Staging() as staging:
        artifacts: list[dict[str, Any]] = []
        skipped: list[dict[str, str]] = []
        lint = None
        for url in urls:
            entries = discover(url)
            skipped += [{"path": e.location, "reason": e.reason} for e in entries if e.kind == "skipped"]
            artifacts += static_rows(entries, None, staging)
            for row in artifacts:  # staged source paths back to their URLs (a worker stages its own copy)
                if row.get("src"):
                    row["src"] = source_locations(row["src"], entries, url, staging)
            staged = staging.dir / "in" / "src"
            py = sorted(staged.rglob("*.py")) if staged.is_dir() else []
            lint = lint_paths(py, Config()) if py else lint
        report = audit_report(urls, artifacts, lint, lambda p: locations.join(urls[0], Path(p).relative_to(
            staging.dir / "in" / "src").as_posix()), skipped)
    if verify:
        _verify(artifacts, out_dir, executor, None, progress)
    return report


def _verify(rows: list[dict[str, Any]], out_dir: Path, executor: Any, max_memory: int | None,
            progress: Progress | None) -> None:
    if executor is None:
        executor = LocalExecutor(max_memory=max_memory)
    verify_rows(rows, out_dir, executor, progress)
