"""The Ray executor: one long-lived actor per node of a Ray cluster, each holding a warm worker pool (one
process per backend, KERAS_BACKEND fixed before Keras is imported, as on one machine). Artifacts are
scheduled one at a time per actor and read from the store by the actor (a shared path or an fsspec URL).

A lost attempt (the actor's process killed, an OOM kill, its node gone) is retried on another actor up to
`max_retries` times, then recorded as that artifact's error; the batch goes on."""

from __future__ import annotations

import os
from collections import deque
from typing import Any

from k2to3.errors import InputError
from k2to3.stores.executors.base import Done, Work, error_result
from k2to3.workers.pool import Pool

MAX_RETRIES = 2
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")


class StoreWorker:
    """A Ray actor: a warm pool, started on the first artifact and kept for the whole batch. It runs one artifact
    at a time (the scheduler sends no second one); the second thread answers `pid` while it works."""

    def __init__(self, backends: list[str], max_memory: int | None):
        self.backends = tuple(backends)
        self.max_memory = max_memory
        self.pool: Any = None

    def pid(self) -> int:
        return os.getpid()

    def run(self, fn: Work, item: dict[str, Any]) -> dict[str, Any]:
        if self.pool is None:
            self.pool = Pool(self.backends, max_memory=self.max_memory)
        return fn(item, self.pool)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


class RayExecutor:
    def __init__(self, address: str | None = None, backends: tuple[str, ...] = ("tensorflow", "torch", "jax"),
                 max_memory: int | None = None, max_retries: int = MAX_RETRIES):
        try:
            import ray
        except ImportError:
            raise InputError("--executor ray needs Ray", hint="pip install 'k2to3[cluster]'") from None
        self.ray = ray
        self.address = address
        self.backends = backends
        self.max_memory = max_memory
        self.max_retries = max_retries
        self._owns_ray = False
        self.actors: list[Any] = []
        self._nodes: dict[Any, dict[str, Any]] = {}  # actor -> the node it was placed on
        self.attempts: list[dict[str, Any]] = []  # every attempt: item, actor pid, outcome (for the report)
        self.busy: dict[Any, str] = {}  # actor -> the artifact it is running now (progress, tests)

    def _connect(self) -> None:
        ray = self.ray
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, log_to_driver=False, include_dashboard=False,
                         logging_level="ERROR")
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise InputError(f"--ray-address {self.address}: cannot connect ({exc})",
                                 hint="start the cluster (ray start --head) or give its address") from None
            self._owns_ray = True

    def _actor(self, node: dict[str, Any] | None) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        alive = [n for n in ray.nodes() if n.get("Alive")]
        if node is None or node["NodeID"] not in {n["NodeID"] for n in alive}:
            node = max(alive, key=lambda n: n.get("Resources", {}).get("CPU", 0))
        cpus = max(1, int(node.get("Resources", {}).get("CPU", 1)))
        env = {v: str(cpus) for v in THREAD_VARS}
        # The actor never imports Keras; its pool's processes each fix KERAS_BACKEND before they do.
        env.update(KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        cls = ray.remote(StoreWorker)
        actor = cls.options(num_cpus=cpus, max_concurrency=2, runtime_env={"env_vars": env},
                            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=True)
                            ).remote(list(self.backends), self.max_memory)
        self._nodes[actor] = node
        return actor

    def run(self, fn: Work, items: list[dict[str, Any]], done: Done) -> None:
        if not items:
            return
        self._connect()
        ray = self.ray
        from ray import exceptions as rx

        lost = (rx.RayActorError, rx.WorkerCrashedError, rx.ObjectLostError, rx.NodeDiedError,
                getattr(rx, "OutOfMemoryError", rx.RayError))
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
        idle = [self._actor(n) for n in nodes[:len(items)]]
        self.actors = list(idle)
        queue = deque((item, 0) for item in items)
        inflight: dict[Any, tuple[Any, dict[str, Any], int]] = {}
        try:
            while queue or inflight:
                while queue and idle:
                    actor = idle.pop(0)
                    item, attempt = queue.popleft()
                    inflight[actor.run.remote(fn, item)] = (actor, item, attempt)
                    self.busy[actor] = item["rel"]
                ready, _ = ray.wait(list(inflight), num_returns=1)
                for ref in ready:
                    actor, item, attempt = inflight.pop(ref)
                    self.busy.pop(actor, None)
                    try:
                        result = ray.get(ref)
                    except lost as exc:  # the attempt was lost with its worker: replace it, retry elsewhere
                        self.attempts.append({"rel": item["rel"], "attempt": attempt + 1, "lost": type(exc).__name__})
                        self._replace(actor, idle)
                        if attempt + 1 > self.max_retries:
                            done(item, error_result(item, f"lost {attempt + 1} times, last: {type(exc).__name__}",
                                                    attempt + 1))
                        else:
                            queue.appendleft((item, attempt + 1))
                        continue
                    except rx.RayTaskError as exc:  # a bug in k2to3 for this artifact: recorded, not retried
                        done(item, error_result(item, str(exc).strip().splitlines()[-1][:300], attempt + 1))
                        idle.append(actor)
                        continue
                    self.attempts.append({"rel": item["rel"], "attempt": attempt + 1, "lost": None})
                    done(item, {**result, "attempts": attempt + 1})
                    idle.append(actor)
        finally:
            self.close()

    def _replace(self, actor: Any, idle: list[Any]) -> None:
        try:
            self.ray.kill(actor)
        except Exception:  # already dead with its process
            pass
        self.actors.remove(actor)
        fresh = self._actor(self._nodes.pop(actor, None))
        self.actors.append(fresh)
        idle.append(fresh)

    def close(self) -> None:
        ray = self.ray
        for a in self.actors:
            try:
                ray.get(a.close.remote(), timeout=30)
            except Exception:  # a dead actor has nothing to close
                pass
            ray.kill(a)
        self.actors = []
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False
