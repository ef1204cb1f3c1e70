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
  metavar   how --help names the value (default: from its type, interfaces/cli_help.py)

and what it may be, and with what (`validate` checks them all, for every command, in the order below):
  strict    a command that does not take it (`commands`) refuses it from the Python API too (others ignore it)
  exists    the value is a file that must exist; the text is the hint when it does not
  requires  other options it needs (any one of them); `example` spells their value in the hint
  excludes  other options it cannot go with, each with why and a hint (`Excludes`)
  minimum   the smallest number it takes (the command line refuses less too)

`lint`'s options are here as well (`LintOptions`), without the pipelines' imports: the pre-commit fast path
(interfaces/fastlint.py) reads which flags lint takes from them, as the full command line does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from k2to3.errors import InputError

BACKENDS = ("tensorflow", "torch", "jax")
EXPORT_FORMATS = ("onnx", "litert", "savedmodel", "torch")
ALL = ("convert", "verify", "export")
GRADS_MODES = ("train", "inference")
LINT_FORMATS = ("text", "json", "sarif", "github")  # source/formats.py says what each prints

VERIFICATION, SOURCE, TRAINING, OUTPUT = "Verification", "Model source", "Training checks", "Output"
DEPLOY = "Deployment target"

GRADS_HELP = ("Also compare the loss gradient w.r.t. every trainable variable on each backend with tf_keras's, on "
              "a seeded batch (training=True, dropout and noise off): report section `gradients`.")
FIT_HELP = ("Also run N train_on_batch steps with tf_keras and on each backend and compare weights and losses "
            "(docs/optimizers.md) [default: 1 with --grads, else 0].")
MAX_MEMORY_HELP = ("Memory budget for all k2to3 processes, e.g. 4G or 1500M: backends verify side by side only "
                   "while their estimated peaks fit, else one after another. [default: 80% of MemAvailable]")
Opts = TypeVar("Opts", bound="CheckOptions")


@dataclass(frozen=True)
class Excludes:
    """An option another one cannot go with: `--grads with --golden: {why}` ({hint})."""

    other: str  # the other option's field name
    why: str
    hint: str


def option(default: Any, help: str | dict[str, str], *, group: str | None, flags: tuple[str, ...] = (),
           commands: tuple[str, ...] = ("convert", "verify"), cli: str | None = None,
           choices: tuple[str, ...] = (), store: bool = False, default_factory: Any = None, metavar: str | None = None,
           strict: bool = False, exists: str | None = None, requires: tuple[str, ...] = (), example: str = "",
           excludes: tuple[Excludes, ...] = (), minimum: int | None = None) -> Any:
    meta = {"help": help, "group": group, "flags": flags, "commands": commands, "cli": cli, "choices": choices,
            "store": store, "metavar": metavar, "strict": strict, "exists": exists, "requires": requires,
            "example": example, "excludes": excludes, "minimum": minimum}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class CheckOptions:
    """What both commands verify with: the inputs, tolerances, backends, the model's source and the training
    checks."""

    COMMAND: ClassVar[str] = ""  # the command a subclass's options are for
    REFUSED_HINT: ClassVar[str] = ""  # what to run instead, when given a `strict` option the command does not take

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
        group=SOURCE, flags=("--src",), cli="list", commands=ALL, metavar="FILE[:FUNCTION]")
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
                         group=TRAINING, strict=True)
    loss: str | None = option(None, "The loss for --grads and --fit-steps (a Keras loss name) [default: the file's "
                              "training_config; --grads falls back to mean_squared_error]", group=TRAINING,
                              metavar="NAME", requires=("fit_steps", "grads"))
    grad_rtol: float | None = option(None, "Gradient relative tolerance [default: 1e-4]", group=TRAINING)
    grad_atol: float | None = option(None, "Gradient absolute tolerance [default: 1e-6]", group=TRAINING)
    grads_mode: str = option("train", "train: BatchNormalization normalizes with the batch statistics (a training "
                             "step); inference: with its moving statistics (fine-tuning with frozen "
                             "BatchNormalization)", group=TRAINING, cli="choice", choices=GRADS_MODES)
    fit_steps: int | None = option(None, {"convert": FIT_HELP, "verify": FIT_HELP + " With --reference."},
                                   group=TRAINING, minimum=0, example="N", strict=True)
    targets: Path | None = option(None, "Targets for --fit-steps (.npz: y0, y1, ...); default: seeded, typed for "
                                  "the loss.", group=TRAINING, exists="pass an .npz with arrays y0, y1, ...",
                                  requires=("fit_steps",))

    @property
    def grads_training(self) -> bool:
        """--grads-mode train: BatchNormalization on batch statistics."""
        return self.grads_mode == "train"

    def resolved(self: Opts) -> Opts:
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

    COMMAND: ClassVar[str] = "convert"

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
        "index; docs/convert.md).", group=DEPLOY, commands=("convert",), store=True, example="3.N")
    target_python: Path | None = option(
        None, "With --target-keras: an interpreter that already has that keras and a backend, instead of an "
        "environment created from the package index.", group=DEPLOY, commands=("convert",), store=True,
        requires=("target_keras",))


