"""The controller's operations endpoints: ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics``
(plain HTTP, no secrets; the sidecar serves the same paths from its own listener)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

#: (ready, one line per check: "ok name" or "fail name: why")
Readiness = Callable[[], tuple[bool, list[str]]]


class Exposition(Protocol):
    """Metrics that render Prometheus' text format."""

    def exposition(self) -> bytes:
        """The text exposition format."""


def ops_app(readiness: Readiness, metrics: Exposition) -> web.Application:
    """An application answering the probes and Prometheus."""

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.Response:
        ready, checks = readiness()
        text = "\n".join(checks) + "\n" if "verbose" in request.query or not ready else "ok\n"
        return web.Response(status=200 if ready else 503, text=text)

    async def prometheus(request: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", prometheus)
    return app
