"""What every check shares: the Run (one convert or verify run, as the checks see it) and the Check interface.

A check is one module with one `CHECK = Check(...)`: the report section it owns (`key`), the stage it runs in,
whether it applies to this run, the worker jobs it queues into its stage's pool round, how it builds its section
from their replies, its report.md section and what it says about the verdict. checks/registry.py lists them."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.core.options import CheckOptions
from k2to3.upgrade.plan import Plan
from k2to3.workers.pool import Pool

Progress = Callable[[str], None]
WorkerJob = Callable[[Any], Any]  # a function of a worker (workers/process.py; Pool.run runs it)
Jobs = dict[str, list[WorkerJob]]  # worker role -> jobs, run in order on that worker
Done = dict[str, list[Future]]  # worker role -> the futures of those jobs, in the same order


@dataclass
class Run:
    """One convert or verify run: what is checked (`keras`), against which Keras 2 reference (`reference_h5` loaded
    by tf_keras with `golden_args`, or the `given` outputs of a golden file), with which options and workers. The
    checks write their sections into `report` and set the shared results (`outputs`, `mismatched`)."""

    options: CheckOptions
    pool: Pool
    work: Path  # the job directory: arrays travel to and from the workers as .npz files here
    progress: Progress
    keras: Path  # the .keras under test: convert's partial output, or the file `verify` checks (never written)
    report: dict[str, Any]
    plan: Plan
    backends: tuple[str, ...]  # the backends verified (tensorflow alone for a TF-only model)
    rtol: float
    atol: float
    weight_bytes: int  # float32 weights: what each worker holds copies of (the memory budget's unit)
    reference_h5: Path | None = None  # the Keras 2 HDF5 tf_keras loads (None: a golden file is the reference)
    golden_args: dict[str, Any] = field(default_factory=dict)  # how tf_keras loads it (pipeline/tf_keras_reference.py)
    reference_origin: str = "the file"  # report.reference.from
    modules: list[str] = field(default_factory=list)  # generated modules every worker imports first
    fixed_random: bool = False  # the model draws random numbers: every job draws a fixed pattern instead
    training_config: dict[str, Any] | None = None
    build: dict[str, Any] | None = None  # convert: the build worker's reply (ledger, weight hash, optimizer)
    given: list[np.ndarray] | None = None  # `verify --golden`: the reference outputs of the golden file
    given_hash: str | None = None  # `verify --golden`: the weight hash the golden file recorded
    golden_path: Path | None = None  # `convert --save-golden`: where the golden file goes
    output_path: Path | None = None  # convert: where the .keras ends up (the golden file records its sha256)
    timings: dict[str, float] = field(default_factory=dict)
    export: dict[str, Any] | None = None  # export / convert --export: format, path, temp (checks/exported_file.py)
    # set by the checks
    outputs: list[np.ndarray] | None = None  # the reference outputs (the outputs check)
    state: dict[str, Any] = field(default_factory=dict)  # what a check keeps between its jobs and their replies

    def npz(self, name: str) -> str:
        return str(self.work / f"{name}.npz")

    def arrays(self, name: str) -> str:
        """A per-step array file (core/arrayfile.py: weights after the steps, step gradients)."""
        return str(self.work / f"{name}.arrays")

    def load(self, name: str) -> list[np.ndarray]:
        with np.load(self.npz(name)) as z:
            return [z[f"out{i}"] for i in range(len(z.files))]

    @property
    def build_hash(self) -> str | None:
        """The weight hash every backend must load: the build's (convert), the golden file's, or none (verify)."""
        return (self.build or {}).get("weight_hash") or self.given_hash

    @property
    def tf_keras_reference(self) -> bool:
        return (self.report.get("reference") or {}).get("kind") == "keras2-tf_keras"


@dataclass(frozen=True)
class Check:
    key: str  # the report section it owns (report.json key)
    title: str  # its report.md heading
    stage: int  # checks of one stage share one pool round; stages run in order (registry.STAGES)
    applies: Callable[[Run], bool]
    collect: Callable[[Run, dict[str, Done]], None]  # build report[key] from the stage's futures (by check key)
    # called for every check of the stage before the first collect: starts parent-side work that needs only the
    # replies in the background, so that it overlaps the collects (and their later rounds) before its own
    prepare: Callable[[Run, dict[str, Done]], None] = lambda run, done: None
    jobs: Callable[[Run], Jobs] = lambda run: {}
    markdown: Callable[[dict[str, Any]], list[str]] = lambda report: []
    console: Callable[[dict[str, Any]], list[str]] = lambda report: []  # its lines under the console's table
    # "mismatch" / "error" / None, from the report; judged only when every other check passed (`after_parity`)
    outcome: Callable[[dict[str, Any]], str | None] = lambda report: None
    after_parity: bool = False
    # the numeric verdict (outputs), or "mismatch" to override it (the float32 shadow), or None
    numeric: Callable[[dict[str, Any]], str | None] = lambda report: None
    retry_without_onednn: bool = False  # torch crashed in its backward pass: run its jobs again with oneDNN off
    # the stage this run gives it, when it is not always `stage` (the training steps join the verification's round)
    stage_for: Callable[[Run], int] | None = None
    # the order the round admits the worker roles in, when its jobs decide it (the longest job first)
    role_order: Callable[[Jobs], Jobs] | None = None

    def stage_of(self, run: Run) -> int:
        return self.stage if self.stage_for is None else self.stage_for(run)
