"""The export check (report section `export`, docs/export.md): the .keras exported to ONNX, LiteRT, a TF SavedModel
or a torch ExportedProgram by Keras 3's own exporter in the worker of the backend it needs, the exported file run
by its own runtime in a fresh process (workers/keras3_export.py, workers/exported.py) on the seeded inputs and compared
with the Keras 2 golden (max abs/rel, minimum tolerance, argmax, per output), at the seeded batch and, where the
format kept the batch dimension dynamic, on the first sample alone. The file is exported beside its destination
under a temporary name and renamed into place only when it ran (a refused export leaves nothing). numpy only."""

from __future__ import annotations

import re
import shutil
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.checks.base import Check, Done, Jobs, Run
from k2to3.checks.number_format import fmt
from k2to3.core.compare import OutputStats, compare_outputs
from k2to3.core.writable import check_dir
from k2to3.errors import Exit, InputError
from k2to3.workers.process import WorkerError
from k2to3.workers.protocol import ExportRequest

FORMATS = ("onnx", "litert", "savedmodel", "torch")
# The backend whose worker runs each exporter: tf2onnx, the TFLite converter and ExportArchive trace a tf.function;
# torch.export traces the torch backend.
EXPORTER_BACKEND = {"onnx": "tensorflow", "litert": "tensorflow", "savedmodel": "tensorflow", "torch": "torch"}
SUFFIX = {"onnx": ".onnx", "litert": ".tflite", "savedmodel": "", "torch": ".pt2"}


def default_path(model: Path, fmt_: str) -> Path:
    """`convert -o MODEL.keras --export FORMAT`: MODEL.onnx, MODEL.tflite, MODEL_savedmodel/, MODEL.pt2."""
    stem = model.with_suffix("") if model.suffix == ".keras" else model
    return stem.with_name(stem.name + "_savedmodel") if fmt_ == "savedmodel" else stem.with_suffix(SUFFIX[fmt_])


def temp_path(dest: Path, fmt_: str) -> Path:
    """Beside the destination (one file system: the rename is atomic), with the suffix the exporter wants."""
    return dest.with_name(f".{dest.name}.k2to3-partial{SUFFIX[fmt_]}")


def target(fmt_: str, dest: Path) -> dict[str, Any]:
    """What Run.export holds: the format, where the file goes, and the temporary name it is exported under."""
    return {"format": fmt_, "path": dest, "temp": temp_path(dest, fmt_)}


def check_target(fmt_: str, dest: Path, force: bool, flag: str) -> None:
    """The destination of an export, before any work (pipeline/export.py, pipeline/convert.py)."""
    if fmt_ not in FORMATS:
        raise InputError(f"--format {fmt_}: unknown format", hint=f"choose one of {'|'.join(FORMATS)}")
    if fmt_ == "torch" and dest.suffix != ".pt2":
        raise InputError(f"{flag} {dest}: a torch ExportedProgram must end in .pt2", hint="e.g. -o model.pt2")
    if dest.exists() and not force:
        raise InputError(f"{flag} {dest}: exists", hint="pass --force to replace it")
    check_dir(dest.parent if str(dest.parent) else Path("."), flag)


def jobs(run: Run) -> Jobs:
    target = run.export
    assert target is not None
    backend = EXPORTER_BACKEND[target["format"]]
    return {backend: [lambda w: w.call(ExportRequest(keras=str(run.keras), format=target["format"],
                                                     path=str(target["temp"]), inputs=run.npz("inputs"),
                                                     out=run.npz("exported"), modules=run.modules))]}


def _worst(stats: list[OutputStats]) -> dict[str, Any]:
    agree = [s.argmax_agreement for s in stats if s.argmax_agreement is not None]
    return {"max_abs": max(s.max_abs for s in stats), "max_rel": max(s.max_rel for s in stats),
            "min_rtol": max(s.min_rtol for s in stats), "min_atol": max(s.min_atol for s in stats),
            "argmax_agreement": min(agree) if agree else None, "allclose": all(s.allclose for s in stats)}


def _compare(run: Run, reply: dict[str, Any]) -> dict[str, Any]:
    with np.load(run.npz("exported")) as z:
        full = [z[f"out{i}"] for i in range(reply["n_outputs"])]
        one = [z[f"b1_out{i}"] for i in range(reply["n_outputs"])] if "b1_out0" in z.files else None
    ref = run.outputs or []
    stats = compare_outputs(full, ref, run.rtol, run.atol)
    section: dict[str, Any] = {"outputs": [s.to_dict() for s in stats], **_worst(stats)}
    if one is not None:
        b1 = compare_outputs(one, [r[:1] for r in ref], run.rtol, run.atol)
        section["batch_1"] = {"outputs": [s.to_dict() for s in b1], **_worst(b1)}
    ok = section["allclose"] and (one is None or section["batch_1"]["allclose"])
    section["status"] = "parity" if ok else "mismatch"
    return section


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _place(temp: Path, dest: Path) -> None:
    """The verified file into place: an existing destination (allowed by --force) is replaced."""
    if dest.exists() or dest.is_symlink():
        _remove(dest)
    temp.replace(dest)


