"""Each side's training steps as they reply: where they sit among the round's futures, and each backend's row
computed as soon as its steps and tf_keras's are done, while the others still train. The gradient check listens
here for the step's gradients (`listen`, `reference_reply`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np

from k2to3.checks.base import Done, Run
from k2to3.checks.training import noise_probe
from k2to3.checks.training.weights_compare import compare_row
from k2to3.core import arrayfile
from k2to3.core.compare import single_threaded_blas

Listener = Callable[[str, dict[str, Any]], None]


def fit_future(done: Done, backend: str) -> Future:
    """A backend's own training job among the round's futures (the tensorflow worker runs tf_keras's first)."""
    return done[backend][1 if backend == "tensorflow" else 0]


def reference_future(done: Done) -> Future:
    """tf_keras's training job among the round's futures."""
    return done["tensorflow"][0]


def listen(run: Run, fn: Listener) -> None:
    """fn(backend, reply) as each backend's steps reply, in the parent's comparison thread."""
    run.state["training"]["early"].listen(fn)


def reference_reply(run: Run) -> dict[str, Any] | None:
    """tf_keras's reply to its steps, once it has come (None: the job never replied)."""
    return run.state["training"]["early"].reference_reply()


class EarlyCompare:
    """Each backend's training row computed in the parent as soon as its steps and tf_keras's are done, while the
    other backends still train (one thread, in the order the replies come): what is left for collect() after the
    last backend finishes is that backend's comparison, not every backend's weights and slots, so the noise
    probe's next round can start sooner."""

    def __init__(self, run: Run):
        from concurrent.futures import ThreadPoolExecutor

        self.run = run
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="k2to3-training-compare")
        self._ref_ready = threading.Event()
        self._ref: dict[str, Any] | None = None
        self.ref_w: list[np.ndarray] | None = None
        self.saved: dict[str, str] = {}  # the file's slot digests, read once for every backend
        self.rows: dict[str, Future] = {}
        self._listeners: list[Listener] = []

    def listen(self, fn: Listener) -> None:
        """fn(backend, reply) as each backend's steps reply (the gradient check compares their gradients then)."""
        self._listeners.append(fn)

    def reference_reply(self) -> dict[str, Any] | None:
        """tf_keras's reply to its steps, once it has come (None: the job never replied)."""
        self._ref_ready.wait()
        return self._ref

    @contextlib.contextmanager
    def reference(self) -> Iterator[list[dict[str, Any]]]:
        """Wraps tf_keras's steps: whatever happens to them, the comparisons waiting for them go on."""
        got: list[dict[str, Any]] = []
        try:
            yield got
        finally:
            self._ref = got[0] if got else None
            self._ref_ready.set()

    def backend(self, b: str, reply: dict[str, Any]) -> None:
        self.rows[b] = self._pool.submit(self._row, b, reply)
        for fn in self._listeners:
            fn(b, reply)

    def reference_weights(self) -> list[np.ndarray] | None:
        """tf_keras's weights after its steps (None: its steps did not give any); read once."""
        self._ref_ready.wait()
        ref = self._ref
        if ref is None or "error" in ref or not ref.get("available") or (not ref.get("state_loaded") and \
                (self.run.report.get("optimizer") or {}).get("status") == "restored"):
            return None
        if self.ref_w is None:
            self.ref_w = arrayfile.read(self.run.arrays("fit-ref"))
        return self.ref_w

    def _row(self, b: str, got: dict[str, Any]) -> dict[str, Any] | None:
        ref_w = self.reference_weights()
        if ref_w is None or "error" in got or not got.get("available"):
            return None  # collect() says why
        assert self._ref is not None
        with single_threaded_blas():
            row = compare_row(self.run, b, self._ref, got, ref_w, self.saved)
        noise_probe.start_first_round(self.run, self._ref, row)  # on a mismatch rounding may explain
        return row

    def row(self, b: str) -> dict[str, Any] | None:
        fut = self.rows.get(b)
        return None if fut is None else fut.result()

    def close(self) -> None:
        self._ref_ready.set()  # a reference job that never ran (a crashed worker) holds nothing up
        self._pool.shutdown(wait=True, cancel_futures=True)
