"""Parent side of the worker protocol: one process per backend, KERAS_BACKEND fixed before import.

Requests and replies are JSON lines; arrays travel as .npz files in the job's work directory.
The child keeps its stdout for the protocol only (library chatter goes to its log file).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

KINDS = ("tensorflow", "torch", "jax")


class WorkerError(RuntimeError):
    def __init__(self, kind: str, message: str, detail: str = "", code: int | None = None):
        super().__init__(f"{kind} worker: {message}")
        self.kind = kind
        self.message = message
        self.detail = detail
        self.code = code  # an Exit code when the child raised a K2to3Error (a user-facing problem)


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


class Worker:
    """A long-lived child process serving requests in order (one at a time)."""

    def __init__(self, kind: str, log_dir: Path, threads: int = 1, legacy: bool = False, nice: int = 0):
        self.kind = kind
        self.log_path = log_dir / f"worker-{kind}{'-legacy' if legacy else ''}-{id(self):x}.log"
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
            raise WorkerError(self.kind, f"failed to start (exit code {self.proc.returncode})", self.tail())
        self._ready = True

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        with self._lock:
            self._read_ready()
            if self.proc.poll() is not None:
                raise WorkerError(self.kind, f"exited with code {self.proc.returncode}", self.tail())
            assert self.proc.stdin and self.proc.stdout
            self.proc.stdin.write((json.dumps({"op": op, **args}) + "\n").encode())
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise WorkerError(self.kind, f"crashed (exit code {self.proc.returncode})", self.tail())
        reply = json.loads(line)
        if not reply.get("ok"):
            raise WorkerError(self.kind, reply.get("error", "unknown error"), reply.get("traceback", ""),
                              reply.get("code"))
        return reply

    def tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def request_shutdown(self) -> None:
        if self.proc.poll() is None and self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write(b'{"op": "shutdown"}\n')
                self.proc.stdin.flush()
            except OSError:
                pass

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin
                self.proc.stdin.write(b'{"op": "shutdown"}\n')
                self.proc.stdin.flush()
                # A worker holds no state worth a slow interpreter teardown (TF takes seconds).
                self.proc.wait(timeout=0.2)
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


class Pool:
    """Warm workers reused across jobs, one process per backend. The tensorflow process builds the model,
    hosts tf_keras for the Keras 2 golden, and verifies the saved file (TensorFlow is imported once);
    torch and jax verify in their own processes. A worker that crashed is replaced on next use."""

    def __init__(self, backends: tuple[str, ...] = KINDS, golden: bool = True, log_dir: Path | None = None):
        self.backends = backends
        self.golden = golden
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="k2to3-logs-"))
        self.workers: dict[str, Worker] = {}

    def roles(self) -> list[str]:
        return ["tensorflow", *(b for b in self.backends if b != "tensorflow")]

    def start(self) -> None:
        for role in self.roles():
            self.get(role)

    def get(self, role: str) -> Worker:
        w = self.workers.get(role)
        if w is not None and w.proc.poll() is not None:
            w.close()
            w = None
        if w is None:
            # The tensorflow worker is the critical path (build, golden, verify in turn): two threads.
            # torch and jax wait for the built file anyway: a lower priority lets the tensorflow
            # worker's imports and build finish first on a small machine.
            w = Worker(role, self.log_dir, threads=2 if role == "tensorflow" else 1,
                       legacy=role == "tensorflow" and self.golden, nice=0 if role == "tensorflow" else 10)
            self.workers[role] = w
        return w

    def close(self) -> None:
        for w in self.workers.values():  # ask all first, then wait: shutdowns overlap
            w.request_shutdown()
        for w in self.workers.values():
            w.close()
        self.workers.clear()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
