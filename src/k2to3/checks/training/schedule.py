"""When and how the training steps run in a run: in the verification's pool round or a round of their own, against
tf_keras or not, and whether they stand in for the gradient check. Decided from the options, the file and the
machine, before any training job is queued."""

from __future__ import annotations

from k2to3.checks.base import Run
from k2to3.checks.training.reference_worker import hold_models
from k2to3.core.policies import REDUCED
from k2to3.upgrade.optimizers import reference_compiles


def fused(run: Run) -> bool:
    """Do the training steps join the verification's pool round (stage 1)? Each worker then trains right after it
    verifies, on the model it holds, instead of waiting for every other backend's verification (a cold jax compile
    of the backward pass starts seconds earlier). When the models are held (reference_worker.hold_models). Decided
    once per run: the stage of a check must not change between the rounds."""
    if "fused" not in run.state:
        run.state["fused"] = hold_models(run)
    return bool(run.state["fused"])


def stage_for(run: Run) -> int:
    return 1 if fused(run) else 3  # 1: the outputs check's stage (registry.OUTPUTS_STAGE)


def expects_tf_keras(run: Run) -> bool:
    """Is tf_keras the reference? Known once the outputs check has its golden; before (the steps joined to its
    round), what the run asks for: tf_keras loads the file unless a golden file is the reference."""
    if "reference" in run.report:
        return run.tf_keras_reference
    return run.given is None and run.reference_h5 is not None and run.pool.golden


def carries_gradients(run: Run) -> bool:
    """Can the training steps stand in for the gradient check (gradient_check.py)? Same mode (training), a file
    compiled with an optimizer, a Keras 2 reference that trains from the file itself (not rebuilt from --src), and
    no loss scaling (its gradients are scaled)."""
    opts = run.options
    optimizer = (run.training_config or {}).get("optimizer_config")
    return bool(opts.grads and opts.fit_steps and opts.grads_training and optimizer
                and not reference_compiles(optimizer)  # a compiled step cannot hand its gradients over
                and expects_tf_keras(run)
                and not ({"golden_config", "build_fn"} & set(run.golden_args))
                and not (set(run.report.get("dtype_policies") or ()) & REDUCED))
