"""The verdict on a training mismatch from tf_keras's own float32 sensitivity (`training.backends.<b>.noise`,
docs/optimizers.md#float32-training-noise): the floors the noise probe's runs give each weight (noise_probe.py), k
and k_abs of each backend's error against them, and why a mismatch is not measured at all (numpy only)."""

from __future__ import annotations

from typing import Any

from k2to3.core.compare import NOISE_K

WITHIN, BEYOND = "within_float32_noise", "beyond_float32_noise"
# per weight, in weight order: a change's (or a floor's) largest element, and its L2 norm over the tensor
Floors = tuple[list[float], list[float]]


# Why k is judged in L2 norm, with the largest element only as a guard: one tensor's largest change is an extreme value
# that varies severalfold between seeds, so a verdict on it would often take every run of the rounds, while a
# weight's L2 k stays steady from seed to seed (docs/optimizers.md#float32-training-noise). The guard ABS_K keeps a
# difference confined to a few elements (a clipped gradient) from hiding in a large tensor's norm; a state error is
# far beyond both (slots swapped).
ABS_K = 10.0


def not_noise(row: dict[str, Any], ref: dict[str, Any]) -> str | None:
    """Why this backend's mismatch cannot be float32 rounding (None: it may be, measure it)."""
    if "weights" not in row:
        return row.get("reason") or "no weights to compare"
    if row.get("iterations_after") != ref.get("iterations_after"):
        return (f"{row.get('iterations_after')} optimizer iterations after the steps, tf_keras "
                f"{ref.get('iterations_after')}: the step count is not the file's")
    sal = row.get("state_as_loaded")
    if sal and sal["equal"] != sal["slots"]:
        return f"{sal['slots'] - sal['equal']} optimizer slot(s) as loaded differ from the file's: {sal['differ']}"
    return None


def weight_floors(n_weights: int, runs: list[Floors], floors: Floors | None) -> Floors:
    """Per weight: the largest change the runs make to it (`runs`: each run's changes), in its largest element and
    in L2 norm, with `floors` of earlier runs."""
    seen = [*runs, *([floors] if floors is not None else [])]
    abs_f, l2_f = ([max((c[j][i] for c in seen), default=0.0) for i in range(n_weights)] for j in (0, 1))
    return abs_f, l2_f


def k_ratio(err: float, floor: float) -> float:
    return err / floor if floor > 0 else (0.0 if err == 0 else float("inf"))


def judge(row: dict[str, Any], floors: Floors, loss_floor: float) -> dict[str, Any]:
    """One backend's `noise` entry from the floors: every weight outside the strict tolerance, with its k (L2 norm)
    and k_abs (largest element)."""
    abs_floors, l2_floors = floors
    weights = [{"weight": w["weight"], "max_abs": w["max_abs"], "floor": abs_floors[i],
                "k_abs": k_ratio(w["max_abs"], abs_floors[i]), "l2": w["l2"], "l2_floor": l2_floors[i],
                "k": k_ratio(w["l2"], l2_floors[i])}
               for i, w in enumerate(row["weights"]) if not w["allclose"]]
    ks = [w["k"] for w in weights]
    if not row.get("loss_allclose", True):
        ks.append(k_ratio(row["loss_max_abs"], loss_floor))
    k, k_abs = max(ks, default=0.0), max((w["k_abs"] for w in weights), default=0.0)
    return {"verdict": WITHIN if k <= NOISE_K and k_abs <= ABS_K else BEYOND, "k": k, "k_max": NOISE_K,
            "k_abs": k_abs, "k_abs_max": ABS_K, "loss_floor": loss_floor, "weights": weights}


def cell(noise: dict[str, Any] | None) -> str:
    """A backend's training noise verdict in a few words: `within (k=0.8: c1[1], c2[1])`; empty when not measured."""
    if not noise:
        return ""
    if noise["verdict"] in ("unavailable", "not_measured"):
        return f"{noise['verdict'].replace('_', ' ')}: {noise.get('reason')}"
    word = "within" if noise["verdict"] == WITHIN else "beyond"
    names = ", ".join(w["weight"] for w in noise["weights"][:4]) + (", ..." if len(noise["weights"]) > 4 else "")
    return f"{word} (k={noise['k']:.2g}{': ' + names if names else ''})"
