"""The operations endpoints: ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics`` (plain HTTP, no secrets).

Served by the same listener as the worker endpoints (:class:`~mkpolicy.sidecar.listener.Listener`,
without TLS), so the same ``limits`` bound it before anything is read: connections open at
once, the head's size and deadline, idle keep-alive time. The ops port usually listens on
every interface (the kubelet's probes, Prometheus): nobody there may hold memory
unbounded.

:class:`OpsServer` runs that listener on a thread and an event loop of its own: a flood of
TLS handshakes or a large decode on the endpoints' loop does not delay the kubelet's probes
(which would restart a sidecar that is only busy). ``/healthz`` and ``/livez`` still say
whether the endpoints' loop runs: they fail once it has not turned for
:data:`LOOP_STALL_SECONDS`. ``/readyz`` is computed on the endpoints' loop (the state it reads
lives there); ``/metrics`` is read where it is served (prometheus_client is thread-safe).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable

from mkpolicy.sidecar.config import Limits
from mkpolicy.sidecar.listener import Exchange, Listener
from mkpolicy.sidecar.metrics import CONTENT_TYPE, Metrics

#: (ready, one line per check: "ok name" or "fail name: why")
Readiness = Callable[[], tuple[bool, list[str]]]

_TEXT = [("Content-Type", "text/plain; charset=utf-8")]

#: /healthz fails when the endpoints' event loop has not turned for this long (it is stuck:
#: the kubelet restarts the container). Far above any bounded work of the sidecar.
LOOP_STALL_SECONDS = 30.0
#: How often the endpoints' loop says it turns.
HEARTBEAT_SECONDS = 1.0
#: /readyz waits this long for the endpoints' loop to compute it (then answers 503).
READY_WAIT_SECONDS = 5.0


def ops_handler(
    readiness: Callable[[], Awaitable[tuple[bool, list[str]]]],
    metrics: Metrics,
    alive: Callable[[], str | None] = lambda: None,
) -> Callable[[Exchange], Awaitable[None]]:
    """The request handler answering the probes and Prometheus.

    ``alive``: why the sidecar is not alive (None: it is), for ``/healthz`` and ``/livez``.
    """

    async def handle(exchange: Exchange) -> None:
        head = exchange.head
        path = head.decoded.path
        if head.method not in ("GET", "HEAD"):
            exchange.respond(405, [*_TEXT, ("Allow", "GET, HEAD")], b"method not allowed\n")
        elif path in ("/healthz", "/livez"):
            why = alive()
            exchange.respond(200 if why is None else 503, _TEXT, b"ok\n" if why is None else f"{why}\n".encode())
        elif path == "/readyz":
            ready, checks = await readiness()
            verbose = "verbose" in head.decoded.query
            text = "\n".join(checks) + "\n" if verbose or not ready else "ok\n"
            exchange.respond(200 if ready else 503, _TEXT, text.encode())
        elif path == "/metrics":
            exchange.respond(200, [("Content-Type", CONTENT_TYPE)], metrics.exposition())
        else:
            exchange.respond(404, _TEXT, b"not found\n")

    return handle


class OpsServer:
    """The ops port on a thread and event loop of its own (see the module's docstring).

    Started and stopped from the endpoints' loop (:meth:`start`, :meth:`close`).
    """

    def __init__(self, readiness: Readiness, metrics: Metrics, limits: Limits) -> None:
        self._readiness = readiness
        self.metrics = metrics
        self.limits = limits
        #: The listener (on the ops thread's loop; its counters may be read from anywhere).
        self.listener: Listener | None = None
        self._main: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._beat = time.monotonic()
        self._heartbeat: asyncio.Task[None] | None = None

    # -- on the endpoints' loop --------------------------------------------------------------
    async def start(self, host: str, port: int) -> int:
        """Start the thread and listen on ``host:port``; the bound port (OSError when it cannot bind)."""
        self._main = asyncio.get_running_loop()
        self._beat = time.monotonic()
        self._heartbeat = asyncio.create_task(self._beating(), name="ops-heartbeat")
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="mkpolicy-ops", daemon=True)
        self._thread.start()
        self.listener = Listener(ops_handler(self._ready, self.metrics, self._alive), None, None, self.limits)
        started = asyncio.run_coroutine_threadsafe(self.listener.start(host, port), loop)
        return await asyncio.wrap_future(started)

    async def close(self, grace: float) -> None:
        """Stop listening (requests in flight get ``grace`` seconds) and end the thread."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        loop, thread, listener = self._loop, self._thread, self.listener
        if loop is None or thread is None:
            return
        if listener is not None:
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(listener.close(grace), loop))
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join)
        loop.close()
        self._loop = self._thread = None

    async def _beating(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(HEARTBEAT_SECONDS)

    # -- on the ops thread ---------------------------------------------------------------------
    def _run(self) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()
        # what stop() left: cancelled, so that closing the loop finds nothing pending
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))

    def _alive(self) -> str | None:
        stalled = time.monotonic() - self._beat
        if stalled > LOOP_STALL_SECONDS:
            return f"the sidecar's event loop has not run for {stalled:.0f} s"
        return None

    async def _ready(self) -> tuple[bool, list[str]]:
        """The readiness computed on the endpoints' loop (503 when it does not answer in time)."""
        main = self._main
        assert main is not None
        done: concurrent.futures.Future[tuple[bool, list[str]]] = concurrent.futures.Future()

        def compute() -> None:
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(self._readiness())
                except BaseException as exc:  # reported to the waiting probe
                    done.set_exception(exc)

        try:
            main.call_soon_threadsafe(compute)
            return await asyncio.wait_for(asyncio.wrap_future(done), READY_WAIT_SECONDS)
        except (TimeoutError, RuntimeError):  # (RuntimeError: the endpoints' loop is closed)
            done.cancel()
            return False, [f"fail loop: the sidecar's event loop did not answer within {READY_WAIT_SECONDS:g} s"]