def _origin(line: str, report: dict[str, Any]) -> str:
    """A stop on an op no Keras 3 layer holds (a TFOpLambda translated into keras.ops calls of the graph): the Keras
    2 layer it came from, from the plan's translation findings (`tf.math.log1p -> keras.ops.log1p`)."""
    m = re.match(r"\S+ cannot take op (\w+)\b(?! in layer)", line)
    if not m:
        return line
    op = m.group(1).lower()
    for f in report.get("findings") or []:
        said = str(f.get("message", ""))
        if "-> keras.ops." in said and op in re.sub(r"[^a-z0-9]", "", str(f.get("layer", "")).lower()):
            head, sep, hint = line.partition(" (")
            return f"{head} from Keras 2 layer {f['layer']} ({said}){' (' if sep else ''}{hint}"
    return line


def collect(run: Run, done: dict[str, Done]) -> None:
    target = run.export
    assert target is not None
    fut: Future = next(iter(done["export"].values()))[0]
    temp, dest = Path(target["temp"]), Path(target["path"])
    base = {"format": target["format"], "path": str(dest),
            "exporter_backend": EXPORTER_BACKEND[target["format"]]}
    try:
        reply = fut.result()
    except WorkerError as exc:
        _remove(temp)
        status = "not_portable" if exc.code == int(Exit.NOT_PORTABLE) else "error"
        run.report["export"] = {**base, "status": status, "error": _origin(exc.message, run.report), "written": False}
        run.progress(f"export {target['format']}: {exc.message}")
        return
    section = {**base, **{k: reply.get(k) for k in ("keras_format", "keras_version", "runtime", "version",
                                                    "dynamic_batch", "batch", "load_seconds", "export_seconds",
                                                    "run_seconds", "runtime_peak_rss_mb", "unrolled")}}
    section["runtime_version"] = section.pop("version")
    section.update(_compare(run, reply))
    _place(temp, dest)
    section["written"] = True
    run.report["export"] = section
    run.progress(f"export {target['format']}: {section['status']} (max abs {fmt(section['max_abs'])}) -> {dest}")


def markdown(report: dict[str, Any]) -> list[str]:
    e = report.get("export")
    if not e:
        return []
    if "error" in e:
        return [f"**{e['status']}**: {e['error']} (nothing written)."]
    lines = [f"**{e['status']}**: `{e['path']}` ({e['format']}, exported on {e['exporter_backend']} with Keras "
             f"{e['keras_version']}, run by {e['runtime']} {e['runtime_version']} in its own process); dynamic "
             f"batch: {'yes' if e['dynamic_batch'] else 'no'}.", "",
             "| batch | output | max abs | max rel | min rtol | argmax % | allclose |", "|---|---|---|---|---|---|---|"]
    rows = [(e["batch"], e["outputs"])] + ([(1, e["batch_1"]["outputs"])] if "batch_1" in e else [])
    for batch, outs in rows:
        for o in outs:
            lines.append(f"| {batch} | {o['index']} | {fmt(o['max_abs'])} | {fmt(o['max_rel'])} | {fmt(o['min_rtol'])} "
                         f"| {o['argmax_agreement'] if o['argmax_agreement'] is not None else '-'} | {o['allclose']} |")
    lines += ["", f"export {e['export_seconds']} s, run {e['run_seconds']} s (runtime peak "
              f"{e['runtime_peak_rss_mb']} MB)."]
    return lines


def console(report: dict[str, Any]) -> list[str]:
    e = report.get("export")
    if not e:
        return []
    if "error" in e:
        return [f"export {e['format']}: {e['status']}: {e['error']}"]
    b1 = f", batch 1 max abs {fmt(e['batch_1']['max_abs'])}" if "batch_1" in e else ""
    return [f"export {e['format']}: {e['status']} against the Keras 2 reference in {e['runtime']} (max abs "
            f"{fmt(e['max_abs'])}, min rtol {fmt(e['min_rtol'])}{b1}; dynamic batch "
            f"{'yes' if e['dynamic_batch'] else 'no'}) -> {e['path']}"]


def outcome(report: dict[str, Any]) -> str | None:
    status = (report.get("export") or {}).get("status")
    return {"mismatch": "mismatch", "not_portable": "not_portable", "error": "error"}.get(status or "")


CHECK = Check(key="export", title="Export", stage=2, applies=lambda run: run.export is not None, jobs=jobs,
              collect=collect, markdown=markdown, console=console, outcome=outcome)
