"""Requests answered from protocol callbacks, without waking a task (the sidecar's fast path).

:meth:`~mkpolicy.sidecar.forward.Forwarder.fast` decides which requests qualify; a
:class:`FastExchange` then sends the request on a kept-alive worker connection and
answers from that connection's data callback once the whole answer is there: as it came
for a pass-through, rewritten by the policy for a read of a policy kind. Whatever it
cannot finish there (a large or streamed answer, a manager object not cached, an
evaluation not proven fast) it hands to the client connection's coroutine, which goes on
exactly as the slow path would.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from mkpolicy.jsonvalues import loads_kube
from mkpolicy.sidecar.conn import HIGH_WATER
from mkpolicy.sidecar.http1 import (
    CHUNKED_MORE,
    CHUNKED_NOT_PLAIN,
    MAX_HEAD,
    HttpError,
    ResponseHead,
    parse_response_head,
    plain_chunked_end,
)
from mkpolicy.sidecar.listener import READ_TIMEOUT, Exchange
from mkpolicy.sidecar.logs import fields
from mkpolicy.sidecar.policies import Entry
from mkpolicy.sidecar.relay import client_head, relay_error, respond_json
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.upstream import WorkerConnection

if TYPE_CHECKING:
    from mkpolicy.sidecar.proxy import WorkerEndpoint

log = logging.getLogger("mkpolicy.sidecar.proxy")

#: Answers up to this size are relayed once whole; larger ones are streamed by the coroutine.
FAST_BODY = HIGH_WATER


class FastExchange:
    """One exchange answered from protocol callbacks (see :meth:`~mkpolicy.sidecar.forward.Forwarder.fast`)."""

    __slots__ = ("conn", "endpoint", "entry", "exchange", "path", "resp", "timer", "verb")

    def __init__(
        self,
        endpoint: WorkerEndpoint,
        exchange: Exchange,
        conn: WorkerConnection,
        path: str,
        verb: str,
        entry: Entry | None,
    ) -> None:
        self.endpoint = endpoint
        self.exchange = exchange
        self.conn = conn
        self.path = path
        self.verb = verb
        #: The policy of a transformed read; None for a pass-through.
        self.entry = entry
        self.resp: ResponseHead | None = None
        self.timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        exchange, conn = self.exchange, self.conn
        head = exchange.head
        exchange.conn.fast_started(exchange)
        conn.requests += 1
        conn.on_event = self._event
        self.timer = conn.loop.call_later(READ_TIMEOUT, self._timeout)
        upstream = self.endpoint.upstream
        out = upstream.head(head.method, head.target, head.headers, reencoded=self.entry is not None)
        conn.write(out + exchange.body_now() if head.framing == "length" else out)
        if conn.eof:
            self._event()

    def _stop(self) -> None:
        self.conn.on_event = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _event(self) -> None:
        """News from the worker: answer when the whole answer is here, hand over when it cannot be."""
        try:
            self._step()
        except Exception:  # a bug: the client sees the exchange broken off, the sidecar goes on
            log.exception("request handling failed", extra=fields(cluster=self.endpoint.cluster, path=self.path))
            self._stop()
            self.endpoint.upstream.release(self.conn, False)
            self.endpoint.record(self.exchange, self.path, self.entry.name if self.entry else "", self.verb, 500)
            client = self.exchange.conn
            client.abort()
            client.fast_done(self.exchange)

    def _step(self) -> None:
        conn = self.conn
        buffer = conn.buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            if conn.eof or len(buffer) > MAX_HEAD:
                self._hand_over()
            return
        resp = self.resp
        if resp is None:
            try:
                resp = parse_response_head(bytes(buffer[: end + 4]), self.exchange.head.method)
            except HttpError:
                self._hand_over()
                return
            if resp.status < 200 or resp.framing == "close" or resp.length > FAST_BODY:
                self._hand_over()
                return
            self.resp = resp
        start = end + 4
        payload: list[bytes] | None = None
        if resp.framing == "chunked":
            # kube-apiserver chunks every answer over 2 KiB (Go net/http server.go, bufferBeforeChunkingSize)
            payload = [] if self.entry is not None else None
            total = plain_chunked_end(buffer, start, FAST_BODY, payload)
            if total == CHUNKED_NOT_PLAIN or (total == CHUNKED_MORE and conn.eof):
                self._hand_over()
                return
        else:
            total = start + resp.length
        if total < 0 or len(buffer) < total:
            if conn.eof:
                self._hand_over()
            return
        if self.entry is None:
            self._stop()
            data = conn.take(total)
            head = client_head(resp)
            self.exchange.send(data if head is resp.raw else head + data[start:])
            self._done(resp, "", resp.status)
        else:
            body = bytes(buffer[start:total]) if payload is None else b"".join(payload)
            self._transformed(resp, body, total)

    def _transformed(self, resp: ResponseHead, body: bytes, total: int) -> None:
        """A policy kind's whole answer (``body`` decoded from its framing, ``total`` bytes with the head):
        rewritten here when nothing has to be waited for."""
        entry, endpoint, exchange, conn = self.entry, self.endpoint, self.exchange, self.conn
        assert entry is not None
        if resp.status >= 300:
            self._stop()
            conn.take(total)
            relay_error(exchange, resp, body)
            self._done(resp, entry.name, resp.status)
            return
        try:
            doc = loads_kube(body)
            ready, doc = endpoint.rewrite_now(doc, entry, exchange.head)
        except (ValueError, RecursionError):
            ready = False  # not JSON: the coroutine answers why
        except StatusError as exc:
            self._stop()
            conn.take(total)
            endpoint.refuse(exchange, exc, entry.name, self.verb, self.path)
            self._done(resp, entry.name, exc.code)
            return
        if not ready:
            self._hand_over()
            return
        self._stop()
        conn.take(total)
        try:
            respond_json(exchange, resp, doc)
        except StatusError as exc:
            endpoint.refuse(exchange, exc, entry.name, self.verb, self.path)
            self._done(resp, entry.name, exc.code)
            return
        self._done(resp, entry.name, resp.status)

    def _done(self, resp: ResponseHead, policy: str, code: int) -> None:
        endpoint, exchange = self.endpoint, self.exchange
        endpoint.upstream.release(self.conn, not resp.close)
        endpoint.record(exchange, self.path, policy, self.verb, code)
        exchange.conn.fast_done(exchange)

    def _hand_over(self) -> None:
        self._stop()
        exchange, conn = self.exchange, self.conn
        exchange.conn.hand_over(lambda: self.endpoint.answer_request(exchange, conn))

    def _timeout(self) -> None:
        self.timer = None
        self._stop()
        endpoint, exchange = self.endpoint, self.exchange
        endpoint.upstream.release(self.conn, False)
        endpoint.hub.metrics.upstream_errors.labels(endpoint.cluster, "timeout").inc()
        exc = StatusError(
            503,
            f"mkpolicy sidecar: worker {endpoint.cluster} is unreachable: timeout: no answer within "
            f"{READ_TIMEOUT:.0f}s",
        )
        policy = self.entry.name if self.entry is not None else ""
        endpoint.refuse(exchange, exc, policy, self.verb, self.path)
        endpoint.record(exchange, self.path, policy, self.verb, 503)
        exchange.conn.fast_done(exchange)
