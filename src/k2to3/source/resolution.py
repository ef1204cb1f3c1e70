"""What --src resolved for an artifact: the generated modules' code, which object serves which layer, the findings.
No keras import."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from k2to3.core.findings import Finding
from k2to3.upgrade.needed_code import ACTIVATION_KEYS, walk_layers


@dataclass
class Resolution:
    module: str
    k3_code: str = ""
    k2_code: str = ""
    lambdas: dict[str, dict[str, Any]] = field(default_factory=dict)  # layer -> {function, arguments}
    activations: dict[tuple[str, str], str] = field(default_factory=dict)  # (layer, key) -> object name
    classes: dict[str, str] = field(default_factory=dict)  # config class name -> object name
    functions: dict[str, str] = field(default_factory=dict)  # stored function name -> object name
    build_fn: str | None = None
    random: bool = False  # the Keras 3 module draws random numbers (source/seed_generators.py)
    findings: list[Finding] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)  # for the report

    @property
    def package(self) -> str:
        return self.module

    def registered(self, name: str) -> str:
        return f"{self.package}>{name}"

    def function_config(self, name: str) -> dict[str, Any]:
        """How Keras 3 serializes a registered function."""
        return {"module": "builtins", "class_name": "function", "config": self.registered(name),
                "registered_name": "function"}

    @property
    def needed_at_load(self) -> bool:
        """Whether the saved .keras references objects of the generated module."""
        return any(o["kind"] != "build function" for o in self.objects)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def golden_config(self, model_config: dict[str, Any]) -> dict[str, Any]:
        """The artifact's model config with every Lambda and lambda activation pointing at the Keras 2 module's
        functions by name (tf_keras then never sees the file's bytecode)."""
        cfg = copy.deepcopy(model_config)
        for layer in walk_layers(cfg):
            lc = layer.get("config", {})
            name = lc.get("name")
            if layer.get("class_name") == "Lambda" and name in self.lambdas:
                lam = self.lambdas[name]
                # tf_keras's two deserializers treat a function name in a Lambda config differently (the legacy
                # one swaps it for the object first): the golden worker's GoldenLambda takes either.
                layer["class_name"] = "K2to3GoldenLambda"
                layer.pop("module", None)
                layer.pop("registered_name", None)
                lc.update(function=lam["function"], arguments=lam["arguments"])
                for key in ("function_type", "module", "output_shape", "output_shape_type", "output_shape_module"):
                    lc.pop(key, None)
            cls = layer.get("class_name")
            if isinstance(cls, str) and self.classes.get(cls.split(">")[-1], cls.split(">")[-1]) != cls.split(">")[-1]:
                layer["class_name"] = self.classes[cls.split(">")[-1]]  # renamed: custom_objects={"Old": New}
                layer.pop("registered_name", None)
                layer.pop("module", None)
            for key in ACTIVATION_KEYS:
                if (name, key) in self.activations:
                    lc[key] = self.activations[(name, key)]
                elif isinstance(lc.get(key), dict) and lc[key].get("class_name") == "function" \
                        and lc[key].get("config") in self.functions:
                    lc[key] = self.functions[lc[key]["config"]]
        return cfg
