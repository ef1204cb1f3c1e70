"""`convert --target-keras 3.N`: the .keras rewritten in the config dialect Keras 3.N reads (rules/keras_versions.toml,
pure data), then loaded by Keras 3.N itself in its own environment (targetenv.py) and compared with the same Keras 2
golden as the current backends (report section `target`)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import h5py

from k2to3.checks.base import Run
from k2to3.checks.number_format import fmt
from k2to3.core.compare import compare_outputs
from k2to3.core.keras_versions import Version, check_weight_paths, downgrade_config, show
from k2to3.errors import Exit
from k2to3.pipeline import targetenv

SCRIPT = Path(__file__).resolve().parents[1] / "workers" / "target_load.py"
TIMEOUT_SECONDS = 900


def rewrite(keras_path: Path, target: Version) -> dict[str, Any]:
    """The archive at `keras_path` in the dialect of `target`, replaced atomically; the section's `dropped` list.
    A key or weight `target` cannot hold raises NotPortable (exit 3) before anything is placed."""
    with zipfile.ZipFile(keras_path) as zin:
        members = [(info, zin.read(info.filename)) for info in zin.infolist()]
    config, changes = None, []
    for info, data in members:
        if info.filename == "config.json":
            config, changes = downgrade_config(json.loads(data), target)
        elif info.filename == "model.weights.h5":
            check_weight_paths(_h5_paths(data), target)
    tmp = keras_path.with_name(keras_path.name + ".target")
    with zipfile.ZipFile(tmp, "w") as zout:
        for info, data in members:
            zout.writestr(info, json.dumps(config).encode() if info.filename == "config.json" else data)
    os.replace(tmp, keras_path)
    return {"keras": show(target), "dropped": [c.to_json() for c in changes]}


def _h5_paths(data: bytes) -> list[str]:
    paths: list[str] = []
    with h5py.File(io.BytesIO(data), "r") as f:
        f.visit(paths.append)
    return paths


def verify(run: Run, section: dict[str, Any], target: Version, python: Path | None) -> None:
    """Load run.keras with Keras `target` in its environment and compare with the reference outputs."""
    env = targetenv.named(python, target) if python else targetenv.ensure(target, run.progress)
    section["environment"] = env.to_json()
    if env.created:
        run.progress(f"created the Keras {env.keras_version} environment in {env.seconds:.0f} s "
                     f"({env.size_bytes / 2**20:.0f} MB): {env.python.parent.parent}")
    # absolute: the script runs in the work directory, a relative -o (a store's OUT/) would not resolve there
    req = {"keras": str(Path(run.keras).resolve()), "inputs": run.npz("inputs"), "out": run.npz("out-target"),
           "modules": [str(Path(m).resolve()) for m in run.modules]}
    reply = run_script(env.python, env.backend, run.work, req, f"Keras {show(target)}")
    section.update(_judge(run, reply))
    run.progress(f"Keras {section.get('keras_version', show(target))} ({env.backend}): {section['status']}")


def run_script(python: Path, backend: str, work: Path, request: dict[str, Any], what: str) -> Any:
    """workers/target_load.py run by `python` with a copy of k2to3/portable alone on its path, a private KERAS_HOME
    and no user site-packages; its reply (a dict, or a list for a batch request)."""
    req_path = work / "target-request.json"
    req_path.write_text(json.dumps(request))
    script = work / SCRIPT.name
    shutil.copy(SCRIPT, script)
    home = work / "target-keras-home"
    home.mkdir(exist_ok=True)
    env_vars = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "KERAS_"))}
    env_vars.update(PYTHONPATH=str(targetenv.portable_path(work)), KERAS_BACKEND=backend, KERAS_HOME=str(home),
                    PYTHONNOUSERSITE="1", OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    try:
        r = subprocess.run([str(python), "-s", str(script), str(req_path)], capture_output=True, text=True,
                           env=env_vars, cwd=work, timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return {"error": f"the {what} worker did not finish in {TIMEOUT_SECONDS} s"}
    (work / "target.log").write_text(r.stderr)
    line = next((x for x in r.stdout.splitlines() if x.startswith("K2TO3-TARGET ")), None)
    if line is None:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"error": f"the {what} worker exited with {r.returncode}: {last}"}
    return json.loads(line.split(" ", 1)[1])


def _judge(run: Run, reply: dict[str, Any]) -> dict[str, Any]:
    if "error" in reply:
        return {"status": "error", "error": reply["error"]}
    if run.outputs is None:
        return {"status": "error", "error": "no reference outputs to compare with", **reply}
    with __import__("numpy").load(run.npz("out-target")) as z:
        got = [z[f"out{i}"] for i in range(len(z.files))]
    stats = compare_outputs(got, run.outputs, run.rtol, run.atol)
    opt = run.report.get("optimizer") or {}
    # the saved optimizer state must reach the target too: its step counter is the file's
    state_ok = opt.get("status") != "restored" or reply.get("optimizer_iterations") == opt.get("iteration")
    ok = all(s.allclose for s in stats) and not reply["warnings"] and state_ok
    return {**reply, "status": "parity" if ok else "mismatch", "outputs": [s.to_dict() for s in stats],
            **({} if state_ok else {"error": f"optimizer step {reply.get('optimizer_iterations')} after loading, "
                                             f"the file's is {opt.get('iteration')}"})}


def settle(report: dict[str, Any]) -> None:
    """The target's outcome in the verdict: a mismatch on Keras 3.N is a mismatch (exit 1), a file Keras 3.N cannot
    load an error (exit 4: a dialect rule is missing)."""
    status = (report.get("target") or {}).get("status")
    if status == "error" and report["exit_code"] in (int(Exit.PARITY), int(Exit.MISMATCH)):
        report.update(verdict="error", exit_code=int(Exit.INTERNAL))
    elif status == "mismatch" and report["exit_code"] == int(Exit.PARITY):
        report.update(verdict="mismatch", exit_code=int(Exit.MISMATCH))


def markdown(report: dict[str, Any]) -> list[str]:
    t = report.get("target")
    if not t:
        return []
    env = t.get("environment") or {}
    lines = [f"Written for Keras {t['keras']}; loaded with Keras {t.get('keras_version', '?')} on "
             f"{env.get('backend', '?')} ({env.get('python', '?')}): **{t.get('status', 'not run')}**."]
    if env.get("created"):
        lines.append(f"Environment created in {env['seconds']} s ({env['size_mb']} MB).")
    if t.get("error"):
        lines.append(f"Error: {t['error']}")
    for o in t.get("outputs") or []:
        lines.append(f"- output {o.get('index', 0)}: max abs {fmt(o.get('max_abs'))}, max rel {fmt(o.get('max_rel'))}")
    for w in t.get("warnings") or []:
        lines.append(f"- load warning: {w}")
    dropped = t.get("dropped") or []
    if dropped:
        by = sorted({f"{d['code']} `{d['key']}`" for d in dropped})
        lines.append(f"Keys dropped at their default or rewritten ({len(dropped)}): {', '.join(by)}.")
    return lines
