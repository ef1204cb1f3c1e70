"""Keras 2 model_config -> a rebuild plan for Keras 3 (pure data: no keras import).

The plan is JSON: the tensorflow worker rebuilds the model from it by calling Keras 3 layers on
KerasTensors (see rebuild.py). Every change is driven by rules/layers.toml and leaves a Finding.
Where each concern lives: names.py (layer/model names, renames), values.py (TensorShape, dtype policies,
initializer objects), activations.py, layers.py (one layer's config and inner layers), specs.py (one graph
node: inputs, nested models, Lambdas, TF op layers), graph.py (Sequential/Functional), training.py
(compile config), core.py (shared state and findings).
"""

from __future__ import annotations

from typing import Any

from k2to3.upgrade import values
from k2to3.upgrade.activations import KERAS3_ACTIVATIONS, function_name, portable_function
from k2to3.upgrade.core import Upgrader
from k2to3.upgrade.keras1 import translate as keras1
from k2to3.upgrade.needed_code import walk_layers
from k2to3.upgrade.node_refs import is_ref, op_node_kwargs
from k2to3.upgrade.plan import (
    INNER_LAYER_KEYS,
    MODEL_CLASSES,
    OP_LAYER_CLASSES,
    PORTABLE_PACKAGE,
    RNN_CLASSES,
    SHAPE_KEYS,
    Plan,
)
from k2to3.upgrade.training import (
    KERAS3_LOSS_CLASSES,
    KERAS3_LOSSES,
    LOSS_ALIASES,
    METRIC_NAMES,
    OPTIMIZERS,
    TrainingConfig,
)

__all__ = [
    "INNER_LAYER_KEYS",
    "KERAS3_ACTIVATIONS",
    "KERAS3_LOSSES",
    "KERAS3_LOSS_CLASSES",
    "LOSS_ALIASES",
    "METRIC_NAMES",
    "MODEL_CLASSES",
    "OPTIMIZERS",
    "OP_LAYER_CLASSES",
    "PORTABLE_PACKAGE",
    "RNN_CLASSES",
    "SHAPE_KEYS",
    "Plan",
    "TrainingConfig",
    "Upgrader",
    "function_name",
    "is_ref",
    "op_node_kwargs",
    "portable_function",
    "upgrade",
]


def upgrade(model_config: dict[str, Any], training_config: dict[str, Any] | None = None,
            source: Any = None) -> Plan:
    """`source` is the Resolution of --src files (k2to3.source.hoist), or None."""
    up = Upgrader(source)
    if keras1.is_keras1(model_config):  # Keras 1.x names -> Keras 2 first (rules/keras1.toml)
        model_config = keras1.translate(up, model_config)
    cfg = values.tensorshape(up, model_config)
    cls = cfg.get("class_name")
    if cls not in MODEL_CLASSES:
        up.note("K2T902", "error", f"top-level class '{cls}' is not a Keras model", None)
        return up.plan
    up.names.reserve(cfg)
    up.plan.model = up.model(cls, cfg["config"])
    if training_config:
        sparse = [la.get("config", {}).get("name") for la in walk_layers(cfg) if la.get("class_name") == "Embedding"
                  and la.get("config", {}).get("trainable", True) is not False]
        up.plan.compile = TrainingConfig(up, sparse).translate(training_config)
        bn = [la.get("config", {}).get("name") for la in walk_layers(cfg) if la.get("class_name") ==
              "BatchNormalization"]
        if bn:  # only a resumed training sees it (rules/optimizers.toml)
            up.note("K2T611", "info", f"{len(bn)} BatchNormalization layer(s): a Keras 3 training step moves the "
                    "moving variance toward the biased batch variance, Keras 2's fused kernel toward the unbiased "
                    "one (x n/(n-1)); outputs and gradients are the same", None, "see docs/optimizers.md#k2t611")
    return up.plan
