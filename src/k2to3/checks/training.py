"""`--fit-steps N`, parent side (numpy only): the training batch's targets, the comparison of the weights after
N steps and of the per-step losses between tf_keras (reference) and each backend (report section `training`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from k2to3.checks.compare import compare_arrays, per_backend
from k2to3.errors import InputError
from k2to3.workers.pool import reply_or_error

SEED = 20240301
# Training tolerances (docs/optimizers.md): float32 steps. Kernels and accumulation order differ between
# tf_keras and each backend at ~1e-7 relative per op; an adaptive optimizer divides by sqrt(v) + eps, which
# amplifies a 1e-7 gradient difference on small second moments, so the defaults are looser than the forward
# pass's 1e-5 / 1e-6.
FIT_RTOL, FIT_ATOL = 1e-4, 1e-5
MIXED = {"mixed_float16", "mixed_bfloat16", "float16", "bfloat16"}  # forward tolerances of convert.POLICY_TOL
CLASSIFICATION = {"categorical_crossentropy", "categorical_hinge", "categorical_focal_crossentropy"}
SPARSE = {"sparse_categorical_crossentropy"}
BINARY = {"binary_crossentropy", "binary_focal_crossentropy", "hinge", "squared_hinge"}


def _loss_name(loss: Any) -> str | None:
    if isinstance(loss, str):
        return loss
    if isinstance(loss, dict) and "class_name" in loss:
        import re

        return re.sub(r"(?<!^)(?=[A-Z])", "_", str(loss["class_name"])).lower()
    return None


def make_targets(outputs: list[np.ndarray], losses: list[Any]) -> list[np.ndarray]:
    """Seeded targets shaped like the model's outputs and typed for each output's loss: one-hot rows for
    categorical losses, integer labels for sparse ones, {0, 1} for binary ones, N(0, 1) otherwise."""
    rng = np.random.default_rng(SEED)
    ys = []
    for out, loss in zip(outputs, losses + [None] * (len(outputs) - len(losses))):
        name = _loss_name(loss) or ""
        if name in CLASSIFICATION:
            ys.append(np.eye(out.shape[-1], dtype="float32")[rng.integers(0, out.shape[-1], out.shape[:-1])])
        elif name in SPARSE:
            ys.append(rng.integers(0, out.shape[-1], out.shape[:-1]).astype("int32"))
        elif name in BINARY:
            ys.append(rng.integers(0, 2, out.shape).astype("float32"))
        else:
            ys.append(rng.standard_normal(out.shape).astype("float32"))
    return ys


def load_targets(path: Path, outputs: list[np.ndarray]) -> list[np.ndarray]:
    try:
        with np.load(path) as z:
            keys = sorted(z.files, key=lambda k: (len(k), k))
            ys = [z[k] for k in keys]
    except (OSError, ValueError) as exc:
        raise InputError(f"--targets {path}: cannot read ({exc})", hint="pass an .npz with arrays y0, y1, ...") \
            from None
    if len(ys) != len(outputs):
        raise InputError(f"--targets {path}: {len(ys)} arrays for a model with {len(outputs)} outputs",
                         hint="one target array per model output, named y0, y1, ...")
    for i, (y, o) in enumerate(zip(ys, outputs)):
        if y.shape[0] != o.shape[0]:
            raise InputError(f"--targets {path}: target {i} has batch {y.shape[0]}, the inputs {o.shape[0]}",
                             hint="targets must match the --input batch (or the seeded batch of 2)")
    return ys


def compare_training(ref: dict[str, Any], got: dict[str, Any], ref_w: list[np.ndarray], got_w: list[np.ndarray],
                     rtol: float, atol: float) -> dict[str, Any]:
    """One backend's `training` entry: per-step losses, weight errors after the steps, first divergent weight."""
    if len(ref_w) != len(got_w):
        return {"status": "mismatch", "reason": f"{len(got_w)} weights after training, tf_keras {len(ref_w)}"}
    rows, first = [], None
    worst_abs = worst_rel = min_atol = 0.0
    for name, g, r in zip(got["weight_names"], got_w, ref_w):
        s = compare_arrays(g, r, rtol, atol, output=False)
        worst_abs, worst_rel, min_atol = max(worst_abs, s.max_abs), max(worst_rel, s.max_rel), max(min_atol,
                                                                                                  s.min_atol)
        if not s.allclose and first is None:
            first = {"weight": name, "max_abs": s.max_abs, "max_rel": s.max_rel}
        rows.append({"weight": name, "max_abs": s.max_abs, "max_rel": s.max_rel, "allclose": s.allclose})
    lr, lg = np.asarray(ref["losses"], np.float64), np.asarray(got["losses"], np.float64)
    loss_abs = float(np.max(np.abs(lr - lg))) if lr.size else 0.0
    loss_rel = float(np.max(np.abs(lr - lg) / np.maximum(np.abs(lr), 1e-12))) if lr.size else 0.0
    loss_ok = bool(np.all(np.abs(lr - lg) <= atol + rtol * np.abs(lr)))
    ok = first is None and loss_ok and got.get("iterations_after") == ref.get("iterations_after")
    return {"status": "parity" if ok else "mismatch", "losses": got["losses"],
            "loss_max_abs": loss_abs, "loss_max_rel": loss_rel, "weights_max_abs": worst_abs,
            "weights_max_rel": worst_rel, "min_atol": min_atol, "first_divergent_weight": first,
            "iterations_after": got.get("iterations_after"), "weights": rows}


