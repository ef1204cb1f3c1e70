"""Keras 2 optimizer configs -> Keras 3 (used by training.py; pure Python): learning-rate schedules, Keras 2's
`decay`, loss scaling, and where Keras 3 computes a different update than Keras 2 for the same hyper-parameters
(rules/optimizers.toml, found by tests/optimizer_update_probe.py): the k2to3 optimizer written instead
(k2to3.portable.optimizers) or the finding."""

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


def is_optimizer_v2(cfg: dict[str, Any]) -> bool:
    """tf.keras optimizer_v2 and standalone Keras 2 configs have no `is_legacy_optimizer: false` (>= 2.11 ones do)."""
    return cfg.get("is_legacy_optimizer", True) is not False


# Updates not linear in the gradient: on the TensorFlow backend Keras 3's computes them on a sparse gradient's rows
# one by one (K2T612). SGD's is linear; Lion adds the gradient to a dense momentum before its sign. Adafactor and
# Lamb have no SummedRows class: Keras 2 had neither.
SUMMED_ROWS = frozenset("Adam AdamW Adamax Adadelta Adagrad RMSprop Ftrl".split())
# a key of the translated config (not Keras 3's): the model trains a sparse-gradient layer (an Embedding)
SPARSE_ROWS = "k2to3_sparse_rows"


def portable_class(cls: str, cfg: dict[str, Any]) -> str | None:
    """The k2to3 optimizer that keeps Keras 2's update where plain Keras 3's differs, else None. The Keras2* classes
    sum a sparse gradient's repeated rows too; SummedRows<cls> only that, when the model trains an Embedding."""
    if cls == "RMSprop" and is_optimizer_v2(cfg) and not cfg.get("momentum"):
        return "Keras2RMSprop"  # epsilon outside the square root (K2T602)
    if cls == "Adagrad" and is_optimizer_v2(cfg):
        return "Keras2Adagrad"  # epsilon outside the square root (K2T610)
    if cls == "Nadam":
        return "Keras2Nadam"  # Keras 2's momentum product (K2T605, K2T606)
    if cfg.get(SPARSE_ROWS) and cls in SUMMED_ROWS:
        return f"SummedRows{cls}"  # repeated rows of an Embedding's gradient summed first (K2T612)
    return None


PORTABLE_MODULE = "k2to3.portable.optimizers"  # where the Keras2* and SummedRows* live (registered k2to3>Name)


def nadam_config(cfg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str, str]:
    """A Keras 2 Nadam config without its momentum schedule's keys, Keras2Nadam's own keys for them, the rule code and
    the finding's message. optimizer_v2 keeps its schedule decay under `decay` (not a learning-rate decay),
    standalone Keras 2 under `schedule_decay`."""
    out = {k: v for k, v in cfg.items() if k not in ("decay", "schedule_decay")}
    if not is_optimizer_v2(cfg):
        return (out, {"u_product_rule": "tf_keras_compiled"}, "K2T606",
                "Nadam (tf.keras >= 2.11) kept as k2to3>Keras2Nadam: its momentum product as tf_keras's compiled "
                "train step computes it after loading the file (from 1.0, once per variable per step)")
    decay = cfg.get("schedule_decay", cfg.get("decay"))
    decay = 0.004 if decay is None else float(decay)
    return (out, {"schedule_decay": decay, "u_product_rule": "per_step"}, "K2T605",
            f"Nadam (Keras 2) kept as k2to3>Keras2Nadam: momentum schedule 0.96**({decay:g}*t), its saved "
            "momentum product carried")


def reference_compiles(optimizer_config: dict[str, Any] | None) -> bool:
    """tf_keras trains this optimizer compiled, not eagerly (workers/training/fit_ops.py): tf.keras >= 2.11 Nadam, whose
    momentum product depends on Python state fixed when the train step is traced (K2T606)."""
    cfg = optimizer_config or {}
    inner = (cfg.get("config") or {}).get("inner_optimizer") if cfg.get("class_name") == "LossScaleOptimizerV3" \
        else cfg
    inner = inner or {}
    return inner.get("class_name") in ("Nadam", "Custom>Nadam") and not is_optimizer_v2(inner.get("config") or {})


def update_findings(cls: str, cfg: dict[str, Any]) -> list[tuple[str, str]]:
    """(code, message) for the update differences Keras 3 cannot express (rules/optimizers.toml, status finding)."""
    if cls == "Ftrl" and cfg.get(SPARSE_ROWS) and is_optimizer_v2(cfg):
        return [("K2T613", "Ftrl (tf.keras optimizer_v2) updated an Embedding's rows lazily, only those in the batch; "
                 "Keras 3's Ftrl updates every row (a row whose accumulators give weight 0 becomes 0)")]
    return []


def serialized(cls: str, cfg: dict[str, Any], port: str | None = None) -> dict[str, Any]:
    """Keras 3 serialized optimizer for a translated config (keys already Keras 3's); `port` the portable class
    TrainingConfig chose, else chosen here."""
    if cls == "Nadam" and "u_product_rule" not in cfg:  # not through TrainingConfig: its schedule keys here
        stripped, own, _, _ = nadam_config(cfg)
        cfg = {**stripped, **own}
    port = port or portable_class(cls, cfg)
    clean = {k: v for k, v in cfg.items() if k not in ("is_legacy_optimizer", SPARSE_ROWS)}
    if port:
        return {"module": PORTABLE_MODULE, "class_name": port, "config": clean,
                "registered_name": f"k2to3>{port}"}
    return {"module": "keras.optimizers", "class_name": cls, "config": clean, "registered_name": None}