# what a golden file cannot be verified with (in this order)
GOLDEN_EXCLUDES = (
    Excludes("grads", "a golden file holds outputs, not a model to differentiate",
             "pass --reference LEGACY.h5 with --grads"),
    Excludes("fit_steps", "a golden file holds outputs, not a model to train",
             "pass --reference LEGACY.h5 with --fit-steps"),
    Excludes("inputs", "the golden file holds its inputs", "drop --input"),
)


@dataclass(frozen=True, kw_only=True)
class VerifyOptions(CheckOptions):
    """`k2to3 verify MODEL.keras --reference LEGACY.h5 | --golden MODEL.golden.npz`."""

    COMMAND: ClassVar[str] = "verify"

    model: Path
    reference: Path | None = option(None, "The Keras 2 .h5 it came from: tf_keras computes the golden output.",
                                    group=VERIFICATION, commands=("verify", "export"), exists="pass the Keras 2 .h5")
    golden: Path | None = option(None, "A golden file from `convert --save-golden` instead of --reference.",
                                 group=VERIFICATION, commands=("verify", "export"), excludes=GOLDEN_EXCLUDES)
    report_dir: Path | None = option(None, {"verify": "Where to write report.json and report.md [default: MODEL's "
                                                "name + '.verify/']",
                                     "export": "Where to write report.json and report.md [default: PATH's name + "
                                               "'.report/']"}, group=OUTPUT, commands=("verify", "export"))


def flags(f: dataclasses.Field) -> tuple[str, ...]:
    """The field's flags on the command line (the first is the one error lines say)."""
    return f.metadata["flags"] or ("--" + f.name.replace("_", "-"),)


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

    COMMAND: ClassVar[str] = "export"
    REFUSED_HINT: ClassVar[str] = "run k2to3 verify for them"

    format: str
    output: Path
    force: bool = option(False, "Replace PATH if it exists.", group=OUTPUT, commands=("export",))


def validate(opts: CheckOptions) -> None:
    """Every option of `opts` against its field's constraints, for its class's command: a `strict` option the
    command does not take, a file that must exist, options that exclude each other, an option without one it
    requires, a number below its minimum; then each value on its own (`checked`). convert, verify and export call
    it before any work (each after its own inputs' checks); the first problem is one error line."""
    fields = [f for f in dataclasses.fields(opts) if f.metadata]
    by_name = {f.name: f for f in fields}
    refused = [f for f in fields if f.metadata["strict"] and opts.COMMAND not in f.metadata["commands"]]
    if any(getattr(opts, f.name) for f in refused):
        said = " and ".join(flags(f)[0] for f in refused)
        raise InputError(f"{said} {'do' if len(refused) > 1 else 'does'} not apply to {opts.COMMAND}",
                         hint=opts.REFUSED_HINT or None)
    for f in fields:
        value = getattr(opts, f.name)
        if f.metadata["exists"] and value is not None and not Path(value).is_file():
            raise InputError(f"{flags(f)[0]} {value}: no such file", hint=f.metadata["exists"])
    for f in fields:
        for ex in f.metadata["excludes"]:
            if getattr(opts, f.name) and ex.other in by_name and getattr(opts, ex.other):
                raise InputError(f"{flags(by_name[ex.other])[0]} with {flags(f)[0]}: {ex.why}", hint=ex.hint)
    for f in fields:
        needs = [by_name[n] for n in f.metadata["requires"] if n in by_name]
        if getattr(opts, f.name) and needs and not any(getattr(opts, n.name) for n in needs):
            raise InputError(f"{flags(f)[0]} applies to {' and '.join(flags(n)[0] for n in needs)} only",
                             hint="add " + " or ".join(f"{flags(n)[0]} {n.metadata['example']}".strip()
                                                       for n in needs))
    for f in fields:
        least, value = f.metadata["minimum"], getattr(opts, f.name)
        if least is not None and value is not None and value < least:
            raise InputError(f"{flags(f)[0]} {value}: less than {least}", hint=f"pass {least} or more")
    opts.checked()


@dataclass(frozen=True, kw_only=True)
class LintOptions:
    """`k2to3 lint [PATH]...`: the options of the full command line and of the pre-commit fast path
    (interfaces/fastlint.py), which parses them without typer. Field names are source/command.py's `lint`
    keywords."""

    COMMAND: ClassVar[str] = "lint"

    fmt: str = option("text", "Output format.", group=None, flags=("--format",), commands=("lint",),
                      metavar="|".join(LINT_FORMATS))
    select: str | None = option(None, "Only these codes or prefixes (comma-separated).", group=None,
                                commands=("lint",), metavar="CODES")
    ignore: str | None = option(None, "Skip these codes or prefixes (comma-separated).", group=None,
                                commands=("lint",), metavar="CODES")
    no_cache: bool = option(False, "Do not read or write the result cache.", group=None, commands=("lint",))
