"""List-and-watch, the loop client-go's reflector runs (``k8s.io/client-go/tools/cache/reflector.go``):
LIST in pages, WATCH from the list's resourceVersion, relist on 410 Gone, back off and relist
on any other error. Shared by the controller's informers and the sidecar's manager cache,
which differ only in what they keep of each object."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mkpolicy.jsonlogs import fields, plain_error
from mkpolicy.kube.client import Gone, KubeClient

#: ``(namespace, name)``.
Key = tuple[str, str]
#: Objects per page when listing (the transient memory of one huge list would stay with the process).
PAGE = 500
#: Retry delays after errors (seconds): exponential up to the last value.
BACKOFF = (0.2, 0.5, 1.0, 2.0, 5.0)


def key_of(obj: dict[str, Any]) -> Key:
    """``(namespace, name)``."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


async def list_paged(client: KubeClient, path: str, on_item: Callable[[dict[str, Any]], None]) -> str:
    """LIST ``path`` page by page, calling ``on_item`` with each object; the list's resourceVersion."""
    params = {"limit": str(PAGE)}
    while True:
        page = await client.get(path, params)
        for item in page.get("items") or []:
            if isinstance(item, dict):
                on_item(item)
        meta = page.get("metadata") or {}
        token = meta.get("continue")
        if not token:
            return str(meta.get("resourceVersion") or "")
        params = {"limit": str(PAGE), "continue": str(token)}


async def keep_listing_and_watching(
    relist: Callable[[], Awaitable[None]],
    watch: Callable[[], Awaitable[None]],
    *,
    log: logging.Logger,
    what: str,
    **context: Any,
) -> None:
    """Run ``relist`` then ``watch`` (again and again, each watch resuming where the last ended)
    until cancelled. Whatever the server does, the loop keeps going: 410 Gone relists at once,
    another error after :data:`BACKOFF`; each is logged with ``what`` and ``context``."""
    failures = 0
    while True:
        try:
            await relist()
            failures = 0
            while True:
                await watch()
        except asyncio.CancelledError:
            raise
        except Gone:
            log.info(f"{what} watch expired; relisting", extra=fields(**context))
        except Exception as exc:  # keep the cache alive whatever the server does
            delay = BACKOFF[min(failures, len(BACKOFF) - 1)]
            failures += 1
            log.warning(
                f"{what} watch failed; retrying",
                extra=fields(**context, error=plain_error(exc), retry_in=delay),
            )
            await asyncio.sleep(delay)


__all__ = ["BACKOFF", "PAGE", "Key", "keep_listing_and_watching", "key_of", "list_paged"]
