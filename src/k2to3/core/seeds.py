"""Every seed k2to3 uses, and the seeded training targets (numpy only): one home, so the gradient check and the
training steps draw the same targets for the same loss, and a worker's randomness is the same in every backend.

The verification inputs have their own seed (core/inputs.py: INPUT_SEED, from the model's input specs)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

INPUT_SEED = 20240229  # the seeded verification batch (core/inputs.py)
TARGET_SEED = 20240301  # targets of --grads and --fit-steps
WORKER_SEED = 1234  # keras.utils.set_random_seed / tf_keras.utils.set_random_seed in every worker job
SENSITIVITY_EPS = 1e-6  # relative input change of the gradient sensitivity probe (docs/report.md#gradients)


def loss_name(spec: Any) -> str:
    """snake_case name of a loss given as a string or a {"class_name": ...} dict ("" when neither)."""
    s = spec.get("class_name", "") if isinstance(spec, dict) else "" if spec is None else str(spec)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", s).lower() if not s.islower() else s


def make_targets(losses: list[Any], outputs: list[np.ndarray]) -> list[np.ndarray]:
    """Seeded targets shaped like each model output and typed for its loss: integer labels for sparse categorical
    losses, one-hot rows for categorical, KL and Poisson ones, {0, 1} for binary and hinge ones, N(0, 1) otherwise.
    An output without a loss of its own gets N(0, 1)."""
    rng = np.random.default_rng(TARGET_SEED)
    ys = []
    for spec, out in zip([*losses, *[None] * (len(outputs) - len(losses))], outputs):
        name, shape = loss_name(spec), out.shape
        if "sparse_categorical" in name:
            ys.append(rng.integers(0, max(shape[-1], 1), size=shape[:-1]).astype(np.int32))
        elif "categorical" in name or "kl" in name or "poisson" in name:
            ys.append(np.eye(shape[-1], dtype=np.float32)[rng.integers(0, shape[-1], size=shape[:-1])])
        elif "binary" in name or "hinge" in name:
            ys.append(rng.integers(0, 2, size=shape).astype(np.float32))
        else:
            ys.append(rng.normal(size=shape).astype(np.float32))
    return ys
