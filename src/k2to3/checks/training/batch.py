"""The batch the training steps run on, the same on every side: the inputs of the run, the `--targets` arrays (or
targets seeded in the shape of the model's outputs) and the losses the file compiled, written once by the first
training job that runs."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from k2to3.checks.base import Run
from k2to3.core.seeds import make_targets
from k2to3.errors import InputError


def read_targets(path: Path, batch: int) -> list[np.ndarray]:
    """The --targets arrays (y0, y1, ...), each of the inputs' batch: checked before any step runs."""
    try:
        with np.load(path) as z:
            keys = sorted(z.files, key=lambda k: (len(k), k))
            ys = [z[k] for k in keys]
    except (OSError, ValueError) as exc:
        raise InputError(f"--targets {path}: cannot read ({exc})", hint="pass an .npz with arrays y0, y1, ...") \
            from None
    for i, y in enumerate(ys):
        if not y.shape or y.shape[0] != batch:
            raise InputError(f"--targets {path}: target {i} has batch {y.shape[0] if y.shape else 'none'}, the "
                             f"inputs {batch}", hint="targets must match the --input batch (or the seeded batch of 2)")
    return ys


def load_targets(path: Path, outputs: list[np.ndarray]) -> list[np.ndarray]:
    ys = read_targets(path, outputs[0].shape[0] if outputs else 0)
    if len(ys) != len(outputs):
        raise InputError(f"--targets {path}: {len(ys)} arrays for a model with {len(outputs)} outputs",
                         hint="one target array per model output, named y0, y1, ...")
    return ys


def compile_losses(run: Run) -> list[Any]:
    """The compiled loss of each output, as the upgraded training config names it."""
    loss = (run.plan.compile or {}).get("loss")
    return list(loss.values()) if isinstance(loss, dict) and "class_name" not in loss else \
        list(loss) if isinstance(loss, list) else [loss]


class Targets:
    """The batch's targets (`--targets`, or seeded ones shaped like the model's outputs), written once, by the first
    training job that runs. Joined to the verification's round, the steps may start before the parent has read the
    outputs: the shapes come from the Keras 2 golden (waited for: it is the tensorflow worker's first job), a golden
    file's, or else the backend's own outputs (its verify came first on its worker). A bad --targets file is raised
    again by collect()."""

    def __init__(self, run: Run):
        self.run, self.path = run, run.npz("fit-targets")
        self._lock = threading.Lock()
        self._done = False
        self.error: InputError | None = None

    def ensure(self, backend: str) -> str:
        with self._lock:
            if self.error is not None:
                raise self.error
            if not self._done:
                run, opts = self.run, self.run.options
                outputs = self._outputs(backend)
                try:
                    ys = load_targets(opts.targets, outputs) if opts.targets else \
                        make_targets(compile_losses(run), outputs)
                except InputError as exc:
                    self.error = exc
                    raise
                np.savez(self.path, **{f"y{i}": y for i, y in enumerate(ys)})
                self._done = True
        return self.path

    def _outputs(self, backend: str) -> list[np.ndarray]:
        run = self.run
        if run.outputs is not None or run.given is not None:
            return run.outputs if run.outputs is not None else run.given  # type: ignore[return-value]
        written = run.state.get("golden_written")
        if written is not None:
            written.wait()
            if run.state.get("golden_ok"):
                return run.load("golden")
        return run.load(f"out-{backend}")
