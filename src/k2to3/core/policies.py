"""Tolerances, and the reduced-precision dtype policies with the tolerances that fit them (one home: the forward
comparison, the float32 shadow, the training steps and the workers' reruns all read these)."""

from __future__ import annotations

DEFAULT_RTOL, DEFAULT_ATOL = 1e-5, 1e-6  # the forward pass in float32 (docs/report.md)
# rtol, atol of a forward pass computed under each policy (the report names the policy found)
POLICY_TOLERANCE = {"mixed_float16": (5e-3, 5e-3), "float16": (5e-3, 5e-3),
                    "mixed_bfloat16": (5e-2, 5e-2), "bfloat16": (5e-2, 5e-2)}
REDUCED = frozenset(POLICY_TOLERANCE)
# --fit-steps under any reduced policy: float16/bfloat16 steps (docs/optimizers.md)
REDUCED_FIT_TOLERANCE = (5e-3, 5e-3)


def reduced(policies: object) -> list[str]:
    """The reduced-precision policies among `policies`, sorted."""
    return sorted(REDUCED.intersection(policies or ()))  # type: ignore[call-overload]
