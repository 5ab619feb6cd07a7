"""The operations endpoints: ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics`` (plain HTTP, no secrets).

Served by the same listener as the worker endpoints (:class:`~mkpolicy.sidecar.listener.Listener`,
without TLS), so the same ``limits`` bound it before anything is read: connections open at
once, the head's size and deadline, idle keep-alive time. The ops port usually listens on
every interface (the kubelet's probes, Prometheus): nobody there may hold memory
unbounded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mkpolicy.sidecar.listener import Exchange
from mkpolicy.sidecar.metrics import CONTENT_TYPE, Metrics

#: (ready, one line per check: "ok name" or "fail name: why")
Readiness = Callable[[], tuple[bool, list[str]]]

_TEXT = [("Content-Type", "text/plain; charset=utf-8")]


def ops_handler(readiness: Readiness, metrics: Metrics) -> Callable[[Exchange], Awaitable[None]]:
    """The request handler answering the probes and Prometheus."""

    async def handle(exchange: Exchange) -> None:
        head = exchange.head
        path = head.decoded.path
        if head.method not in ("GET", "HEAD"):
            exchange.respond(405, [*_TEXT, ("Allow", "GET, HEAD")], b"method not allowed\n")
        elif path in ("/healthz", "/livez"):
            exchange.respond(200, _TEXT, b"ok\n")
        elif path == "/readyz":
            ready, checks = readiness()
            verbose = "verbose" in head.decoded.query
            text = "\n".join(checks) + "\n" if verbose or not ready else "ok\n"
            exchange.respond(200 if ready else 503, _TEXT, text.encode())
        elif path == "/metrics":
            exchange.respond(200, [("Content-Type", CONTENT_TYPE)], metrics.exposition())
        else:
            exchange.respond(404, _TEXT, b"not found\n")

    return handle
