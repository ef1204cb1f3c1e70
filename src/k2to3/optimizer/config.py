"""Keras 2 optimizer config pieces -> Keras 3 (used by upgrade/training.py; pure Python)."""

from __future__ import annotations

from typing import Any

# tf.keras and Keras 3 share these schedules with the same config keys.
SCHEDULES = frozenset("ExponentialDecay PiecewiseConstantDecay PolynomialDecay InverseTimeDecay CosineDecay "
                      "CosineDecayRestarts".split())


def keras3_schedule(lr: dict[str, Any]) -> dict[str, Any] | None:
    """A serialized tf.keras learning-rate schedule as Keras 3's, or None when Keras 3 has no such class."""
    cls = lr.get("class_name")
    if cls not in SCHEDULES or not isinstance(lr.get("config"), dict):
        return None
    cfg = dict(lr["config"])
    if cfg.get("name") is None:  # tf.keras saved name=None; Keras 3 needs a string
        cfg["name"] = cls
    return {"module": "keras.optimizers.schedules", "class_name": cls, "config": cfg, "registered_name": None}


def decay_schedule(tc: Any, lr: float, decay: float) -> dict[str, Any]:
    """Keras 2's per-step decay `lr / (1 + decay * iterations)` is exactly InverseTimeDecay(lr, 1, decay): both
    read the step counter before it is incremented (tests/test_optimizer_updates.py proves it on one apply)."""
    tc.up.note(tc.code, "info", f"optimizer decay={decay} translated to InverseTimeDecay(learning_rate={lr}, "
               f"decay_steps=1, decay_rate={decay}), Keras 2's lr / (1 + decay * iterations)")
    return {"module": "keras.optimizers.schedules", "class_name": "InverseTimeDecay",
            "config": {"initial_learning_rate": lr, "decay_steps": 1, "decay_rate": decay, "staircase": False,
                       "name": "InverseTimeDecay"}, "registered_name": None}


def loss_scale_config(tc: Any, cfg: dict[str, Any]) -> dict[str, Any] | None:
    """tf.keras LossScaleOptimizerV3 -> keras.optimizers.LossScaleOptimizer with the same initial scale and growth
    steps. The HDF5 file does not store the current loss scale (tf_keras saves the inner optimizer's variables
    only), so Keras 3 starts from initial_scale as tf_keras does when it loads the same file."""
    inner = tc.optimizer(cfg.get("inner_optimizer"))
    if inner is None:
        return None
    if cfg.get("dynamic") is False:
        tc.warn("LossScaleOptimizer(dynamic=False) unwrapped: Keras 3's LossScaleOptimizer is always dynamic")
        return inner
    tc.up.note(tc.code, "info", "LossScaleOptimizer kept (initial_scale, dynamic_growth_steps); the file does not "
               "store the current loss scale: training resumes from initial_scale, as in tf_keras")
    return {"module": "keras.optimizers", "class_name": "LossScaleOptimizer", "registered_name": None,
            "config": {"name": "loss_scale_optimizer", "inner_optimizer": inner,
                       "initial_scale": cfg.get("initial_scale", 2.0 ** 15),
                       "dynamic_growth_steps": cfg.get("dynamic_growth_steps", 2000)}}
