"""The real-artifact zoo: Keras 2 files from public repositories nobody on this project wrote, converted as a user
would, from the file alone and with the repository's own sources (`--src`), one fresh `k2to3 convert` process each.

    python bench/zoo.py --mirror DIR        # take the files from local git snapshots (DIR/owner+name/repo/.git)
    python bench/zoo.py --fetch             # or download each file at its recorded commit (needs the network)
    python bench/zoo.py --only ID [ID ...]  # a few artifacts; --mode alone|src|both (default both)
    python bench/zoo.py --table             # print the last run's table again

The manifest (bench/zoo/manifest.toml) records each artifact's repository, commit, path, sha256 and licence, and
the repository files a user would pass with --src. Files go to bench/.zoo/files (never committed: most licences do
not allow it); each run writes bench/.zoo/results.json and prints the table: parity / mismatch / stop (a precise
one-line stop, exit 2 or 3) / crash (exit 4, a traceback, a timeout), per artifact and in total, and every artifact
that does worse with its sources than without."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "bench" / "zoo" / "manifest.toml"
WORK = ROOT / "bench" / ".zoo"
RANK = {"parity": 0, "mismatch": 1, "stop": 2, "crash": 3, "unavailable": 4}


def load_manifest() -> list[dict]:
    with MANIFEST.open("rb") as f:
        arts = tomllib.load(f)["artifact"]
    ids = [a["id"] for a in arts]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        sys.exit(f"manifest: duplicate ids {sorted(dup)}")
    return arts


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _git_dir(mirror: Path, repo: str) -> Path | None:
    base = mirror / repo.replace("/", "+")
    for cand in (base / "repo" / ".git", base / "repo", base / ".git", base):
        if (cand / "HEAD").exists():
            return cand
    return None


def _git_files(gdir: Path, commit: str, path: str) -> list[str]:
    """Repository paths at or under `path` (a SavedModel is a directory)."""
    r = subprocess.run(["git", "--git-dir", str(gdir), "ls-tree", "-r", "--name-only", commit, "--", path],
                       capture_output=True, text=True)
    return [p for p in r.stdout.splitlines() if p == path or p.startswith(path.rstrip("/") + "/")]


def _materialize_one(art: dict, rel: str, dest: Path, mirror: Path | None, fetch: bool) -> bool:
    target = dest / rel
    if target.exists():
        return True
    target.parent.mkdir(parents=True, exist_ok=True)
    if mirror is not None:
        gdir = _git_dir(mirror, art["repo"])
        if gdir is None:
            return False
        for commit in (art["commit"], "HEAD"):
            files = _git_files(gdir, commit, rel)
            if not files:
                continue
            for f in files:
                out = dest / f
                out.parent.mkdir(parents=True, exist_ok=True)
                blob = subprocess.run(["git", "--git-dir", str(gdir), "show", f"{commit}:{f}"], capture_output=True)
                if blob.returncode != 0:
                    return False
                out.write_bytes(blob.stdout)
            return True
        return False
    if fetch:
        url = f"https://raw.githubusercontent.com/{art['repo']}/{art['commit']}/{rel}"
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                target.write_bytes(resp.read())
            return True
        except OSError:
            return False
    return False


def library_dir(spec: str) -> Path:
    """"owner/name@commit:path" (a manifest `libraries` entry) -> where its folder is materialized."""
    repo, _, rest = spec.partition("@")
    commit, _, path = rest.partition(":")
    return WORK / "libs" / repo.replace("/", "+") / commit[:12] / path


def materialize_library(spec: str, mirror: Path | None) -> str:
    """A layer library's package folder at its commit, from the mirror (why not, or "")."""
    repo, _, rest = spec.partition("@")
    commit, _, path = rest.partition(":")
    dest = library_dir(spec)
    if dest.is_dir():
        return ""
    gdir = _git_dir(mirror, repo) if mirror is not None else None
    if gdir is None:
        return f"library {repo} is not in the mirror (fetch it: a git snapshot under --mirror)"
    files = _git_files(gdir, commit, path)
    if not files:
        return f"library {repo}: {path} not found at {commit[:8]}"
    for f in files:
        blob = subprocess.run(["git", "--git-dir", str(gdir), "show", f"{commit}:{f}"], capture_output=True)
        out = dest.parent / f
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(blob.stdout)
    return ""


