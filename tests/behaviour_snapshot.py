"""Behaviour snapshot: convert (and verify) every fixture that converts, normalise each report.json, and compare
two snapshots. Written for the wave-3 redesign (issue 22): the same reports before and after the code moved.

    python tests/behaviour_snapshot.py snapshot OUT.json [--only SUBSTR]   # run every case with this checkout
    python tests/behaviour_snapshot.py compare BEFORE.json AFTER.json [--noise NOISE.json]

tests/fixtures/behaviour/baseline-c8926e9.json.gz is the snapshot of the code before the redesign (two runs of it
were identical, so no noise file is needed): `snapshot /tmp/now.json` on a checkout, then
`compare tests/fixtures/behaviour/baseline-c8926e9.json.gz /tmp/now.json` (.gz is read and written as gzip).

Normalised away: timings, memory figures, creation times, temporary paths and the sha256 of files whose bytes
hold a save date (.keras, golden files). `compare --noise` also ignores the fields that differ between two
snapshots of the *same* code (float noise of a backend's threads): run `snapshot` twice on the old code, compare
those two with `--write-noise`, then compare old against new with that noise file.

Cases run through the public Python API (k2to3.api.convert / verify) with one warm worker pool; an option the
API did not take before the redesign (fit_steps) goes through the pipeline's own options of that checkout."""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FIX = Path(__file__).resolve().parent / "fixtures"
H5, OPT, LONG, SRCM, SRC, VER, BAD = (FIX / "h5", FIX / "optimizers", FIX / "longtail", FIX / "src_models",
                                       FIX / "src", FIX / "verify", FIX / "bad")
ZOO = SRC / "k2_zoo.py"


def cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    out += [{"name": f"h5/{p.name}", "src": p} for p in sorted(H5.glob("*.h5"))]
    out += [{"name": f"opt/{p.name}", "src": p, "fit_steps": 2} for p in sorted(OPT.glob("*.h5"))]
    out += [{"name": f"long/{p.relative_to(LONG)}", "src": p} for p in [
        LONG / "pairs/cnn_weights.h5", LONG / "pairs/mlp.h5", LONG / "pairs/yaml/net_weights.h5",
        LONG / "pairs/store/weights.h5", LONG / "keras1_pairs/merge_weights.h5", LONG / "multigpu/parallel.h5",
        LONG / "cudnn/cudnn_rnns.h5", LONG / "tfoplayer/tf_op_layers.h5", LONG / "pairs/bad/not_a_model.h5",
        *sorted((LONG / "hdf5names").iterdir())]]
    out.append({"name": "long/pairs/mlp.h5+config", "src": LONG / "pairs/mlp.h5", "config": LONG / "pairs/mlp.json"})
    for fx, src in [("lambda_args.h5", ZOO), ("lambda_loop.h5", f"{ZOO}:build_lambda_loop"),
                    ("lambda_activation.h5", ZOO), ("custom.h5", ZOO), ("lambda_custom_objects.h5",
                                                                          SRC / "lrelu_model.py"),
                    ("k_attention.h5", SRC / "k_attention.py"), ("weights_only.h5", f"{ZOO}:build_weights_only"),
                    ("archive.keras", None), ("savedmodel", None), ("archive_lambda.keras", None),
                    ("payload.h5", None), ("payload.h5", ZOO), ("tf_only.h5", ZOO), ("weights_only.h5", None),
                    ("lambda_args.h5", None)]:
        out.append({"name": f"src/{fx}" + (f"+{Path(str(src)).name}" if src else ""), "src": SRCM / fx,
                    "sources": (str(src),) if src else ()})
    out += [{"name": f"bad/{p.name}", "src": p} for p in sorted(BAD.glob("*.h5"))]
    out += [{"name": f"verify/{p.name}", "src": p} for p in sorted(VER.glob("*.h5"))]
    out += [{"name": "grads/lstm_dropout.h5", "src": VER / "lstm_dropout.h5", "grads": True},
            {"name": "grads/strided_1x1_conv.h5", "src": VER / "strided_1x1_conv.h5", "grads": True},
            {"name": "grads/batchnorm_adam_legacy.h5", "src": OPT / "batchnorm_adam_legacy.h5", "grads": True},
            {"name": "grads/inference/plain_cnn.h5", "src": VER / "plain_cnn.h5", "grads": True,
             "grads_mode": "inference"},
            {"name": "golden/fm19_hard_sigmoid.h5", "src": H5 / "fm19_hard_sigmoid.h5", "save_golden": True,
             "then_verify_golden": True},
            {"name": "verify/plain_cnn.naive.keras", "verify": VER / "plain_cnn.naive.keras",
             "reference": VER / "plain_cnn.h5"},
            {"name": "verify/fm19_hard_sigmoid_dense.naive.keras",
             "verify": VER / "fm19_hard_sigmoid_dense.naive.keras", "reference": H5 / "fm19_hard_sigmoid_dense.h5"},
            {"name": "verify/lstm_dropout+grads", "convert_then_verify": VER / "lstm_dropout.h5", "grads": True},
            {"name": "verify/adam_legacy+fit", "convert_then_verify": OPT / "adam_legacy.h5", "fit_steps": 2}]
    # the command line and the stores: a static audit of the fixture tree, audit --verify and a batch convert of a
    # small store (tests/store_tree.py), a CLI convert
    out += [{"name": "cli/audit-static", "cli": ["audit", str(H5), str(SRCM), str(SRC), str(OPT), str(LONG),
                                                 "--format", "json"], "report": "audit.json"},
            {"name": "cli/audit-verify", "cli": ["audit", "<STORE>", "--verify", "--format", "json"],
             "report": "audit.json"},
            {"name": "cli/convert-store", "cli": ["convert", "<STORE>", "-o", "<OUT>"],
             "report": "store-report.json"},
            {"name": "cli/convert-json", "cli": ["convert", str(H5 / "fm07_conv1d.h5"), "-o", "<OUT>/m.keras",
                                                 "--json"], "report": "m.keras.report/report.json"}]
    return out


