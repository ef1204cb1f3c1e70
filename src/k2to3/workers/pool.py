"""The pool of backend workers (one process per role, workers/process.py) and its scheduler: which role's jobs run
when, side by side while the memory budget and the cores allow, workers started early or shut down to make room.
"""

from __future__ import annotations

import copy
import os
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from k2to3.workers import memory
from k2to3.workers.process import Job, Worker

KINDS = ("tensorflow", "torch", "jax")
# A second tensorflow process for the tf_keras side of a run that trains (checks/training/reference_worker.py): the
# Keras 2 reference, its training steps and their float32 noise probe, beside the Keras 3 tensorflow worker's build,
# verification and steps. Never started unless a run asks for it.
REFERENCE = "reference"
BACKEND = {"tensorflow": "tensorflow", "torch": "torch", "jax": "jax", REFERENCE: "tensorflow"}
# Resident set of a warm idle worker (after its imports, no model), in MB: starting estimates for the versions
# constraints.txt pins, on Linux x86-64; the pool replaces them with its own workers' figures once they have run.
IDLE_MB = {"tensorflow": 700.0, "torch": 420.0, "jax": 330.0, REFERENCE: 700.0}
# What a job adds on top of that per byte of float32 weights (load buffer, variables, hashes), and at least
# JOB_MIN_MB for activations and compiled programs; estimated likewise from large models, then learned.
JOB_FACTOR = {"tensorflow": 4.0, "torch": 3.0, "jax": 3.0, REFERENCE: 4.0}
JOB_MIN_MB = 150.0
# Keep this share of MemAvailable for everything else on the machine when no --max-memory is given.
DEFAULT_BUDGET_SHARE = 0.8
# Compute threads of each role's worker: the tensorflow worker is the critical path (build, golden, verify).
THREADS = {"tensorflow": 2, "torch": 1, "jax": 1, REFERENCE: 2}
# Scheduling priority (nice) of each role's worker: the tensorflow side carries the longest chains (the build, then
# the golden and the reference's steps); torch and jax wait for the built file anyway, and at nice 10 their imports
# fill the cores the build leaves idle instead of slowing it.
NICE = {"tensorflow": 0, REFERENCE: 0, "torch": 10, "jax": 10}
# Backends verify side by side while the budget allows and at most one per core. On a quiet machine side by side
# shortens the run for a higher memory peak, and more backends than cores slow small conversions down
# (bench/convert.py; figures in docs/convert.md "Memory budget"). Under other tenants' load side by side gains
# less; --max-memory trades the wall time back for memory.
CORES_PER_ROLE = 1


