"""A controller's work queue (client-go ``util/workqueue``, as controller-runtime uses it).

A key waits in the queue once however often it is added; a key being reconciled is not
handed out again until that reconcile ends (added meanwhile, it is reconciled after). A
reconcile that fails is retried after ``DefaultTypedControllerRateLimiter``'s delay:
5 ms doubling per consecutive failure of that key, up to 1000 s (the overall 10 qps
bucket is not modelled); success forgets the failures. ``RequeueAfter`` adds the key
after a delay. Delays are multiplied by the model's time scale. One worker per queue
(controller-runtime's default ``MaxConcurrentReconciles``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger("mkpolicy.testing.kueue")

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Keys to reconcile, one at a time."""

    def __init__(self, reconcile: Callable[[K], Awaitable[float | None]], *, scale: float, name: str) -> None:
        self._reconcile = reconcile
        self._scale = scale
        self.name = name
        self._queue: list[K] = []
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._wake = asyncio.Event()
        self._timers: set[asyncio.TimerHandle] = set()
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        #: Reconciles that ended (for waiting on quiescence).
        self.done = 0

    def add(self, key: K) -> None:
        """Queue ``key`` now (once)."""
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._wake.set()

    def add_after(self, key: K, seconds: float) -> None:
        """Queue ``key`` after ``seconds`` of Kueue time (scaled)."""
        if seconds <= 0:
            self.add(key)
            return
        handle = asyncio.get_running_loop().call_later(seconds * self._scale, self._fire, key)
        self._timers.add(handle)

    def _fire(self, key: K) -> None:
        self._timers = {t for t in self._timers if not t.cancelled() and t.when() > asyncio.get_running_loop().time()}
        self.add(key)

    def add_rate_limited(self, key: K) -> None:
        """Retry ``key`` after its failure backoff (5 ms * 2^failures, at most 1000 s)."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.add_after(key, min(0.005 * 2**failures, 1000.0))

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    @property
    def idle(self) -> bool:
        """Nothing queued or being reconciled (timers may still be pending)."""
        return not self._queue and not self._processing

    def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        if self._task is not None:
            # The flag as well as the cancellation: a cancellation can be lost inside a reconcile
            # (asyncio.wait_for's race before Python 3.12), and the loop would wait for work forever.
            self._stopping.set()
            self._wake.set()
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while not self._stopping.is_set():
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
                if self._stopping.is_set():
                    return
            key = self._queue.pop(0)
            self._dirty.discard(key)
            self._processing.add(key)
            try:
                requeue = await self._reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # retried with backoff, as controller-runtime does
                log.debug("%s: reconcile of %s failed: %s", self.name, key, exc)
                self._processing.discard(key)
                self.add_rate_limited(key)
            else:
                self._processing.discard(key)
                self.forget(key)
                if requeue is not None:
                    self.add_after(key, requeue)
            finally:
                self.done += 1
            if key in self._dirty and key not in self._queue:
                self._queue.append(key)
                self._wake.set()
