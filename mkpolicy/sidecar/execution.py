"""Where policy evaluations run: inline while a policy is fast, on worker threads when it is not.

A CEL evaluation is bounded by its cost budget, but a budget-sized evaluation still
takes seconds of CPU; on the event loop it would stall every other request and
watch. Each policy (adapter) therefore starts on the worker threads; once its
evaluations have proven fast they run inline (no thread hand-off, the common case),
and any slow one sends that policy back to the threads for a while.

Speed is judged per object: a batch (a LIST page, a burst of watch events) costs its
objects' sum without making the policy slow. A batch whose expected cost exceeds
``LOOP_BUDGET`` runs on a thread all the same, so that the event loop stays responsive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

#: An evaluation slower than this (seconds of CPU per object) is "slow".
SLOW = 0.002
#: Work expected to take longer than this (seconds) runs on a thread even for a fast policy.
LOOP_BUDGET = 0.002
#: Evaluations a policy runs on threads before it may run inline.
PROBATION = 3
#: After a slow evaluation, the policy runs on threads for this many evaluations.
PENALTY = 200
#: Weight of the latest evaluation in a policy's running cost per object.
_SMOOTHING = 0.2


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
        #: id(adapter) -> running CPU seconds per object
        self._cost: dict[int, float] = {}

    def inline(self, key: object, items: int = 1) -> bool:
        """Whether work on ``items`` objects for ``key`` (an adapter) runs on the event loop now."""
        ident = id(key)
        if self._threaded.get(ident, PROBATION) > 0:
            return False
        return items <= 1 or items * self._cost.get(ident, 0.0) <= LOOP_BUDGET

    async def run(self, key: object, fn: Callable[..., T], *args: Any, items: int = 1) -> T:
        """``fn(*args)`` (work on ``items`` objects) for the policy ``key``, inline or on a thread."""
        if self.inline(key, items):
            return self.run_here(key, fn, *args, items=items)
        loop = asyncio.get_running_loop()
        result, cpu = await loop.run_in_executor(self._pool, _measured, fn, args)
        self._learn(key, cpu, items)
        return result

    def run_here(self, key: object, fn: Callable[..., T], *args: Any, items: int = 1) -> T:
        """``fn(*args)`` on the calling thread (when :meth:`inline` says so); learns from its CPU time."""
        result, cpu = _measured(fn, args)
        self._learn(key, cpu, items)
        return result

    def _learn(self, key: object, cpu: float, items: int) -> None:
        ident = id(key)
        per_item = cpu / max(1, items)
        cost = self._cost.get(ident)
        self._cost[ident] = per_item if cost is None else cost + _SMOOTHING * (per_item - cost)
        if per_item > SLOW:
            self._threaded[ident] = PENALTY
        else:
            self._threaded[ident] = max(0, self._threaded.get(ident, PROBATION) - 1)
        if len(self._threaded) > 1024:  # adapters of old policy sets
            self._threaded.clear()
            self._cost.clear()

    def shutdown(self) -> None:
        """Stop the threads (pending work is cancelled)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
