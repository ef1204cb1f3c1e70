"""`k2to3 convert LEGACY -o MODEL.keras`: read (formats) -> upgrade (rules) -> rebuild and restore in the tensorflow
worker -> checks on every backend in its own process -> save atomically -> verdict. No backend import here."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from k2to3.checks import outputs as outputs_check
from k2to3.checks.base import Progress, Run
from k2to3.checks.exported_file import EXPORTER_BACKEND, default_path, target
from k2to3.checks.exported_file import check_target as check_export_target
from k2to3.checks.golden_file import golden_path
from k2to3.checks.registry import SAVED_STAGE, VERIFY_STAGES
from k2to3.checks.runner import run_checks, set_verdict
from k2to3.core.findings import Finding, not_portable_line
from k2to3.core.keras_versions import check_target as check_keras_target
from k2to3.core.options import CheckOptions, ConvertOptions, validate
from k2to3.core.policies import DEFAULT_ATOL, DEFAULT_RTOL, POLICY_TOLERANCE
from k2to3.errors import Exit, InputError, K2to3Error
from k2to3.formats import Input, open_input
from k2to3.formats.artifact import file_sha256
from k2to3.formats.checkpoint import prefix_of as checkpoint_prefix
from k2to3.formats.pairs import find_config, is_weights_only
from k2to3.pipeline import build_search, targetenv, tf_keras_reference
from k2to3.pipeline import report as report_mod
from k2to3.pipeline import sources as sources_mod
from k2to3.pipeline import target as target_mod
from k2to3.pipeline.bridge import bridge
from k2to3.pipeline.checkpoints import bridge_checkpoint, needs_no_source
from k2to3.pipeline.prepare import LegacyModel, model_of_inputs, prepare, write_inputs
from k2to3.upgrade.plan import Plan
from k2to3.workers.pool import Pool
from k2to3.workers.process import WorkerError
from k2to3.workers.protocol import BuildRequest


def check_paths(opts: ConvertOptions) -> None:
    """Every problem with the paths and options, before any work."""
    src, out = opts.src, opts.output
    if not src.exists() and checkpoint_prefix(src) is None:
        raise InputError(f"{src}: no such file", hint="check the path")
    if out.suffix != ".keras":
        raise InputError(f"{out}: the output must end in .keras", hint="e.g. -o model.keras")
    if out.exists() and out.resolve() == src.resolve():
        raise InputError(f"{out}: output would overwrite the input", hint="choose another -o path")
    if out.exists() and not opts.force:
        raise InputError(f"{out}: output exists", hint="pass --force to replace it")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{parent}: output directory does not exist", hint="create it first")
    try:  # a real write probe: os.access says yes to root even on read-only places
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".k2to3-probe-"):
            pass
    except OSError:
        raise InputError(f"{parent}: output directory is not writable", hint="choose a writable -o path") from None
    if opts.sources:
        module = sources_mod.module_path(out)
        if module.exists() and not opts.force:
            raise InputError(f"{module}: the generated module exists", hint="pass --force to replace it")
        if any(sources_mod.spec_path(spec).resolve() == module.resolve() for spec in opts.sources):
            raise InputError(f"{module}: the generated module would overwrite a --src file", hint="choose another -o")
    if opts.save_golden and not opts.force:
        if golden_path(out).exists():
            raise InputError(f"{golden_path(out)}: golden file exists", hint="pass --force to replace it")
    if opts.export is not None:
        check_export_target(opts.export, default_path(opts.output, opts.export), opts.force, "--export")
    check_options(opts)


def check_options(opts: ConvertOptions) -> None:
    """The options' own constraints (core/options.py), then --export's backend and --target-keras's release (also
    once for a whole store, stores/batch.py)."""
    validate(opts)
    if opts.export is not None:
        _check_export_backend(opts)
    if opts.target_keras is not None:
        release = check_keras_target(opts.target_keras)
        if opts.target_python is not None:  # its keras release, before any work
            targetenv.named(opts.target_python, release)


def _check_export_backend(opts: ConvertOptions) -> None:
    fmt = opts.export or ""
    if fmt not in EXPORTER_BACKEND:
        raise InputError(f"--export {fmt}: unknown format", hint=f"choose one of {'|'.join(EXPORTER_BACKEND)}")
    if EXPORTER_BACKEND[fmt] not in ("tensorflow", *opts.backends):
        raise InputError(f"--export {fmt} exports on the {EXPORTER_BACKEND[fmt]} backend, not in --backends",
                         hint=f"add {EXPORTER_BACKEND[fmt]} to --backends")


def tolerances(opts: CheckOptions, plan: Plan) -> tuple[float, float, str]:
    """The forward tolerance: the default, loosened to a reduced-precision policy's, or the user's."""
    rtol, atol, source = DEFAULT_RTOL, DEFAULT_ATOL, "default"
    for policy in sorted(plan.dtype_policies):
        if policy in POLICY_TOLERANCE:
            pr, pa = POLICY_TOLERANCE[policy]
            if pr > rtol:
                rtol, atol, source = pr, pa, f"dtype policy {policy}"
    if opts.rtol is not None:
        rtol, source = opts.rtol, "user"
    if opts.atol is not None:
        atol, source = opts.atol, "user"
    return rtol, atol, source


@contextmanager
def workers(opts: CheckOptions, pool: Pool | None, golden: bool = True) -> Iterator[Callable[[], Pool]]:
    """A function returning the worker pool: the caller's warm one, or one started on first use and closed after."""
    made: list[Pool] = []

    def get() -> Pool:
        if pool is not None:
            if set(opts.backends) - set(pool.backends):
                raise InputError(f"the worker pool serves {pool.backends}, not {opts.backends}")
            return pool
        if not made:
            made.append(Pool(opts.backends, golden=golden, max_memory=opts.max_memory, one_shot=True))
        return made[0]

    try:
        yield get
    finally:
        for p in made:
            p.close()


