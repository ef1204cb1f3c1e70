"""How tf_keras computes the Keras 2 reference of an input (the golden): the arguments its worker jobs take
(workers/tf_keras_outputs.py) and the sentence report.json's `reference.from` says. One place for every input: a --src
resolution (the user's definitions as written, or their build function), Lambda bytecode the user trusts, CuDNN layers
(run as LSTM/GRU on a CPU), Keras 1 configs (translated to Keras 2), Theano-trained kernels (flipped)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from k2to3.formats import Input
from k2to3.pipeline import sources as sources_mod
from k2to3.pipeline.prepare import LegacyModel
from k2to3.upgrade import cudnn
from k2to3.upgrade.bytecode import loads_here
from k2to3.upgrade.keras1 import reference_build as keras1_reference

KERAS1_CONFIG = "golden_keras1_config.json"


def golden_args(work: Path, model: LegacyModel, trust_bytecode: bool) -> dict[str, Any]:
    """The arguments of the tf_keras jobs that compute `model`'s reference (job files written into `work`)."""
    artifact, plan, resolution, modules = model.inp.artifact, model.prepared.plan, model.prepared.resolution, \
        model.modules
    build_fn, build_args = model.sources.build_fn, model.sources.build_args
    assert artifact is not None
    args: dict[str, Any] = {}
    if resolution is not None and modules is not None:
        # bytecode of another Python cannot serve as the golden
        trusted = trust_bytecode and artifact.model_config is not None and loads_here(artifact.model_config)
        args = {"k2_module": str(modules.k2), "trust_bytecode": trusted}
        if build_fn and artifact.model_config is None:  # weights-only: the build function makes the model
            args["build_fn"] = build_fn
            args["build_args"] = build_args
        else:
            args["golden_config"] = str(sources_mod.golden_config(resolution, artifact.model_config or {}, work))
    if plan.weight_transforms and artifact.model_config is not None:
        cudnn.golden_config(work, args, artifact.model_config)  # tf_keras runs CuDNN layers on GPU only
    found = keras1_reference.golden_config(artifact.model_config)
    if found is not None and "golden_config" not in args:
        path = work / KERAS1_CONFIG
        path.write_text(json.dumps(found[0]))
        args["golden_config"] = str(path)
        if found[1]:  # K2T485: the Functional form loads by layer name
            args["golden_by_name"] = True
    if keras1_reference.is_theano(artifact.backend):
        args["theano_kernels"] = True
    return args


def origin(args: dict[str, Any], inp: Input) -> str:
    """report.json reference.from: what tf_keras loaded."""
    if args.get("trust_bytecode"):
        return "the file's Lambda bytecode (--trust-bytecode)"
    if args.get("build_fn"):
        return "the --src build function"
    if args.get("k2_module"):
        return "the --src definitions as written"
    if inp.pair:
        return "the config + weights pair (tf_keras model_from_config + load_weights)"
    if str(args.get("golden_config", "")).endswith(KERAS1_CONFIG):
        return "the file, its Keras 1 config translated to Keras 2 (tf_keras converts the Keras 1 weight layouts)"
    if args.get("golden_config"):
        return "the file, its CuDNN layers as LSTM/GRU (tf_keras converts their weights)"
    if inp.multi_gpu:
        return "the template model of the multi_gpu_model save"
    return "the file" if inp.h5 == inp.path else "the file re-saved as HDF5 by tf_keras"
