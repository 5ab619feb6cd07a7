"""WATCH: a filtered event stream of one resource, written as chunked JSON lines.

A watch is registered on its collection in the same step that computes its starting
point, so no event is lost or doubled between the two:

- no ``resourceVersion`` (or ``"0"``): an ADDED event for every current object, then
  every change ("get state and start at most recent");
- ``resourceVersion=N``: every change after N, from the resource's history; when that
  history no longer reaches back to N the stream is one ERROR event with a 410
  ``Expired`` Status, as kube-apiserver's watch cache answers (and a 504 ``Timeout``
  one when N is newer than the server's resource version);
- ``sendInitialEvents=true`` (with ``resourceVersionMatch=NotOlderThan``): the current
  objects, then a BOOKMARK annotated ``k8s.io/initial-events-end``, then changes.

Label and field selectors are applied to both sides of a change: an object that starts
matching arrives as ADDED, one that stops matching as DELETED (with its previous
content at the event's resource version). With ``allowWatchBookmarks=true`` a BOOKMARK
carrying the current resource version is sent whenever the stream has been idle for the
bookmark interval. ``timeoutSeconds`` ends the stream cleanly (final zero-length chunk).
A watcher that falls too far behind (its queue overflows) is ended, as kube-apiserver
ends slow watchers; the client re-watches from its last resource version.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from mkpolicy.testing.apiserver.jsonutil import dumps
from mkpolicy.testing.apiserver.operations import ListOptions, Target, parse_rv, too_large_resource_version
from mkpolicy.testing.apiserver.storage import ADDED, DELETED, MODIFIED, Event, Store, Stored

BOOKMARK = "BOOKMARK"
ERROR = "ERROR"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class WatchOptions:
    """The watch-only query parameters."""

    timeout: float
    bookmarks: bool = False
    send_initial_events: bool = False


class Watch:
    """One open watch: events are filtered as they are committed and queued for the stream."""

    def __init__(self, t: Target, opts: ListOptions, max_queue: int) -> None:
        self.target = t
        self.opts = opts
        self.max_queue = max_queue
        self.queue: deque[tuple[str, Stored | None]] = deque()
        self.wake = asyncio.Event()
        self.closed = False
        #: End by cutting the connection rather than with a clean end of stream.
        self.abort = False
        #: End after this many events (fault injection), or None.
        self.event_budget: int | None = None

    def matches(self, stored: Stored) -> bool:
        """Whether ``stored`` is selected by this watch's namespace and selectors."""
        if self.target.namespace and stored.key[0] != self.target.namespace:
            return False
        return self.opts.label_selector.matches(stored.meta.get("labels")) and self.opts.field_selector.matches(
            stored.obj
        )

    def _convert(self, event: Event) -> tuple[str, Stored] | None:
        if event.type == ADDED:
            return (ADDED, event.obj) if self.matches(event.obj) else None
        if event.type == DELETED:
            return (DELETED, event.obj) if self.matches(event.obj) else None
        now = self.matches(event.obj)
        before = event.prev is not None and self.matches(event.prev)
        if now:
            return (MODIFIED if before else ADDED, event.obj)
        if before and event.prev is not None:
            # The object left the selection: DELETED, with its previous content at this event's version.
            prev = event.prev.obj
            gone = {**prev, "metadata": {**prev["metadata"], "resourceVersion": str(event.rv)}}
            return (DELETED, Stored(gone, event.rv))
        return None

    def offer(self, event: Event) -> None:
        """Queue ``event`` if this watch selects it (called inside the write)."""
        if self.closed:
            return
        if self.target.namespace and event.key[0] != self.target.namespace:
            return
        converted = self._convert(event)
        if converted is None:
            return
        self.queue.append(converted)
        if len(self.queue) > self.max_queue:
            self.end()
        self.wake.set()

    def end(self, abort: bool = False) -> None:
        """Finish the stream (after what is queued, unless ``abort``)."""
        self.closed = True
        self.abort = self.abort or abort
        self.wake.set()


def open_watch(store: Store, t: Target, opts: ListOptions, wopts: WatchOptions, max_queue: int) -> Watch:
    """Register a watch with its starting events already queued (410 ApiError when too old)."""
    coll = store.collection(t.rt.key)
    watch = Watch(t, opts, max_queue)
    rv = opts.resource_version
    if rv in ("", "0") or wopts.send_initial_events:
        for key in coll.sorted_keys():
            stored = coll.objects[key]
            if watch.matches(stored):
                watch.queue.append((ADDED, stored))
        if wopts.send_initial_events and wopts.bookmarks:
            watch.queue.append((BOOKMARK, None))
    else:
        since = parse_rv(rv)
        if since > store.rv:
            # Events up to a version the server has not reached would be sent as if newer.
            raise too_large_resource_version(since, store.rv)
        for event in coll.events_after(since):
            watch.offer(event)
    coll.sinks.add(watch)
    return watch


def close_watch(store: Store, watch: Watch) -> None:
    """Unregister ``watch`` from its collection."""
    coll = store.collections.get(watch.target.rt.key)
    if coll is not None:
        coll.sinks.discard(watch)


class Encoder:
    """Encodes watch events of one stream (objects reuse their cached JSON)."""

    def __init__(self, t: Target, store: Store, partial: str | None = None) -> None:
        self.api_version = t.api_version
        self.kind = t.rt.kind
        self.store = store
        #: ``meta.k8s.io`` version when every object goes out as ``PartialObjectMetadata``
        #: (handlers/watch.go: the negotiated transform applies to each event's object).
        self.partial = partial
        if partial is not None:
            self.api_version, self.kind = f"meta.k8s.io/{partial}", "PartialObjectMetadata"
        self._prefix = {
            t: b'{"type":"' + t.encode() + b'","object":' for t in (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)
        }

    def event(self, type_: str, stored: Stored | None, initial_end: bool = False) -> bytes:
        """One event line; ``stored`` None is a BOOKMARK at the store's current version."""
        if stored is None:
            meta: dict[str, object] = {"resourceVersion": str(self.store.rv)}
            if initial_end:
                meta["annotations"] = {INITIAL_EVENTS_END: "true"}
            body = dumps({"kind": self.kind, "apiVersion": self.api_version, "metadata": meta})
            return self._prefix[BOOKMARK] + body + b"}\n"
        data = stored.json(self.api_version) if self.partial is None else stored.partial_json(self.partial)
        return self._prefix[type_] + data + b"}\n"

    def error(self, status: dict[str, object]) -> bytes:
        """An ERROR event carrying a Status."""
        return self._prefix[ERROR] + dumps(status) + b"}\n"
