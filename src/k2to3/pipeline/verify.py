"""`k2to3 verify`: the checks of `convert` on a `.keras` that already exists (converted by k2to3, by hand, or by plain
Keras 3), against the Keras 2 original (`--reference legacy.h5`, tf_keras computes the golden) or a golden file
written earlier (`--golden MODEL.golden.npz`). The file under test is only read (safe_mode=True in every worker).
No backend import here."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.checks.base import Progress, Run
from k2to3.checks.golden_file import Golden, read_golden
from k2to3.checks.registry import VERIFY_STAGES
from k2to3.checks.runner import run_checks, set_verdict
from k2to3.core.options import VerifyOptions, validate
from k2to3.errors import InputError
from k2to3.formats import open_input
from k2to3.formats.artifact import file_sha256, read_keras_config, sniff
from k2to3.pipeline import report as report_mod
from k2to3.pipeline import sources as sources_mod
from k2to3.pipeline import tf_keras_reference
from k2to3.pipeline.convert import tolerances, workers
from k2to3.pipeline.prepare import LegacyModel, prepare, write_inputs
from k2to3.pipeline.recorded_reference import with_recorded_reference
from k2to3.upgrade.plan import Plan
from k2to3.workers.pool import Pool


def check(opts: VerifyOptions) -> None:
    """Every problem with the paths and options, before any work."""
    if not opts.model.exists():
        raise InputError(f"{opts.model}: no such file", hint="pass the Keras 3 .keras file to verify")
    if opts.model.is_dir() or sniff(opts.model) != "zip":
        raise InputError(f"{opts.model}: not a Keras 3 .keras archive", hint="pass the Keras 3 .keras file; "
                         "convert a Keras 2 .h5 with `k2to3 convert`")
    if (opts.reference is None) == (opts.golden is None):
        raise InputError("verify needs exactly one of --reference LEGACY.h5 or --golden FILE.golden.npz",
                         hint="e.g. k2to3 verify model.keras --reference legacy.h5")
    validate(opts)  # the options' own constraints (core/options.py): --reference exists, --golden without --grads...
    if opts.reference is not None and sniff(opts.reference) != "hdf5":
        raise InputError(f"--reference {opts.reference}: not an HDF5 file",
                         hint="pass the Keras 2 .h5 the .keras was converted from")
    if opts.golden is not None and opts.sources:
        sources_mod.generated_modules(opts.sources, opts.model)
    elif opts.golden is not None:
        _check_registered(opts.model)


def _check_registered(model: Path) -> None:
    """A .keras whose objects a module registers (`lam_k3>lambda_fn`: convert --src) loads only after that module:
    without --src, one line naming it rather than the loader's deserialization error. k2to3>: the portable runtime,
    which every worker imports."""
    config, _, _ = read_keras_config(model)
    found = sorted({m.group(1) for m in re.finditer(r'"([A-Za-z_][\w.]*)>[^"]+"', json.dumps(config))} - {"k2to3"})
    if found:
        name = f"{found[0]}.py"
        raise InputError(f"{model}: its objects are registered by the package '{found[0]}', which --golden does not "
                         "import", hint=f"pass --src {name} (the module convert wrote beside it), or --reference "
                                        "LEGACY.h5 with the model's source")


def verify(opts: VerifyOptions, progress: Progress = lambda s: None, pool: Pool | None = None,
           export: dict[str, Any] | None = None) -> dict[str, Any]:
    """Verify an existing .keras; returns the report dict (report["exit_code"]: the CLI's exit code, as convert).
    `export` (pipeline/export.py): also export it and check the exported file (checks/exported_file.py)."""
    opts, found = with_recorded_reference(opts.resolved(), "export" if export is not None else "verify")
    if found:
        progress(found)
    check(opts)
    golden = read_golden(opts.golden) if opts.golden is not None else None
    work = Path(tempfile.mkdtemp(prefix="k2to3-verify-"))
    try:
        with workers(opts, pool, golden=golden is None) as get_pool:
            run = _against_golden(opts, golden, work, progress, get_pool) if golden is not None else \
                _against_reference(opts, work, progress, get_pool)
            if export is not None:
                run.export = export
                run.report["command"] = "export"
            t0 = time.perf_counter()
            run.progress("starting workers: " + ", ".join(run.pool.roles()) + " (imports: seconds)")
            run.pool.start(run.weight_bytes)
            run_checks(run, VERIFY_STAGES)
            run.timings["total_seconds"] = round(time.perf_counter() - t0, 3)
            run.report["timings"] = run.timings
            set_verdict(run.report, run.plan.tf_only)
            if found:  # the reference convert recorded: said in the report too
                run.report.setdefault("reference", {})["found"] = found
            return run.report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _output(model: Path) -> dict[str, Any]:
    return {"path": str(model), "sha256": file_sha256(model), "checked_only": True,
            "load": f"keras.saving.load_model({str(model)!r})"}


def _against_reference(opts: VerifyOptions, work: Path, progress: Progress, get_pool: Callable[[], Pool]) -> Run:
    assert opts.reference is not None
    sources = sources_mod.read_sources(opts.sources)
    inp = open_input(opts.reference, work, weights_only_ok=sources.build_fn is not None)
    prepared = prepare(inp, sources, opts.model, opts.trust_bytecode)
    plan, resolution = prepared.plan, prepared.resolution
    report = report_mod.base(opts.reference, inp, plan)
    report.update(command="verify", schema=report_mod.SCHEMA)
    assert inp.artifact is not None
    modules = sources_mod.write_modules(resolution, work, work / "unused_module.py") \
        if resolution is not None and resolution.k3_code else None
    if inp.artifact.model_config is None:
        raise InputError(f"--reference {opts.reference}: a weights-only file", hint="verify needs the full Keras 2 "
                         "model file (model.save), or a golden file from convert --save-golden")
    rtol, atol, tol_source = tolerances(opts, plan)
    report["tolerance"] = {"rtol": rtol, "atol": atol, "source": tol_source}
    report["inputs"] = write_inputs(str(work / "inputs.npz"), opts.inputs, plan.model)
    report["output"] = _output(opts.model)
    args = tf_keras_reference.golden_args(work, LegacyModel(inp, prepared, sources, modules), opts.trust_bytecode)
    return Run(options=opts, pool=get_pool(), work=work, progress=progress, keras=opts.model, report=report,
               plan=plan, backends=("tensorflow",) if plan.tf_only else opts.backends, rtol=rtol, atol=atol,
               weight_bytes=4 * int(inp.artifact.n_params or 0), reference_h5=inp.h5, golden_args=args,
               reference_origin=tf_keras_reference.origin(args, inp), modules=[str(modules.k3)] if modules else [],
               training_config=inp.artifact.training_config, fixed_random=bool(resolution and resolution.random))


def _against_golden(opts: VerifyOptions, golden: Golden, work: Path, progress: Progress,
                    get_pool: Callable[[], Pool]) -> Run:
    meta = golden.meta
    np.savez(work / "inputs.npz", **{f"in{i}": x for i, x in enumerate(golden.inputs)})
    src = meta.get("input") if isinstance(meta.get("input"), dict) else {}
    rtol, atol, tol_source = golden.rtol, golden.atol, "golden file"
    if opts.rtol is not None:
        rtol, tol_source = opts.rtol, "user"
    if opts.atol is not None:
        atol, tol_source = opts.atol, "user"
    report: dict[str, Any] = {
        "schema": report_mod.SCHEMA,
        "command": "verify",
        "k2to3_version": report_mod.__version__,
        "created": report_mod.now(),
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
        "output": _output(opts.model),
    }
    build_hash = meta.get("weight_hash") if isinstance(meta.get("weight_hash"), str) else None
    modules = sources_mod.generated_modules(opts.sources, opts.model)
    return Run(options=opts, pool=get_pool(), work=work, progress=progress, keras=opts.model, report=report,
               plan=Plan(model={}), backends=opts.backends, rtol=rtol, atol=atol,
               weight_bytes=4 * int(src.get("n_params") or 0), given=golden.outputs, given_hash=build_hash,
               modules=modules, fixed_random=sources_mod.draws_random(modules))
