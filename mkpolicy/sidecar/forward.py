"""Moving one worker endpoint's requests to the worker and its answers back (the transport side).

:class:`Forwarder` is what :class:`~mkpolicy.sidecar.proxy.WorkerEndpoint` uses to talk to
its worker: it sends a request (the client's streamed body, or a body of the sidecar's
own), reads the answer's head and, for pass-through, relays the answer as the bytes that
came (watches included). Its fast hook answers plain requests from protocol callbacks
(:mod:`mkpolicy.sidecar.fastpath`), asking the endpoint how each one is routed.

What is transformed, and how, is the endpoint's business; this module never looks at
a body.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mkpolicy.sidecar.fastpath import FastExchange
from mkpolicy.sidecar.http1 import HttpError, RequestHead, ResponseHead
from mkpolicy.sidecar.listener import READ_TIMEOUT, ClientConnection, Exchange
from mkpolicy.sidecar.paths import Target
from mkpolicy.sidecar.relay import REPLAY_LIMIT, AnswerTooLarge, read_answer, send_request, splice
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.upstream import Upstream, UpstreamError, WorkerConnection

if TYPE_CHECKING:
    from mkpolicy.sidecar.proxy import WorkerEndpoint

#: Retry-After of a watch refused for the watch limit (one of the client's watches must end first).
WATCH_RETRY_SECONDS = 5

#: Methods sent again on a fresh connection when a reused one turns out closed (as Go's
#: client does: the worker cannot have acted on them).
_REPLAYABLE = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
#: Request bodies up to this size, received with their head, are sent from callbacks (a
#: Workload's create, a DELETE's options); larger ones are streamed by the coroutine.
FAST_REQUEST_BODY = 64 * 1024


class Forwarder:
    """The transport of one worker endpoint: its worker's connection pool and the relay."""

    def __init__(self, endpoint: WorkerEndpoint, upstream: Upstream) -> None:
        self.endpoint = endpoint
        self.upstream = upstream
        self.cluster = upstream.name
        self.metrics = endpoint.hub.metrics
        #: Watches relayed now, per client address (bounded by ``maxWatchesPerAddress``).
        self._watches: dict[str, int] = {}

    # -- the fast path ---------------------------------------------------------------------------
    def fast(self, client: ClientConnection) -> bool:
        """Take a plain request from ``client``'s buffer and answer it from callbacks.

        Plain: not a watch, routed (token accepted) to a pass-through or to a transformed
        ``get`` of a kind whose manager objects are cached, no request body or (for a
        pass-through write) a small one already received whole, and a kept-alive worker
        connection is ready. The answer goes back from the worker connection's callback
        when it is whole in one go (a head and a Content-Length or plain chunked body, as
        nearly every answer) and, for a policy kind, when the endpoint can rewrite it
        without waiting; anything else is handed to the connection's coroutine
        (:meth:`WorkerEndpoint.answer_request`), which finishes the exchange as the slow
        path would. No task wakes up on the way: two event-loop turns less per request.
        Declined requests keep their parsed head in ``client.next_head``.
        """
        head = client.next_head  # parsed by the connection as its bytes came (llhttp)
        if head is None or "expect" in head.fields:
            return False
        body = head.framing != "none"
        if body and not self._whole_body(client, head):
            return False
        endpoint = self.endpoint
        target = endpoint.target_of(head)
        if target is not None and target.verb == "watch":
            return False
        try:
            entry = endpoint.route(head, target)
        except StatusError:
            return False
        client.authenticated()
        if entry is not None and (target is None or target.verb != "get" or not endpoint.hub.caches(entry)):
            return False  # (reads: direct: the manager's object is read by the coroutine)
        if body and (entry is not None or target is None or endpoint.pending_create(target)):
            return False
        conn = self.upstream.take_idle()
        if conn is None:
            return False
        client.next_head = None
        exchange = Exchange(client, head)
        self.metrics.inflight.inc()
        path = head.target.partition("?")[0]
        verb = target.verb if target is not None else "nonresource"
        FastExchange(endpoint, exchange, conn, path, verb, entry).start()
        return True

    def _whole_body(self, client: ClientConnection, head: RequestHead) -> bool:
        """Whether the request's body may go with it from callbacks: a small Content-Length body of a
        method the worker may have acted on (never sent twice), all of it received, no request log."""
        return (
            head.framing == "length"
            and head.method not in _REPLAYABLE
            and head.length <= min(FAST_REQUEST_BODY, client.limits.max_body_bytes)
            and len(client.buffer) >= head.length
            and self.endpoint.hub.request_log is None
        )

    # -- talking to the worker -------------------------------------------------------------------
    async def send(
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
                    self.metrics.upstream_errors.labels(self.cluster, exc.reason).inc()
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
                self.metrics.upstream_errors.labels(self.cluster, exc.reason).inc()
                raise StatusError(
                    503, f"mkpolicy sidecar: worker {self.cluster} is unreachable: {exc.reason}: {exc}"
                ) from None
            except HttpError as exc:
                self.upstream.release(conn, False)
                self.metrics.upstream_errors.labels(self.cluster, "read").inc()
                raise StatusError(
                    502, f"mkpolicy sidecar: worker {self.cluster} sent an invalid answer: {exc.message}"
                ) from None
            except BaseException:
                self.upstream.release(conn, False)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def answer(self, conn: WorkerConnection, resp: ResponseHead, timeout: float | None = READ_TIMEOUT) -> bytes:
        """The whole body of an answer (the connection released); StatusError when the worker breaks off."""
        limits = self.upstream.limits
        try:
            raw = await read_answer(
                conn,
                resp,
                timeout,
                limits.max_answer_bytes,
                limits.answer_budget_bytes,
                (self.upstream.answers, limits.worker_answer_budget_bytes),
                limits.answer_seconds,
            )
        except AnswerTooLarge as exc:
            self.upstream.release(conn, False)
            if exc.busy:
                raise StatusError(
                    429,
                    f"mkpolicy sidecar: too many answers are being rewritten at once ({exc}); retry shortly",
                    details={"retryAfterSeconds": 1},
                ) from None
            raise StatusError(502, f"mkpolicy sidecar: worker {self.cluster}: {exc}") from None
        except UpstreamError as exc:
            self.upstream.release(conn, False)
            self.metrics.upstream_errors.labels(self.cluster, "read").inc()
            raise StatusError(503, f"mkpolicy sidecar: worker {self.cluster} broke off: {exc}") from None
        except HttpError as exc:
            self.upstream.release(conn, False)
            self.metrics.upstream_errors.labels(self.cluster, "read").inc()
            raise StatusError(502, f"mkpolicy sidecar: worker {self.cluster}: {exc.message}") from None
        except BaseException:
            self.upstream.release(conn, False)
            raise
        self.upstream.release(conn, not resp.close)
        return raw

    # -- watches ------------------------------------------------------------------------------
    def _admit_watch(self, peer: str) -> None:
        """Count a watch of ``peer``; StatusError 429 when it holds ``maxWatchesPerAddress`` already."""
        held = self._watches.get(peer, 0)
        kueue = self.endpoint.hub.contract.kueue_watches
        limit = self.upstream.limits.watch_limit(len(kueue))
        if held >= limit:
            self.metrics.refusals.labels(self.cluster, "", "WatchLimit").inc()
            raise StatusError(
                429,
                f"mkpolicy sidecar: too many watches from {peer}: it holds {held} on this endpoint, and "
                f"limits.maxWatchesPerAddress is {limit} (Kueue watches {len(kueue)} kinds here: "
                f"{', '.join(kueue) or 'none'}); retry once one of them ends",
                details={"retryAfterSeconds": WATCH_RETRY_SECONDS},
            )
        self._watches[peer] = held + 1

    def _watch_ended(self, peer: str) -> None:
        left = self._watches.get(peer, 0) - 1
        if left > 0:
            self._watches[peer] = left
        else:
            self._watches.pop(peer, None)

    # -- pass-through -----------------------------------------------------------------------
    async def passthrough(self, exchange: Exchange, target: Target | None, sent: WorkerConnection | None) -> int:
        """Relay a request to the worker and its answer back as the bytes that came (watches included)."""
        if target is None or target.verb != "watch":
            return await self._relay(exchange, False, sent)
        peer = exchange.conn.peer
        self._admit_watch(peer)
        try:
            return await self._relay(exchange, True, sent)
        finally:
            self._watch_ended(peer)

    async def _relay(self, exchange: Exchange, watching: bool, sent: WorkerConnection | None) -> int:
        head = exchange.head
        out = self.upstream.head(head.method, head.target, head.headers)
        body: bytes | None = None
        if head.framing == "length" and head.length <= REPLAY_LIMIT and len(exchange.conn.buffer) >= head.length:
            body = await exchange.body_part()  # all there: sent with the head, and again on a retry
        timeout = None if watching else READ_TIMEOUT
        conn, resp = await self.send(head.method, out, body, exchange, timeout, sent)
        metrics = self.metrics
        if watching:
            metrics.request_seconds.labels(self.cluster, "", "watch").observe(time.perf_counter() - exchange.started)
            metrics.active_watches.labels(self.cluster).inc()
            exchange.streaming(conn.wake)
        reusable = False
        try:
            reusable = await splice(
                exchange, conn, resp, watching=watching, watch_idle=self.upstream.limits.watch_idle_seconds
            )
        finally:
            if watching:
                exchange.streaming(None)
                metrics.active_watches.labels(self.cluster).dec()
            self.upstream.release(conn, reusable and exchange.complete)
            if not exchange.complete and exchange.conn.writable:
                metrics.upstream_errors.labels(self.cluster, "read").inc()
        return resp.status


__all__ = ["Forwarder"]
