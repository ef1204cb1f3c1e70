"""`--grads`: the loss gradient w.r.t. every trainable variable on each backend, compared with tf_keras's on the
same seeded batch (report.json `gradients`, docs/report.md#gradients). Parent side, numpy only; the
differentiation runs in the per-backend workers (workers/grads.py)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from k2to3.checks.compare import compare_arrays, per_backend
from k2to3.workers.pool import reply_or_error

if TYPE_CHECKING:
    from pathlib import Path

    from k2to3.convert import Job

GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-6  # defaults (docs/report.md#gradients); --grad-rtol / --grad-atol
DEFAULT_LOSS = "mean_squared_error"
TARGET_SEED = 20240301
TOP = 5
SENSITIVITY_K = 10.0  # a mismatch up to this many times tf_keras's own input sensitivity is ill-conditioning
ILL_CONDITIONED = 0.01  # reference sensitivity (relative L2) above which the report says so


def _name(spec: Any) -> str:
    """snake_case name of a loss given as a string or a {"class_name": ...} dict."""
    s = spec.get("class_name", "") if isinstance(spec, dict) else str(spec)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", s).lower() if not s.islower() else s


def _clean(spec: Any) -> Any:
    """A loss both tf_keras and Keras 3 deserialize: a name, or class_name + the config keys both share."""
    if isinstance(spec, dict) and "class_name" in spec:
        cfg = {k: v for k, v in (spec.get("config") or {}).items()
               if k in ("from_logits", "label_smoothing", "axis", "delta")}
        return {"class_name": spec["class_name"], "config": cfg}
    return spec


def loss_specs(training_config: dict[str, Any] | None, override: str | None,
               n_outputs: int) -> tuple[list[Any], str]:
    """One loss per model output, and where it came from."""
    if override:
        return [override] * n_outputs, "--loss"
    loss = (training_config or {}).get("loss")
    if isinstance(loss, str) or (isinstance(loss, dict) and "class_name" in loss):
        return [_clean(loss)] * n_outputs, "training_config"
    if isinstance(loss, list) and len(loss) == n_outputs and all(isinstance(x, str | dict) for x in loss):
        return [_clean(x) for x in loss], "training_config"
    return [DEFAULT_LOSS] * n_outputs, f"default ({DEFAULT_LOSS}: no single loss in the file's training_config)"


def make_targets(losses: list[Any], outputs: list[np.ndarray]) -> list[np.ndarray]:
    """Seeded targets shaped and typed for each output's loss."""
    rng = np.random.default_rng(TARGET_SEED)
    ys = []
    for spec, out in zip(losses, outputs):
        name, shape = _name(spec), out.shape
        if "sparse_categorical" in name:
            ys.append(rng.integers(0, max(shape[-1], 1), size=shape[:-1]).astype(np.int32))
        elif "categorical" in name or "kl" in name or "poisson" in name:
            ys.append(np.eye(shape[-1], dtype=np.float32)[rng.integers(0, shape[-1], size=shape[:-1])])
        elif "binary" in name or "hinge" in name:
            ys.append(rng.integers(0, 2, size=shape).astype(np.float32))
        else:
            ys.append(rng.normal(size=shape).astype(np.float32))
    return ys


def _cosine(g: np.ndarray, r: np.ndarray) -> float | None:
    ng, nr = float(np.linalg.norm(g)), float(np.linalg.norm(r))
    if ng == 0.0 and nr == 0.0:
        return 1.0
    if ng == 0.0 or nr == 0.0:
        return 0.0
    return float(np.dot(g, r) / (ng * nr))


