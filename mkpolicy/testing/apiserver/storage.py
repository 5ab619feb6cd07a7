"""Object storage: one global resource-version counter, per-resource history and watchers.

Stored objects are immutable once committed (every write stores a new dict), so events,
history and snapshots share them without copying, and each object's JSON is encoded at
most once per ``apiVersion``.

Every committed change gets the next resource version and becomes an :class:`Event` in
the resource's history (a bounded ring). The history serves watches that resume from a
resource version and lists at an exact resource version (continue tokens): the state at
``rv`` is today's state with the newer events undone. Once an event has left the ring,
asking for a version before it is a 410 Expired, as after an etcd compaction.

Only the server's event-loop thread touches a store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from mkpolicy.testing.apiserver.conversion import convert
from mkpolicy.testing.apiserver.errors import expired
from mkpolicy.testing.apiserver.jsonutil import JsonObject, dumps
from mkpolicy.testing.apiserver.negotiate import partial_object_metadata

Key = tuple[str, str]  # (namespace, name); namespace is "" for cluster-scoped objects

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


class Stored:
    """A committed object and its cached JSON encodings (per ``apiVersion``)."""

    __slots__ = ("_json", "key", "obj", "rv")

    def __init__(self, obj: JsonObject, rv: int) -> None:
        self.obj = obj
        self.rv = rv
        meta = obj["metadata"]
        self.key: Key = (meta.get("namespace", ""), meta["name"])
        self._json: dict[tuple[str, bool], bytes] = {}

    @property
    def meta(self) -> JsonObject:
        """The object's metadata (read-only by convention)."""
        meta: JsonObject = self.obj["metadata"]
        return meta

    def as_version(self, api_version: str) -> JsonObject:
        """The object as served under ``api_version`` (a shallow copy when it differs;
        converted when the versions' fields differ, see :mod:`.conversion`)."""
        return convert(self.obj, api_version)

    def json(self, api_version: str, *, typed_list_item: bool = False) -> bytes:
        """The JSON encoding under ``api_version``; ``typed_list_item`` drops apiVersion/kind.

        (Items of a built-in kind's list carry no apiVersion/kind, as kube-apiserver writes them.)
        """
        cache_key = (api_version, typed_list_item)
        data = self._json.get(cache_key)
        if data is None:
            if typed_list_item:
                data = dumps({k: v for k, v in self.as_version(api_version).items() if k not in ("apiVersion", "kind")})
            else:
                data = dumps(self.as_version(api_version))
            self._json[cache_key] = data
        return data

    def partial_json(self, version: str) -> bytes:
        """The object as ``PartialObjectMetadata`` of ``meta.k8s.io/<version>`` (encoded once)."""
        cache_key = (f"PartialObjectMetadata/{version}", False)
        data = self._json.get(cache_key)
        if data is None:
            data = dumps(partial_object_metadata(self.meta, version))
            self._json[cache_key] = data
        return data


@dataclass(slots=True)
class Event:
    """A committed change: ``obj`` is the new state (for DELETED: the last state, at the
    deletion's resource version), ``prev`` the state before (None for ADDED)."""

    type: str
    rv: int
    key: Key
    obj: Stored
    prev: Stored | None


class Sink(Protocol):
    """Something that wants every event of a resource (an open watch)."""

    def offer(self, event: Event) -> None:
        """Take ``event``; must not block (runs inside the write that made it)."""

    def end(self) -> None:
        """The resource is no longer served: finish."""


class Collection:
    """The objects of one resource, their recent history and their watchers."""

    def __init__(self, history_limit: int, compacted: int) -> None:
        self.objects: dict[Key, Stored] = {}
        self.history: deque[Event] = deque()
        self.history_limit = history_limit
        #: Events with a resource version <= this may be gone from the history.
        self.compacted = compacted
        self.sinks: set[Sink] = set()
        self._sorted: list[Key] | None = None

    def sorted_keys(self) -> list[Key]:
        """Keys in etcd order (namespace, then name); cached until the key set changes."""
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def apply(self, event: Event) -> None:
        """Commit ``event``: update the objects, append to history, tell the watchers."""
        if event.type == DELETED:
            del self.objects[event.key]
            self._sorted = None
        else:
            if event.key not in self.objects:
                self._sorted = None
            self.objects[event.key] = event.obj
        self.history.append(event)
        while len(self.history) > self.history_limit:
            self.compacted = self.history.popleft().rv
        for sink in list(self.sinks):
            sink.offer(event)

    def events_after(self, rv: int) -> Iterator[Event]:
        """The retained events newer than ``rv`` (410 Expired when some are gone)."""
        if rv < self.compacted:
            raise expired(f"too old resource version: {rv} ({self.compacted + 1})")
        if not self.history or self.history[-1].rv <= rv:
            return iter(())
        return (e for e in self.history if e.rv > rv)

    def state_at(self, rv: int) -> dict[Key, Stored]:
        """The objects as they were at resource version ``rv`` (410 Expired when unknown)."""
        if rv < self.compacted:
            raise expired(f"too old resource version: {rv} ({self.compacted + 1})")
        state = dict(self.objects)
        for event in reversed(self.history):
            if event.rv <= rv:
                break
            if event.type == ADDED:
                state.pop(event.key, None)
            elif event.prev is not None:
                state[event.key] = event.prev
        return state


