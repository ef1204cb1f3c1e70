"""The one options model of `convert` and `verify` (pure data). The command line (interfaces/cli.py), the Python
API (interfaces/api.py) and the stores' per-artifact settings (stores/batch.py) are all derived from the fields
below, so an option added here is everywhere: its CLI flag and help, its API keyword, and whether a store passes it
to every artifact (tests/test_options.py fails when one of them lacks it).

Each field's metadata says how it appears:
  flags     the CLI spelling (default: --field-name)
  help      the CLI help ({verify: ...} where verify's reads differently)
  group     the --help panel
  commands  which commands take it ("convert", "verify")
  cli       how the CLI spells the value when it is not the field's own type: "csv" (a,b,c -> tuple),
            "size" (4G -> bytes), "list" (repeatable), "choice" (one of `choices`)
  store     True: `convert STORE/` passes it to every artifact (and it is part of the store cache key)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k2to3.errors import InputError

BACKENDS = ("tensorflow", "torch", "jax")
EXPORT_FORMATS = ("onnx", "litert", "savedmodel", "torch")
ALL = ("convert", "verify", "export")
GRADS_MODES = ("train", "inference")

VERIFICATION, SOURCE, TRAINING, OUTPUT = "Verification", "Model source", "Training checks", "Output"
DEPLOY = "Deployment target"

GRADS_HELP = ("Also compare the loss gradient w.r.t. every trainable variable on each backend with tf_keras's, on "
              "a seeded batch (training=True, dropout and noise off): report section `gradients`.")
FIT_HELP = ("Also run N train_on_batch steps with tf_keras and on each backend and compare weights and losses "
            "(docs/optimizers.md) [default: 1 with --grads, else 0].")
MAX_MEMORY_HELP = ("Memory budget for all k2to3 processes, e.g. 4G or 1500M: backends verify side by side only "
                   "while their estimated peaks fit, else one after another. [default: 80% of MemAvailable]")


def option(default: Any, help: str | dict[str, str], *, group: str, flags: tuple[str, ...] = (),
           commands: tuple[str, ...] = ("convert", "verify"), cli: str | None = None,
           choices: tuple[str, ...] = (), store: bool = False, default_factory: Any = None) -> Any:
    meta = {"help": help, "group": group, "flags": flags, "commands": commands, "cli": cli, "choices": choices,
            "store": store}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class CheckOptions:
    """What both commands verify with: the inputs, tolerances, backends, the model's source and the training
    checks."""

    inputs: Path | None = option(None, {"convert": "Inputs to compare on (.npz: in0, in1, ...) instead of the seeded "
                                                   "ones.",
                                        "verify": "Inputs (.npz: in0, in1, ...) instead of the seeded ones (with "
                                                  "--reference)."}, group=VERIFICATION, flags=("--input",),
                                commands=ALL)
    rtol: float | None = option(None, {"convert": "Relative tolerance [default: 1e-5]",
                                       "verify": "Relative tolerance [default: 1e-5, or the golden file's]"},
                                group=VERIFICATION, store=True, commands=ALL)
    atol: float | None = option(None, {"convert": "Absolute tolerance [default: 1e-6]",
                                       "verify": "Absolute tolerance [default: 1e-6, or the golden file's]"},
                                group=VERIFICATION, store=True, commands=ALL)
    backends: tuple[str, ...] = option(BACKENDS, "Backends to verify on, comma-separated.", group=VERIFICATION,
                                       cli="csv", store=True)
    max_memory: int | None = option(None, MAX_MEMORY_HELP, group=VERIFICATION, cli="size", store=True,
                                    commands=ALL)
    sources: tuple[str, ...] = option(
        (), {"convert": "Python source (.py or .ipynb, or a directory) that defines the model's Lambda functions, "
                        "custom layers, activations or losses (repeatable; never run, definitions are extracted; the "
                        "repository modules it imports are read too). FILE.py:FUNCTION names the build function of a "
                        "weights-only file.",
             "verify": "Python source of the model's Lambda functions / custom objects (as for convert)."},
        group=SOURCE, flags=("--src",), cli="list", commands=ALL)
    build_args: str | None = option(
        None, "Arguments of the build function a weights-only file or TF checkpoint is built with, as Python "
        "literals in call syntax: \"model_capacity='tiny'\" or \"'tiny', dropout=0.0\" (parsed with "
        "ast.literal_eval, never run) [default: the values the --src files themselves pass, matched to the "
        "file's weights]", group=SOURCE, commands=("convert",))
    trust_bytecode: bool = option(
        False, "Allow unmarshalling the file's Lambda bytecode: to show what it references and, if this Python wrote "
        "it, to compute the Keras 2 reference from it; bytecode of CPython 3.5-3.10 is read as data and simple "
        "Lambdas are decompiled and converted as if passed with --src. Only for files you trust.", group=SOURCE,
        commands=("convert",), store=True)
    grads: bool = option(False, {"convert": GRADS_HELP, "verify": GRADS_HELP + " With --reference."},
                         group=TRAINING)
    loss: str | None = option(None, "The loss for --grads and --fit-steps (a Keras loss name) [default: the file's "
                              "training_config; --grads falls back to mean_squared_error]", group=TRAINING)
    grad_rtol: float | None = option(None, "Gradient relative tolerance [default: 1e-4]", group=TRAINING)
    grad_atol: float | None = option(None, "Gradient absolute tolerance [default: 1e-6]", group=TRAINING)
    grads_mode: str = option("train", "train: BatchNormalization normalizes with the batch statistics (a training "
                             "step); inference: with its moving statistics (fine-tuning with frozen "
                             "BatchNormalization)", group=TRAINING, cli="choice", choices=GRADS_MODES)
    fit_steps: int | None = option(None, {"convert": FIT_HELP, "verify": FIT_HELP + " With --reference."},
                                   group=TRAINING)
    targets: Path | None = option(None, "Targets for --fit-steps (.npz: y0, y1, ...); default: seeded, typed for "
                                  "the loss.", group=TRAINING)

    @property
    def grads_training(self) -> bool:
        """--grads-mode train: BatchNormalization on batch statistics."""
        return self.grads_mode == "train"

    def resolved(self) -> Any:
        """--fit-steps defaults to 1 with --grads (a gradient that agrees is worth little if the step built on it
        does not), else 0; an explicit value, 0 included, is kept."""
        if self.fit_steps is None:
            return dataclasses.replace(self, fit_steps=1 if self.grads else 0)
        return self

    def checked(self) -> None:
        """The checks of an option's own value (the pipelines check how options combine with the files)."""
        for b in self.backends:
            if b not in BACKENDS:
                raise InputError(f"unknown backend '{b}'", hint=f"choose from {','.join(BACKENDS)}")
        if self.grads_mode not in GRADS_MODES:
            raise InputError(f"grads_mode={self.grads_mode!r}: unknown mode", hint="choose 'train' or 'inference'")


