"""A watch cache of one resource type (every namespace): LIST, then WATCH from the list's
resourceVersion with bookmarks; 410 Gone or a broken stream relists. Each change calls the
handlers with the old and new object (None for absent), as client-go's informers do.

Cached objects are kept compact, for 10,000 jobs and their Workloads in 150 MiB: without
``metadata.managedFields`` (controller-runtime's ``TransformStripManagedFields``: nothing reads
them, they are often the larger part of an object, and a PUT that omits them keeps the server's:
``decodeLiveOrNew``, k8s.io/apimachinery ``pkg/util/managedfields/internal/fieldmanager.go``), and
with their keys and short strings interned: every object decoded on its own has its own copy of
``metadata``, ``apiVersion``, ``containers``... which the interned ones replace by one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from mkpolicy.jsonlogs import fields, plain_error
from mkpolicy.kube.client import KubeClient, ResourceInfo
from mkpolicy.kube.listwatch import Key, keep_listing_and_watching, key_of, list_paged

log = logging.getLogger("mkpolicy.controller.informer")

Handler = Callable[[dict[str, Any] | None, dict[str, Any] | None], None]
#: An object's index value (None: not indexed).
IndexFunc = Callable[[dict[str, Any]], Hashable | None]
#: Seconds a watch asks to last (the server ends it, the informer opens the next).
WATCH_SECONDS = 300


class Informer:
    """The objects of one resource type, kept current; read with :meth:`get` and :meth:`items`."""

    def __init__(self, client: KubeClient, info: ResourceInfo, index: IndexFunc | None = None) -> None:
        self.client = client
        self.info = info
        self.synced = asyncio.Event()
        self.handlers: list[Handler] = []
        self._objects: dict[Key, dict[str, Any]] = {}
        #: client-go's Indexer: ``index(obj)`` -> the keys of the objects with that value.
        self._index_func = index
        self._index: dict[Hashable, set[Key]] = {}
        self._task: asyncio.Task[None] | None = None
        self._version = ""

    def __len__(self) -> int:
        return len(self._objects)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The cached object (shared: never modify it), or None."""
        return self._objects.get((namespace, name))

    def items(self, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """The cached objects (of one namespace)."""
        for (ns, _), obj in list(self._objects.items()):
            if namespace is None or ns == namespace:
                yield obj

    def indexed(self, value: Hashable) -> list[dict[str, Any]]:
        """The cached objects whose index value is ``value`` (an index must be given)."""
        return [self._objects[key] for key in self._index.get(value, ()) if key in self._objects]

    def _store(self, key: Key, obj: dict[str, Any] | None) -> None:
        """Put (None: remove) an object, keeping the index current."""
        old = self._objects.pop(key, None) if obj is None else self._objects.get(key)
        if self._index_func is not None:
            before = self._index_func(old) if old is not None else None
            after = self._index_func(obj) if obj is not None else None
            if before != after and before is not None:
                keys = self._index.get(before)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._index[before]
            if after is not None:
                self._index.setdefault(after, set()).add(key)
        if obj is not None:
            self._objects[key] = obj

    def observe(self, obj: dict[str, Any]) -> None:
        """Record an object this process just wrote (a newer resourceVersion than the cache's),
        so the next reconcile reads its own write, not the stale copy, before the watch delivers it."""
        obj = compact(obj)
        key = key_of(obj)
        old = self._objects.get(key)
        if old is None or _newer(obj, old):
            self._store(key, obj)

    def start(self) -> None:
        """List and watch in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"informer-{self.info.resource}")

    async def stop(self) -> None:
        """Stop watching."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        await keep_listing_and_watching(self._list, self._watch, log=log, what="informer", resource=self.info.resource)

    async def _list(self) -> None:
        seen: dict[Key, dict[str, Any]] = {}

        def keep(item: dict[str, Any]) -> None:
            item.setdefault("apiVersion", self.info.api_version)
            item.setdefault("kind", self.info.kind)
            item = compact(item)
            seen[key_of(item)] = item

        self._version = await list_paged(self.client, self.info.path(), keep)
        old_objects = self._objects
        self._objects, self._index = {}, {}
        for key, obj in seen.items():
            self._store(key, obj)
        for key, obj in seen.items():
            self._notify(old_objects.get(key), obj)
        for key, obj in old_objects.items():
            if key not in seen:
                self._notify(obj, None)
        self.synced.set()

    async def _watch(self) -> None:
        params = {"resourceVersion": self._version} if self._version else {}
        async for event in self.client.watch(self.info.path(), params, timeout_seconds=WATCH_SECONDS):
            kind, obj = event.get("type"), event.get("object") or {}
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if version:
                self._version = version
            if kind == "BOOKMARK":
                continue
            obj = compact(obj)
            key = key_of(obj)
            old = self._objects.get(key)
            if kind == "DELETED":
                self._store(key, None)
                self._notify(old, None)
            elif kind in ("ADDED", "MODIFIED"):
                if old is not None and _newer(old, obj):
                    continue  # our own newer write is already here
                self._store(key, obj)
                self._notify(old, obj)

    def _notify(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for handler in self.handlers:
            try:
                handler(old, new)
            except Exception as exc:  # a handler bug must not stop the watch
                log.error("informer handler failed", extra=fields(resource=self.info.resource, error=plain_error(exc)))


#: Strings up to this length are interned (names, keys, label values, images; not uids).
_INTERN = 32


def compact(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the cache keeps it: no ``metadata.managedFields``, keys and short strings interned."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    out: dict[str, Any] = _interned(obj)
    return out


def _interned(value: Any) -> Any:
    if isinstance(value, dict):
        return {sys.intern(k) if isinstance(k, str) else k: _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    if isinstance(value, str) and len(value) <= _INTERN:
        return sys.intern(value)
    return value


def _newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether ``a``'s resourceVersion is greater than ``b``'s (both integers, as etcd's are)."""
    try:
        return int(a["metadata"]["resourceVersion"]) > int(b["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False


__all__ = ["Informer", "key_of"]
