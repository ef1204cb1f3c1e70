"""The checks, in the order they run and report (report.md renders their sections in this order). A new check is
one module with a `CHECK` (checks/base.py) and one line here; docs/architecture.md walks through an example."""

from __future__ import annotations

from k2to3.checks import exported_file, golden_file, optimizer, outputs, precision
from k2to3.checks.base import Check
from k2to3.checks.training import gradient_check, step_check

CHECKS: tuple[Check, ...] = (
    optimizer.CHECK,  # stage 0: the optimizer state the build migrated
    outputs.CHECK,  # stage 1: every backend against the Keras 2 golden (noise floor, first divergent layer)
    precision.CHECK,  # stage 2: the float32 shadow of a mixed-precision model
    exported_file.CHECK,  # stage 2: the exported file in its own runtime against the Keras 2 golden
    step_check.CHECK,  # stage 3, one round with gradients: N training steps against tf_keras
    gradient_check.CHECK,  # stage 3: loss gradients (from the first training step when it can)
    golden_file.CHECK,  # stage 4, once the .keras is in place: the golden file
)
VERIFY_STAGES = (0, 1, 2, 3)  # everything that judges the model under test
OUTPUTS_STAGE = 1  # after it the workers may close (runner.RELEASE_MIN_BYTES)
SAVED_STAGE = 4  # what needs the output in place