@dataclass(frozen=True, kw_only=True)
class ConvertOptions(CheckOptions):
    """`k2to3 convert LEGACY -o MODEL.keras`."""

    src: Path
    output: Path
    report_dir: Path | None = option(None, "Where to write report.json and report.md [default: OUTPUT's name + "
                                     "'.report/']", group=OUTPUT, commands=("convert",))
    force: bool = option(False, "Replace OUTPUT if it exists.", group=OUTPUT, commands=("convert",))
    config: Path | None = option(
        None, "The model.to_json() / to_yaml() architecture of a save_weights SRC (found alone when it sits beside "
        "SRC: x.json + x.h5 or x_weights.h5, model.json + weights.h5).", group=SOURCE, commands=("convert",))
    export: str | None = option(None, "Also export the verified model to this format beside OUTPUT (MODEL.onnx, "
                                "MODEL.tflite, MODEL_savedmodel/, MODEL.pt2) and check the exported file in its own "
                                "runtime against the Keras 2 reference (docs/export.md).", group=OUTPUT,
                                commands=("convert",), cli="choice", choices=EXPORT_FORMATS, store=True)
    save_golden: bool = option(False, "Also write OUTPUT's name + '.golden.npz' (inputs, reference outputs, "
                               "tolerances, versions) for `k2to3 verify --golden` after upgrading "
                               "keras/torch/jax.", group=OUTPUT, commands=("convert",))
    target_keras: str | None = option(
        None, "Write the config dialect an older Keras 3 reads (3.0 ... the current release) and verify the file "
        "by loading it with that Keras in its own environment (created in the cache directory from the package "
        "index; docs/convert.md).", group=DEPLOY, commands=("convert",), store=True)
    target_python: Path | None = option(
        None, "With --target-keras: an interpreter that already has that keras and a backend, instead of an "
        "environment created from the package index.", group=DEPLOY, commands=("convert",), store=True)


@dataclass(frozen=True, kw_only=True)
class VerifyOptions(CheckOptions):
    """`k2to3 verify MODEL.keras --reference LEGACY.h5 | --golden MODEL.golden.npz`."""

    model: Path
    reference: Path | None = option(None, "The Keras 2 .h5 it came from: tf_keras computes the golden output.",
                                    group=VERIFICATION, commands=("verify", "export"))
    golden: Path | None = option(None, "A golden file from `convert --save-golden` instead of --reference.",
                                 group=VERIFICATION, commands=("verify", "export"))
    report_dir: Path | None = option(None, {"verify": "Where to write report.json and report.md [default: MODEL's "
                                                "name + '.verify/']",
                                     "export": "Where to write report.json and report.md [default: PATH's name + "
                                               "'.report/']"}, group=OUTPUT, commands=("verify", "export"))


def fields_of(cls: type, command: str) -> list[dataclasses.Field]:
    """The option fields `command` takes, in declaration order (the required inputs are not options)."""
    return [f for f in dataclasses.fields(cls) if f.metadata and command in f.metadata["commands"]]


def store_settings(opts: CheckOptions) -> dict[str, Any]:
    """The options a store passes to every artifact it converts (the `store` ones of `opts`' class: a
    ConvertOptions also passes --export, --target-keras and --target-python), as plain data."""
    return {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts) if f.metadata.get("store")}


@dataclass(frozen=True, kw_only=True)
class ExportOptions(VerifyOptions):
    """`k2to3 export MODEL.keras --format FORMAT -o PATH --reference LEGACY.h5 | --golden MODEL.golden.npz`."""

    format: str
    output: Path
    force: bool = option(False, "Replace PATH if it exists.", group=OUTPUT, commands=("export",))
