"""training_config (FM-2) -> a Keras 3 compile config: losses, metrics, optimizer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from k2to3.upgrade.optimizers import (
    SPARSE_ROWS,
    SUMMED_ROWS,
    decay_schedule,
    keras3_schedule,
    loss_scale_config,
    nadam_config,
    portable_class,
    serialized,
    update_findings,
)

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState

LOSS_ALIASES = {
    "mse": "mean_squared_error", "mae": "mean_absolute_error", "mape": "mean_absolute_percentage_error",
    "msle": "mean_squared_logarithmic_error", "kld": "kl_divergence", "kullback_leibler_divergence":
    "kl_divergence", "logcosh": "log_cosh", "bce": "binary_crossentropy", "cosine_proximity": "cosine_similarity",
    # Keras 2's upper-case module aliases (keras.losses.MSE = mean_squared_error), written by loss="MSE"
    "MSE": "mean_squared_error", "MAE": "mean_absolute_error", "MAPE": "mean_absolute_percentage_error",
    "MSLE": "mean_squared_logarithmic_error", "KLD": "kl_divergence",
}
KERAS3_LOSSES = frozenset(
    "mean_squared_error mean_absolute_error mean_absolute_percentage_error mean_squared_logarithmic_error "
    "kl_divergence log_cosh binary_crossentropy categorical_crossentropy sparse_categorical_crossentropy "
    "hinge squared_hinge categorical_hinge poisson huber cosine_similarity binary_focal_crossentropy "
    "categorical_focal_crossentropy ctc dice tversky".split()
)
KERAS3_LOSS_CLASSES = frozenset(
    "MeanSquaredError MeanAbsoluteError MeanAbsolutePercentageError MeanSquaredLogarithmicError KLDivergence "
    "LogCosh BinaryCrossentropy CategoricalCrossentropy SparseCategoricalCrossentropy Hinge SquaredHinge "
    "CategoricalHinge Poisson Huber CosineSimilarity BinaryFocalCrossentropy CategoricalFocalCrossentropy".split()
)
METRIC_NAMES = frozenset(
    "accuracy acc binary_accuracy categorical_accuracy sparse_categorical_accuracy top_k_categorical_accuracy "
    "sparse_top_k_categorical_accuracy mean_squared_error mean_absolute_error mean_absolute_percentage_error "
    "mean_squared_logarithmic_error binary_crossentropy categorical_crossentropy "
    "sparse_categorical_crossentropy kl_divergence poisson hinge squared_hinge categorical_hinge "
    "cosine_similarity log_cosh auc precision recall".split()
)
OPTIMIZERS = frozenset("SGD RMSprop Adam AdamW Adadelta Adagrad Adamax Adafactor Nadam Ftrl Lion Lamb".split())
OPTIMIZER_DROP = ("jit_compile", "is_legacy_optimizer", "decay", "schedule_decay")


class TrainingConfig:
    def __init__(self, up: UpgradeState, sparse_rows: list[str] | None = None):
        self.up = up
        self.code = up.code("training_config")
        self.sparse_rows = sparse_rows or []  # trainable Embeddings: their gradient is sparse (K2T612)

    def warn(self, msg: str, fix: str | None = None) -> None:
        self.up.note(self.code, "warning", msg, None, fix)

    def loss(self, loss: Any) -> Any:
        if loss is None:
            return None
        if isinstance(loss, str):
            name = LOSS_ALIASES.get(loss, loss)
            if name in KERAS3_LOSSES:
                return name
            src = self.up.source
            if src is not None and loss in src.functions:
                self.up.note(self.up.code("from_source"), "info",
                             f"loss '{loss}' rebuilt from the source as {src.registered(src.functions[loss])}")
                return src.function_config(src.functions[loss])
            self.warn(f"loss '{loss}' is a custom function; compile config saved without it",
                      "recompile after loading, or pass the source with --src model.py")
            return None
        if isinstance(loss, dict) and "class_name" in loss:
            cls = loss["class_name"]
            if cls not in KERAS3_LOSS_CLASSES:
                self.warn(f"loss class '{cls}' is custom; compile config saved without it")
                return None
            cfg = dict(loss.get("config", {}))
            if cfg.get("reduction") in ("auto", None):
                cfg["reduction"] = "sum_over_batch_size"
            cfg.pop("fn", None)
            return {"module": "keras.losses", "class_name": cls, "config": cfg, "registered_name": None}
        if isinstance(loss, dict):
            return {k: self.loss(v) for k, v in loss.items()}
        if isinstance(loss, list):
            return [self.loss(v) for v in loss]
        return None

    def metric(self, m: Any) -> Any:
        src = self.up.source
        if isinstance(m, str) and src is not None and m in src.functions:
            self.up.note(self.up.code("from_source"), "info",
                         f"metric '{m}' rebuilt from the source as {src.registered(src.functions[m])}")
            return src.function_config(src.functions[m])
        if isinstance(m, str):
            name = LOSS_ALIASES.get(m, m)
            return name if name in METRIC_NAMES else None
        if isinstance(m, dict) and m.get("class_name") == "MeanMetricWrapper":
            return self.metric(m.get("config", {}).get("fn") or m.get("config", {}).get("name"))
        if isinstance(m, dict) and "class_name" in m:
            return None
        if isinstance(m, list):
            out = [self.metric(x) for x in m]
            return [x for x in out if x is not None]
        if isinstance(m, dict):
            return {k: self.metric(v) for k, v in m.items()}
        return None

    def optimizer(self, opt: Any) -> dict[str, Any] | None:
        if not isinstance(opt, dict):
            return None
        cls, cfg = opt.get("class_name"), dict(opt.get("config", {}))
        if cls == "LossScaleOptimizerV3":  # tf.keras >= 2.11 mixed precision: Keras 3 has the same wrapper
            return loss_scale_config(self, cfg)
        if cls == "LossScaleOptimizer":
            self.warn("LossScaleOptimizer unwrapped to its inner optimizer")
            return self.optimizer(cfg.get("inner_optimizer") or cfg.get("optimizer"))
        cls = {"Custom>Adam": "Adam"}.get(cls, cls)
        if isinstance(cls, str) and cls.startswith("Custom>"):  # tf.keras >= 2.11 optimizers' registered names
            cls = cls.removeprefix("Custom>")
        if cls not in OPTIMIZERS:
            self.warn(f"optimizer '{cls}' has no Keras 3 equivalent; compile config saved without it")
            return None
        if "lr" in cfg:
            cfg["learning_rate"] = cfg.pop("lr")
        if cls == "Adagrad" and "initial_accumulator_value" not in cfg:
            cfg["initial_accumulator_value"] = 0.0  # standalone Keras 2 starts at K.zeros (optimizer_v2 saves it)
        if self.sparse_rows and cls in SUMMED_ROWS:
            cfg[SPARSE_ROWS] = True
        port = portable_class(cls, cfg)  # Keras 2's update where Keras 3's differs (rules/optimizers.toml)
        if cfg.get(SPARSE_ROWS):
            self.up.note("K2T612", "info", f"{cls} kept as k2to3>{port}: the gradient of {', '.join(self.sparse_rows)} "
                         "has one row per token occurrence, summed before the update as in Keras 2 (Keras 3 on "
                         "TensorFlow updates a token repeated in a batch with each row's square)", None,
                         "see docs/optimizers.md#k2t612")
        for code, msg in update_findings(cls, cfg):
            self.up.note(code, "warning", msg, None, "see docs/optimizers.md")
        own: dict[str, Any] = {}
        if cls == "Nadam":  # its `decay` is the momentum schedule's, not the learning rate's
            cfg, own, code, msg = nadam_config(cfg)
            self.up.note(code, "info", msg)
        if cfg.get("decay") and not isinstance(cfg.get("learning_rate"), dict):
            cfg["learning_rate"] = decay_schedule(self, cfg["learning_rate"], cfg["decay"])
        elif cfg.get("decay"):
            self.warn(f"optimizer decay={cfg['decay']} dropped; Keras 3 needs a LearningRateSchedule")
        for k in OPTIMIZER_DROP:
            cfg.pop(k, None)
        cfg.update(own)
        if isinstance(cfg.get("learning_rate"), dict) and keras3_schedule(cfg["learning_rate"]):
            cfg["learning_rate"] = keras3_schedule(cfg["learning_rate"])
        elif isinstance(cfg.get("learning_rate"), dict):
            self.warn("learning-rate schedule dropped; the initial rate is not recoverable from the config")
            cfg.pop("learning_rate")
        if port:
            self.up.plan.needs_portable = True
            if not port.startswith("SummedRows"):  # K2T612's note above says why
                self.up.note(self.code, "info", f"{cls} kept with Keras 2's update as k2to3>{port} "
                             "(docs/optimizers.md)")
            return serialized(cls, cfg, port)
        return {"module": "keras.optimizers", "class_name": cls, "config": cfg, "registered_name": None}

    def translate(self, tc: dict[str, Any]) -> dict[str, Any]:
        out = {
            "optimizer": self.optimizer(tc.get("optimizer_config")),
            "loss": self.loss(tc.get("loss")),
            "metrics": self.metric(tc.get("metrics")) or None,
            "loss_weights": tc.get("loss_weights"),
        }
        self.up.note(self.code, "info", "training_config translated to a Keras 3 compile config "
                     "(the optimizer state: report section optimizer)")
        return out

