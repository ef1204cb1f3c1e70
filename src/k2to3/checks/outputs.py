"""The outputs check (report sections `reference`, `backends`, `weight_hashes_agree`, `memory`): the converted model
loaded with safe_mode=True on each backend in its own process and run on the seeded inputs, the tf_keras golden
computed beside it (unless a golden file gives the reference outputs), parameter counts, weight hashes and outputs
compared; on a mismatch, the float32 noise floor (noise_floor.py) and the first divergent layer (divergence.py)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import numpy as np

from k2to3.checks import divergence, noise_floor
from k2to3.checks.base import Check, Done, Jobs, Run, WorkerJob
from k2to3.checks.number_format import fmt
from k2to3.checks.training import reference_worker
from k2to3.core.compare import compare_outputs
from k2to3.errors import Exit, K2to3Error
from k2to3.workers.process import WorkerError
from k2to3.workers.protocol import GoldenReferenceRequest, GoldenRequest, VerifyRequest

NOISE = "within_float32_noise"  # a backend whose every difference the measured float32 noise floor explains


def _golden_job(run: Run) -> WorkerJob:
    """The tf_keras golden (the tensorflow worker's first job, or the reference worker's: training/reference_worker.py).
    With --fit-steps every worker keeps the model it loads for the training steps (reference_worker.hold_models): the
    golden is then computed by the reference those steps train (op golden_reference), for a plain file."""
    held = reference_worker.hold_models(run) and not run.golden_args
    # the training steps joined to this round take their targets' shapes from the golden (training/batch.py: Targets)
    written = run.state["golden_written"] = threading.Event()

    def tf_side(w: Any) -> tuple[dict[str, Any] | None, WorkerError | None]:
        golden, gerr = None, None
        try:
            if _computes_golden(run):
                try:
                    where = {"h5": str(run.reference_h5), "inputs": run.npz("inputs"), "out": run.npz("golden"),
                             **run.golden_args}
                    golden = w.call(GoldenReferenceRequest(loss=run.options.loss, **where) if held
                                    else GoldenRequest(**where))
                except WorkerError as exc:
                    gerr = exc
        finally:
            run.state["golden_ok"] = golden is not None
            written.set()
        return golden, gerr

    return reference_worker.on_reference(tf_side)


def _computes_golden(run: Run) -> bool:
    return run.given is None and run.reference_h5 is not None and run.pool.golden


def start_reference(run: Run) -> None:
    """Before the build: a run with a reference worker starts the golden there now, beside the build (a plain file:
    it needs the file and the inputs only); jobs() queues the job that hands its result over."""
    if _computes_golden(run) and not run.golden_args and reference_worker.split(run):
        run.state["early_golden"] = reference_worker.start_early(run, _golden_job(run))


def jobs(run: Run) -> Jobs:
    """One process per backend: the tensorflow worker computes the tf_keras golden and then verifies; torch and jax
    verify meanwhile, side by side as far as the memory budget allows (Pool.run), else one after another. With
    --fit-steps every worker keeps the model it loads for the training steps (reference_worker.hold_models)."""
    hold = reference_worker.hold_models(run)

    def verify_on(b: str) -> Any:
        return lambda w: w.call(VerifyRequest(keras=str(run.keras), inputs=run.npz("inputs"), out=run.npz(f"out-{b}"),
                                              modules=run.modules, hold=hold))

    early = run.state.pop("early_golden", None)
    tf = [*([early or _golden_job(run)] if run.given is None else []),
          *([verify_on("tensorflow")] if "tensorflow" in run.backends else [])]
    # no tensorflow job when a golden file gives the reference and no verify runs there (torch alone): the worker
    # and its TensorFlow import are not started for nothing
    return {**({"tensorflow": tf} if tf else {}), **{b: [verify_on(b)] for b in run.backends if b != "tensorflow"}}


def collect(run: Run, done: dict[str, Done]) -> None:
    mine, report = done["backends"], run.report
    if run.given is None:
        run.outputs = _reference(run, mine["tensorflow"][0])
    else:
        run.outputs = run.given
    results: dict[str, dict[str, Any]] = {}
    for b in run.backends:
        try:
            results[b] = mine[b][-1].result()
            run.progress(f"{b}: loaded with safe_mode=True and ran")
        except WorkerError as exc:
            results[b] = {"not_runnable" if exc.not_runnable else "error": exc.message}
            run.progress(f"{b}: {'not runnable here' if exc.not_runnable else 'failed'}: {exc.message}")
    report["memory"] = run.pool.memory_report(run.weight_bytes)
    if run.outputs is None:  # golden unavailable: the Keras 3 tensorflow result is the reference
        kind = "tensorflow" if _ran(results.get("tensorflow", {"error": 1})) else next(
            (b for b in run.backends if _ran(results[b])), None)
        if kind is None:
            _model_fails_its_inputs(run, results)
            raise K2to3Error("no backend could load the converted model", Exit.INTERNAL,
                             hint=f"see {report['backends'] if 'backends' in report else 'the worker logs'}")
        run.outputs = run.load(f"out-{kind}")
        report["reference"].update(kind=f"keras3-{kind}")
    backends = {b: _row(run, b, results[b]) for b in run.backends}
    noise_floor.measure(run, backends, run.outputs)
    divergence.locate(run, backends)
    for v in backends.values():  # the one rule for float32 noise (docs/verify.md#float32-noise): not a mismatch
        if v.get("status") == "mismatch" and (v.get("noise") or {}).get("verdict") == NOISE \
                and v.get("weight_hash_matches_build", True):
            v["status"] = NOISE
    ops = ", ".join(sorted({f"{t['op']} at layer '{t['layer']}'" for t in run.plan.tf_only}))
    for b in run.options.backends:
        if b not in backends:
            backends[b] = {"status": "skipped", "reason": f"TensorFlow-only ops: {ops}"}
    report["backends"] = backends
    report["weight_hashes_agree"] = len(weight_hashes(report)) == 1


def _ran(r: dict[str, Any]) -> bool:
    return "error" not in r and "not_runnable" not in r


def _row(run: Run, b: str, r: dict[str, Any]) -> dict[str, Any]:
    if "error" in r:
        return {"status": "error", "error": r["error"]}
    if "not_runnable" in r:  # errors.NotRunnableHere: the others verify (docs/exit-codes.md)
        return {"status": "not_runnable", "reason": r["not_runnable"]}
    assert run.outputs is not None
    stats = compare_outputs(run.load(f"out-{b}"), run.outputs, run.rtol, run.atol)
    return {
        "status": "parity" if all(s.allclose for s in stats) else "mismatch",
        "params_trainable": r["params_trainable"],
        "params_non_trainable": r["params_non_trainable"],
        "weight_hash": r["weight_hash"],
        "weight_hash_matches_build": run.build_hash is None or r["weight_hash"] == run.build_hash,
        "layer_hashes": r["layer_hashes"],
        "outputs": [s.to_dict() for s in stats],
        "load_seconds": round(r["load_seconds"], 3),
        "predict_seconds": round(r["predict_seconds"], 3),
        "keras_version": r.get("keras_version"),
        "library_version": r.get("library_version"),
        "first_divergent_layer": None,
        "noise": None,
    }


FIXED_RANDOM = ("the model draws random numbers (keras.random in Keras 3): compared with every draw replaced by the "
                "same fixed pattern on each side; the random streams themselves differ (docs/verify.md \"Random ops\")")


def _model_fails_its_inputs(run: Run, results: dict[str, dict[str, Any]]) -> None:
    """tf_keras's own run of the Keras 2 model failed too, on the same seeded inputs: the model does not take them
    (a graph that fixes its batch size, `K.random_normal(shape=(batch_size, latent_dim))`), which is no fault of
    the conversion. One line, exit 3, naming both sides' errors; inputs it takes go in with --input."""
    why = (run.report.get("reference") or {}).get("reason") or ""
    if not why.startswith(GOLDEN_FAILED) or not results:
        return
    first = next(iter(results.values())).get("error") or ""
    raise K2to3Error(f"the Keras 2 model fails on k2to3's seeded inputs under tf_keras as on every backend, so there "
                     f"is nothing to compare ({why[len(GOLDEN_FAILED):][:200]}; Keras 3: {first[:200]})",
                     Exit.NOT_PORTABLE, hint="pass inputs the model takes with --input FILE.npz (a graph that fixes "
                     "its batch size takes only that batch)")