def compare_grads(names: list[str], got: list[np.ndarray], ref_names: list[str], ref: list[np.ndarray],
                  rtol: float, atol: float, sensitivity: list[float] | None = None) -> dict[str, Any]:
    """Per-variable figures (in the model's topological variable order), the first divergent variable, the worst."""
    if [list(a.shape) for a in got] != [list(a.shape) for a in ref]:
        return {"status": "error", "error": f"trainable variables do not line up with the reference: {len(got)} "
                f"vs {len(ref)} variables or shapes differ"}
    rows = []
    for name, rname, g, r in zip(names, ref_names, got, ref):
        s = compare_arrays(g, r, rtol, atol, output=False)
        g64, r64 = g.astype(np.float64).ravel(), r.astype(np.float64).ravel()
        nr = float(np.linalg.norm(r64))
        cosine = _cosine(g64, r64)
        rel_l2 = float(np.linalg.norm(np.subtract(g64, r64, out=g64)) / nr) if nr > 0 else \
            (0.0 if s.max_abs == 0 else float("inf"))
        rows.append({"variable": name, "reference_variable": rname, "shape": list(r.shape), "max_abs": s.max_abs,
                     "max_rel": s.max_rel, "cosine": cosine, "rel_l2": rel_l2, "allclose": s.allclose,
                     "min_atol": s.min_atol, "ref_max_abs": float(np.abs(r64).max()) if r.size else 0.0})
        if sensitivity is not None:
            rows[-1]["reference_sensitivity"] = sensitivity[len(rows) - 1]
    first = next((r for r in rows if not r["allclose"]), None)
    top = sorted(rows, key=lambda r: -r["rel_l2"])[:TOP]
    ok = first is None
    return {"status": "parity" if ok else "mismatch", "numeric_verdict": _numeric(rows, sensitivity is not None),
            "max_abs": max((r["max_abs"] for r in rows), default=0.0),
            "max_rel": max((r["max_rel"] for r in rows), default=0.0),
            "max_rel_l2": max((r["rel_l2"] for r in rows), default=0.0),
            "min_cosine": min((r["cosine"] for r in rows), default=1.0),
            "first_divergent_variable": first["variable"] if first else None,
            "top_divergent": [{k: r[k] for k in ("variable", "rel_l2", "max_abs", "cosine")} for r in top],
            "variables": rows}


def _numeric(rows: list[dict[str, Any]], probed: bool) -> str | None:
    if all(r["allclose"] for r in rows):
        return "parity"
    if not probed:
        return None
    # every mismatch as large as tf_keras's own sensitivity at most
    within = all(r["allclose"] or r["rel_l2"] <= SENSITIVITY_K * r["reference_sensitivity"] for r in rows)
    return "within_reference_sensitivity" if within else "mismatch"


def add_sensitivity(section: dict[str, Any], ref_names: list[str], sens: list[float]) -> None:
    """Give a built section tf_keras's input sensitivity per variable (probed after the fact: trainchecks.py)
    without comparing the gradients again."""
    for row in section.get("backends", {}).values():
        if "variables" in row:
            for r, v in zip(row["variables"], sens):
                r["reference_sensitivity"] = v
            row["numeric_verdict"] = _numeric(row["variables"], True)
    _sensitivity_summary(section, ref_names, sens)
    _overall_numeric(section)


def _sensitivity_summary(section: dict[str, Any], ref_names: list[str], sens: list[float]) -> None:
    i = int(np.argmax(sens))
    section["reference"]["sensitivity"] = {"input_change": 1e-6, "max_rel_l2": sens[i], "variable": ref_names[i]}
    if sens[i] > ILL_CONDITIONED:
        section["notes"].append(f"ill-conditioned: a 1e-6 relative change of the inputs moves tf_keras's own "
                                f"gradient of '{ref_names[i]}' by {sens[i]:.3g} (relative L2); backends that "
                                "round differently cannot agree closer (typical: BatchNormalization in training "
                                "mode over few values per channel)")


def _overall_numeric(section: dict[str, Any]) -> None:
    backends = section["backends"]
    statuses = {v["status"] for v in backends.values()}
    nums = {v.get("numeric_verdict") for v in backends.values()}
    section["numeric_verdict"] = None if "error" in statuses else "mismatch" if "mismatch" in nums else \
        "within_reference_sensitivity" if "within_reference_sensitivity" in nums else "parity"


