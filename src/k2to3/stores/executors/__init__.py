"""Executors: where a store's artifacts are converted. One interface, `run(fn, items, done)`:
`fn(item, pool)` runs for every item on a warm worker pool somewhere, and `done(item, result)` is called once
per item in the calling thread (results are recorded there: cache, progress, report).

- `local` (default): warm pools on this machine (workers/pool.py), `jobs` artifacts at a time.
- `ray`: one long-lived actor per node of a Ray cluster, each holding a warm pool; Ray is imported only here."""

from __future__ import annotations

from dataclasses import dataclass

from k2to3.errors import InputError
from k2to3.stores.executors.base import Executor

NAMES = ("local", "ray")


@dataclass(frozen=True)
class ExecutorSettings:
    """Where a store's artifacts run: the executor (one of NAMES), how many at a time on this machine, and the Ray
    cluster's address (None: a local Ray)."""

    executor: str = "local"
    jobs: int = 1
    ray_address: str | None = None


def make(name: str, *, jobs: int = 1, backends: tuple[str, ...] = ("tensorflow", "torch", "jax"),
         max_memory: int | None = None, ray_address: str | None = None) -> Executor:
    if name == "local":
        from k2to3.stores.executors.local import LocalExecutor

        return LocalExecutor(jobs=jobs, backends=backends, max_memory=max_memory)
    if name == "ray":
        from k2to3.stores.executors.ray import RayExecutor

        return RayExecutor(address=ray_address, backends=backends, max_memory=max_memory)
    raise InputError(f"--executor {name}: unknown executor", hint="choose local or ray")