class Store:
    """Every collection of a server and the global resource-version counter."""

    def __init__(self, history_limit: int = 10_000, first_rv: int = 1000) -> None:
        self.rv = first_rv
        self.history_limit = history_limit
        self._floor = 0
        self.collections: dict[tuple[str, str], Collection] = {}
        #: uid -> (resource, key) of every stored object (owner look-ups).
        self.by_uid: dict[str, tuple[tuple[str, str], Key]] = {}
        #: owner uid -> the (resource, key) of objects whose ownerReferences name it.
        self.dependents: dict[str, set[tuple[tuple[str, str], Key]]] = {}
        #: namespace -> how many namespaced objects it holds (namespace termination).
        self.ns_counts: dict[str, int] = {}

    def _index(self, resource: tuple[str, str], event: Event) -> None:
        where = (resource, event.key)
        old_owners = _owner_uids(event.prev) if event.prev is not None else ()
        new_owners = () if event.type == DELETED else _owner_uids(event.obj)
        for uid in old_owners:
            if uid not in new_owners:
                deps = self.dependents.get(uid)
                if deps is not None:
                    deps.discard(where)
                    if not deps:
                        del self.dependents[uid]
        for uid in new_owners:
            self.dependents.setdefault(uid, set()).add(where)
        ns = event.key[0]
        if event.type == ADDED:
            self.by_uid[event.obj.meta["uid"]] = where
            if ns:
                self.ns_counts[ns] = self.ns_counts.get(ns, 0) + 1
        elif event.type == DELETED:
            self.by_uid.pop(event.obj.meta["uid"], None)
            if ns:
                self.ns_counts[ns] -= 1

    def lookup_uid(self, uid: str) -> tuple[tuple[str, str], Stored] | None:
        """The resource and object with ``uid``, or None."""
        where = self.by_uid.get(uid)
        if where is None:
            return None
        stored = self.get(where[0], where[1])
        return (where[0], stored) if stored is not None else None

    def dependents_of(self, uid: str) -> list[tuple[tuple[str, str], Stored]]:
        """The objects whose ownerReferences name ``uid`` (sorted, for a stable order)."""
        out = []
        for resource, key in sorted(self.dependents.get(uid, ())):
            stored = self.get(resource, key)
            if stored is not None:
                out.append((resource, stored))
        return out

    def _commit(self, resource: tuple[str, str], event: Event) -> None:
        self._index(resource, event)
        self.collection(resource).apply(event)

    def collection(self, key: tuple[str, str]) -> Collection:
        """The collection of resource ``(group, plural)`` (created empty on first use)."""
        coll = self.collections.get(key)
        if coll is None:
            coll = self.collections[key] = Collection(self.history_limit, self._floor)
        return coll

    def get(self, key: tuple[str, str], obj_key: Key) -> Stored | None:
        """The object ``obj_key`` of resource ``key``, or None."""
        coll = self.collections.get(key)
        return coll.objects.get(obj_key) if coll is not None else None

    def _stamp(self, obj: JsonObject) -> Stored:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return Stored(obj, self.rv)

    def add(self, key: tuple[str, str], obj: JsonObject) -> Stored:
        """Commit a new object (its metadata gets the next resource version)."""
        stored = self._stamp(obj)
        self._commit(key, Event(ADDED, stored.rv, stored.key, stored, None))
        return stored

    def replace(self, key: tuple[str, str], old: Stored, obj: JsonObject) -> Stored:
        """Commit a new state of ``old``."""
        stored = self._stamp(obj)
        self._commit(key, Event(MODIFIED, stored.rv, stored.key, stored, old))
        return stored

    def remove(self, key: tuple[str, str], old: Stored) -> Stored:
        """Remove ``old``; the DELETED event's object is ``old`` at a new resource version."""
        obj: dict[str, Any] = {**old.obj, "metadata": dict(old.meta)}
        stored = self._stamp(obj)
        self._commit(key, Event(DELETED, stored.rv, stored.key, stored, old))
        return stored

    def drop(self, key: tuple[str, str]) -> None:
        """Forget the (empty) resource ``key`` entirely (its CRD is gone)."""
        coll = self.collections.pop(key, None)
        assert coll is None or not coll.objects, "drop() of a resource that still has objects"

    def compact(self) -> int:
        """Forget all history, as an etcd compaction at the current revision; returns it.

        Watches and continue tokens from before this point now get 410 Expired.
        """
        self._floor = self.rv
        for coll in self.collections.values():
            coll.history.clear()
            coll.compacted = self.rv
        return self.rv


def _owner_uids(stored: Stored) -> tuple[str, ...]:
    refs = stored.meta.get("ownerReferences")
    if not refs:
        return ()
    return tuple(r["uid"] for r in refs if isinstance(r, dict) and isinstance(r.get("uid"), str))