def run_cli(case: dict[str, Any], tmp: Path) -> dict[str, Any]:
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from store_tree import make_tree

    store = make_tree(tmp / "store")
    (tmp / "out").mkdir()
    args = [a.replace("<STORE>", str(store)).replace("<OUT>", str(tmp / "out")) for a in case["cli"]]
    if args[0] == "audit":
        args += ["-o", str(tmp / "out")]
    r = subprocess.run([sys.executable, "-m", "k2to3", *args], capture_output=True, text=True)
    report = tmp / "out" / case["report"]
    return {"exit_code": r.returncode, "report": json.loads(report.read_text()) if report.exists() else None,
            "stdout_lines": len(r.stdout.splitlines())}


def _call(fn: Any, legacy: Any, args: tuple, kw: dict[str, Any]) -> dict[str, Any]:
    """The public API when it takes every option, else the pipeline of this checkout (before the redesign the
    API lacked fit_steps and config)."""
    params = inspect.signature(fn).parameters
    if all(k in params for k in kw):
        return fn(*args, **kw).data
    return legacy(*args, **kw)


def _legacy_convert(src: Any, output: Any, *, pool: Any = None, **kw: Any) -> dict[str, Any]:
    from k2to3.convert import Options, convert  # the pipeline module before wave 3

    kw = {("input_npz" if k == "inputs" else k): v for k, v in kw.items()}
    if "grads_mode" in kw:
        kw["grads_training"] = kw.pop("grads_mode") == "train"
    return convert(Options(src=Path(src), out=Path(output), **kw), pool=pool)


def _legacy_verify(model: Any, *, pool: Any = None, **kw: Any) -> dict[str, Any]:
    from k2to3.verification import VerifyOptions, verify

    if "grads_mode" in kw:
        kw["grads_training"] = kw.pop("grads_mode") == "train"
    return verify(VerifyOptions(keras=Path(model), **kw), pool=pool)


def run(case: dict[str, Any], pool: Any, tmp: Path) -> dict[str, Any]:
    from k2to3.errors import K2to3Error

    try:
        import k2to3.interfaces.api as api
    except ImportError:  # before the redesign
        import k2to3.api as api  # type: ignore[no-redef]

    opts = {k: case[k] for k in ("sources", "fit_steps", "grads", "grads_mode", "save_golden", "config")
            if k in case}
    if "cli" in case:
        return run_cli(case, tmp)
    out = tmp / "model.keras"
    result: dict[str, Any] = {}
    try:
        if "verify" in case:
            result["verify"] = _call(api.verify, _legacy_verify, (case["verify"],),
                                     {"reference": case["reference"], "pool": pool})
        elif "convert_then_verify" in case:
            result["convert"] = _call(api.convert, _legacy_convert, (case["convert_then_verify"], out),
                                      {**opts, "pool": pool})
            result["verify"] = _call(api.verify, _legacy_verify, (out,),
                                     {"reference": case["convert_then_verify"], **opts, "pool": pool})
        else:
            result["convert"] = _call(api.convert, _legacy_convert, (case["src"], out), {**opts, "pool": pool})
            if case.get("then_verify_golden"):
                result["verify"] = _call(api.verify, _legacy_verify, (out,),
                                         {"golden": tmp / "model.golden.npz", "pool": pool})
    except K2to3Error as exc:
        result["error"] = {"class": type(exc).__name__, "line": exc.line(), "code": int(exc.code)}
        if getattr(exc, "report", None) is not None:
            result["error"]["report"] = exc.report
    result["files"] = sorted(p.name for p in tmp.iterdir())
    return result


