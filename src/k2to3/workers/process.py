"""One backend worker process, seen from the parent: started with its backend fixed in the environment
(`python -m k2to3.workers.child BACKEND`), asked one typed request at a time (workers/protocol.py), shut down.

Requests and replies are JSON lines; arrays travel as .npz and array files in the job's work directory. The child
keeps its stdout for the protocol only (library chatter goes to its log file). Which worker runs which job, and when
(the memory budget, the cores), is pool.py's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from k2to3.workers import protocol

R = TypeVar("R")


class WorkerError(RuntimeError):
    def __init__(self, kind: str, message: str, detail: str = "", code: int | None = None,
                 not_runnable: bool = False):
        super().__init__(f"{kind} worker: {message}")
        self.kind = kind
        self.message = message
        self.detail = detail
        self.code = code  # an Exit code when the child raised a K2to3Error (a user-facing problem)
        self.not_runnable = not_runnable  # errors.NotRunnableHere: this backend cannot run the model here


def worker_env(backend: str, keras_home: str, threads: int = 1, legacy: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        KERAS_BACKEND=backend,
        KERAS_HOME=keras_home,  # a private keras.json: a user's channels_first/float64 must not leak in
        TF_CPP_MIN_LOG_LEVEL="3",
        TF_ENABLE_ONEDNN_OPTS="0",
        CUDA_VISIBLE_DEVICES="",
        JAX_PLATFORMS="cpu",
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        OPENBLAS_NUM_THREADS=str(threads),
        TF_NUM_INTRAOP_THREADS=str(threads),
        TF_NUM_INTEROP_THREADS="1",
        XLA_FLAGS=f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}",
        PYTHONHASHSEED="0",
        PYTHONWARNINGS="ignore",
    )
    if legacy:
        env["TF_USE_LEGACY_KERAS"] = "1"
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def reply_or_error(fut: Future) -> dict[str, Any]:
    """A job's reply from its future, or {"error": message} when the worker reported an error."""
    try:
        return fut.result()
    except WorkerError as exc:
        return {"error": exc.message}


class Worker:
    """A long-lived child process serving requests in order (one at a time)."""

    def __init__(self, kind: str, log_dir: Path, threads: int = 1, legacy: bool = False, nice: int = 0,
                 stats: dict[str, float] | None = None, role: str | None = None):
        self.kind = kind  # the backend this process imports
        self.role = role or kind  # the pool's name for it (the reference worker is a second tensorflow process)
        # Memory figures from the child's replies (MB): idle_rss after imports / after each job, peak_rss the
        # largest job peak. Shared with the pool, so they outlive a worker it shuts down.
        self.stats: dict[str, Any] = stats if stats is not None else {}
        self.log_path = log_dir / f"worker-{self.role}{'-legacy' if legacy else ''}-{id(self):x}.log"
        self._home = tempfile.mkdtemp(prefix=f"k2to3-keras-home-{kind}-")
        self._lock = threading.Lock()
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "k2to3.workers.child", kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=worker_env(kind, self._home, threads, legacy),
            preexec_fn=(lambda: os.nice(nice)) if nice else None,
        )

        self._ready = False

    def wait_ready(self) -> None:
        """Block until the child has imported its backend (its first line)."""
        with self._lock:
            self._read_ready()

    def _read_ready(self) -> None:
        if self._ready:
            return
        assert self.proc.stdout
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise WorkerError(self.role, f"failed to start (exit code {self.proc.returncode})", self.tail())
        self._ready = True
        self._note_memory(json.loads(line).get("memory", {}).get("rss_mb"), None)

    def _note_memory(self, idle_mb: float | None, peak_mb: float | None) -> None:
        if idle_mb:
            self.stats["idle_rss_mb"] = idle_mb
            self.stats.setdefault("peak_rss_mb", idle_mb)
        if peak_mb:
            self.stats["peak_rss_mb"] = max(self.stats.get("peak_rss_mb", 0.0), peak_mb)
            self.stats["last_job_peak_mb"] = peak_mb

    def call(self, req: protocol.Request[R]) -> R:
        """Serve one typed request (workers/protocol.py) and return the op's typed reply; a job that raised in the
        child raises WorkerError here, and so does a child that died under it."""
        line = protocol.encode_request(req)  # a ProtocolError (a bug) unless a registered op's typed request
        with self._lock:
            self._read_ready()
            if self.proc.poll() is not None:
                raise WorkerError(self.role, f"exited with code {self.proc.returncode}", self.tail())
            assert self.proc.stdin and self.proc.stdout
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        if not answer:
            self.proc.wait()
            raise WorkerError(self.role, f"crashed (exit code {self.proc.returncode})", self.tail())
        reply = json.loads(answer)
        mem = reply.get("memory") or {}
        self._note_memory(mem.get("idle_rss_mb"), mem.get("peak_rss_mb"))
        if mem.get("peak_rss_mb"):
            by_op = self.stats.setdefault("peak_by_op_mb", {})
            by_op[req.OP] = max(by_op.get(req.OP, 0.0), mem["peak_rss_mb"])
        if not reply.get("ok"):
            raise WorkerError(self.role, reply.get("error", "unknown error"), reply.get("traceback", ""),
                              reply.get("code"), bool(reply.get("not_runnable")))
        return protocol.decode_reply(req, reply)

    def tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def request_shutdown(self) -> None:
        if self.proc.poll() is None and self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write((json.dumps({"op": protocol.SHUTDOWN}) + "\n").encode())
                self.proc.stdin.flush()
            except OSError:
                pass

    def close(self, deadline: float | None = None) -> None:
        """Shut the child down: asked first, killed when it has not exited by `deadline` (perf_counter; default
        0.2 s from now). A worker holds no state worth a slow interpreter teardown (TF takes seconds)."""
        if self.proc.poll() is None:
            try:
                self.request_shutdown()
                self.proc.wait(timeout=max(0.0, (deadline or time.perf_counter() + 0.2) - time.perf_counter()))
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        import shutil

        shutil.rmtree(self._home, ignore_errors=True)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Job = Callable[["Worker"], Any]  # a function of a worker (Pool.run runs it on its role's worker)


class _Switched:
    """A worker whose every request carries some per-job switches (see with_switches)."""

    def __init__(self, worker: Worker, switches: dict[str, Any]):
        self._worker, self._switches = worker, switches

    def call(self, req: protocol.Request[R]) -> R:
        return self._worker.call(dataclasses.replace(req, **self._switches))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._worker, name)


def with_switches(job: Job, **switches: Any) -> Job:
    """The same job, each of its requests carrying `switches`: the per-job switches every request has
    (protocol.Request: `onednn`, `fixed_random`; workers/child.py `_job_switches`)."""
    unknown = sorted(set(switches) - set(protocol.SWITCHES))
    if unknown:
        raise protocol.ProtocolError(f"{unknown}: not a per-job switch (the switches: {', '.join(protocol.SWITCHES)})")
    return lambda w: job(_Switched(w, switches))


def crashed(fut: Future) -> bool:
    """Did this job's worker die under it (a signal or an abort, not an error it reported)?"""
    exc = fut.exception() if fut.done() else None
    return isinstance(exc, WorkerError) and exc.message.startswith("crashed")
