"""Kubernetes Events on the manager's objects, recorded as client-go's event recorder records them.

When the sidecar refuses to create a worker copy (a match condition false, a CEL error,
the manager's object missing...) or a worker refuses the transformed copy, Kueue retries
forever and nothing on the job says why. The sidecar writes a core/v1 ``Event`` on the
manager's object (or on the Workload when the object is missing), so that
``kubectl describe`` shows the reason, the policy and the patch.

Follows client-go's tools/record (event.go, events_cache.go), so that a refusal retried
every few seconds does not flood the API server:

* **deduplication**: the same event (object, type, reason, message) again increments the
  ``count`` of the first one (a PATCH), instead of creating another;
* **aggregation**: more than 10 distinct messages with the same object, type and reason
  within 10 minutes become one event whose message starts with
  ``(combined from similar events):``;
* **spam filter**: per source and object, a token bucket of 25 events refilled at one
  event every 5 minutes; the rest are dropped (and counted);
* writes run in the background from a bounded queue (1000, the excess dropped), retried
  up to 12 times 10 s apart (the first delay randomized) while the API server cannot be
  reached, and abandoned when it refuses the event.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import logging
import random
import re
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from mkpolicy.kube.client import ApiError, KubeClient
from mkpolicy.kube.rest import resource_path
from mkpolicy.sidecar.logs import fields, plain_error
from mkpolicy.sidecar.metrics import Metrics

log = logging.getLogger("mkpolicy.sidecar.events")

COMPONENT = "mkpolicy-sidecar"
#: client-go's defaults (events_cache.go, event.go).
LRU_SIZE = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
MAX_QUEUED = 1000
MAX_TRIES = 12
RETRY_SLEEP = 10.0
#: Longest message written (the API server's limit for an event's note is 1 kB).
MAX_MESSAGE = 1024

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class ObjectRef:
    """The object an event is about (``involvedObject``)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def of(cls, obj: dict[str, Any]) -> ObjectRef:
        """The reference of an object as read from the API server."""
        meta = obj.get("metadata") or {}
        return cls(
            str(obj.get("apiVersion") or ""),
            str(obj.get("kind") or ""),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
        )

    def body(self) -> dict[str, str]:
        """As ``involvedObject``."""
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


