"""CPU work of the studio's routes off the event loop, in a bounded pool of worker threads.

Why: one event loop serves every browser. A route that computes on it (an assessment of
Adult with six quasi-identifiers, a schema drafted from 20,000 columns, a release, an
audit-log verification) stalls every other session's pages for as long as it runs (4-6 s,
34.8 s measured). A route decorated with `in_worker` is a plain function run in a thread of
one pool of `cpu_slots()` threads shared by the whole studio: the loop stays free to answer
other requests, and a burst of heavy requests queues in the pool instead of starting a
thread each. Light state-changing routes (choose data, cancel a job) are plain `def`
routes, which FastAPI already runs in its own thread pool. Long jobs (synthesizers, models)
are processes, not threads (`privlab.studio.jobs`)."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

R = TypeVar("R")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def cpu_slots() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def pool() -> ThreadPoolExecutor:
    """The studio's one pool of route workers, created on first use: at least two threads
    (one long assessment never holds every other session's request) and no more than the
    cores (CPU-bound work gains nothing from more threads)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(2, cpu_slots()),
                                       thread_name_prefix="privlab-studio-worker")
        return _pool


def in_worker(route: Callable[..., R]) -> Callable[..., Any]:
    """A route endpoint that runs `route` (a plain function) in the worker pool and awaits it.

    FastAPI reads the parameters (and their dependencies) from `route` itself, through the
    wrapper's `__wrapped__`."""

    @functools.wraps(route)
    async def endpoint(*args: Any, **kwargs: Any) -> R:
        call = functools.partial(route, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(pool(), call)

    endpoint.in_worker = True  # type: ignore[attr-defined]  # checked by the studio's tests
    return endpoint
