"""One worker endpoint: authenticate Kueue, transform policy kinds, pass everything else through.

Per request (DESIGN.md §3):

* not a policy kind: relayed to the worker and back byte-for-byte (watches included) —
  only the request head is parsed and rewritten (credentials, hop-by-hop fields), the
  bodies pass as they came (:func:`~mkpolicy.sidecar.relay.splice`);
* ``create`` of a policy kind: the policy's ``create`` of the manager's object is sent,
  never Kueue's body; any failure answers a Kubernetes ``Status`` and nothing is created;
* ``get``/``list``/``watch`` (and delete responses): objects come back with
  ``status`` = what the policy's ``sync`` makes of the manager's status;
* ``update``/``patch`` of a policy kind, or another version of its resource: refused
  (Kueue never sends them; forwarding them would bypass the policy).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar
from urllib.parse import unquote_plus

import aiohttp

from mkpolicy.kube.client import ApiError
from mkpolicy.sidecar.endpoints import Credentials
from mkpolicy.sidecar.fastpath import FastExchange
from mkpolicy.sidecar.http1 import (
    LAST_CHUNK,
    MAX_HEAD,
    ChunkedScanner,
    HttpError,
    RequestHead,
    ResponseHead,
    chunk,
    parse_request_head,
    response_head,
)
from mkpolicy.sidecar.listener import READ_TIMEOUT, ClientConnection, Exchange
from mkpolicy.sidecar.logs import fields
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.paths import Target, parse_target
from mkpolicy.sidecar.policies import Entry, PolicySet
from mkpolicy.sidecar.relay import (
    REENCODED,
    REPLAY_LIMIT,
    describe,
    read_answer,
    ref,
    relay_error,
    respond_json,
    send_request,
    splice,
)
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.transform import Outcome, measure, rewrite_batch, worker_copy
from mkpolicy.sidecar.upstream import Upstream, UpstreamError, WorkerConnection

log = logging.getLogger("mkpolicy.sidecar.proxy")

T = TypeVar("T")

#: Look-ups of manager objects run concurrently at most this many at a time.
_LOOKUPS = 16
#: Largest request body of a policy kind read (bytes).
MAX_BODY = 16 * 1024 * 1024
#: Methods sent again on a fresh connection when a reused one turns out closed (as Go's
#: client does: the worker cannot have acted on them).
_REPLAYABLE = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class Hub(Protocol):
    """What a worker endpoint needs from the sidecar."""

    metrics: Metrics
    origin: str
    credentials: Credentials

    @property
    def policies(self) -> PolicySet | None:
        """The active policy set (None before the first one loads)."""

    async def manager_object(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The manager's object (cache or direct read); None when absent, ApiError/OSError when unreadable."""

    def cached_manager_object(
        self, entry: Entry, namespace: str | None, name: str, *, count: bool = True
    ) -> dict[str, Any] | None:
        """The manager's object if the watch cache has it (never waits; do not modify it); counts a hit."""

    def count_cache_hits(self, entry: Entry, hits: int) -> None:
        """Count reads served by the watch cache (found with ``count=False``)."""

    def inline(self, key: object, items: int = 1) -> bool:
        """Whether policy work on ``items`` objects for the adapter ``key`` runs on the event loop now."""

    def run_here(self, key: object, fn: Callable[..., T], *args: Any, items: int = 1) -> T:
        """Run policy work on the event loop (when :meth:`inline` says so)."""

    async def offload(self, key: object, fn: Callable[..., T], *args: Any, items: int = 1) -> T:
        """Run policy work on ``items`` objects for the adapter ``key`` (off the event loop unless proven fast)."""


def _watch_query(query: str) -> dict[str, str]:
    """The ``watch`` parameter of a query string (the only one routing needs), first value wins."""
    if "watch" not in query:
        return {}
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if unquote_plus(key) == "watch":
            return {"watch": unquote_plus(value)}
    return {}


