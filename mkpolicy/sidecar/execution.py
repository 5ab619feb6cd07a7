"""Where policy evaluations run: inline while a policy is fast, on worker threads when it is not.

A CEL evaluation is bounded by its cost budget, but a budget-sized evaluation still
takes seconds of CPU; on the event loop it would stall every other request and
watch. Each policy (adapter) therefore starts on the worker threads; once its
evaluations have proven fast they run inline (no thread hand-off, the common case),
and any slow one sends that policy back to the threads for a while.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

#: An evaluation slower than this (seconds of CPU) is "slow".
SLOW = 0.002
#: Evaluations a policy runs on threads before it may run inline.
PROBATION = 3
#: After a slow evaluation, the policy runs on threads for this many evaluations.
PENALTY = 200


def _measured(fn: Callable[..., T], args: tuple[Any, ...]) -> tuple[T, float]:
    """``fn(*args)`` and the CPU time it took on this thread (waiting for the GIL excluded)."""
    started = time.thread_time()
    result = fn(*args)
    return result, time.thread_time() - started


class Evaluator:
    """Runs policy work for the sidecar (one per sidecar)."""

    def __init__(self, threads: int = 2) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mkpolicy-transform")
        #: id(adapter) -> evaluations still to run on threads (absent: PROBATION)
        self._threaded: dict[int, int] = {}

    def inline(self, key: object) -> bool:
        """Whether work for ``key`` (an adapter) runs on the event loop now."""
        return self._threaded.get(id(key), PROBATION) <= 0

    async def run(self, key: object, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` for the policy ``key``, inline or on a thread."""
        if self.inline(key):
            return self.run_here(key, fn, *args)
        loop = asyncio.get_running_loop()
        result, cpu = await loop.run_in_executor(self._pool, _measured, fn, args)
        self._learn(key, cpu)
        return result

    def run_here(self, key: object, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the calling thread (when :meth:`inline` says so); learns from its CPU time."""
        result, cpu = _measured(fn, args)
        self._learn(key, cpu)
        return result

    def _learn(self, key: object, cpu: float) -> None:
        ident = id(key)
        if cpu > SLOW:
            self._threaded[ident] = PENALTY
        else:
            self._threaded[ident] = max(0, self._threaded.get(ident, PROBATION) - 1)
        if len(self._threaded) > 1024:  # adapters of old policy sets
            self._threaded.clear()

    def shutdown(self) -> None:
        """Stop the threads (pending work is cancelled)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
