"""The local executor: `jobs` warm pools on this machine, one artifact at a time each."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from k2to3.stores.executors.base import Done, Work, error_result
from k2to3.workers.pool import Pool, default_budget


class LocalExecutor:
    def __init__(self, jobs: int = 1, backends: tuple[str, ...] = ("tensorflow", "torch", "jax"),
                 max_memory: int | None = None):
        self.jobs = max(1, jobs)
        self.backends = backends
        # Each pool schedules its backends within its share of the budget (workers/pool.py).
        self.max_memory = max_memory // self.jobs if max_memory else None
        self._local = threading.local()
        self._pools: list[Any] = []
        self._lock = threading.Lock()

    def _pool(self) -> Any:
        pool = getattr(self._local, "pool", None)
        if pool is None:
            budget = self.max_memory
            if budget is None and self.jobs > 1:
                total, _ = default_budget()
                budget = total // self.jobs if total else None
            pool = self._local.pool = Pool(self.backends, max_memory=budget)
            with self._lock:
                self._pools.append(pool)
        return pool

    def run(self, fn: Work, items: list[dict[str, Any]], done: Done) -> None:
        ex = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="k2to3-job")
        futs: dict[Future, dict[str, Any]] = {ex.submit(lambda it=it: fn(it, self._pool())): it for it in items}
        try:
            pending = set(futs)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    exc = f.exception()
                    done(futs[f], {**f.result(), "attempts": 1} if exc is None else
                         error_result(futs[f], f"{type(exc).__name__}: {exc}", 1))
        finally:  # Ctrl-C: drop what has not started; closing the pools ends the artifacts in flight
            ex.shutdown(wait=False, cancel_futures=True)
            self.close()

    def close(self) -> None:
        with self._lock:
            pools, self._pools = self._pools, []
        for p in pools:
            p.close()