class WorkerEndpoint:
    """The request handler of one worker's endpoint."""

    def __init__(self, hub: Hub, upstream: Upstream) -> None:
        self.hub = hub
        self.upstream = upstream
        self.cluster = upstream.name
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    # -- entry point ----------------------------------------------------------------------
    async def handle(self, exchange: Exchange) -> None:
        """Answer one request."""
        await self.answer_request(exchange, None)

    async def answer_request(self, exchange: Exchange, sent: WorkerConnection | None) -> None:
        """Answer ``exchange`` (one whose request the fast path sent on ``sent`` already: from its answer on)."""
        head = exchange.head
        path, _, query = head.target.partition("?")
        target = parse_target(head.method, path, _watch_query(query))
        verb = target.verb if target is not None else "nonresource"
        policy = ""
        code = 500
        if sent is None:
            self.hub.metrics.inflight.inc()  # (the fast path counted its own)
        try:
            entry = self._route(exchange.head, target)
            if entry is None or target is None:
                code = await self._passthrough(exchange, target, sent)
            else:
                policy = entry.name
                code = await self._transformed(exchange, target, entry, sent)
        except StatusError as exc:
            code = exc.code
            self.refuse(exchange, exc, policy, verb, path)
        except ConnectionError:
            code = 499  # the client went away
        finally:
            self.record(exchange, path, policy, verb, code)

    def _route(self, head: RequestHead, target: Target | None) -> Entry | None:
        """The policy for a request (None: pass-through); StatusError when it is refused."""
        if not self.hub.credentials.check_token(self.cluster, head.fields.get("authorization")):
            raise StatusError(401, "Unauthorized: expected the bearer token of this sidecar endpoint")
        if "upgrade" in head.fields or "upgrade" in head.fields.get("connection", "").lower():
            raise StatusError(400, "mkpolicy sidecar: connection upgrades (exec, attach, port-forward) are not proxied")
        policies = self.hub.policies
        if policies is None:
            raise StatusError(503, "mkpolicy sidecar: no policy set is active yet; retry shortly")
        return policies.lookup(target.group, target.resource) if target is not None else None

    def refuse(self, exchange: Exchange, exc: StatusError, policy: str, verb: str, path: str) -> None:
        """Answer a refusal (a Kubernetes ``Status``), logging server-side ones."""
        if exc.code >= 500 or exc.code == 403:
            log.warning(
                "request refused",
                extra=fields(
                    cluster=self.cluster, policy=policy, verb=verb, path=path, code=exc.code, error=exc.message
                ),
            )
        if not exchange.responded:
            exchange.respond_status(exc)

    def record(self, exchange: Exchange, path: str, policy: str, verb: str, code: int) -> None:
        """Count a request (and log it at debug level)."""
        metrics = self.hub.metrics
        metrics.inflight.dec()
        key = (policy, verb, code)
        counters = self._request_children.get(key)
        if counters is None:
            counters = (
                metrics.requests.labels(self.cluster, policy, verb, str(code)),
                metrics.request_seconds.labels(self.cluster, policy, verb),
            )
            self._request_children[key] = counters
        counters[0].inc()
        elapsed = time.perf_counter() - exchange.started
        if verb != "watch":
            counters[1].observe(elapsed)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "request",
                extra=fields(
                    cluster=self.cluster,
                    policy=policy,
                    verb=verb,
                    method=exchange.head.method,
                    path=path,
                    code=code,
                    ms=round(elapsed * 1000, 2),
                ),
            )

    # -- the fast path ---------------------------------------------------------------------------
    def fast(self, client: ClientConnection) -> bool:
        """Take a plain request from ``client``'s buffer and answer it from callbacks.

        Plain: no request body, not a watch, accepted (token), a pass-through or a
        ``get``/``list`` of a policy kind, and a kept-alive worker connection is ready.
        The answer goes back from the worker connection's callback when it is whole in
        one go (a head and a Content-Length body, as nearly every GET answer) and, for a
        policy kind, when the manager's objects are in the watch cache and the policy's
        evaluations are proven fast; anything else is handed to the connection's
        coroutine (:meth:`answer_request`), which finishes the exchange as the slow
        path would. No task wakes up on the way: two event-loop turns less per request.
        Declined requests keep their parsed head in ``client.next_head``.
        """
        buffer = client.buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0 or end + 4 > MAX_HEAD:
            return False
        try:
            head = parse_request_head(bytes(buffer[: end + 4]))
        except HttpError:
            return False  # the coroutine answers it
        del buffer[: end + 4]
        client.next_head = head
        if head.framing != "none" or "expect" in head.fields:
            return False
        path, _, query = head.target.partition("?")
        target = parse_target(head.method, path, _watch_query(query))
        if target is not None and target.verb == "watch":
            return False
        try:
            entry = self._route(head, target)
        except StatusError:
            return False
        if entry is not None and (
            target is None or target.verb not in ("get", "list") or target.version != entry.info.version
        ):
            return False
        conn = self.upstream.take_idle()
        if conn is None:
            return False
        client.next_head = None
        exchange = Exchange(client, head)
        self.hub.metrics.inflight.inc()
        FastExchange(self, exchange, conn, path, target.verb if target is not None else "nonresource", entry).start()
        return True

    # -- talking to the worker -------------------------------------------------------------------
    async def _send(
        self,
        method: str,
        head: bytes,
        body: bytes | None,
        exchange: Exchange | None,
        timeout: float | None,
        sent: WorkerConnection | None = None,
    ) -> tuple[WorkerConnection, ResponseHead]:
        """Send a request to the worker and read its answer's head.

        The body is ``body``, or the client's streamed from ``exchange``; ``sent``: the
        request went out on that connection already. A reused connection found closed
        before any answer is replaced once, for requests the worker cannot have acted
        on. StatusError 503 when the worker cannot be reached, 502 when its answer is
        not HTTP.
        """
        replayable = method in _REPLAYABLE and (exchange is None or exchange.body_done)
        for attempt in range(2):
            if sent is not None and attempt == 0:
                conn = sent
            else:
                try:
                    conn = await self.upstream.acquire(fresh=attempt > 0)
                except UpstreamError as exc:
                    self.hub.metrics.upstream_errors.labels(self.cluster, exc.reason).inc()
                    raise StatusError(
                        503, f"mkpolicy sidecar: worker {self.cluster} is unreachable: {exc.reason}: {exc}"
                    ) from None
                conn.requests += 1
            reused = conn.requests > 1
            try:
                if conn is not sent:
                    await send_request(conn, head, body, exchange)
                return conn, await conn.response_head(method, timeout)
            except UpstreamError as exc:
                self.upstream.release(conn, False)
                if reused and replayable and exc.reason == "read" and not conn.buffer:
                    continue
                self.hub.metrics.upstream_errors.labels(self.cluster, exc.reason).inc()
                raise StatusError(
                    503, f"mkpolicy sidecar: worker {self.cluster} is unreachable: {exc.reason}: {exc}"
                ) from None
            except HttpError as exc:
                self.upstream.release(conn, False)
                self.hub.metrics.upstream_errors.labels(self.cluster, "read").inc()
                raise StatusError(
                    502, f"mkpolicy sidecar: worker {self.cluster} sent an invalid answer: {exc.message}"
                ) from None
            except BaseException:
                self.upstream.release(conn, False)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _answer(self, conn: WorkerConnection, resp: ResponseHead, timeout: float | None = READ_TIMEOUT) -> bytes:
        """The whole body of an answer (the connection released); StatusError when the worker breaks off."""
        try:
            raw = await read_answer(conn, resp, timeout)
        except UpstreamError as exc:
            self.upstream.release(conn, False)
            self.hub.metrics.upstream_errors.labels(self.cluster, "read").inc()
            raise StatusError(503, f"mkpolicy sidecar: worker {self.cluster} broke off: {exc}") from None
        except HttpError as exc:
            self.upstream.release(conn, False)
            self.hub.metrics.upstream_errors.labels(self.cluster, "read").inc()
            raise StatusError(502, f"mkpolicy sidecar: worker {self.cluster}: {exc.message}") from None
        except BaseException:
            self.upstream.release(conn, False)
            raise
        self.upstream.release(conn, not resp.close)
        return raw

    # -- pass-through -----------------------------------------------------------------------
    async def _passthrough(self, exchange: Exchange, target: Target | None, sent: WorkerConnection | None) -> int:
        watching = target is not None and target.verb == "watch"
        head = exchange.head
        out = self.upstream.head(head.method, head.target, head.headers)
        body: bytes | None = None
        if head.framing == "length" and head.length <= REPLAY_LIMIT and len(exchange.conn.buffer) >= head.length:
            body = await exchange.body_part()  # all there: sent with the head, and again on a retry
        timeout = None if watching else READ_TIMEOUT
        conn, resp = await self._send(head.method, out, body, exchange, timeout, sent)
        metrics = self.hub.metrics
        if watching:
            metrics.request_seconds.labels(self.cluster, "", "watch").observe(time.perf_counter() - exchange.started)
            metrics.active_watches.labels(self.cluster).inc()
            exchange.streaming(conn.wake)
        reusable = False
        try:
            reusable = await splice(exchange, conn, resp, watching=watching)
        finally:
            if watching:
                exchange.streaming(None)
                metrics.active_watches.labels(self.cluster).dec()
            self.upstream.release(conn, reusable and exchange.complete)
            if not exchange.complete and exchange.conn.writable:
                metrics.upstream_errors.labels(self.cluster, "read").inc()
        return resp.status

    # -- policy kinds --------------------------------------------------------------------------
    async def _transformed(
        self, exchange: Exchange, target: Target, entry: Entry, sent: WorkerConnection | None = None
    ) -> int:
        gvk = entry.adapter.gvk
        if target.version != entry.info.version:
            raise StatusError(
                403,
                f"mkpolicy sidecar: policy {entry.name} covers {entry.info.resource}.{entry.info.group} "
                f"at version {entry.info.version} only; found a request for {target.version}",
            )
        verb = target.verb
        if verb == "create" and target.subresource is None:
            return await self._create(exchange, target, entry)
        if verb in ("update", "patch"):
            raise StatusError(
                403,
                f"mkpolicy sidecar: {verb} of {gvk.kind} objects is not proxied (policy {entry.name}); "
                "Kueue only creates, reads, watches and deletes them",
            )
        if verb == "watch":
            return await self._watch(exchange, entry)
        if verb in ("get", "list", "delete", "deletecollection"):
            return await self._read(exchange, target, entry, sent)
        raise StatusError(
            405,
            f"mkpolicy sidecar: {exchange.head.method} {target.verb} is not supported for policy kind {gvk.kind}",
        )

    async def _create(self, exchange: Exchange, target: Target, entry: Entry) -> int:
        adapter = entry.adapter
        gvk = adapter.gvk
        head = exchange.head
        ctype = head.fields.get("content-type", "application/json").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise StatusError(415, f"mkpolicy sidecar: expected an application/json body for {gvk.kind}; found {ctype}")
        try:
            body = json.loads(await exchange.read_body(MAX_BODY))
        except ValueError as exc:
            raise StatusError(400, f"mkpolicy sidecar: the body is not JSON: {exc}") from None
        except RecursionError:
            raise StatusError(400, "mkpolicy sidecar: the body nests too deeply") from None
        if not isinstance(body, dict):
            raise StatusError(400, f"mkpolicy sidecar: expected a {gvk.kind} object; found {type(body).__name__}")
        if body.get("apiVersion") != gvk.api_version or body.get("kind") != gvk.kind:
            raise StatusError(
                400,
                f"mkpolicy sidecar: expected apiVersion {gvk.api_version!r} and kind {gvk.kind!r}; "
                f"found {body.get('apiVersion')!r}, {body.get('kind')!r}",
            )
        meta: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise StatusError(
                400, f"mkpolicy sidecar: {gvk.kind} objects need metadata.name (generateName is not supported)"
            )
        namespace = target.namespace
        if entry.info.namespaced and meta.get("namespace") not in (None, namespace):
            raise StatusError(
                400,
                f"mkpolicy sidecar: metadata.namespace {meta.get('namespace')!r} differs from the path's {namespace!r}",
            )
        manager = await self._manager(entry, namespace, name)
        if manager is None:
            raise StatusError(
                404,
                f"mkpolicy sidecar: the manager cluster has no {gvk.kind} {ref(namespace, name)}; "
                f"policy {entry.name} builds worker copies from it",
                details={"name": name, "group": gvk.group, "kind": entry.info.resource},
            )
        worker = await self._timed(entry, "create", worker_copy, entry.adapter, manager, body, self.cluster)
        data = json.dumps(worker, separators=(",", ":")).encode()
        out = self.upstream.head(
            "POST",
            head.target,
            head.headers,
            reencoded=True,
            extra=(("Content-Type", "application/json"), ("Content-Length", str(len(data)))),
        )
        conn, resp = await self._send("POST", out, data, None, READ_TIMEOUT)
        return await self._relay_objects(exchange, conn, resp, entry, manager_hint=manager, strict=False)

    async def _read(self, exchange: Exchange, target: Target, entry: Entry, sent: WorkerConnection | None) -> int:
        head = exchange.head
        extra: tuple[tuple[str, str], ...] = ()
        body: bytes | None = None
        if head.framing != "none":
            body = await exchange.read_body(MAX_BODY)
            extra = (("Content-Length", str(len(body))),)
            if "content-type" in head.fields:
                extra += (("Content-Type", head.fields["content-type"]),)
        out = self.upstream.head(head.method, head.target, head.headers, reencoded=True, extra=extra)
        conn, resp = await self._send(head.method, out, body, None, READ_TIMEOUT, sent)
        strict = target.verb in ("get", "list")
        return await self._relay_objects(exchange, conn, resp, entry, manager_hint=None, strict=strict)

    async def _relay_objects(
        self,
        exchange: Exchange,
        conn: WorkerConnection,
        resp: ResponseHead,
        entry: Entry,
        *,
        manager_hint: dict[str, Any] | None,
        strict: bool,
    ) -> int:
        """The worker's answer with every object of the policy kind rewritten (errors relayed as sent)."""
        raw = await self._answer(conn, resp)
        if resp.status >= 300:
            relay_error(exchange, resp, raw)
            return resp.status
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            raise StatusError(
                502, f"mkpolicy sidecar: worker {self.cluster} sent a body that is not JSON (or nests too deeply)"
            ) from None
        doc = await self._rewrite_document(doc, entry, manager_hint, strict)
        respond_json(exchange, resp, doc)
        return resp.status

    async def _rewrite_document(self, doc: Any, entry: Entry, manager_hint: dict[str, Any] | None, strict: bool) -> Any:
        objects = _objects_of(doc, entry)
        if objects is None:
            return doc
        managers = await self._managers(entry, objects, manager_hint)
        results = await self._timed_batch(entry, "sync", objects, managers, strict)
        return _with_results(doc, objects, results)

    def rewrite_now(self, doc: Any, entry: Entry, strict: bool) -> tuple[bool, Any]:
        """(True, ``doc`` rewritten) when that needs no waiting: every manager object cached, the
        policy proven fast; else (False, None) and nothing done. StatusError as :meth:`_rewrite_document`."""
        objects = _objects_of(doc, entry)
        if objects is None:
            return True, doc
        adapter = entry.adapter
        if not self.hub.inline(adapter, len(objects)):
            return False, None
        managers: list[Any] = []
        for obj in objects:
            meta = obj.get("metadata") or {}
            found = self.hub.cached_manager_object(
                entry, meta.get("namespace"), str(meta.get("name") or ""), count=False
            )
            if found is None:
                return False, None
            managers.append(found)
        if managers:
            self.hub.count_cache_hits(entry, len(managers))
        results = self.hub.run_here(
            adapter,
            rewrite_batch,
            adapter,
            objects,
            managers,
            self.cluster,
            self.hub.origin,
            strict,
            items=len(objects),
        )
        return True, _with_results(doc, objects, self._results(entry, "sync", results))

    # -- watches ---------------------------------------------------------------------------------
    async def _watch(self, exchange: Exchange, entry: Entry) -> int:
        head = exchange.head
        out = self.upstream.head("GET", head.target, head.headers, reencoded=True)
        conn, resp = await self._send("GET", out, None, None, None)
        if resp.status != 200:
            return await self._relay_objects(exchange, conn, resp, entry, manager_hint=None, strict=False)
        metrics = self.hub.metrics
        headers = [(k, v) for k, v in resp.headers if k.lower() not in REENCODED]
        headers += [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")]
        exchange.send(response_head(200, headers, resp.reason), complete=False)
        metrics.request_seconds.labels(self.cluster, entry.name, "watch").observe(
            time.perf_counter() - exchange.started
        )
        metrics.active_watches.labels(self.cluster).inc()
        exchange.streaming(conn.wake)
        client = exchange.conn
        client.on_lost = conn.wake
        scanner = ChunkedScanner() if resp.framing == "chunked" else None
        left = resp.length if resp.framing == "length" else 0 if resp.framing == "none" else -1
        pending = b""
        reusable = False
        try:
            while True:
                parts: list[bytes] = []
                if scanner is not None:
                    data = conn.take()
                    try:
                        scanner.feed(data, parts)
                    except HttpError:
                        break
                    ended = scanner.done
                elif left >= 0:
                    parts.append(conn.take(left))
                    left -= len(parts[0])
                    ended = left == 0
                else:
                    parts.append(conn.take())
                    ended = conn.eof and not conn.buffer
                pending += b"".join(parts)
                cut = pending.rfind(b"\n")
                if cut >= 0:
                    lines, pending = pending[: cut + 1], pending[cut + 1 :]
                    rewritten = await self._rewrite_events(lines, entry)
                    if rewritten:
                        exchange.send(chunk(rewritten), complete=False)
                if ended:
                    if pending.strip():  # a last event without its newline; a broken one is dropped
                        exchange.send(chunk(await self._rewrite_events(pending + b"\n", entry)), complete=False)
                    reusable = scanner is not None and not conn.buffer and not resp.close
                    break
                if not client.writable or exchange.stopping:
                    break
                try:
                    await client.drain()
                    await conn.wait_readable(None)
                except ConnectionResetError:
                    break
                if conn.eof and not conn.buffer:
                    break  # the worker broke off: whole events were relayed, the client re-watches
        finally:
            client.on_lost = None
            exchange.streaming(None)
            metrics.active_watches.labels(self.cluster).dec()
            self.upstream.release(conn, reusable)
        # the worker ended the watch (or shutdown ended it): end ours cleanly, the client re-watches
        exchange.send(LAST_CHUNK)
        return 200

    async def _rewrite_events(self, lines: bytes, entry: Entry) -> bytes:
        events: list[tuple[bytes, dict[str, Any] | None]] = []
        for line in lines.split(b"\n"):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                events.append((line, None))
                continue
            obj = event.get("object") if isinstance(event, dict) else None
            if (
                isinstance(obj, dict)
                and event.get("type") in ("ADDED", "MODIFIED", "DELETED")
                and obj.get("kind", entry.adapter.gvk.kind) == entry.adapter.gvk.kind
            ):
                events.append((line, event))
            else:
                events.append((line, None))
        objects = [e["object"] for _, e in events if e is not None]
        if objects:
            managers = await self._managers(entry, objects, None)
            rewritten = iter(await self._timed_batch(entry, "sync", objects, managers, False))
            self.hub.metrics.watch_events.labels(self.cluster, entry.name).inc(len(objects))
        out = []
        for line, event in events:
            if event is None:
                out.append(line)
            else:
                new = {"type": event["type"], "object": next(rewritten)}
                out.append(json.dumps(new, separators=(",", ":")).encode())
        return b"\n".join(out) + b"\n" if out else b""

    # -- manager objects and transforms ------------------------------------------------------------
    async def _manager(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            return await self.hub.manager_object(entry, namespace, name)
        except (TimeoutError, ApiError, aiohttp.ClientError, OSError) as exc:
            self.hub.metrics.upstream_errors.labels("manager", "read").inc()
            raise StatusError(
                503,
                f"mkpolicy sidecar: cannot read {entry.adapter.gvk.kind} {ref(namespace, name)} "
                f"from the manager: {describe(exc)}",
            ) from None

    async def _managers(
        self, entry: Entry, objects: list[dict[str, Any]], hint: dict[str, Any] | None
    ) -> list[dict[str, Any] | Exception | None]:
        """The manager's object for each worker object (an exception where it could not be read).

        The watch cache answers without waiting; misses are read from the manager,
        at most ``_LOOKUPS`` at a time.
        """
        if hint is not None:
            return [hint for _ in objects]
        found: list[dict[str, Any] | Exception | None] = []
        missing: list[int] = []
        for i, obj in enumerate(objects):
            meta = obj.get("metadata") or {}
            cached = self.hub.cached_manager_object(entry, meta.get("namespace"), str(meta.get("name") or ""))
            found.append(cached)
            if cached is None:
                missing.append(i)
        if not missing:
            return found
        limit = asyncio.Semaphore(_LOOKUPS)

        async def one(obj: dict[str, Any]) -> dict[str, Any] | Exception | None:
            meta = obj.get("metadata") or {}
            async with limit:
                try:
                    return await self._manager(entry, meta.get("namespace"), str(meta.get("name") or ""))
                except StatusError as exc:
                    return exc

        for i, value in zip(missing, await asyncio.gather(*(one(objects[i]) for i in missing)), strict=True):
            found[i] = value
        return found

    async def _timed(
        self, entry: Entry, phase: str, fn: Callable[..., tuple[dict[str, Any], Outcome]], *args: Any
    ) -> dict[str, Any]:
        obj, outcome, seconds = await self.hub.offload(entry.adapter, measure, fn, *args)
        self._count(entry, phase, outcome, seconds)
        if isinstance(obj, StatusError):
            raise obj
        result: dict[str, Any] = obj
        return result

    async def _timed_batch(
        self, entry: Entry, phase: str, objects: list[dict[str, Any]], managers: list[Any], strict: bool
    ) -> list[dict[str, Any]]:
        for manager in managers:
            if isinstance(manager, StatusError) and strict:
                raise manager
        results = await self.hub.offload(
            entry.adapter,
            rewrite_batch,
            entry.adapter,
            objects,
            managers,
            self.cluster,
            self.hub.origin,
            strict,
            items=len(objects),
        )
        return self._results(entry, phase, results)

    def _results(self, entry: Entry, phase: str, results: list[tuple[Any, Outcome, float]]) -> list[dict[str, Any]]:
        """The objects of a batch's results, counted; its StatusError raised."""
        out = []
        for obj, outcome, seconds in results:
            self._count(entry, phase, outcome, seconds)
            if isinstance(obj, StatusError):
                raise obj
            out.append(obj)
        return out

    def _count(self, entry: Entry, phase: str, outcome: Outcome, seconds: float) -> None:
        m = self.hub.metrics
        key = (entry.name, phase, outcome.result)
        children = self._children.get(key)
        if children is None:
            children = (
                m.transforms.labels(self.cluster, entry.name, phase, outcome.result),
                m.transform_seconds.labels(self.cluster, entry.name, phase),
            )
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)
        if outcome.result == "error":
            m.transform_errors.labels(self.cluster, entry.name, phase).inc()
            if outcome.error:
                log.warning(
                    "status write-back withheld",
                    extra=fields(cluster=self.cluster, policy=entry.name, error=outcome.error),
                )
        if outcome.ignored:
            m.ignored_patches.labels(self.cluster, entry.name, phase).inc(len(outcome.ignored))
            for exc in outcome.ignored:
                log.warning(
                    "patch skipped (failurePolicy Ignore)",
                    extra=fields(cluster=self.cluster, policy=entry.name, error=exc.report()),
                )


def _objects_of(doc: Any, entry: Entry) -> list[dict[str, Any]] | None:
    """The objects of the policy's kind in a worker's answer: itself, its list's items; None: nothing to rewrite."""
    if not isinstance(doc, dict):
        return None
    kind = entry.adapter.gvk.kind
    if doc.get("kind") == kind:
        return [doc]
    if doc.get("kind") == f"{kind}List" or (isinstance(doc.get("items"), list) and doc.get("kind") != "Status"):
        return [o for o in doc.get("items") or [] if isinstance(o, dict)]
    return None


def _with_results(doc: dict[str, Any], objects: list[dict[str, Any]], results: list[dict[str, Any]]) -> Any:
    """``doc`` with its objects (see :func:`_objects_of`) replaced by ``results``."""
    if objects and objects[0] is doc:
        return results[0]
    doc = dict(doc)
    doc["items"] = results
    return doc


__all__ = ["Hub", "WorkerEndpoint"]