GOLDEN_FAILED = "tf_keras could not load the file: "


def _reference(run: Run, fut_golden: Future) -> list[np.ndarray] | None:
    g, exc = fut_golden.result()
    if g is None and exc is None:
        run.report["reference"] = {"kind": None, "reason": "golden reference disabled"}
        return None
    if exc is not None:
        run.report["reference"] = {"kind": None, "reason": f"{GOLDEN_FAILED}{exc.message}"}
        run.progress("Keras 2 golden unavailable; using the Keras 3 tensorflow result as reference")
        return None
    run.report["reference"] = {"kind": "keras2-tf_keras", "keras_version": g["keras_version"],
                               "from": run.reference_origin}
    if run.fixed_random:
        run.report["reference"]["random"] = FIXED_RANDOM
        run.progress("the model draws random numbers: every side draws the same fixed pattern instead")
    nhwc = g.get("nhwc_layers") or []
    run.progress("Keras 2 golden output computed with tf_keras" + (
        f" ({len(nhwc)} channels_first layers run transposed to NHWC: no CPU kernel)" if nhwc else ""))
    return run.load("golden")


def weight_hashes(report: dict[str, Any]) -> set[str]:
    return {v["weight_hash"] for v in report.get("backends", {}).values() if "weight_hash" in v}


