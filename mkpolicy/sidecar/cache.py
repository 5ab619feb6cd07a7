"""A watch cache of one policy kind in the manager cluster.

LIST, then WATCH from the list's resourceVersion (with bookmarks); 410 Gone or a
broken stream relists. Objects are kept as compact JSON bytes (parsed on use), so
10,000 objects cost little more than their serialized size. On a miss the sidecar
reads the manager directly (:func:`read_object`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections import OrderedDict
from typing import Any

from mkpolicy.kube.client import ApiError, KubeClient, ResourceInfo
from mkpolicy.kube.listwatch import Key, keep_listing_and_watching, key_of, list_paged
from mkpolicy.sidecar.metrics import Metrics

log = logging.getLogger("mkpolicy.sidecar.cache")

#: How many objects are kept parsed besides their JSON bytes.
PARSED = 256


def _compact(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


async def read_object(
    client: KubeClient, info: ResourceInfo, namespace: str | None, name: str
) -> dict[str, Any] | None:
    """The object ``namespace/name`` read from the API server, None when it does not exist."""
    try:
        obj: dict[str, Any] = await client.get(info.path(namespace if info.namespaced else None, name))
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return obj


class ManagerCache:
    """The manager's objects of one kind, kept current by a watch."""

    def __init__(self, client: KubeClient, info: ResourceInfo, policy: str, metrics: Metrics) -> None:
        self.client = client
        self.info = info
        self.policy = policy
        self.metrics = metrics
        self.synced = asyncio.Event()
        self._objects: dict[Key, bytes] = {}
        #: Least recently used first (evicted first).
        self._parsed: OrderedDict[Key, tuple[bytes, dict[str, Any]]] = OrderedDict()
        self._hits = metrics.cache_reads.labels(policy, "cache")
        self._task: asyncio.Task[None] | None = None
        self._resource_version = ""

    def __len__(self) -> int:
        return len(self._objects)

    # -- reading --------------------------------------------------------------------------
    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The cached object, or None. Shared with other readers: never modify it.

        The most recently used objects are kept parsed (a watch of a busy object
        rewrites many events against the same manager object).
        """
        key = (namespace or "", name)
        raw = self._objects.get(key)
        if raw is None:
            return None
        hit = self._parsed.get(key)
        if hit is not None and hit[0] is raw:
            self._parsed.move_to_end(key)
            return hit[1]
        obj: dict[str, Any] = json.loads(raw)
        self._parsed[key] = (raw, obj)
        self._parsed.move_to_end(key)  # replacing a stale entry keeps its old place otherwise
        if len(self._parsed) > PARSED:
            self._parsed.popitem(last=False)
        return obj

    def count_hit(self) -> None:
        """Count a read served by the cache."""
        self._hits.inc()

    # -- keeping current ---------------------------------------------------------------------
    def start(self) -> None:
        """Start listing and watching in the background."""
        self.metrics.cache_objects.labels(self.policy).set_function(lambda: len(self._objects))
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"manager-cache-{self.policy}")

    async def stop(self) -> None:
        """Stop watching."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for metric in (self.metrics.cache_synced, self.metrics.cache_objects):
            with contextlib.suppress(KeyError):
                metric.remove(self.policy)

    async def _run(self) -> None:
        await keep_listing_and_watching(self._list, self._watch, log=log, what="manager cache", policy=self.policy)

    async def _list(self) -> None:
        """A full list, in pages (the transient memory of one huge list would stay with the process)."""
        self.metrics.cache_relists.labels(self.policy).inc()
        objects: dict[Key, bytes] = {}

        def keep(item: dict[str, Any]) -> None:
            objects[key_of(item)] = _compact(item)

        version = await list_paged(self.client, self.info.path(), keep)
        self._objects = objects
        self._parsed.clear()
        self._resource_version = version
        self.metrics.cache_synced.labels(self.policy).set(1)
        self.synced.set()

    async def _watch(self) -> None:
        params = {"resourceVersion": self._resource_version} if self._resource_version else {}
        timeout = random.randint(300, 600)
        async for event in self.client.watch(self.info.path(), params, timeout_seconds=timeout):
            kind = event.get("type")
            obj = event.get("object")
            if not isinstance(obj, dict):
                continue
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if kind in ("ADDED", "MODIFIED"):
                self._objects[key_of(obj)] = _compact(obj)
            elif kind == "DELETED":
                self._objects.pop(key_of(obj), None)
            if rv:
                self._resource_version = str(rv)
