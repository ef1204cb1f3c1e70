"""Real Keras 2 code from PyPI through `k2to3 fix`: files rewritten, and files whose rewritten form reaches
a name Keras 3 does not have through an import the rewrite changed (must be 0), per package.

    python bench/real_code.py --fetch   # pip download the sdists into tests/.cache/real_code (nothing committed)
    python bench/real_code.py           # report; the names are resolved against the installed keras
    python bench/real_code.py --src ../main/src   # the same with another tree's fix (before/after)

tests/test_fix_safety.py runs the same check on this corpus when it is present."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "tests" / ".cache" / "real_code"
# Packages written for Keras 2 (standalone keras or tf.keras), pinned to the versions the figures came from.
PACKAGES = ["keras-tcn==3.5.0", "keras-self-attention==0.51.0", "keras-multi-head==0.29.0", "keras-pos-embd==0.13.0",
            "keras-layer-normalization==0.16.0", "keras-position-wise-feed-forward==0.8.0",
            "keras-embed-sim==0.10.0", "keras-transformer==0.40.0", "keras-bert==0.89.0", "keras-xlnet==0.19.0",
            "keras-gpt-2==0.17.0", "keras-adabound==0.6.0", "keras-radam==0.15.0",
            "keras-lookahead==0.9.0", "keras-drop-block==0.7.0", "keras-resnet==0.2.0", "keras-retinanet==1.0.0",
            "efficientnet==1.1.1", "segmentation-models==1.0.1", "image-classifiers==1.0.0",
            "keras-vggface==0.6", "keras-applications==1.0.8"]


def fetch() -> None:
    sdist, src = CACHE / "sdist", CACHE / "src"
    sdist.mkdir(parents=True, exist_ok=True)
    for spec in PACKAGES:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", spec,
                            "-d", str(sdist)], capture_output=True, text=True)
        print(f"{spec}: {'ok' if r.returncode == 0 else 'not available: ' + r.stderr.strip().splitlines()[-1]}")
    for archive in sorted(sdist.iterdir()):
        dest = src / archive.name.split(".tar")[0].removesuffix(".zip")
        if dest.exists():
            continue
        if archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                for m in z.namelist():
                    if m.endswith(".py") and ".." not in m and not m.startswith("/"):
                        z.extract(m, dest)
        else:
            with tarfile.open(archive) as t:
                t.extractall(dest, members=[m for m in t.getmembers() if m.name.endswith(".py") and m.isfile()],
                             filter="data")


def report(src_tree: Path) -> dict:
    sys.path.insert(0, str(src_tree))
    from k2to3.source import fix

    def fix_module(code: str, path: str) -> tuple[str, int, list[str]]:
        if hasattr(fix, "fix_module"):
            return fix.fix_module(code, path)
        return (*fix.fix_source(code, path), [])  # a tree from before fix reported what it kept

    rows = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        pairs, owner = [], {}
        for pkg in sorted((CACHE / "src").iterdir()):
            files = sorted(pkg.rglob("*.py"))
            row = {"files": len(files), "lines": 0, "rewritten": 0, "rewrites": 0, "kept": 0, "missing_files": 0,
                   "missing": []}
            for f in files:
                old = f.read_text(errors="replace")
                row["lines"] += old.count("\n")
                try:
                    new, n, kept = fix_module(old, str(f))
                except Exception as exc:
                    row.setdefault("errors", []).append(f"{f.name}: {type(exc).__name__}")
                    continue
                row["kept"] += len(kept)
                if n and new != old:
                    row["rewritten"] += 1
                    row["rewrites"] += n
                    out = Path(tmp) / f"{len(pairs)}.py"
                    out.write_text(new)
                    pairs.append([str(f), str(out)])
                    owner[str(out)] = (pkg.name, f.relative_to(pkg))
            rows[pkg.name] = row
        fix_s = time.perf_counter() - t0
        spec = Path(tmp) / "pairs.json"
        spec.write_text(json.dumps(pairs))
        r = subprocess.run([sys.executable, str(ROOT / "tests" / "keras3_names_probe.py"), str(spec)],
                           capture_output=True, text=True, check=True)
        for path, names in json.loads(r.stdout.strip().splitlines()[-1]).items():
            if names:
                pkg, rel = owner[path]
                rows[pkg]["missing_files"] += 1
                rows[pkg]["missing"].append(f"{rel}: {', '.join(names)}")
    total = {k: sum(r[k] for r in rows.values()) for k in ("files", "lines", "rewritten", "rewrites", "kept",
                                                            "missing_files")}
    return {"packages": rows, "total": total, "fix_seconds": round(fix_s, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fetch", action="store_true")
    ap.add_argument("--src", type=Path, default=ROOT / "src",
                    help="k2to3 source tree whose fix to run (e.g. main's src/ for the figures before this check)")
    args = ap.parse_args()
    if args.fetch:
        fetch()
    if not (CACHE / "src").is_dir():
        sys.exit("no corpus: run python bench/real_code.py --fetch")
    res = report(args.src)
    for name, r in res["packages"].items():
        print(f"{name:45s} files {r['files']:4d}  rewritten {r['rewritten']:3d}  kept on tf.keras {r['kept']:3d}  "
              f"missing-name files {r['missing_files']}")
        for m in r["missing"]:
            print(f"    {m}")
    t = res["total"]
    print(f"total: {t['files']} files, {t['lines']} lines; fix rewrote {t['rewritten']} files ({t['rewrites']} "
          f"rewrites), kept {t['kept']} uses on tf.keras; files reaching a missing Keras 3 name: "
          f"{t['missing_files']}; fix took {res['fix_seconds']} s")


if __name__ == "__main__":
    main()