def partial_path(out: Path) -> Path:
    """Where the .keras is written until it has passed the checks (then renamed into place, atomically)."""
    return out.parent / f".{out.name}.k2to3-partial-{os.getpid()}-{id(out):x}.keras"


def convert(opts: ConvertOptions, progress: Progress = lambda s: None, pool: Pool | None = None) -> dict[str, Any]:
    """Run the whole job; returns the report dict (report["exit_code"] is the CLI's exit code). Pass a warm `pool`
    to convert many models without paying the backend imports again.

    Sources only add: when a run with --src fails after the plan (a worker could not import or build what the
    sources gave) and the same file converts without them, that conversion is the result, and its report says
    why the sources were set aside (`source.set_aside`)."""
    try:
        report = _convert(opts, progress, pool)
    except K2to3Error as exc:
        if not opts.sources or exc.code not in (Exit.INTERNAL, Exit.NOT_PORTABLE) \
                or isinstance(exc, report_mod.NotPortableReport):  # a plan stop: sources were already optional
            raise
        return _without_sources(opts, progress, pool, exc.line(), exc)
    if opts.sources and report.get("exit_code") == int(Exit.INTERNAL):
        why = "; ".join(f"{b}: {v.get('error')}" for b, v in (report.get("backends") or {}).items()
                        if v.get("status") == "error")[:300]
        return _without_sources(opts, progress, pool, why or "a backend failed", None, report)
    return report


