"""`k2to3 verify`: the verification half of `convert` for a `.keras` that already exists (converted by k2to3, by
hand, or by plain Keras 3), against the Keras 2 original (`--reference legacy.h5`, tf_keras computes the golden)
or a golden file written earlier (`--golden MODEL.golden.npz`). The backend work is convert.verify_backends;
the file under test is only read (safe_mode=True in every worker). No backend import here."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from k2to3 import __version__
from k2to3.convert import (
    Job,
    Options,
    Progress,
    _compile_losses,
    _inputs,
    _prepare_source,
    _report_base,
    parse_sources,
    plan_for,
    resolve_fit_steps,
    set_verdict,
    tolerances,
    verify_backends,
)
from k2to3.errors import InputError
from k2to3.formats.artifact import file_sha256, read_artifact, sniff
from k2to3.golden import Golden, read_golden
from k2to3.gradients import apply_verdict
from k2to3.source.extract import index_sources
from k2to3.trainchecks import run_training_checks
from k2to3.upgrade import Plan
from k2to3.workers.pool import KINDS, Pool


@dataclass
class VerifyOptions:
    keras: Path
    reference: Path | None = None  # the Keras 2 .h5 (tf_keras golden)
    golden: Path | None = None  # a golden file (convert --save-golden)
    input_npz: Path | None = None
    rtol: float | None = None
    atol: float | None = None
    backends: tuple[str, ...] = KINDS
    sources: tuple[str, ...] = ()
    trust_bytecode: bool = False
    max_memory: int | None = None
    grads: bool = False  # --grads: loss gradients on every backend vs tf_keras (gradients.py)
    loss: str | None = None
    grad_rtol: float | None = None
    grad_atol: float | None = None
    grads_training: bool = True  # --grads-mode train (batch statistics) | inference (frozen BatchNormalization)
    fit_steps: int | None = None  # --fit-steps N (with --reference); None: 1 with --grads, else 0
    targets: Path | None = None  # --targets y.npz for --fit-steps


def check(opts: VerifyOptions) -> None:
    if not opts.keras.exists():
        raise InputError(f"{opts.keras}: no such file", hint="pass the Keras 3 .keras file to verify")
    if opts.keras.is_dir() or sniff(opts.keras) != "zip":
        raise InputError(f"{opts.keras}: not a Keras 3 .keras archive", hint="verify takes the .keras file; "
                         "convert a Keras 2 .h5 with `k2to3 convert`")
    if (opts.reference is None) == (opts.golden is None):
        raise InputError("verify needs exactly one of --reference LEGACY.h5 or --golden FILE.golden.npz",
                         hint="e.g. k2to3 verify model.keras --reference legacy.h5")
    if opts.reference is not None:
        if not opts.reference.is_file():
            raise InputError(f"--reference {opts.reference}: no such file", hint="pass the Keras 2 .h5")
        if sniff(opts.reference) != "hdf5":
            raise InputError(f"--reference {opts.reference}: not an HDF5 file",
                             hint="pass the Keras 2 .h5 the .keras was converted from")
    if opts.golden is not None and opts.grads:
        raise InputError("--grads with --golden: a golden file holds outputs, not a model to differentiate",
                         hint="pass --reference LEGACY.h5 with --grads")
    if opts.golden is not None and opts.fit_steps:
        raise InputError("--fit-steps with --golden: a golden file holds outputs, not a model to train",
                         hint="pass --reference LEGACY.h5 with --fit-steps")
    if opts.targets is not None and not opts.targets.is_file():
        raise InputError(f"--targets {opts.targets}: no such file", hint="pass an .npz with arrays y0, y1, ...")
    if opts.targets is not None and not opts.fit_steps:
        raise InputError("--targets applies to --fit-steps only", hint="add --fit-steps N")
    if opts.golden is not None and opts.input_npz is not None:
        raise InputError("--input with --golden: the golden file holds its inputs", hint="drop --input")
    for b in opts.backends:
        if b not in KINDS:
            raise InputError(f"unknown backend '{b}'", hint=f"choose from {','.join(KINDS)}")


def verify(opts: VerifyOptions, progress: Progress = lambda s: None, pool: Pool | None = None) -> dict[str, Any]:
    """Verify an existing .keras; returns the report dict (report["exit_code"]: the CLI's exit code, as convert)."""
    opts = resolve_fit_steps(opts)
    check(opts)
    golden = read_golden(opts.golden) if opts.golden is not None else None
    copts = Options(src=opts.reference or opts.golden, out=opts.keras, input_npz=opts.input_npz, rtol=opts.rtol,
                    atol=opts.atol, backends=opts.backends, golden=golden is None, sources=opts.sources,
                    trust_bytecode=opts.trust_bytecode, max_memory=opts.max_memory, grads=opts.grads,
                    loss=opts.loss, grad_rtol=opts.grad_rtol, grad_atol=opts.grad_atol,
                    grads_training=opts.grads_training, fit_steps=opts.fit_steps, targets=opts.targets)
    own_pool = pool is None
    work = Path(tempfile.mkdtemp(prefix="k2to3-verify-"))
    try:
        if pool is None:
            pool = Pool(opts.backends, golden=golden is None, max_memory=opts.max_memory, one_shot=True)
        elif set(opts.backends) - set(pool.backends):
            raise InputError(f"the worker pool serves {pool.backends}, not {opts.backends}")
        job = Job(copts, progress, pool, work=work, keras=opts.keras)
        if golden is not None:
            return _against_golden(job, golden)
        return _against_reference(job)
    finally:
        if own_pool and pool is not None:
            pool.close()
        shutil.rmtree(work, ignore_errors=True)


def _finish(job: Job, plan: Plan, report: dict[str, Any], rtol: float, atol: float, build_hash: str | None,
            weight_bytes: int, given: list[np.ndarray] | None, training_config: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    t0 = time.perf_counter()
    report["tolerance"] = report.get("tolerance") or {"rtol": rtol, "atol": atol, "source": "default"}
    report["output"] = {"path": str(job.keras), "sha256": file_sha256(job.keras), "checked_only": True,
                        "load": f"keras.saving.load_model({str(job.keras)!r})"}
    verify = ("tensorflow",) if plan.tf_only else job.opts.backends
    job.progress("workers: " + ", ".join(job.pool.roles()))
    job.pool.start(weight_bytes)
    timings: dict[str, float] = {}
    reference, mismatched, hashes = verify_backends(job, plan, report, job.keras, build_hash, verify, rtol, atol,
                                                    weight_bytes, timings, given)
    opts = job.opts
    if opts.grads or opts.fit_steps:
        run_training_checks(job, report, job.keras, verify, reference, training_config, weight_bytes,
                            _compile_losses(plan))
        if (report.get("training") or {}).get("status") == "mismatch":
            mismatched.append("training")
    timings["total_seconds"] = round(time.perf_counter() - t0, 3)
    report["timings"] = timings
    set_verdict(report, plan, mismatched, hashes)
    if opts.grads:
        apply_verdict(report)
    return report


def _against_reference(job: Job) -> dict[str, Any]:
    opts = job.opts
    files, build_fn = parse_sources(opts.sources)
    index = index_sources(files, skip_bad=any(Path(s).is_dir() for s in opts.sources)) if files else None
    artifact = read_artifact(opts.src, weights_only_ok=build_fn is not None)
    job.h5 = opts.src
    source, plan = plan_for(opts, index, artifact, build_fn)
    report = _report_base(opts, artifact, plan)
    report.update(command="verify", schema="k2to3.convert/2")
    report["input"]["format"] = "HDF5" if artifact.model_config else "HDF5 weights only"
    if source is not None:
        _prepare_source(job, artifact, source, build_fn, job.work / "unused_module.py")
    if artifact.model_config is None:
        raise InputError(f"--reference {opts.src}: a weights-only file", hint="verify needs the full Keras 2 model "
                         "file (model.save), or a golden file from convert --save-golden")
    rtol, atol, source_tol = tolerances(opts, plan)
    report["tolerance"] = {"rtol": rtol, "atol": atol, "source": source_tol}
    _inputs(job, plan.model, report)
    return _finish(job, plan, report, rtol, atol, None, 4 * int(artifact.n_params or 0), None,
                   artifact.training_config)


def _against_golden(job: Job, golden: Golden) -> dict[str, Any]:
    opts, meta = job.opts, golden.meta
    np.savez(job.npz("inputs"), **{f"in{i}": x for i, x in enumerate(golden.inputs)})
    src = meta.get("input") if isinstance(meta.get("input"), dict) else {}
    rtol, atol, tol_source = golden.rtol, golden.atol, "golden file"
    if opts.rtol is not None:
        rtol, tol_source = opts.rtol, "user"
    if opts.atol is not None:
        atol, tol_source = opts.atol, "user"
    report: dict[str, Any] = {
        "schema": "k2to3.convert/2",
        "command": "verify",
        "k2to3_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "input": {"path": str(golden.path), "sha256": file_sha256(golden.path), "format": "golden npz",
                  "keras_version": src.get("keras_version"), "n_params": int(src.get("n_params") or 0),
                  "n_weight_tensors": int(src.get("n_weight_tensors") or 0), "original": src.get("path")},
        "findings": [], "renames": {}, "dtype_policies": [],
        "inputs": [{"name": f"in{i}", "shape": list(x.shape), "dtype": str(x.dtype), "source": str(golden.path)}
                   for i, x in enumerate(golden.inputs)],
        "reference": {"kind": "golden-npz", "path": str(golden.path), "created": meta.get("created"),
                      "k2to3_version": meta.get("k2to3_version"), "recorded": meta.get("reference"),
                      "versions": meta.get("versions")},
        "tolerance": {"rtol": rtol, "atol": atol, "source": tol_source},
    }
    build_hash = meta.get("weight_hash") if isinstance(meta.get("weight_hash"), str) else None
    weight_bytes = 4 * int(src.get("n_params") or 0)
    return _finish(job, Plan(model={}), report, rtol, atol, build_hash, weight_bytes, golden.outputs)
