"""Relaying HTTP answers from a worker to the client (aiohttp server side)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.upstream import HOP_BY_HOP


async def pump(
    up: aiohttp.ClientResponse, response: web.StreamResponse, convert: Callable[[bytes], Awaitable[bytes]]
) -> bool:
    """Copy the worker's body to the client through ``convert``.

    True when the worker's body ended normally; False when the worker broke off or
    the client went away.
    """
    try:
        async for chunk in up.content.iter_any():
            out = await convert(chunk)
            if out:
                await response.write(out)
    except ConnectionResetError:
        return False  # the client went away
    except (TimeoutError, aiohttp.ClientError):
        return False  # the worker broke off
    return True


async def finish(request: web.Request, response: web.StreamResponse, complete: bool) -> None:
    """End the response: cleanly when complete, else close the connection so the client sees it broken."""
    if not complete:
        if request.transport is not None:
            request.transport.close()
        return
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()


def status_response(exc: StatusError) -> web.Response:
    """A Kubernetes ``Status`` error answer."""
    return web.Response(status=exc.code, body=json.dumps(exc.body()).encode(), content_type="application/json")


def copy_response(up: aiohttp.ClientResponse, raw: bytes) -> web.Response:
    """The worker's answer with body ``raw``, as it came (hop-by-hop headers left out)."""
    headers: CIMultiDict[str] = CIMultiDict()
    for key, value in up.headers.items():
        if key.lower() not in HOP_BY_HOP:
            headers.add(key, value)
    return web.Response(status=up.status, reason=up.reason, body=raw, headers=headers)


def ref(namespace: str | None, name: str) -> str:
    """``namespace/name`` (``name`` alone when cluster-scoped)."""
    return f"{namespace}/{name}" if namespace else name


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, for error answers."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
