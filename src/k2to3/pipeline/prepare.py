"""From a read input to what the workers need: the upgrade plan (rules/*.toml) with every finding in the order the
report lists them, the --src resolution, and the seeded verification inputs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.core.inputs import free_sizes, input_specs, load_inputs, make_inputs
from k2to3.formats import Input
from k2to3.pipeline import sources as sources_mod
from k2to3.source.resolution import Resolution
from k2to3.upgrade import upgrade
from k2to3.upgrade.bytecode import inspect_lambdas
from k2to3.upgrade.keras1 import reference_build as keras1_reference
from k2to3.upgrade.plan import Plan


@dataclass
class Prepared:
    plan: Plan
    resolution: Resolution | None


@dataclass(frozen=True)
class LegacyModel:
    """The Keras 2 model as a run has read it: the input, its plan and --src resolution, the --src files (with the
    build function and arguments chosen for a weights-only file) and the modules written from them; what tf_keras
    computes the reference from (pipeline/tf_keras_reference.py) and what the checks run against."""

    inp: Input
    prepared: Prepared
    sources: sources_mod.Sources
    modules: sources_mod.Modules | None


def prepare(inp: Input, sources: sources_mod.Sources, output: Path, trust_bytecode: bool) -> Prepared:
    """The plan of a Keras 2 artifact. Findings, in order: what reading the input did (the multi-GPU wrapper
    removed), what --src resolved, the upgrade's own, the Theano kernel flip, and with --trust-bytecode what
    the Lambda bytecode references."""
    artifact = inp.artifact
    assert artifact is not None
    alone = None  # sources only add: what the file converts alone stays converted, whatever the sources hold
    if sources.index is not None and artifact.model_config:
        alone = upgrade(artifact.model_config, artifact.training_config, None)
    blocking = {f.layer for f in alone.findings if f.severity == "error"} if alone is not None else None
    resolution = sources_mod.resolve(sources, artifact, output, blocking)
    if resolution is not None and resolution.errors and alone is not None and not blocking:
        resolution = _demoted(resolution)
    plan = upgrade(artifact.model_config, artifact.training_config, resolution) if artifact.model_config \
        else Plan(model={})
    if alone is not None and resolution is not None and not blocking and any(
            f.severity == "error" for f in plan.findings):  # what the sources gave broke a convertible model
        plan, resolution = alone, _demoted(resolution)
    plan.findings.extend(keras1_reference.findings(artifact.backend))  # Theano-trained kernels (K2T480)
    if resolution is not None:
        plan.findings[:0] = [f for f in resolution.findings if f not in plan.findings]
        plan.needs_portable = plan.needs_portable or "k2to3.portable" in resolution.k3_code
    plan.findings[:0] = inp.findings()
    if trust_bytecode and artifact.model_config:
        plan.findings.extend(inspect_lambdas(artifact.model_config))
    return Prepared(plan, resolution)


def _demoted(resolution: Resolution) -> Resolution:
    """The file converts alone: a --src resolution that failed leaves its findings as warnings and is not used."""
    notes = [dataclasses.replace(f, severity="warning", message=f"{f.message}; converted from the file's own config")
             if f.severity == "error" else f for f in resolution.findings]
    return Resolution(resolution.module, findings=notes)


def write_inputs(npz: str, given: Path | None, plan_model: dict[str, Any]) -> list[dict[str, Any]]:
    """The verification batch (--input, or seeded from the model's input specs) as `npz`; report.json `inputs`."""
    xs = load_inputs(given, plan_model) if given else make_inputs(plan_model)
    np.savez(npz, **{f"in{i}": x for i, x in enumerate(xs)})
    out = [{"name": s["orig_name"], "shape": list(x.shape), "dtype": str(x.dtype),
            "source": str(given) if given else "seeded"} for s, x in zip(input_specs(plan_model), xs)]
    if not given:  # which free dimensions were given which size, and why (core/inputs.py free_sizes)
        for row, s in zip(out, input_specs(plan_model)):
            free = free_sizes(plan_model, s["config"]["batch_shape"])
            if free:
                row["free_dims"] = {str(a): {"size": n, "why": why or "the default"} for a, (n, why) in free.items()}
    return out


def model_of_inputs(inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """Input specs of a model built by a --src build function, in the plan's form (for make_inputs)."""
    layers = [{"name": i["name"], "orig_name": i["name"], "class_name": "InputLayer", "inbound_nodes": [],
               "config": {"batch_shape": i["shape"], "dtype": i["dtype"]}} for i in inputs]
    layers += [{"name": f"{i['name']}/embedding", "class_name": "Embedding", "config": {"input_dim": v},
                "inbound_nodes": [[[i["name"], 0, 0, {}]]]} for i in inputs if (v := i.get("embedding_input_dim"))]
    return {"kind": "functional", "layers": layers, "inputs": [[i["name"], 0, 0] for i in inputs]}
