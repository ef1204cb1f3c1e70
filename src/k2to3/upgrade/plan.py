"""The rebuild plan (JSON for the tensorflow worker) and the class groups the upgrade steps share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from k2to3.core.findings import Finding

MODEL_CLASSES = frozenset({"Functional", "Model", "Sequential"})
INNER_LAYER_KEYS = ("layer", "backward_layer", "cell")
RNN_CLASSES = frozenset({"LSTM", "GRU", "SimpleRNN", "RNN", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"})
RANDOM_LAMBDA = "K2to3RandomLambda"  # a rebuilt Lambda whose function draws random numbers (source/seed_generators.py)
OP_LAYER_CLASSES = frozenset({"TFOpLambda", "SlicingOpLambda", "TensorFlowOpLayer"})
SHAPE_KEYS = ("batch_input_shape", "input_shape", "batch_size")
PORTABLE_PACKAGE = "k2to3"


@dataclass
class Plan:
    model: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)
    compile: dict[str, Any] | None = None
    dtype_policies: set[str] = field(default_factory=set)
    needs_portable: bool = False
    tf_only: list[dict[str, str]] = field(default_factory=list)  # ops kept as TensorFlow calls (layer, op, why)
    weight_transforms: dict[str, str] = field(default_factory=dict)  # layer -> weight layout to convert (cudnn.py)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "renames": self.renames,
            "compile": self.compile,
            "dtype_policies": sorted(self.dtype_policies),
            "needs_portable": self.needs_portable,
            "tf_only": self.tf_only,
            "weight_transforms": self.weight_transforms,
        }