def outcome(report: dict[str, Any]) -> str | None:
    backends = report["backends"]
    if any(v["status"] == "error" for v in backends.values()):
        return "error"
    if all(v["status"] in ("not_runnable", "skipped") for v in backends.values()):
        return "not_portable"  # no backend of this machine can run it: nothing verified
    bad = any(v["status"] == "mismatch" or not v.get("weight_hash_matches_build", True) for v in backends.values())
    return "mismatch" if bad or len(weight_hashes(report)) != 1 else None


def numeric(report: dict[str, Any]) -> str | None:
    """parity / within_float32_noise / mismatch over the verified backends; None when a backend failed to run."""
    ran = [v for v in report["backends"].values() if v["status"] not in ("skipped", "not_runnable")]
    if any(v["status"] == "error" for v in ran):
        return None
    if len(weight_hashes(report)) != 1 or not all(v.get("weight_hash_matches_build") for v in ran):
        return "mismatch"
    if any(v["status"] == "mismatch" for v in ran):
        return "mismatch"
    return NOISE if any(v["status"] == NOISE for v in ran) else "parity"


def noise_cell(value: dict[str, Any] | None) -> str:
    """The float32 noise verdict in a few words: `within (k=0.55, floor 3.8e-05)`; empty when not measured."""
    if not value:
        return ""
    if value["verdict"] == "unavailable":
        return f"unavailable: {value['reason']}"
    floor = max(o["floor_abs"] + o["reference_floor_abs"] for o in value["outputs"])
    word = "within" if value["verdict"] == "within_float32_noise" else "beyond"
    return f"{word} (k={fmt(value['k'])}, floor {fmt(floor)})"


def notes(report: dict[str, Any]) -> list[str]:
    """What the backends table cannot say in a cell (report.md and the console print these)."""
    out = []
    noisy = [b for b, v in report.get("backends", {}).items() if v.get("status") == NOISE]
    if noisy:
        k = max((report["backends"][b].get("noise") or {}).get("k") or 0.0 for b in noisy)
        out.append(f"{', '.join(noisy)}: outside the strict tolerance but within float32 noise (k={fmt(k)}): the "
                   "float64 reruns agree and the error is what float32 rounding of the two sides explains, so this "
                   "is not a mismatch (exit 0; the strict figures are in the report; docs/verify.md#float32-noise)")
    nonfinite = (report.get("ledger") or {}).get("nonfinite") or []
    if nonfinite:  # restored as stored (docs/security.md): say so where the user looks, not only in report.json
        more = f" and {len(nonfinite) - 3} more" if len(nonfinite) > 3 else ""
        out.append(f"{len(nonfinite)} weight tensor(s) hold NaN or Inf, restored as stored: "
                   f"{', '.join(nonfinite[:3])}{more} (ledger.nonfinite; docs/security.md)")
    for v in report.get("backends", {}).values():
        for o in v.get("outputs", []):
            if o.get("note") and f"output {o['index']}: {o['note']}" not in out:
                out.append(f"output {o['index']}: {o['note']}")
    return out


def markdown(report: dict[str, Any]) -> list[str]:
    if not report.get("backends"):
        return []
    lines = ["| backend | status | params (trainable / non-trainable) | weight hash | max abs err | max rel err | "
             "min rtol | min atol | argmax agree | float32 noise | first divergent layer |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for b, v in report["backends"].items():
        if v["status"] in ("error", "skipped", "not_runnable"):
            lines.append(f"| {b} | {v['status']}: {v.get('error') or v.get('reason')} | | | | | | | | | |")
            continue
        outs = v["outputs"]
        fdl = v.get("first_divergent_layer") or {}
        agree = [o["argmax_agreement"] for o in outs if o["argmax_agreement"] is not None]
        lines.append(
            f"| {b} | {v['status']} | {v['params_trainable']:,} / {v['params_non_trainable']:,} | "
            f"`{v['weight_hash'][:12]}` | {fmt(max(o['max_abs'] for o in outs))} | "
            f"{fmt(max(o['max_rel'] for o in outs))} | {fmt(max(o['min_rtol'] for o in outs))} | "
            f"{fmt(max(o['min_atol'] for o in outs))} | {fmt(min(agree)) + '%' if agree else 'n/a'} | "
            f"{noise_cell(v.get('noise'))} | {fdl.get('layer', '')} |")
    lines += [f"\nNote: {n}" for n in notes(report)]
    for b, v in report["backends"].items():
        beyond = [r for r in v.get("layer_errors") or [] if not r["allclose"]]
        if beyond:
            lines.append(f"\nLayers beyond tolerance on {b} ({len(beyond)}, in topological order): " + ", ".join(
                f"`{r['layer']}` (max abs {fmt(r['max_abs'])})" for r in beyond[:5]))
    return lines


CHECK = Check(key="backends", title="Backends", stage=1, applies=lambda run: True, jobs=jobs, collect=collect,
              markdown=markdown, outcome=outcome, numeric=numeric)