def gradient_jobs(job: Job, report: dict[str, Any], keras: Path, verify: tuple[str, ...],
                  outputs: list[np.ndarray], training_config: dict[str, Any] | None, loss: str | None,
                  rtol: float | None, atol: float | None, training: bool = True
                  ) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The worker jobs of `--grads` (tf_keras's gradients first on the tensorflow worker) and what
    gradient_section needs to read their replies."""
    t0 = time.perf_counter()
    losses, source = loss_specs(training_config, loss, len(outputs))
    ys = make_targets(losses, outputs)
    np.savez(job.npz("grad-targets"), **{f"y{i}": y for i, y in enumerate(ys)})
    rt, at = (GRAD_RTOL if rtol is None else rtol), (GRAD_ATOL if atol is None else atol)
    golden = report.get("reference", {}).get("kind") == "keras2-tf_keras"
    common = {"inputs": job.npz("inputs"), "targets": job.npz("grad-targets"), "losses": losses, "training": training}
    job.progress("--grads: differentiating the loss on " + ", ".join(verify) + (" and tf_keras" if golden else ""))

    def k3(b: str) -> Any:
        return lambda w: w.call("grads", keras=str(keras), out=job.npz(f"grads-{b}"), modules=job.modules, **common)

    def k2(w: Any) -> Any:
        return w.call("golden_grads", h5=str(job.h5), out=job.npz("grads-golden"), **common, **job.golden_args)

    jobs = {"tensorflow": [*([k2] if golden else []), *([k3("tensorflow")] if "tensorflow" in verify else [])],
            **{b: [k3(b)] for b in verify if b != "tensorflow"}}
    return {r: js for r, js in jobs.items() if js}, {"t0": t0, "verify": verify, "golden": golden, "rt": rt,
                                                     "at": at, "losses": losses, "source": source,
                                                     "training": training,
                                                     "tol_source": "default" if rtol is None and atol is None
                                                     else "user"}


def gradient_section(job: Job, report: dict[str, Any], done: dict[str, list[Any]], ctx: dict[str, Any]
                     ) -> dict[str, Any]:
    """Fill report["gradients"] from the replies of gradient_jobs' jobs; returns it."""
    replies = {b: reply_or_error(done[b][-1]) for b in ctx["verify"]}
    return build_section(job, report, replies, reply_or_error(done["tensorflow"][0]) if ctx["golden"] else None,
                         ctx)


def step_context(t0: float, report: dict[str, Any], verify: tuple[str, ...], losses: list[Any], loss: str | None,
                 targets: Path | None, rtol: float | None, atol: float | None) -> dict[str, Any]:
    """build_section's context for the gradients a training step computed (trainchecks.py, workers/stepgrads.py):
    the compiled loss of the fit steps on the fit steps' batch."""
    return {"t0": t0, "verify": verify,
            "golden": report.get("reference", {}).get("kind") == "keras2-tf_keras",
            "rt": GRAD_RTOL if rtol is None else rtol, "at": GRAD_ATOL if atol is None else atol,
            "losses": [loss] * len(losses) if loss else losses,
            "source": "--loss, as the training step minimises it" if loss else
            "the training step's compiled loss (training_config; loss weights and regularisation losses included)",
            "training": True, "targets": str(targets) if targets else "seeded", "from": "training step",
            "tol_source": "default" if rtol is None and atol is None else "user"}


def build_section(job: Job, report: dict[str, Any], replies: dict[str, dict[str, Any]], ref: dict[str, Any] | None,
                  ctx: dict[str, Any]) -> dict[str, Any]:
    """Fill report["gradients"] from each backend's reply and tf_keras's (None: no Keras 2 reference)."""
    t0, golden, rt, at = ctx["t0"], ctx["golden"], ctx["rt"], ctx["at"]
    losses, source, training = ctx["losses"], ctx["source"], ctx["training"]
    section: dict[str, Any] = {"loss": losses, "loss_source": source, "targets": ctx.get("targets", "seeded"),
                               "training": training, "from": ctx.get("from", "standalone differentiation"),
                               "tolerance": {"rtol": rt, "atol": at,
                                             "source": ctx["tol_source"]}}
    if golden:
        assert ref is not None
        got = {"error": ref["error"]} if "error" in ref else {"loss": ref["loss"],
                                                               "from": report["reference"].get("from")}
        section["reference"] = {"kind": "keras2-tf_keras", **got}
    if not golden or "error" in ref:
        kind = "tensorflow" if "error" not in replies.get("tensorflow", {"error": 1}) else None
        if kind is None:
            section.update(verdict="unavailable", backends={b: {"status": "error", "error": r.get("error")}
                                                           for b, r in replies.items()})
            report["gradients"] = section
            return section
        ref = replies[kind]
        section["reference"] = {"kind": f"keras3-{kind}", "loss": ref["loss"],
                                **({"reason": section["reference"]["error"]} if golden else {})}
        ref_path = job.npz(f"grads-{kind}")
    else:
        ref_path = job.npz("grads-golden")
    ref_arrays = _load(ref_path, len(ref["names"]))
    section["derandomized"] = sorted(set(ref.get("derandomized", [])).union(
        *(r.get("derandomized", []) for r in replies.values() if "error" not in r)))
    section["notes"] = sorted(set().union(*(r.get("notes", []) for r in replies.values() if "error" not in r)))
    sens = ref.get("sensitivity")
    if sens:
        _sensitivity_summary(section, ref["names"], sens)
    def one(b: str) -> dict[str, Any]:
        r = replies[b]
        if "error" in r:
            return {"status": "error", "error": r["error"]}
        row = compare_grads(r["names"], _load(job.npz(f"grads-{b}"), len(r["names"])), ref["names"], ref_arrays,
                            rt, at, ref.get("sensitivity"))
        row.update(loss=r["loss"], loss_abs_diff=abs(r["loss"] - ref["loss"]), seconds=round(r["grad_seconds"], 3),
                   unconnected=r.get("none", []))
        return row

    backends = dict(zip(replies, per_backend(one, list(replies), ref_arrays)))
    section["backends"] = backends
    statuses = {v["status"] for v in backends.values()}
    section["verdict"] = "error" if "error" in statuses else "mismatch" if "mismatch" in statuses else "parity"
    _overall_numeric(section)
    section["seconds"] = round(time.perf_counter() - t0, 3)
    report["gradients"] = section
    return section


def _load(path: str, n: int) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[f"g{i}"] for i in range(n)]