def cores() -> int:
    """CPU cores this process may use (K2TO3_CORES overrides: the scheduler's assumption, e.g. to compare)."""
    env = os.environ.get("K2TO3_CORES", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_budget() -> tuple[int | None, str]:
    """The memory budget when none is given: a share of MemAvailable (None: unknown, no limit)."""
    avail = memory.available_bytes()
    if avail is None:
        return None, "unlimited (MemAvailable unknown)"
    return int(avail * DEFAULT_BUDGET_SHARE), f"{DEFAULT_BUDGET_SHARE:.0%} of MemAvailable"


class Pool:
    """Warm workers reused across jobs, one process per backend. The tensorflow process builds the model,
    hosts tf_keras for the Keras 2 golden, and verifies the saved file (TensorFlow is imported once);
    torch and jax verify in their own processes. A worker that crashed is replaced on next use.

    Memory budget (`max_memory`, bytes): every worker process holds its backend's libraries and its own copy
    of the model, so running the backends side by side costs the sum of their peaks. `run` starts a
    backend's jobs only while the estimated peaks of what is resident fit the budget, and only while each
    running backend has CORES_PER_ROLE cores (`cores`: sched_getaffinity, K2TO3_CORES overrides); otherwise
    it waits for the running ones, and shuts down idle workers this run no longer needs before starting
    another."""

    def __init__(self, backends: tuple[str, ...] = KINDS, golden: bool = True, log_dir: Path | None = None,
                 max_memory: int | None = None, one_shot: bool = False):
        self.backends = backends
        # Serves one model (a `convert` or `verify` without a warm pool): when backends run one at a time on
        # too few cores, a finished worker is shut down before the next starts. A warm pool (audit --verify,
        # batch) keeps them for the next model instead of importing TensorFlow again.
        self.one_shot = one_shot
        self.golden = golden
        # Worker logs are read into an error's detail when a worker fails; a directory the pool made is its own to
        # remove on close (every conversion used to leave one in the temporary directory).
        self._own_log_dir = log_dir is None
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="k2to3-logs-"))
        self.workers: dict[str, Worker] = {}
        if max_memory is not None:
            self.max_memory: int | None = max_memory
            self.budget_source = "--max-memory"
        else:
            self.max_memory, self.budget_source = default_budget()
        self.stats: dict[str, dict[str, Any]] = {}  # role -> memory figures (MB), kept across restarts
        self._factor: dict[str, float] = {}  # role -> learned job bytes per weight byte
        self.schedule: list[dict[str, Any]] = []  # the last run(): when each role's jobs started and ended
        self.cores = cores()

    def roles(self) -> list[str]:
        """The workers a run starts: tensorflow first when it verifies there or hosts tf_keras for the golden (it
        builds too: `get` starts it on demand); a run against a golden file on torch alone needs torch alone."""
        tf = ["tensorflow"] if self.golden or "tensorflow" in self.backends else []
        return [*tf, *(b for b in self.backends if b != "tensorflow")]

    # -- estimates ---------------------------------------------------------------------------------------
    def idle_bytes(self, role: str) -> int:
        return int(self.stats.get(role, {}).get("idle_rss_mb", IDLE_MB[role]) * memory.MB)

    def job_bytes(self, role: str, weight_bytes: int) -> int:
        """Estimated peak RSS of `role`'s worker while it runs a job on a model with these weights."""
        extra = max(JOB_MIN_MB * memory.MB, self._factor.get(role, JOB_FACTOR[role]) * weight_bytes)
        return self.idle_bytes(role) + int(extra)

    def learn(self, role: str, weight_bytes: int) -> None:
        """After a job: what it really added per weight byte, for the next estimates."""
        st = self.stats.get(role, {})
        if weight_bytes > 0 and st.get("last_job_peak_mb") and st.get("idle_rss_mb"):
            added = (st["last_job_peak_mb"] - st["idle_rss_mb"]) * memory.MB
            if added > JOB_MIN_MB * memory.MB:  # below that the floor decides, the factor says nothing
                self._factor[role] = added / weight_bytes

    def fits(self, roles: list[str], weight_bytes: int, running: set[str] = frozenset()) -> bool:  # type: ignore
        """Would `roles` running jobs, next to the `running` ones and the other resident idle workers and this
        process, stay within the budget?"""
        if self.max_memory is None:
            return True
        busy = set(roles) | set(running)
        total = memory.rss_bytes() + sum(self.job_bytes(r, weight_bytes) for r in busy)
        total += sum(self.idle_bytes(r) for r, w in self.workers.items() if r not in busy and w.proc.poll() is None)
        return total <= self.max_memory

    @property
    def max_parallel(self) -> int:
        """How many backends may verify side by side on this machine's cores (the budget may allow fewer)."""
        return max(1, self.cores // CORES_PER_ROLE)

    # -- workers -----------------------------------------------------------------------------------------
    def start(self, weight_bytes: int = 0) -> None:
        """Start the first role's worker (tensorflow, but for a golden-file run without it), and the others now too
        (their imports overlap the build): all of them when they can run side by side within the budget and the
        cores, else each one whose idle resident set fits the budget beside the build (`prestart`); `run`
        starts any left while the one before it runs."""
        roles = self.roles()
        for st in self.stats.values():  # the report's peaks are this job's (a warm pool serves many)
            st.pop("peak_rss_mb", None)
            st.pop("peak_by_op_mb", None)
        self.get(roles[0])
        if len(roles) <= self.max_parallel and self.fits(roles, weight_bytes):
            for role in roles:
                self.get(role)
        else:
            # More roles than cores: start the others anyway while their idle resident sets fit beside the build.
            # Their imports (niced) fill the cores the first worker's single-threaded import leaves idle; started
            # only when a core frees up, the last backend's seconds of imports would follow everything else and
            # lengthen the run (docs/convert.md "Memory budget").
            for role in roles[1:]:
                self.prestart(role, weight_bytes, {roles[0]})

    def prestart(self, role: str, weight_bytes: int, running: set[str]) -> None:
        """Start `role`'s worker before its turn when its idle resident set fits beside the running ones: its
        imports (at a lower priority) overlap their work instead of delaying its own."""
        if role in self.workers and self.workers[role].proc.poll() is None:
            return
        if self.max_memory is not None:
            total = memory.rss_bytes() + sum(self.job_bytes(r, weight_bytes) for r in running)
            total += sum(self.idle_bytes(r) for r, w in self.workers.items()
                         if r not in running and w.proc.poll() is None)
            if total + self.idle_bytes(role) > self.max_memory:
                return
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
            self.log_dir.mkdir(parents=True, exist_ok=True)  # a pool used again after close
            w = Worker(BACKEND[role], self.log_dir, threads=THREADS[role],
                       legacy=BACKEND[role] == "tensorflow" and self.golden,
                       nice=NICE[role], stats=self.stats.setdefault(role, {}),
                       role=role)
            self.workers[role] = w
        return w

    def release(self, role: str) -> None:
        """Shut a worker down (its memory goes back to the machine); `get` starts a fresh one when needed."""
        w = self.workers.pop(role, None)
        if w is not None:
            w.close()

    def run(self, jobs: dict[str, list[Job]], weight_bytes: int, release_finished: bool = False
            ) -> dict[str, list[Future]]:
        """Run each role's jobs in order on its worker; roles side by side while the budget and the cores
        (`max_parallel`) allow.

        Returns a future per job (a job's exception is set on its future). Roles are admitted in the order
        given; one that does not fit waits for a running role to finish, and idle workers that no job of this
        run needs are shut down first. With nothing running, the next role starts whatever its estimate: the
        budget orders work, it never blocks it (`over_budget` in the schedule says so). When roles run one at
        a time because of the budget, or of the cores in a one-shot pool, the idle workers this run no longer
        needs are shut down before each starts; while one runs, the next one's worker is started early when
        its idle resident set fits the budget (`prestart`). With `release_finished` (the caller needs no worker
        after this run, as a `convert` whose outputs agree), a one-shot pool shuts each worker down as soon as
        its own jobs are done, so a finished backend's resident set is not summed with the ones still working."""
        futs = {r: [Future() for _ in js] for r, js in jobs.items()}
        pending = [r for r in jobs if jobs[r]]
        running: set[str] = set()
        cond = threading.Condition()
        t0 = time.perf_counter()
        self.schedule = []

        def serve(role: str, entry: dict[str, Any]) -> None:
            try:
                for job, fut in zip(jobs[role], futs[role]):
                    fut.set_running_or_notify_cancel()
                    try:
                        fut.set_result(job(self.get(role)))
                    except BaseException as exc:  # delivered to the caller through the future
                        fut.set_exception(exc)
                    self.learn(role, weight_bytes)
            finally:
                done_worker = None
                with cond:
                    entry["end_s"] = round(time.perf_counter() - t0, 3)
                    running.discard(role)
                    if release_finished and self.one_shot:
                        done_worker = self.workers.pop(role, None)
                    cond.notify_all()
                if done_worker is not None:
                    done_worker.close()

        threads = []
        with cond:
            while pending:
                role = pending[0]
                if running and role != REFERENCE and len(running - {REFERENCE}) >= self.max_parallel:
                    cond.wait()
                    continue
                if running and not self.fits([role], weight_bytes, running):
                    idle = [r for r in self.workers if r not in running and r not in pending]
                    if idle:
                        self.release(idle[0])
                        continue
                    cond.wait()
                    continue
                if not running and ((self.one_shot and self.max_parallel == 1) or not self.fits([role], weight_bytes)):
                    # one at a time (cores or budget): one resident worker, as the naive recipe
                    for r in [r for r in self.workers if r not in pending]:
                        self.release(r)
                pending.pop(0)
                entry = {"role": role, "start_s": round(time.perf_counter() - t0, 3),
                         "concurrent": sorted(running),
                         "over_budget": not self.fits([role], weight_bytes, running)}
                self.schedule.append(entry)
                running.add(role)
                t = threading.Thread(target=serve, args=(role, entry), daemon=True)
                threads.append(t)
                t.start()
                if pending and len(running - {REFERENCE}) >= self.max_parallel:
                    self.prestart(pending[0], weight_bytes, running)
        for t in threads:
            t.join()
        return futs

    def memory_report(self, weight_bytes: int) -> dict[str, Any]:
        """report.json `memory`: the budget, what the scheduler estimated, and what the processes measured."""
        mb = memory.MB
        ran_reference = any(e["role"] == REFERENCE for e in self.schedule)  # this run's, not a warm pool's last
        roles = [r for r in [*self.roles(), *([REFERENCE] if ran_reference else [])] if r in self.stats]
        parallel = sum(self.job_bytes(r, weight_bytes) for r in roles) + memory.rss_bytes()
        return {
            "budget_mb": None if self.max_memory is None else round(self.max_memory / mb, 1),
            "budget_source": self.budget_source,
            "weights_mb": round(weight_bytes / mb, 1),
            "estimated_parallel_peak_mb": round(parallel / mb, 1),
            "schedule": [dict(e) for e in self.schedule],
            "sequential": all(not e["concurrent"] for e in self.schedule),
            "cores": self.cores,
            "max_parallel": self.max_parallel,
            # copied: the diagnostics of a mismatch (per-layer probe, float64 rerun) run later jobs
            "workers": {r: {k: copy.copy(self.stats[r][k]) for k in ("peak_rss_mb", "idle_rss_mb", "peak_by_op_mb")
                            if k in self.stats[r]} for r in roles},
            "parent_peak_rss_mb": round(memory.peak_rss_bytes() / mb, 1),
        }

    def close(self) -> None:
        for w in self.workers.values():  # ask all first, then wait: shutdowns overlap, under one deadline
            w.request_shutdown()
        deadline = time.perf_counter() + 0.2
        for w in self.workers.values():
            w.close(deadline)
        self.workers.clear()
        if self._own_log_dir:
            import shutil

            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
