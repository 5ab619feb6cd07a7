"""A work queue as client-go's ``workqueue`` has it: each key at most once (so the queue is
bounded by the number of objects, however many events arrive), never processed by two
workers at once (a key added while it is processed runs again after), failed keys retried
with a per-key exponential backoff."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

#: Backoff of a failing key: base * 2^failures seconds, capped.
BASE_DELAY = 0.05
MAX_DELAY = 30.0


class WorkQueue(Generic[K]):
    """Keys to reconcile."""

    def __init__(self, *, base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> None:
        self._order: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._ready = asyncio.Condition()
        self._base = base_delay
        self._max = max_delay
        self._closed = False

    def __len__(self) -> int:
        return len(self._order)

    def add(self, key: K) -> None:
        """Queue ``key`` (nothing happens when it is already queued)."""
        if self._closed or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._order.append(key)
            asyncio.get_running_loop().create_task(self._wake())

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds."""
        asyncio.get_running_loop().call_later(delay, self.add, key)

    def retry(self, key: K) -> float:
        """Queue ``key`` again after its backoff; returns the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = float(min(self._max, self._base * (2**failures)))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (it succeeded)."""
        self._failures.pop(key, None)

    async def _wake(self) -> None:
        async with self._ready:
            self._ready.notify()

    async def get(self) -> K | None:
        """The next key to process (None once the queue is shut down)."""
        async with self._ready:
            while not self._order and not self._closed:
                await self._ready.wait()
            if self._closed:
                return None
            key = self._order.popleft()
            self._dirty.discard(key)
            self._processing.add(key)
            return key

    def done(self, key: K) -> None:
        """Processing ``key`` ended; if it was added meanwhile, it is queued again."""
        self._processing.discard(key)
        if key in self._dirty:
            self._order.append(key)
            asyncio.get_running_loop().create_task(self._wake())

    async def shutdown(self) -> None:
        """Wake every waiting worker with None."""
        self._closed = True
        async with self._ready:
            self._ready.notify_all()