def apply_verdict(report: dict[str, Any]) -> None:
    """With the outputs at parity, a gradient mismatch fails the run like an output mismatch (exit code 1), a
    backend that could not differentiate the model like a backend that could not load it (4)."""
    g = report.get("gradients") or {}
    if report.get("exit_code") != 0:
        return
    if g.get("verdict") == "mismatch":
        report.update(verdict="mismatch", exit_code=1)
    elif g.get("verdict") in ("error", "unavailable"):  # a backend could not differentiate the model
        report.update(verdict="error", exit_code=4)


def markdown(g: dict[str, Any]) -> list[str]:
    """report.md's Gradients section: a row per backend, then its most divergent variables."""

    def f(x: Any) -> str:
        return f"{x:.3g}" if isinstance(x, float) else "" if x is None else str(x)

    ref = g.get("reference", {})
    lines = ["", "## Gradients", "",
             f"Loss {', '.join(map(str, g['loss']))} ({g['loss_source']}) on seeded targets, training={g['training']}"
             + (f", dropout/noise off in {', '.join(g['derandomized'])}" if g.get("derandomized") else "")
             + f"; reference {ref.get('kind')} (loss {f(ref.get('loss'))}); rtol={g['tolerance']['rtol']:g}, "
             f"atol={g['tolerance']['atol']:g}. Verdict: **{g['verdict']}**"
             + (f" (numerically: {g['numeric_verdict']})" if g.get("numeric_verdict") not in (None, "parity") else "")
             + ".", "",
             "| backend | status | loss | max abs | max rel | max rel L2 | min cosine | first divergent variable |",
             "|---|---|---|---|---|---|---|---|"]
    for b, v in g.get("backends", {}).items():
        if v["status"] == "error":
            lines.append(f"| {b} | error: {v.get('error')} | | | | | | |")
            continue
        lines.append(f"| {b} | {v['status']} | {f(v['loss'])} | {f(v['max_abs'])} | {f(v['max_rel'])} | "
                     f"{f(v['max_rel_l2'])} | {f(v['min_cosine'])} | {v['first_divergent_variable'] or ''} |")
    for b, v in g.get("backends", {}).items():
        if v.get("top_divergent"):
            lines.append(f"\nMost divergent on {b}: " + ", ".join(
                f"`{t['variable']}` (rel L2 {f(t['rel_l2'])}, cosine {f(t['cosine'])})" for t in v["top_divergent"]))
    lines += [f"\nNote: {n}" for n in g.get("notes", [])]
    return lines