def fit_jobs(job: Any, report: dict[str, Any], verify: tuple[str, ...], outputs: list[np.ndarray],
             keras_path: Path, steps: int, targets: Path | None, loss: str | None, losses: list[Any],
             step_grads: bool = False) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The worker jobs of `--fit-steps` (the tf_keras reference first on the tensorflow worker, every backend's
    steps side by side as the pool allows) and what fit_section needs to read their replies. With `step_grads`
    every side also saves its first step's gradients (the gradient check's, trainchecks.py)."""
    ys = load_targets(targets, outputs) if targets else make_targets(outputs, losses)
    np.savez(job.npz("fit-targets"), **{f"y{i}": y for i, y in enumerate(ys)})
    common = {"inputs": job.npz("inputs"), "targets": job.npz("fit-targets"), "steps": steps, "loss": loss}
    rtol, atol = (5e-3, 5e-3) if set(report.get("dtype_policies") or ()) & MIXED else (FIT_RTOL, FIT_ATOL)
    section: dict[str, Any] = {"steps": steps, "rtol": rtol, "atol": atol,
                               "targets": str(targets) if targets else "seeded", "loss": loss or "training_config",
                               "randomness": "dropout and noise rates set to 0 on both sides", "backends": {}}
    report["training"] = section

    def golden(w: Any) -> Any:
        from k2to3.workers.grads import SENSITIVITY_EPS

        # with the step's gradients, tf_keras also takes the sensitivity probe while it holds the model
        probe = {"grads_out": job.npz("grads-golden"), "nudged_grads_out": job.npz("grads-golden-nudged"),
                 "nudge_eps": SENSITIVITY_EPS}
        return w.call("fit_golden", h5=str(job.h5), weights_out=job.npz("fit-ref"), **common, **job.golden_args,
                      **(probe if step_grads else {}))

    def k3(b: str) -> Any:
        return lambda w: w.call("fit", keras=str(keras_path), weights_out=job.npz(f"fit-{b}"),
                                state_out=job.npz(f"state-{b}"), modules=job.modules, **common,
                                **({"grads_out": job.npz(f"grads-{b}")} if step_grads else {}))

    jobs: dict[str, list[Any]] = {"tensorflow": [golden, *([k3("tensorflow")] if "tensorflow" in verify else [])],
                                  **{b: [k3(b)] for b in verify if b != "tensorflow"}}
    job.progress(f"--fit-steps {steps}{' (and --grads, from its first step)' if step_grads else ''}: tf_keras and "
                 + ", ".join(verify))
    return jobs, {"verify": verify}


def fit_section(job: Any, report: dict[str, Any], done: dict[str, list[Any]], ctx: dict[str, Any]) -> None:
    """Fill report["training"] from the replies of fit_jobs' jobs."""
    section, verify = report["training"], ctx["verify"]
    ref = reply_or_error(done["tensorflow"][0])
    if "error" in ref:
        section.update(status="unavailable", reason=f"tf_keras reference: {ref['error']}")
        return
    if not ref.get("available"):
        section.update(status="unavailable", reason=ref.get("reason"))
        return
    section["reference"] = {"losses": ref["losses"], "optimizer_class": ref["optimizer_class"],
                            "state_loaded": ref["state_loaded"], "state_source": ref.get("state_source"),
                            "iterations_after": ref["iterations_after"], "noise_disabled": ref["noise_disabled"]}
    if not ref["state_loaded"] and (report.get("optimizer") or {}).get("status") == "restored":
        section.update(status="unavailable", reason="the tf_keras reference could not load the file's optimizer "
                       "state, so its steps start from a fresh optimizer and are not a reference")
        return
    with np.load(job.npz("fit-ref")) as z:
        ref_w = [z[f"w{i}"] for i in range(len(z.files))]
    saved: dict[str, np.ndarray] = {}  # the file's slots, read once for every backend
    if (report.get("optimizer") or {}).get("slots"):
        state_as_loaded(job.h5, report.get("optimizer"), None, saved)

    def one(b: str) -> dict[str, Any]:
        got = reply_or_error(done[b][-1])
        if "error" in got:
            return {"status": "error", "error": got["error"]}
        if not got.get("available"):
            return {"status": "unavailable", "reason": got.get("reason")}
        with np.load(job.npz(f"fit-{b}")) as z:
            got_w = [z[f"w{i}"] for i in range(len(z.files))]
        row = compare_training(ref, got, ref_w, got_w, section["rtol"], section["atol"])
        row["state_as_loaded"] = state_as_loaded(job.h5, report.get("optimizer"), job.npz(f"state-{b}"), saved)
        return row

    section["backends"].update(zip(verify, per_backend(one, verify, ref_w)))
    states = {v.get("status") for v in section["backends"].values()}
    section["status"] = "parity" if states == {"parity"} else "mismatch"


def state_as_loaded(h5: Path, optimizer: dict[str, Any] | None, state_npz: str | None,
                    saved: dict[str, np.ndarray] | None = None) -> dict[str, Any] | None:
    """Does the optimizer this backend loaded from the .keras hold the file's slots, bit for bit? `saved` caches
    the file's slots between calls (filled by the first; `state_npz` None only fills it)."""
    from k2to3.core.h5safe import open_checked, read_dataset

    slots = (optimizer or {}).get("slots")
    if not slots:
        return None
    saved = {} if saved is None else saved
    if not saved:
        f = open_checked(h5)
        try:
            saved.update({n: read_dataset(f, f"optimizer_weights/{n}") for n in slots})
        finally:
            f.close()
    if state_npz is None:
        return None
    with np.load(state_npz) as z:
        loaded = {k: z[k] for k in z.files}
    equal = [n for n, i in slots.items() if f"v{i}" in loaded and
             np.array_equal(np.asarray(loaded[f"v{i}"], np.float64).reshape(-1),
                            np.asarray(saved[n], np.float64).reshape(-1))]
    return {"slots": len(slots), "equal": len(equal), "differ": sorted(set(slots) - set(equal))[:5]}