def materialize(art: dict, mirror: Path | None, fetch: bool) -> tuple[Path | None, str]:
    """The artifact and its companions and sources under bench/.zoo/files/ID/, in the repository's layout (so a
    weights file finds the JSON beside it and a source its sibling modules). (artifact path, why not)."""
    dest = WORK / "files" / art["id"]
    for rel in [art["path"], *art.get("companions", []), *art.get("sources", [])]:
        if not _materialize_one(art, rel, dest, mirror, fetch):
            return None, f"{rel} not found at {art['commit'][:8]}"
    for lib in art.get("libraries", []):
        why = materialize_library(lib, mirror)
        if why:
            return None, why
    path = dest / art["path"]
    digest_of = path / "saved_model.pb" if path.is_dir() else path
    if not digest_of.is_file():
        return None, f"{art['path']}: no file"
    got = _sha(digest_of)
    if got != art["sha256"]:
        return None, f"sha256 {got[:12]} is not the manifest's {art['sha256'][:12]}"
    return path, ""


def classify(rc: int | None, report: dict | None, stderr: str) -> tuple[str, str]:
    """(outcome, one-line reason) of one convert run."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    error = next((ln for ln in reversed(lines) if ln.startswith("error:")), "")
    if rc is None:
        return "crash", "timeout"
    if "Traceback (most recent call last)" in stderr:
        return "crash", "traceback: " + (lines[-1] if lines else "")
    if rc == 0:
        return "parity", (report or {}).get("numeric_verdict") or ""
    if rc == 1:
        worst = ""
        for name, b in ((report or {}).get("backends") or {}).items():
            if b.get("status") not in ("parity", None):
                worst = f"{name} {b.get('status')}"
                break
        return "mismatch", worst
    if rc in (2, 3):
        return "stop", error or f"exit {rc}"
    return "crash", error or f"exit {rc}"


def convert(art: dict, path: Path, mode: str, timeout: float) -> dict:
    out = WORK / "out" / art["id"] / mode
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "k2to3", "convert", str(path), "-o", str(out / "model.keras"), "--force", "--json"]
    if mode == "src":
        base = WORK / "files" / art["id"]
        for s in art.get("sources", []):
            cmd += ["--src", str(base / s)]
        for lib in art.get("libraries", []):  # a layer library's own source, as a user passes its checkout
            cmd += ["--src", str(library_dir(lib))]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=out,
                           env={**os.environ, "COLUMNS": "200"})
        rc, stdout, stderr = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as exc:
        rc, stdout = None, ""
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    seconds = time.perf_counter() - t0
    try:
        report = json.loads(stdout) if stdout.strip() else None
    except json.JSONDecodeError:
        report = None
    outcome, reason = classify(rc, report, stderr)
    (out / "stderr.txt").write_text(stderr)
    return {"outcome": outcome, "reason": reason[:300], "exit": rc, "seconds": round(seconds, 1),
            "verdict": (report or {}).get("verdict")}


def table(results: list[dict]) -> str:
    rows = ["| artifact | repository | kind | alone | with sources | reason (worse of the two) |",
            "|---|---|---|---|---|---|"]
    totals = {m: {} for m in ("alone", "src")}
    worse = []
    for r in results:
        a, s = r.get("alone"), r.get("src")
        for m, v in (("alone", a), ("src", s)):
            if v:
                totals[m][v["outcome"]] = totals[m].get(v["outcome"], 0) + 1
        if a and s and RANK[s["outcome"]] > RANK[a["outcome"]]:
            worse.append(r["id"])
        show = s if s and (not a or RANK[s["outcome"]] >= RANK[a["outcome"]]) else a
        reason = (show or {}).get("reason", "").replace("|", "\\|")
        rows.append(f"| {r['id']} | {r['repo']} | {r['kind']} | {(a or {}).get('outcome', '-')} | "
                    f"{(s or {}).get('outcome', '-')} | {reason[:160]} |")
    lines = ["\n".join(rows), ""]
    for m in ("alone", "src"):
        n = sum(totals[m].values())
        lines.append(f"{m}: {n} runs: " + ", ".join(f"{k} {v}" for k, v in sorted(totals[m].items(),
                                                                                   key=lambda kv: RANK[kv[0]])))
    lines.append(f"worse with sources: {len(worse)}" + (f" ({', '.join(worse)})" if worse else ""))
    repos = {r["repo"] for r in results}
    lines.append(f"{len(results)} artifacts from {len(repos)} repositories")
    # what the sources are for: the artifacts the file alone does not convert
    needy = [r for r in results if (r.get("alone") or {}).get("outcome") not in ("parity", "unavailable")
             and r.get("src")]
    gained = [r for r in needy if r["src"]["outcome"] == "parity"]
    lines.append(f"not converted from the file alone: {len(needy)}; with the repository's sources: {len(gained)} "
                 "at parity")
    by_kind: dict[str, list[int]] = {}
    for r in results:
        k = by_kind.setdefault(r["kind"], [0, 0, 0])
        k[0] += 1
        k[1] += (r.get("alone") or {}).get("outcome") == "parity"
        k[2] += (r.get("src") or {}).get("outcome") == "parity"
    lines.append("by kind (artifacts, parity alone, parity with sources): " + ", ".join(
        f"{k} {v[0]}/{v[1]}/{v[2]}" for k, v in sorted(by_kind.items())))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirror", type=Path, help="a folder of git snapshots, DIR/owner+name/repo/.git")
    ap.add_argument("--fetch", action="store_true", help="download each file at its commit (network)")
    ap.add_argument("--only", nargs="*", help="artifact ids")
    ap.add_argument("--mode", choices=("alone", "src", "both"), default="both")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per conversion")
    ap.add_argument("--table", action="store_true", help="print the last results and stop")
    ap.add_argument("--results", type=Path, default=WORK / "results.json")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(args.results.read_text())))
        return
    arts = load_manifest()
    if args.only:
        arts = [a for a in arts if a["id"] in set(args.only)]
    previous = {r["id"]: r for r in json.loads(args.results.read_text())} if args.results.exists() else {}
    modes = ("alone", "src") if args.mode == "both" else (args.mode,)
    for i, art in enumerate(arts, 1):
        rec = {**previous.get(art["id"], {}), "id": art["id"], "repo": art["repo"], "kind": art["kind"]}
        path, why = materialize(art, args.mirror, args.fetch)
        for mode in modes:
            if path is None:
                rec[mode] = {"outcome": "unavailable", "reason": why, "exit": None, "seconds": 0}
            elif mode == "src" and not art.get("sources"):
                rec[mode] = {**rec["alone"], "reason": "(no sources: same as alone)"} if "alone" in rec else None
            else:
                rec[mode] = convert(art, path, mode, args.timeout)
            v = rec[mode] or {}
            print(f"[{i}/{len(arts)}] {art['id']} {mode}: {v.get('outcome')} {v.get('seconds', '')}s "
                  f"{v.get('reason', '')[:150]}", flush=True)
        previous[art["id"]] = rec
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(list(previous.values()), indent=1))
    order = {a["id"]: n for n, a in enumerate(load_manifest())}
    results = sorted(previous.values(), key=lambda r: order.get(r["id"], 1 << 30))
    print()
    print(table([r for r in results if r["id"] in order]))


if __name__ == "__main__":
    main()
