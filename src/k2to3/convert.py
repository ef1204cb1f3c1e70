"""`k2to3 convert`: read, upgrade, rebuild + restore (tensorflow worker), save atomically, verify on
each backend in its own process, compare with the Keras 2 golden output. No backend import here."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from k2to3 import __version__
from k2to3.api import CallableModule
from k2to3.checks.compare import compare_outputs, first_divergent_layer, noise_stats, noise_verdict
from k2to3.core.inputs import input_specs, load_inputs, make_inputs
from k2to3.errors import Exit, InputError, K2to3Error, NotPortable
from k2to3.formats.artifact import file_sha256, read_artifact, read_keras_config, sniff
from k2to3.source.extract import index_sources
from k2to3.source.hoist import Resolution, collect_needs, module_name_for, resolve_in_files, resolve_sources
from k2to3.upgrade import Plan, upgrade
from k2to3.workers.pool import KINDS, Pool, WorkerError

DEFAULT_RTOL, DEFAULT_ATOL = 1e-5, 1e-6
# Tolerances that fit reduced-precision compute dtypes (the report names the policy found).
POLICY_TOL = {"mixed_float16": (5e-3, 5e-3), "float16": (5e-3, 5e-3),
              "mixed_bfloat16": (5e-2, 5e-2), "bfloat16": (5e-2, 5e-2)}


@dataclass
class Options:
    src: Path
    out: Path
    report_dir: Path | None = None
    input_npz: Path | None = None
    rtol: float | None = None
    atol: float | None = None
    backends: tuple[str, ...] = KINDS
    force: bool = False
    golden: bool = True
    sources: tuple[str, ...] = ()  # --src FILE or FILE:BUILD_FN (repeatable)
    trust_bytecode: bool = False
    max_memory: int | None = None  # bytes; None: a share of MemAvailable (workers/pool.py)
    config: Path | None = None  # --config: the to_json/to_yaml architecture of a save_weights file (pairs.py)
    save_golden: bool = False  # write MODEL.golden.npz beside the .keras (golden.py; `k2to3 verify --golden`)
    grads: bool = False  # --grads: loss gradients on every backend vs tf_keras (gradients.py)
    loss: str | None = None  # --loss: the loss for --grads and --fit-steps instead of training_config's
    grad_rtol: float | None = None
    grad_atol: float | None = None
    grads_training: bool = True  # --grads-mode train (batch statistics) | inference (frozen BatchNormalization)
    # --fit-steps N: N-step training parity against tf_keras (docs/optimizers.md); None: 1 with --grads, else 0
    fit_steps: int | None = None
    targets: Path | None = None  # --targets y.npz for --fit-steps


Progress = Callable[[str], None]


def check_paths(opts: Options) -> None:
    src, out = opts.src, opts.out
    if not src.exists():
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
        module = _module_path(opts)
        if module.exists() and not opts.force:
            raise InputError(f"{module}: the generated module exists", hint="pass --force to replace it")
        if any(Path(spec.rsplit(":", 1)[0] if _has_fn(spec) else spec).resolve() == module.resolve()
               for spec in opts.sources):
            raise InputError(f"{module}: the generated module would overwrite a --src file", hint="choose another -o")
    if opts.save_golden and not opts.force:
        from k2to3.golden import golden_path

        if golden_path(out).exists():
            raise InputError(f"{golden_path(out)}: golden file exists", hint="pass --force to replace it")
    if opts.targets is not None and not opts.targets.is_file():
        raise InputError(f"--targets {opts.targets}: no such file", hint="pass an .npz with arrays y0, y1, ...")
    if opts.targets is not None and not opts.fit_steps:
        raise InputError("--targets applies to --fit-steps only", hint="add --fit-steps N")
    if opts.loss and not (opts.fit_steps or opts.grads):
        raise InputError("--loss applies to --fit-steps and --grads only", hint="add --fit-steps N or --grads")
    for b in opts.backends:
        if b not in KINDS:
            raise InputError(f"unknown backend '{b}'", hint=f"choose from {','.join(KINDS)}")


def _has_fn(spec: str) -> bool:
    head, sep, tail = spec.rpartition(":")
    return bool(sep) and bool(head) and tail.isidentifier() and not tail.startswith(("\\", "/"))


def parse_sources(specs: tuple[str, ...]) -> tuple[list[Path], str | None]:
    """--src values -> (files, build function). `FILE:FUNCTION` names the build function; a directory stands for
    the .py files under it."""
    files, build_fn = [], None
    for spec in specs:
        if _has_fn(spec):
            path, fn = spec.rsplit(":", 1)
            if build_fn and build_fn != fn:
                raise InputError(f"--src {spec}: a second build function (already {build_fn})",
                                 hint="name one build function")
            build_fn = fn
            files.append(Path(path))
        elif Path(spec).is_dir():
            from k2to3.source.files import SKIP_DIRS

            files.extend(p for p in sorted(Path(spec).rglob("*.py")) if not SKIP_DIRS & set(p.parts))
        else:
            files.append(Path(spec))
    files = list(dict.fromkeys(files))  # a file named and also under a named directory: once
    for f in files:
        if not f.is_file():
            raise InputError(f"--src {f}: no such file", hint="pass the Python file that defines the model")
        if f.suffix != ".py":
            raise InputError(f"--src {f}: not a .py file", hint="pass the Python source that builds the model")
    return files, build_fn


def _module_path(opts: Options) -> Path:
    return opts.out.with_name(module_name_for(opts.out.stem) + ".py")


def tolerances(opts: Options, plan: Plan) -> tuple[float, float, str]:
    rtol, atol, source = DEFAULT_RTOL, DEFAULT_ATOL, "default"
    for policy in sorted(plan.dtype_policies):
        if policy in POLICY_TOL:
            pr, pa = POLICY_TOL[policy]
            if pr > rtol:
                rtol, atol, source = pr, pa, f"dtype policy {policy}"
    if opts.rtol is not None:
        rtol, source = opts.rtol, "user"
    if opts.atol is not None:
        atol, source = opts.atol, "user"
    return rtol, atol, source


RELEASE_MIN_BYTES = 32 * 2**20  # weights from which convert closes each worker once its verification is done


@dataclass
class Job:
    opts: Options
    progress: Progress
    pool: Pool
    work: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="k2to3-")))
    h5: Path | None = None  # the Keras 2 HDF5 to read (the input, or an archive re-saved as HDF5)
    modules: list[str] = field(default_factory=list)  # generated modules every worker imports first
    golden_args: dict[str, Any] = field(default_factory=dict)
    build_fn: str | None = None
    module_needed: bool = False  # the .keras references objects of the generated module
    pair: bool = False  # the input is a config + weights pair merged into one HDF5 (pairs.py)
    opts_input: dict[str, Any] = field(default_factory=dict)  # what the input was bridged from (report input)
    keras: Path | None = None  # `k2to3 verify`: the existing .keras to check (convert: the partial output)

    def npz(self, name: str) -> str:
        return str(self.work / f"{name}.npz")

    def load(self, name: str) -> list[np.ndarray]:
        with np.load(self.npz(name)) as z:
            return [z[f"out{i}"] for i in range(len(z.files))]


def _report_base(opts: Options, artifact: Any, plan: Plan | None) -> dict[str, Any]:
    return {
        "schema": "k2to3.convert/2",
        "k2to3_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "input": {
            "path": str(opts.src),
            "sha256": file_sha256(opts.src),
            "keras_version": artifact.keras_version,
            "saved_backend": artifact.backend,
            "n_weight_tensors": artifact.n_tensors,
            "n_params": artifact.n_params,
            "optimizer_weights_dropped": artifact.optimizer_weight_count,
            "extra_attributes": artifact.extra_root_attrs,
        },
        "findings": [f.to_dict() for f in plan.findings] if plan else [],
        "renames": plan.renames if plan else {},
        "dtype_policies": sorted(plan.dtype_policies) if plan else [],
    }


def resolve_fit_steps(opts: Options) -> Options:
    """--fit-steps defaults to 1 with --grads (a gradient that agrees is worth little if the step built on it
    does not), else 0; an explicit value, 0 included, is kept."""
    if opts.fit_steps is None:
        return dataclasses.replace(opts, fit_steps=1 if opts.grads else 0)
    return opts


def convert(opts: Options, progress: Progress = lambda s: None, pool: Pool | None = None) -> dict[str, Any]:
    """Run the whole job; returns the report dict (report["exit_code"] is the CLI's exit code).

    Pass a warm `pool` to convert many models without paying the backend imports again."""
    opts = resolve_fit_steps(opts)
    check_paths(opts)
    files, build_fn = parse_sources(opts.sources)
    # Files named one by one must parse; files found under a --src directory may be skipped with a note.
    index = index_sources(files, skip_bad=any(Path(s).is_dir() for s in opts.sources)) if files else None
    if files:
        progress(f"read {len(files)} source file(s): definitions only, nothing is run")
    pools = {"pool": pool}

    def get_pool() -> Pool:
        if pools["pool"] is None:
            pools["pool"] = Pool(opts.backends, golden=opts.golden, max_memory=opts.max_memory, one_shot=True)
        elif set(opts.backends) - set(pools["pool"].backends):
            raise InputError(f"the worker pool serves {pools['pool'].backends}, not {opts.backends}")
        return pools["pool"]

    work = Path(tempfile.mkdtemp(prefix="k2to3-"))
    tmp_out = tmp_module = None
    try:
        h5, bridged = opts.src, None
        if sniff(opts.src) in ("zip", "savedmodel"):
            h5, bridged = _bridge(opts, index, work, get_pool, progress)
        elif build_fn is None and sniff(opts.src) == "hdf5":
            from k2to3.formats import pairs
            found = pairs.resolve(opts.src, opts.config)
            if found is not None:
                progress(f"architecture from {found.config_path}; weights from {opts.src}")
                h5, bridged = pairs.bridge(found, work, opts.config is None)
            else:
                from k2to3.formats import multigpu
                bridged_gpu = multigpu.bridge(opts.src, work)  # the template of a multi_gpu_model save
                if bridged_gpu is not None:
                    h5, bridged = bridged_gpu
        artifact = read_artifact(h5, weights_only_ok=build_fn is not None)
        source, plan = plan_for(opts, index, artifact, build_fn)
        if source is not None:
            plan.findings[:0] = [f for f in source.findings if f not in plan.findings]
            plan.needs_portable = plan.needs_portable or "k2to3.portable" in source.k3_code
        if bridged and "multi_gpu" in bridged:
            from k2to3.core.rules import builtin_code
            from k2to3.formats.multigpu import finding

            plan.findings.insert(0, finding(bridged["multi_gpu"], builtin_code("multi_gpu_wrapper")))
        if opts.trust_bytecode and artifact.model_config:
            from k2to3.upgrade.bytecode import inspect_lambdas

            plan.findings.extend(inspect_lambdas(artifact.model_config))
        report = _report_base(opts, artifact, plan)
        report["input"]["format"] = bridged["format"] if bridged else ("HDF5 weights only" if
                                                                       artifact.model_config is None else "HDF5")
        if bridged:
            report["input"].update(bridged)
        report["source"] = _source_report(files, build_fn, source, opts)
        if plan.errors:
            report.update(verdict="not_portable", exit_code=int(Exit.NOT_PORTABLE))
            first = (source.errors if source is not None and source.errors else plan.errors)[0]
            raise NotPortableReport(first.line(), report)
        job = Job(opts, progress, get_pool(), work=work, h5=h5, pair=bool(bridged and "pair" in bridged),
                  opts_input=bridged or {})
        tmp_out = _tmp_of(job)
        tmp_module = tmp_out.with_suffix(".py")
        if source is not None:
            _prepare_source(job, artifact, source, build_fn, tmp_module)
        if plan.weight_transforms and artifact.model_config is not None:
            from k2to3.upgrade.cudnn import golden_config

            golden_config(work, job.golden_args, artifact.model_config)  # tf_keras runs CuDNN layers on GPU only
        _prepare_legacy_golden(job, artifact)  # Keras 1 and Theano files
        return _run(job, artifact, plan, report, tmp_out, tmp_module if source is not None else None)
    finally:
        if pool is None and pools["pool"] is not None:
            pools["pool"].close()
        for tmp in (tmp_out, tmp_module):
            if tmp is not None and tmp.exists():
                tmp.unlink()
        shutil.rmtree(work, ignore_errors=True)


def _prepare_legacy_golden(job: Job, artifact: Any) -> None:
    from k2to3.upgrade.keras1 import reference as keras1_reference

    found = keras1_reference.golden_config(artifact.model_config)
    if found is not None and "golden_config" not in job.golden_args:
        path = job.work / "golden_keras1_config.json"
        path.write_text(json.dumps(found[0]))
        job.golden_args["golden_config"] = str(path)
        if found[1]:  # K2T485: the Functional form loads by layer name
            job.golden_args["golden_by_name"] = True
    if keras1_reference.is_theano(artifact.backend):
        job.golden_args["theano_kernels"] = True


def plan_for(opts: Options, index: Any, artifact: Any, build_fn: str | None) -> tuple[Resolution | None, Plan]:
    """The --src resolution (None without --src) and the upgrade plan of a Keras 2 artifact."""
    source = None
    if index is not None:
        source = resolve_in_files(index, artifact.model_config, artifact.training_config,
                                  module_name_for(opts.out.stem), build_fn)
    plan = upgrade(artifact.model_config, artifact.training_config, source) if artifact.model_config \
        else Plan(model={})
    from k2to3.upgrade.keras1 import reference as keras1_reference  # Theano-trained kernels (K2T480)

    plan.findings.extend(keras1_reference.findings(artifact.backend))
    return source, plan


def _bridge(opts: Options, index: Any, work: Path, get_pool: Callable[[], Pool],
            progress: Progress) -> tuple[Path, dict[str, Any]]:
    """A tf.keras `.keras` archive or Keras SavedModel: checked as data first (no Lambda bytecode, custom
    objects only from --src), then loaded by tf_keras with safe_mode=True in the tensorflow worker and
    re-saved as a Keras 2 .h5, which the rest of the pipeline reads like any other."""
    config, version, fmt = read_keras_config(opts.src)
    needs = collect_needs(config, None)
    lambdas = [n.layer for n in needs if n.kind in ("lambda", "activation_lambda")]
    if lambdas:
        raise NotPortable(f"{opts.src}: Lambda layers or lambda activations ({', '.join(map(str, lambdas[:3]))}) in "
                          f"a {fmt}; k2to3 rebuilds Lambdas from Keras 2 .h5 files with --src",
                          hint="in Keras 2, load it and model.save('model.h5'), then convert the .h5 with --src")
    k2_module = None
    custom = sorted({str(n.class_name or n.fn_name) for n in needs})
    if custom and index is None:
        raise NotPortable(f"{opts.src}: custom objects {', '.join(custom[:5])} in a {fmt}",
                          hint="pass the source that defines them with --src model.py")
    if custom:
        res = resolve_sources(index, config, None, module_name_for(opts.out.stem))
        if res.errors:
            raise NotPortable(res.errors[0].line())
        k2_module = work / f"_k2to3_bridge_{res.module}.py"
        k2_module.write_text(res.k2_code)
    progress(f"loading the {fmt} with tf_keras (safe_mode=True) and re-saving it as Keras 2 HDF5")
    out = work / "bridged.h5"
    try:
        reply = get_pool().get("tensorflow").call("bridge", src=str(opts.src), out=str(out),
                                                 k2_module=str(k2_module) if k2_module else None)
    except WorkerError as exc:
        raise NotPortable(f"{opts.src}: tf_keras could not load the {fmt}: {exc.message}",
                          hint="load it in Keras 2 and model.save('model.h5'), then convert the .h5") from None
    return out, {"format": fmt, "keras_version": version, "bridged": f"loaded by tf_keras {reply['keras_version']} "
                 f"(compile={reply['compiled']}) and re-saved as HDF5"}


def _source_report(files: list[Path], build_fn: str | None, source: Resolution | None,
                   opts: Options) -> dict[str, Any] | None:
    if source is None:
        return None
    return {"files": [str(f) for f in files], "build_fn": build_fn, "module": str(_module_path(opts)),
            "package": source.package, "objects": source.objects}


def _prepare_source(job: Job, artifact: Any, source: Resolution, build_fn: str | None, tmp_module: Path) -> None:
    """Write the generated modules: the Keras 3 one under its final name in the job directory (workers import
    it from there) and beside the output (renamed into place with the .keras), the Keras 2 one for the golden."""
    k3 = job.work / f"{source.module}.py"
    k3.write_text(source.k3_code)
    tmp_module.write_text(source.k3_code)
    k2 = job.work / f"_k2to3_golden_{source.module}.py"
    k2.write_text(source.k2_code)
    job.modules = [str(k3)]
    job.module_needed = source.needed_at_load
    trusted = False
    if job.opts.trust_bytecode and artifact.model_config is not None:
        from k2to3.upgrade.bytecode import loads_here

        trusted = loads_here(artifact.model_config)  # bytecode of another Python cannot serve as the golden
    job.golden_args = {"k2_module": str(k2), "trust_bytecode": trusted}
    if build_fn and artifact.model_config is None:  # weights-only: the build function makes the model
        job.build_fn = build_fn
        job.golden_args["build_fn"] = build_fn
    else:
        cfg = job.work / "golden_config.json"
        cfg.write_text(json.dumps(source.golden_config(artifact.model_config)))
        job.golden_args["golden_config"] = str(cfg)


class NotPortableReport(NotPortable):
    def __init__(self, message: str, report: dict[str, Any]):
        super().__init__(message, hint=None)
        self.report = report


def _inputs(job: Job, plan_model: dict[str, Any], report: dict[str, Any]) -> None:
    opts = job.opts
    xs = load_inputs(opts.input_npz, plan_model) if opts.input_npz else make_inputs(plan_model)
    np.savez(job.npz("inputs"), **{f"in{i}": x for i, x in enumerate(xs)})
    report["inputs"] = [{"name": s["orig_name"], "shape": list(x.shape), "dtype": str(x.dtype),
                         "source": str(opts.input_npz) if opts.input_npz else "seeded"}
                        for s, x in zip(input_specs(plan_model), xs)]


def _model_of_inputs(inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """Input specs of a model built by a --src build function, in the plan's form (for make_inputs)."""
    layers = [{"name": i["name"], "orig_name": i["name"], "class_name": "InputLayer", "inbound_nodes": [],
               "config": {"batch_shape": i["shape"], "dtype": i["dtype"]}} for i in inputs]
    return {"kind": "functional", "layers": layers, "inputs": [[i["name"], 0, 0] for i in inputs]}


def _run(job: Job, artifact: Any, plan: Plan, report: dict[str, Any], tmp_out: Path,
         tmp_module: Path | None) -> dict[str, Any]:
    opts, progress = job.opts, job.progress
    t_start = time.perf_counter()
    rtol, atol, tol_source = tolerances(opts, plan)
    # A model with TF-only ops (k2to3>TFOpLayer) runs on the tensorflow backend only.
    verify = ("tensorflow",) if plan.tf_only else opts.backends
    if not job.build_fn:
        _inputs(job, plan.model, report)
    plan_path = job.work / "plan.json"
    plan_path.write_text(json.dumps(plan.to_json()))
    report["tolerance"] = {"rtol": rtol, "atol": atol, "source": tol_source}

    # One process per backend. The tensorflow worker builds first (torch and jax wait for the file),
    # then computes the tf_keras golden and verifies; torch and jax verify meanwhile, side by side as far as
    # the memory budget allows (Pool.run), else one after another.
    progress("workers: " + ", ".join(job.pool.roles()))
    wp = job.pool
    weight_bytes = 4 * int(artifact.n_params or 0)  # float32 weights: what each worker holds copies of
    wp.start(weight_bytes)
    timings: dict[str, float] = {}
    tfw = wp.get("tensorflow")
    try:
        build = tfw.call("build", plan=str(plan_path), h5=str(job.h5), out=str(tmp_out), modules=job.modules,
                         build_fn=job.build_fn)
    except WorkerError as exc:
        raise _as_user_error(exc) from None
    wp.learn("tensorflow", weight_bytes)
    if job.build_fn:
        _inputs(job, _model_of_inputs(build["inputs"]), report)
    timings["build_seconds"] = round(build["seconds"], 3)
    progress(f"rebuilt and restored {build['ledger']['tensors_restored']}/"
             f"{build['ledger']['tensors_expected']} weight tensors; verifying")
    report["ledger"] = build["ledger"]
    if job.pair:
        report["ledger"]["weights_matched_by"] = report["input"]["pair"]["weights_matched_by"]
    report["build"] = {"weight_hash": build["weight_hash"], "warnings": build["warnings"]}
    report["optimizer"] = build.get("optimizer")  # optimizer state migration (docs/optimizers.md)
    weight_bytes = 4 * int(build["ledger"].get("params_restored") or 0) or weight_bytes
    reference, mismatched, hashes = verify_backends(job, plan, report, tmp_out, build["weight_hash"], verify,
                                                    rtol, atol, weight_bytes, timings)
    if opts.grads or opts.fit_steps:
        from k2to3.trainchecks import run_training_checks

        run_training_checks(job, report, tmp_out, verify, reference, artifact.training_config, weight_bytes,
                            _compile_losses(plan))
        if (report.get("training") or {}).get("status") == "mismatch":
            mismatched.append("training")
    if tmp_module is not None:
        os.replace(tmp_module, _module_path(opts))
    os.replace(tmp_out, opts.out)  # atomic within the output directory
    imports = (["import k2to3.portable"] if plan.needs_portable else []) + (
        [f"import {_module_path(opts).stem}"] if tmp_module is not None and job.module_needed else [])
    report["output"] = {"path": str(opts.out), "sha256": file_sha256(opts.out),
                        "needs_k2to3_portable": plan.needs_portable,
                        "module": str(_module_path(opts)) if tmp_module is not None else None,
                        "load": "; ".join([*imports, f"keras.saving.load_model({str(opts.out)!r})"])}
    timings["total_seconds"] = round(time.perf_counter() - t_start, 3)
    report["timings"] = timings
    set_verdict(report, plan, mismatched, hashes)
    if opts.grads:
        from k2to3.gradients import apply_verdict

        apply_verdict(report)
    if opts.save_golden:
        from k2to3.golden import save_golden

        report["golden"] = save_golden(job, report, reference, rtol, atol)
    return report


def set_verdict(report: dict[str, Any], plan: Plan, mismatched: list[str], hashes: set[str]) -> None:
    backends = report["backends"]
    if any(backends[b]["status"] == "error" for b in backends):
        report.update(verdict="error", exit_code=int(Exit.INTERNAL))
    elif mismatched or len(hashes) != 1:
        report.update(verdict="mismatch", exit_code=int(Exit.MISMATCH))
    elif plan.tf_only:  # written and verified on tensorflow; not portable to torch / jax
        report.update(verdict="tf_only", exit_code=int(Exit.NOT_PORTABLE), tf_only=plan.tf_only)
    else:
        report.update(verdict="parity", exit_code=int(Exit.PARITY))
    report["numeric_verdict"] = _numeric_verdict(backends, len(hashes) == 1)
    if (report.get("precision") or {}).get("status") == "mismatch" and report["numeric_verdict"] is not None:
        report["numeric_verdict"] = "mismatch"  # the float32 shadow disagrees: a conversion error (precision.py)


def verify_backends(job: Job, plan: Plan, report: dict[str, Any], keras: Path, build_hash: str | None,
                    verify: tuple[str, ...], rtol: float, atol: float, weight_bytes: int, timings: dict[str, float],
                    given: list[np.ndarray] | None = None) -> tuple[list[np.ndarray], list[str], set[str]]:
    """The verification half, shared by `convert` and `verify`: load `keras` (safe_mode=True) on each backend in
    its own process, compute the tf_keras golden (unless reference outputs are `given`: `verify --golden`), compare,
    and on a mismatch measure the float32 noise floor and locate the first divergent layer. Fills
    report["reference"], ["memory"], ["backends"], ["weight_hashes_agree"]; returns (reference outputs,
    mismatching backends, the distinct weight hashes)."""
    opts, progress, wp = job.opts, job.progress, job.pool

    def verify_on(b: str) -> Callable[[Any], dict[str, Any]]:
        return lambda w: w.call("verify", keras=str(keras), inputs=job.npz("inputs"), out=job.npz(f"out-{b}"),
                                layers=False, modules=job.modules)

    def tf_side(w: Any) -> tuple[dict[str, Any] | None, WorkerError | None]:
        golden, gerr = None, None
        if given is None and opts.golden and wp.golden:
            try:
                golden = w.call("golden", h5=str(job.h5), inputs=job.npz("inputs"),
                                out=job.npz("golden"), layers=False, **job.golden_args)
            except WorkerError as exc:
                gerr = exc
        return golden, gerr

    jobs: dict[str, list[Callable[[Any], Any]]] = {
        "tensorflow": [tf_side, *([verify_on("tensorflow")] if "tensorflow" in verify else [])],
        **{b: [verify_on(b)] for b in verify if b != "tensorflow"}}
    # Nothing needs a worker after this round unless the training checks or the mixed-precision shadow follow;
    # a mismatch (float64 noise floor, per-layer probe) starts the ones it needs again.
    from k2to3.precision import REDUCED

    later = bool(opts.grads or opts.fit_steps or set(plan.dtype_policies) & set(REDUCED))
    # Only for models whose copies matter: on a small one, restarting workers for a mismatch's diagnostics
    # costs seconds of imports and saves little memory.
    done = wp.run(jobs, weight_bytes, release_finished=not later and weight_bytes >= RELEASE_MIN_BYTES)
    fut_golden = done["tensorflow"][0]
    futs: dict[str, Future] = {b: done[b][-1] for b in verify}
    reference = _reference(job, fut_golden, report) if given is None else given
    results: dict[str, dict[str, Any]] = {}
    for b in verify:
        try:
            results[b] = futs[b].result()
            progress(f"{b}: loaded with safe_mode=True and ran")
        except WorkerError as exc:
            results[b] = {"error": exc.message}
            progress(f"{b}: failed: {exc.message}")
    report["memory"] = wp.memory_report(weight_bytes)
    if reference is None:  # golden unavailable: the Keras 3 tensorflow result is the reference
        kind = "tensorflow" if "error" not in results.get("tensorflow", {"error": 1}) else next(
            (b for b in verify if "error" not in results[b]), None)
        if kind is None:
            raise K2to3Error("no backend could load the converted model", Exit.INTERNAL,
                             hint=f"see {report['backends'] if 'backends' in report else 'the worker logs'}")
        reference = job.load(f"out-{kind}")
        report["reference"].update(kind=f"keras3-{kind}")
    backends: dict[str, Any] = {}
    mismatched = []
    for b in verify:
        r = results[b]
        if "error" in r:
            backends[b] = {"status": "error", "error": r["error"]}
            mismatched.append(b)
            continue
        stats = compare_outputs(job.load(f"out-{b}"), reference, rtol, atol)
        ok = all(s.allclose for s in stats)
        backends[b] = {
            "status": "parity" if ok else "mismatch",
            "params_trainable": r["params_trainable"],
            "params_non_trainable": r["params_non_trainable"],
            "weight_hash": r["weight_hash"],
            "weight_hash_matches_build": build_hash is None or r["weight_hash"] == build_hash,
            "layer_hashes": r["layer_hashes"],
            "outputs": [s.to_dict() for s in stats],
            "load_seconds": round(r["load_seconds"], 3),
            "predict_seconds": round(r["predict_seconds"], 3),
            "keras_version": r.get("keras_version"),
            "library_version": r.get("library_version"),
            "first_divergent_layer": None,
            "noise": None,
        }
        if not ok or not backends[b]["weight_hash_matches_build"]:
            mismatched.append(b)
    if plan.dtype_policies and reference is not None:  # mixed precision: the float32 shadow (precision.py)
        from k2to3.precision import check_precision

        check_precision(job, report, backends, reference, sorted(plan.dtype_policies),
                        DEFAULT_RTOL if opts.rtol is None else opts.rtol,
                        DEFAULT_ATOL if opts.atol is None else opts.atol, mismatched, timings)
    _noise_floor(job, report, backends, reference, timings)
    _locate_divergence(job, report, backends, plan, rtol, atol)
    ops = ", ".join(sorted({f"{t['op']} at layer '{t['layer']}'" for t in plan.tf_only}))
    for b in opts.backends:
        if b not in backends:
            backends[b] = {"status": "skipped", "reason": f"TensorFlow-only ops: {ops}"}
    hashes = {v["weight_hash"] for v in backends.values() if "weight_hash" in v}
    report["backends"] = backends
    report["weight_hashes_agree"] = len(hashes) == 1
    return reference, mismatched, hashes


def _numeric_verdict(backends: dict[str, Any], hashes_agree: bool) -> str | None:
    """parity / within_float32_noise / mismatch over the verified backends (information: the exit code keeps
    the strict tolerance); None when a backend failed to run."""
    ran = [v for v in backends.values() if v["status"] != "skipped"]
    if any(v["status"] == "error" for v in ran):
        return None
    if not hashes_agree or not all(v.get("weight_hash_matches_build") for v in ran):
        return "mismatch"
    bad = [v for v in ran if v["status"] == "mismatch"]
    if not bad:
        return "parity"
    if all((v.get("noise") or {}).get("verdict") == "within_float32_noise" for v in bad):
        return "within_float32_noise"
    return "mismatch"


def _noise_floor(job: Job, report: dict[str, Any], backends: dict[str, Any], reference: list[np.ndarray],
                 timings: dict[str, float]) -> None:
    """On a mismatch only: rerun the reference and each mismatching backend in float64 (same weights, same
    inputs) and say whether the error is float32 rounding (docs/report.md#float32-noise)."""
    bad = [b for b, v in backends.items() if v.get("status") == "mismatch"]
    if not bad:
        return
    ref_kind = report["reference"].get("kind")
    if ref_kind == "golden-npz":  # `verify --golden`: no reference model to rerun in float64
        for b in bad:
            backends[b]["noise"] = {"verdict": "unavailable", "reason": "the reference is a golden file"}
        return
    t0 = time.perf_counter()
    job.progress(f"mismatch on {', '.join(bad)}: rerunning in float64 to measure the float32 noise floor")
    replies = rerun(job, report, bad, "float64", "f64", "noise_schedule")
    ref_reply = replies["reference"]
    for b in bad:
        rep = replies[b]
        if not rep["available"] or not ref_reply["available"]:
            why = rep.get("reason") if not rep["available"] else f"reference: {ref_reply.get('reason')}"
            backends[b]["noise"] = {"verdict": "unavailable", "reason": why}
            continue
        stats = [noise_stats(g, g64, r, r64, i) for i, (g, g64, r, r64) in enumerate(zip(
            job.load(f"out-{b}"), job.load(f"f64-{b}"), reference, job.load("f64-reference")))]
        verdict, k = noise_verdict(stats)
        backends[b]["noise"] = {"verdict": verdict, "k": k, "outputs": [s.to_dict() for s in stats],
                                "seconds": round(rep["seconds"], 3),
                                "reference_seconds": round(ref_reply["seconds"], 3)}
    timings["noise_seconds"] = round(time.perf_counter() - t0, 3)


def rerun(job: Job, report: dict[str, Any], backends: list[str], dtype: str, prefix: str,
          schedule_key: str) -> dict[str, dict[str, Any]]:
    """Rerun the reference and each of `backends` in `dtype` (op `float64` of workers/child.py: float64 for the
    noise floor, float32 for a mixed-precision shadow) on the same weights and inputs; outputs go to
    job.npz(f"{prefix}-{name}"). Returns the worker replies by name ("reference" and each backend)."""
    common = {"inputs": job.npz("inputs"), "dtype": dtype}
    ref_kind = report["reference"].get("kind")
    if ref_kind == "keras2-tf_keras":
        ref_call = ("tensorflow", {**common, "golden": True, "h5": str(job.h5), **job.golden_args})
    else:
        ref_call = (ref_kind.split("-", 1)[1], {**common, "keras": str(_tmp_of(job)), "modules": job.modules})
    calls = {"reference": ref_call} | {b: (b, {**common, "keras": str(_tmp_of(job)), "modules": job.modules})
                                       for b in backends}
    # Scheduled through the memory budget like the verification (Pool.run): float64 doubles the weights.
    jobs: dict[str, list[Callable[[Any], Any]]] = {}
    names: dict[str, list[str]] = {}
    for name, (kind, args) in calls.items():
        jobs.setdefault(kind, []).append(
            lambda w, name=name, args=args: w.call("float64", out=job.npz(f"{prefix}-{name}"), **args))
        names.setdefault(kind, []).append(name)
    weight_bytes = (8 if dtype == "float64" else 4) * int(report.get("ledger", {}).get("params_restored") or 0)
    done = job.pool.run(jobs, weight_bytes)
    if isinstance(report.get("memory"), dict):
        report["memory"][schedule_key] = job.pool.schedule
    replies: dict[str, dict[str, Any]] = {}
    for kind, futs in done.items():
        for name, fut in zip(names[kind], futs):
            try:
                replies[name] = fut.result()
            except WorkerError as exc:
                replies[name] = {"available": False, "reason": f"{dtype} rerun failed: {exc.message}"}
    return replies


def _reference(job: Job, fut_golden: Future, report: dict[str, Any]) -> list[np.ndarray] | None:
    g, exc = fut_golden.result()
    if g is None and exc is None:
        report["reference"] = {"kind": None, "reason": "golden reference disabled"}
        return None
    if exc is not None:
        report["reference"] = {"kind": None, "reason": f"tf_keras could not load the file: {exc.message}"}
        job.progress("Keras 2 golden unavailable; using the Keras 3 tensorflow result as reference")
        return None
    args = job.golden_args
    origin = ("the file's Lambda bytecode (--trust-bytecode)" if args.get("trust_bytecode") else
              "the --src build function" if args.get("build_fn") else
              "the --src definitions as written" if args.get("k2_module") else
              "the config + weights pair (tf_keras model_from_config + load_weights)" if job.pair else
              "the file, its Keras 1 config translated to Keras 2 (tf_keras converts the Keras 1 weight layouts)"
              if str(args.get("golden_config", "")).endswith("golden_keras1_config.json") else
              "the file, its CuDNN layers as LSTM/GRU (tf_keras converts their weights)" if args.get("golden_config")
              else "the template model of the multi_gpu_model save" if "multi_gpu" in job.opts_input else
              "the file" if job.h5 == job.opts.src else "the file re-saved as HDF5 by tf_keras")
    report["reference"] = {"kind": "keras2-tf_keras", "keras_version": g["keras_version"], "from": origin}
    job.progress("Keras 2 golden output computed with tf_keras")
    return job.load("golden")


def _locate_divergence(job: Job, report: dict[str, Any], backends: dict[str, Any], plan: Plan,
                       rtol: float, atol: float) -> None:
    """On a mismatch, probe every layer on the reference and the mismatching backends."""
    bad = [b for b, v in backends.items() if v.get("status") == "mismatch"]
    if not bad:
        return
    ref_kind = report["reference"].get("kind")
    if ref_kind == "golden-npz":  # `verify --golden` holds the model outputs only, not every layer's
        return
    try:
        if ref_kind == "keras2-tf_keras":
            ref_reply = job.pool.get("tensorflow").call(
                "golden", h5=str(job.h5), inputs=job.npz("inputs"), out=job.npz("golden2"), layers=True,
                layers_out=job.npz("golden-layers"), **job.golden_args)
        else:
            kind = ref_kind.split("-", 1)[1]
            ref_reply = job.pool.get(kind).call("verify", keras=str(_tmp_of(job)), inputs=job.npz("inputs"),
                                               out=job.npz("ref2"), layers=True, layers_out=job.npz("ref-layers"),
                                               modules=job.modules)
        ref_layers = dict(zip(ref_reply["layer_names"], job.load(
            "golden-layers" if ref_kind == "keras2-tf_keras" else "ref-layers")))
        inverse = {new: old for old, new in plan.renames.items()}
        for b in bad:
            rep = job.pool.get(b).call("verify", keras=str(_tmp_of(job)), inputs=job.npz("inputs"),
                                      out=job.npz(f"probe-{b}"), layers=True, layers_out=job.npz(f"layers-{b}"),
                                      modules=job.modules)
            got = dict(zip(rep["layer_names"], job.load(f"layers-{b}")))
            first, rows = first_divergent_layer(rep["layer_names"], got, ref_layers, inverse, rtol, atol)
            backends[b]["first_divergent_layer"] = first
            backends[b]["layer_errors"] = rows
    except WorkerError as exc:
        for b in bad:
            backends[b]["first_divergent_layer"] = {"error": f"per-layer probe failed: {exc.message}"}


def _compile_losses(plan: Plan) -> list[Any]:
    loss = (plan.compile or {}).get("loss") if hasattr(plan, "compile") else None
    return list(loss.values()) if isinstance(loss, dict) and "class_name" not in loss else \
        list(loss) if isinstance(loss, list) else [loss]


def _tmp_of(job: Job) -> Path:
    if job.keras is not None:  # `k2to3 verify`: the file under test, never written
        return job.keras
    return job.opts.out.parent / f".{job.opts.out.name}.k2to3-partial-{os.getpid()}-{id(job):x}.keras"


def _as_user_error(exc: WorkerError) -> K2to3Error:
    if exc.code is not None:
        return K2to3Error(exc.message, Exit(exc.code))
    return K2to3Error(f"{exc.kind} worker failed: {exc.message}", Exit.INTERNAL,
                      hint="this is a k2to3 bug; the worker log has the traceback")


# `k2to3.convert(...)` is the Python API (docs/api.md): this module's name is the function's.
sys.modules[__name__].__class__ = CallableModule