DROP_KEYS = {"created", "elapsed", "rate", "timings", "memory", "load_seconds", "predict_seconds", "seconds",
             "grad_seconds", "reference_seconds", "noise_schedule", "shadow_schedule"}
HASHED_FILES = ("output", "golden")  # sections whose sha256 covers a file with a save date in it


def normalise(obj: Any, tmp: str, key: str | None = None, parent: str | None = None) -> Any:
    if isinstance(obj, dict):
        golden_file = obj.get("format") == "golden npz"  # its bytes hold the time it was written
        return {normalise(k, tmp): normalise(v, tmp, k, key) for k, v in obj.items()
                if not (golden_file and k == "sha256")
                and k not in DROP_KEYS and not k.endswith("_seconds")
                and not (k == "sha256" and key in HASHED_FILES) and not (k == "model_sha256")}
    if isinstance(obj, list):
        return [normalise(v, tmp, None, key) for v in obj]
    if isinstance(obj, str):
        s = obj.replace(tmp, "<TMP>").replace(str(FIX), "<FIX>")
        s = re.sub(r"/tmp/snap-\w+", "<TMP>", s)
        s = re.sub(r"/tmp/k2to3-[\w.-]+", "<WORK>", s)
        s = re.sub(r"\b[0-9a-f]{10}-", "<HASH>-", s)  # audit --verify's converted/<path hash>-name.keras
        return re.sub(r"\.k2to3-partial-\d+-[0-9a-f]+", ".k2to3-partial", s)
    return obj


def snapshot(path: Path, only: str | None) -> None:
    from k2to3.workers.pool import Pool

    todo = [c for c in cases() if not only or only in c["name"]]
    results: dict[str, Any] = {}
    t0 = time.perf_counter()
    with Pool(max_memory=None) as pool:
        for i, case in enumerate(todo):
            tmp = Path(tempfile.mkdtemp(prefix="snap-"))
            t = time.perf_counter()
            try:
                results[case["name"]] = normalise(run(case, pool, tmp), str(tmp))
            except Exception as exc:  # a crash is a result too: it must be the same after
                results[case["name"]] = {"crash": f"{type(exc).__name__}: {str(exc)[:300]}"}
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            print(f"[{i + 1}/{len(todo)}] {case['name']}: {_summary(results[case['name']])} "
                  f"({time.perf_counter() - t:.1f} s)", flush=True)
    _write(path, results)
    print(f"{len(results)} cases in {time.perf_counter() - t0:.0f} s -> {path}")


def _read(path: Path) -> Any:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return json.loads(data)


def _write(path: Path, results: Any) -> None:
    text = (json.dumps(results, indent=1, sort_keys=True, default=str) + "\n").encode()
    path.write_bytes(gzip.compress(text, mtime=0) if path.suffix == ".gz" else text)


def _summary(r: dict[str, Any]) -> str:
    if "crash" in r:
        return "CRASH " + r["crash"]
    if "error" in r:
        return f"error {r['error']['code']}"
    return " ".join(f"{k}={v.get('verdict')}" for k, v in r.items() if isinstance(v, dict))


def _diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: {'missing before' if k not in a else 'missing after'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out)
    elif a != b and not (isinstance(a, float) and isinstance(b, float) and a != a and b != b):  # NaN is NaN
        out.append(f"{where}: {json.dumps(a, default=str)[:160]} -> {json.dumps(b, default=str)[:160]}")


def _generic(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def compare(before: Path, after: Path, noise: Path | None, write_noise: Path | None) -> int:
    a, b = _read(before), _read(after)
    diffs: list[str] = []
    _diff(a, b, "", diffs)
    if write_noise is not None:
        fields = sorted({_generic(d.split(":", 1)[0]) for d in diffs})
        write_noise.write_text(json.dumps(fields, indent=1) + "\n")
        print(f"{len(diffs)} differences between two runs of the same code; {len(fields)} noisy fields -> "
              f"{write_noise}")
        return 0
    ignored = set(json.loads(noise.read_text())) if noise else set()
    real = [d for d in diffs if _generic(d.split(":", 1)[0]) not in ignored]
    for d in real:
        print(d)
    print(f"{len(a)} cases before, {len(b)} after; {len(diffs)} differences, {len(diffs) - len(real)} of them in "
          f"fields that differ between two runs of the same code; {len(real)} real")
    return 1 if real else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("out", type=Path)
    s.add_argument("--only")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--noise", type=Path)
    c.add_argument("--write-noise", type=Path)
    args = ap.parse_args()
    if args.cmd == "snapshot":
        snapshot(args.out, args.only)
        return 0
    return compare(args.before, args.after, args.noise, args.write_noise)


if __name__ == "__main__":
    sys.exit(main())