def _without_sources(opts: ConvertOptions, progress: Progress, pool: Pool | None, why: str,
                     exc: K2to3Error | None, failed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The file alone, after a run with sources failed; the first outcome stands unless this one is better."""
    progress(f"with the --src files the conversion failed ({why}); trying the file alone")
    try:
        alone = _convert(dataclasses.replace(opts, sources=(), build_args=None), progress, pool)
    except K2to3Error:
        if exc is not None:
            raise exc from None
        return failed  # type: ignore[return-value]
    if alone.get("exit_code") not in (int(Exit.PARITY), int(Exit.MISMATCH)):
        if exc is not None:
            raise exc
        return failed  # type: ignore[return-value]
    alone["source"] = {"files": [str(s) for s in opts.sources], "set_aside": why}
    alone.setdefault("findings", []).insert(0, {
        "code": "K2T906", "severity": "warning", "layer": None,
        "message": f"the --src files were set aside: with them the conversion failed ({why}); the file converts "
                   "alone", "fix": "report it to k2to3 with the file and the sources"})
    return alone


def _convert(opts: ConvertOptions, progress: Progress, pool: Pool | None) -> dict[str, Any]:
    opts = opts.resolved()
    check_paths(opts)
    sources = sources_mod.read_sources(opts.sources, opts.build_args)
    if sources.files:
        progress(f"read {len(sources.files)} source file(s): definitions only, nothing is run")
    work = Path(tempfile.mkdtemp(prefix="k2to3-"))
    partial = partial_path(opts.output)
    partial_module = partial.with_suffix(".py")
    try:
        with workers(opts, pool) as get_pool:
            inp = open_input(opts.src, work, opts.config, weights_only_ok=_weights_only_ok(opts, sources))
            if inp.kind == "tf_checkpoint":
                inp = bridge_checkpoint(inp, sources, opts.output, work, get_pool, progress)
                if needs_no_source(inp):  # a plain model now: tf_keras's reference is the file and its optimizer
                    sources = sources_mod.Sources([], None, None)
            elif inp.needs_bridge:
                inp = bridge(inp, sources, opts.output, work, get_pool, progress)
            adapted = sources_mod.for_file_version(sources, inp.artifact.keras_version if inp.artifact else None)
            _choose_build(inp, sources, opts, work, get_pool, progress)
            decompiled: list[Finding] = []
            if opts.trust_bytecode and not sources.files:
                sources, decompiled = _decompiled_sources(inp, work, progress) or (sources, [])
            prepared = prepare(inp, sources, opts.output, opts.trust_bytecode)
            prepared.plan.findings.extend(f for f in decompiled if f.severity != "info")  # why one was not
            prepared.plan.findings.extend(adapted)
            plan, resolution = prepared.plan, prepared.resolution
            report = report_mod.base(opts.src, inp, plan)
            report["source"] = sources_mod.report_section(sources, resolution, opts.output)
            if plan.errors:
                report.update(verdict="not_portable", exit_code=int(Exit.NOT_PORTABLE))
                errors = resolution.errors if resolution is not None and resolution.errors else plan.errors
                raise report_mod.NotPortableReport(not_portable_line(errors), report)
            modules = sources_mod.write_modules(resolution, work, partial_module) \
                if resolution is not None and resolution.k3_code else None
            run, tol_source = _new_run(opts, LegacyModel(inp, prepared, sources, modules), report, work, get_pool(),
                                       progress, partial)
            started = time.perf_counter()
            _build(run, inp.pair, run.golden_args.get("build_fn"), tol_source)
            if opts.target_keras:  # every backend below verifies the file as written for the target
                report["target"] = target_mod.rewrite(run.keras, check_keras_target(opts.target_keras))
            run_checks(run, VERIFY_STAGES)
            if opts.target_keras:
                target_mod.verify(run, report["target"], check_keras_target(opts.target_keras), opts.target_python)
            _place(run, modules, partial_module)
            run.timings["total_seconds"] = round(time.perf_counter() - started, 3)
            set_verdict(report, plan.tf_only)
            target_mod.settle(report)
            run_checks(run, [SAVED_STAGE])
            return report
    finally:
        for tmp in (partial, partial_module):
            if tmp.exists():
                tmp.unlink()
        shutil.rmtree(work, ignore_errors=True)


def _decompiled_sources(inp: Input, work: Path, progress: Progress
                        ) -> tuple[sources_mod.Sources, list[Finding]] | None:
    """--trust-bytecode without --src: Lambdas whose bytecode another Python wrote are decompiled (read as data,
    never unmarshalled or run here) into a Keras 2 module in the job directory, then read as if passed with --src."""
    from k2to3.upgrade.bytecode import DECOMPILED_PREFIX, decompiled_module

    if inp.artifact is None or not inp.artifact.model_config:
        return None
    text, findings = decompiled_module(inp.artifact.model_config, inp.path.name)
    if text is None:
        return (sources_mod.Sources([], None, None), findings) if findings else None
    path = work / f"{DECOMPILED_PREFIX}{inp.path.stem if inp.path.stem.isidentifier() else 'model'}.py"
    path.write_text(text)
    progress(f"decompiled {len(findings)} Lambda function(s) from the file's bytecode (--trust-bytecode)")
    return sources_mod.read_sources((str(path),)), findings


def _weights_only_ok(opts: ConvertOptions, sources: sources_mod.Sources) -> bool:
    """A save_weights file is built by a --src function: named, or searched for when no config sits beside it."""
    if sources.build_fn is not None:
        return True
    return bool(sources.files) and opts.config is None and is_weights_only(opts.src) and find_config(opts.src) is None


def _choose_build(inp: Input, sources: sources_mod.Sources, opts: ConvertOptions, work: Path,
                  get_pool: Callable[[], Pool], progress: Progress) -> None:
    """A weights-only file without its build function (or its arguments): found in the --src files."""
    if inp.artifact is not None and inp.artifact.model_config is None:
        build_search.add_script_builds(sources)
    if inp.artifact is None or not build_search.needs_search(sources, inp.artifact):
        return
    weights = build_search.WeightFile(inp.path, build_search.weight_groups(inp.artifact))
    chosen = build_search.choose(sources, weights, opts.output, work, get_pool, progress)
    sources.build_fn, sources.build_args, sources.match = chosen.fn, chosen.build_args, chosen.match
    if chosen.match:
        progress(chosen.match["summary"])


def _new_run(opts: ConvertOptions, model: LegacyModel, report: dict[str, Any], work: Path, pool: Pool,
             progress: Progress, partial: Path) -> tuple[Run, str]:
    """The run the checks see: the partial .keras against the Keras 2 reference as tf_keras computes it."""
    inp, prepared, modules = model.inp, model.prepared, model.modules
    plan, artifact = prepared.plan, inp.artifact
    assert artifact is not None
    args = tf_keras_reference.golden_args(work, model, opts.trust_bytecode)
    rtol, atol, tol_source = tolerances(opts, plan)
    run = Run(options=opts, pool=pool, work=work, progress=progress, keras=partial, report=report, plan=plan,
              backends=("tensorflow",) if plan.tf_only else opts.backends, rtol=rtol, atol=atol,
              weight_bytes=4 * int(artifact.n_params or 0), reference_h5=inp.h5, golden_args=args,
              reference_origin=tf_keras_reference.origin(args, inp), modules=[str(modules.k3)] if modules else [],
              fixed_random=bool(prepared.resolution and prepared.resolution.random),
              training_config=artifact.training_config, golden_path=_golden_path(opts), output_path=opts.output,
              export=target(opts.export, default_path(opts.output, opts.export)) if opts.export else None)
    return run, tol_source


def _golden_path(opts: ConvertOptions) -> Path | None:
    return golden_path(opts.output) if opts.save_golden else None


def _build(run: Run, pair: bool, build_fn: str | None, tol_source: str) -> None:
    """Rebuild and restore in the tensorflow worker: the .keras at run.keras, the ledger and the weight hash."""
    report, plan, opts = run.report, run.plan, run.options
    if not build_fn:
        report["inputs"] = write_inputs(run.npz("inputs"), opts.inputs, plan.model)
    plan_path = run.work / "plan.json"
    plan_path.write_text(json.dumps(plan.to_json()))
    report["tolerance"] = {"rtol": run.rtol, "atol": run.atol, "source": tol_source}
    # One process per backend. The tensorflow worker builds first (torch and jax wait for the file).
    run.progress("starting workers: " + ", ".join(run.pool.roles()) + " (imports: seconds)")
    run.pool.start(run.weight_bytes)
    outputs_check.start_reference(run)  # with --fit-steps: tf_keras's golden beside the build, on a worker of its own
    try:
        build = run.pool.get("tensorflow").call(BuildRequest(
            plan=str(plan_path), h5=str(run.reference_h5), out=str(run.keras), modules=run.modules, build_fn=build_fn,
            build_args=run.golden_args.get("build_args")))
    except WorkerError as exc:
        raise _as_user_error(exc) from None
    run.pool.learn("tensorflow", run.weight_bytes)
    if build_fn:
        report["inputs"] = write_inputs(run.npz("inputs"), opts.inputs, model_of_inputs(build["inputs"]))
    run.timings["build_seconds"] = round(build["seconds"], 3)
    run.progress(f"rebuilt and restored {build['ledger']['tensors_restored']}/"
                 f"{build['ledger']['tensors_expected']} weight tensors; verifying")
    report["ledger"] = build["ledger"]
    if pair:
        report["ledger"]["weights_matched_by"] = report["input"]["pair"]["weights_matched_by"]
    report["build"] = {"weight_hash": build["weight_hash"], "warnings": build["warnings"]}
    for note in build.get("notes", []):  # K2T436-K2T437 on a --src built model: its .keras needs k2to3.portable
        finding = Finding(note["code"], "info", note["message"], note["layer"])
        plan.findings.append(finding)
        report["findings"].append(finding.to_dict())
        plan.needs_portable = True
    run.build = build
    run.weight_bytes = 4 * int(build["ledger"].get("params_restored") or 0) or run.weight_bytes


def _place(run: Run, modules: sources_mod.Modules | None, partial_module: Path) -> None:
    """The checked .keras (and its generated module) renamed into place, atomically within the output directory;
    report.json `output` and `timings`."""
    opts, report, plan = run.options, run.report, run.plan
    assert isinstance(opts, ConvertOptions)
    module = sources_mod.module_path(opts.output)
    if modules is not None:
        os.replace(partial_module, module)
    os.replace(run.keras, opts.output)
    imports = (["import k2to3.portable"] if plan.needs_portable else []) + (
        [f"import {module.stem}"] if modules is not None and modules.needed_at_load else [])
    report["output"] = {"path": str(opts.output), "sha256": file_sha256(opts.output),
                        "needs_k2to3_portable": plan.needs_portable,
                        "module": str(module) if modules is not None else None,
                        "load": "; ".join([*imports, f"keras.saving.load_model({str(opts.output)!r})"])}
    report["timings"] = run.timings


def _as_user_error(exc: WorkerError) -> K2to3Error:
    if exc.code is not None:
        return K2to3Error(exc.message, Exit(exc.code))
    return K2to3Error(f"{exc.kind} worker failed: {exc.message}", Exit.INTERNAL,
                      hint="this is a k2to3 bug; the worker log has the traceback")