class _Lru(OrderedDict[str, Any]):
    """A bounded mapping dropping the least recently used key (k8s.io/utils/lru)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get_lru(self, key: str) -> Any:
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


class _Bucket:
    """A token bucket that is never waited on, only asked (flowcontrol's passive rate limiter)."""

    def __init__(self, qps: float, burst: int, now: float) -> None:
        self.qps, self.burst, self.tokens, self.last = qps, burst, float(burst), now

    def try_accept(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


@dataclass
class Event:
    """One event to write: the core/v1 fields client-go fills in."""

    ref: ObjectRef
    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    host: str
    first: float = 0.0
    last: float = 0.0
    count: int = 1
    name: str = ""

    @property
    def namespace(self) -> str:
        return self.ref.namespace or "default"

    def key(self) -> str:
        """getEventKey: source, object, type, reason, message."""
        return "\0".join((COMPONENT, self.host, self._object(), self.type, self.reason, self.message))

    def aggregate_key(self) -> str:
        """EventAggregatorByReasonFunc: source, object, type, reason."""
        return "\0".join((COMPONENT, self.host, self._object(), self.type, self.reason))

    def spam_key(self) -> str:
        """getSpamKey: source, object, type."""
        return "\0".join((COMPONENT, self.host, self._object(), self.type))

    def _object(self) -> str:
        r = self.ref
        return "\0".join((r.kind, r.namespace, r.name, r.uid, r.api_version))

    def body(self) -> dict[str, Any]:
        """The Event object to create."""
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "involvedObject": self.ref.body(),
            "reason": self.reason,
            "message": self.message,
            "source": {"component": COMPONENT, "host": self.host},
            "firstTimestamp": _timestamp(self.first),
            "lastTimestamp": _timestamp(self.last),
            "count": self.count,
            "type": self.type,
        }


def _timestamp(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(int(seconds), _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_name(object_name: str, unix_nano: int) -> str:
    """``<object>.<unix nanoseconds in hex>``, or a UUID when that is no valid name (GenerateEventName)."""
    name = f"{object_name}.{unix_nano:x}"
    return name if len(name) <= 253 and _SUBDOMAIN.match(name) else str(uuid.uuid4())


class Correlator:
    """client-go's EventCorrelator: aggregate, deduplicate, filter spam (events_cache.go)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._aggregates = _Lru(LRU_SIZE)  # aggregate key -> (set of messages, last seen)
        self._seen = _Lru(LRU_SIZE)  # event key -> (count, first, name)
        self._spam = _Lru(LRU_SIZE)  # spam key -> bucket

    def correlate(self, event: Event) -> tuple[Event | None, bool]:
        """(the event to write, or None when filtered as spam; whether it updates an earlier one)."""
        now = self.clock()
        event.first = event.last = now
        key = event.key()
        record = self._aggregates.get_lru(event.aggregate_key())
        if record is None or now - record[1] > AGGREGATE_INTERVAL:
            record = (set(), now)
        messages: set[str] = record[0]
        messages.add(event.message)
        self._aggregates.put(event.aggregate_key(), (messages, now))
        if len(messages) >= AGGREGATE_MAX_EVENTS:
            messages.pop()
            event = Event(
                event.ref, event.type, event.reason, "(combined from similar events): " + event.message, event.host
            )
            event.first = event.last = now
            key = event.aggregate_key()
        seen = self._seen.get_lru(key)
        update = seen is not None
        if seen is not None:
            event.count, event.first, event.name = seen[0] + 1, seen[1], seen[2]
        else:
            event.name = event_name(event.ref.name, int(now * 1e9))
        self._seen.put(key, (event.count, event.first, event.name))
        bucket = self._spam.get_lru(event.spam_key())
        if bucket is None:
            bucket = _Bucket(SPAM_QPS, SPAM_BURST, now)
        accepted = bucket.try_accept(now)
        self._spam.put(event.spam_key(), bucket)
        return (event if accepted else None), update

    def forget(self, event: Event) -> None:
        """The event is gone on the server (a PATCH found nothing): the next one creates anew."""
        for key in (event.key(), event.aggregate_key()):
            seen = self._seen.get(key)
            if seen is not None and seen[2] == event.name:
                del self._seen[key]


ClientGetter = Callable[[], KubeClient | None]


def escape(text: str) -> str:
    """``text`` with what is not printable (line breaks, control and format characters, which names
    from a client may hold) written as Python escapes: an Event message is one readable line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class EventRecorder:
    """Records events on the manager cluster in the background; :meth:`record` never blocks."""

    def __init__(
        self,
        client: ClientGetter,
        metrics: Metrics,
        *,
        host: str | None = None,
        clock: Callable[[], float] = time.time,
        retry_sleep: float = RETRY_SLEEP,
    ) -> None:
        self.client = client
        self.metrics = metrics
        self.host = host or socket.gethostname()
        self.correlator = Correlator(clock)
        self.retry_sleep = retry_sleep
        self._queue: asyncio.Queue[tuple[Event, bool]] = asyncio.Queue(MAX_QUEUED)
        self._task: asyncio.Task[None] | None = None

    def record(self, ref: ObjectRef, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        """Queue an event on ``ref`` (correlated first; dropped when spam or the queue is full)."""
        message = escape(message)
        text = message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."
        event, update = self.correlator.correlate(Event(ref, type_, reason, text, self.host))
        if event is None:
            self.metrics.events.labels(reason, "filtered").inc()
            return
        try:
            self._queue.put_nowait((event, update))
        except asyncio.QueueFull:
            self.metrics.events.labels(reason, "dropped").inc()

    def start(self) -> None:
        """Start writing queued events."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-recorder")

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait until every queued event was written (or given up), at most ``timeout`` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._queue.join()

    async def stop(self) -> None:
        """Write what is queued (briefly), then stop."""
        if self._task is None:
            return
        await self.flush(1.0)
        task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while True:
            event, update = await self._queue.get()
            try:
                await self._write(event, update)
            finally:
                self._queue.task_done()

    async def _write(self, event: Event, update: bool) -> None:
        """recordToSink: a PATCH of the count (a create when the event is gone), retried while unreachable."""
        for attempt in range(MAX_TRIES):
            client = self.client()
            if client is None:
                return
            try:
                if update:
                    try:
                        await client.patch(
                            resource_path("", "v1", "events", event.namespace, event.name),
                            {"count": event.count, "lastTimestamp": _timestamp(event.last), "message": event.message},
                        )
                    except ApiError as exc:
                        if exc.status != 404:
                            raise
                        self.correlator.forget(event)
                        update = False
                if not update:
                    body = event.body()
                    await client.create(resource_path("", "v1", "events", event.namespace), body)
                self.metrics.events.labels(event.reason, "recorded").inc()
                return
            except ApiError as exc:
                # The server refused the event: it would refuse it again (client-go gives up too).
                self.metrics.events.labels(event.reason, "failed").inc()
                level = logging.DEBUG if exc.status == 409 else logging.WARNING
                log.log(level, "event refused", extra=fields(reason=event.reason, error=exc.message))
                return
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                delay = self.retry_sleep * (random.random() if attempt == 0 else 1.0)
                log.warning(
                    "cannot write event; retrying",
                    extra=fields(reason=event.reason, error=plain_error(exc), retry_in=round(delay, 2)),
                )
                await asyncio.sleep(delay)
        self.metrics.events.labels(event.reason, "failed").inc()
        log.error("event given up after retries", extra=fields(reason=event.reason, object=event.ref.name))


__all__ = ["Correlator", "Event", "EventRecorder", "ObjectRef", "event_name"]
