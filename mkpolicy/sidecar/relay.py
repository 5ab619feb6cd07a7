"""Moving bodies between a client exchange and a worker connection.

* :func:`send_request` — a request head and its body to the worker (the body streamed
  from the client as it came, or bytes of the sidecar's own);
* :func:`splice` — a worker's answer to the client as the bytes that came (pass-through):
  the head unchanged unless it carries hop-by-hop fields, the body in its own framing;
  the worker connection is kept for reuse only when the answer ended where its framing
  says;
* :func:`read_answer` — a worker's whole answer body, decoded from its framing (for
  transformed requests);
* :func:`relay_error`, :func:`respond_json` — a whole answer of a policy kind to the
  client: a worker's error as it came, or a rewritten JSON body.

Streams (watches) end cleanly — the last chunk written — when the worker ends them or
the sidecar shuts down, at a chunk boundary; a body broken off elsewhere leaves the
exchange incomplete and the listener cuts the client's connection, so the client sees
the break instead of a shortened body.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mkpolicy.jsonvalues import dumps_kube
from mkpolicy.sidecar.http1 import (
    LAST_CHUNK,
    ChunkedScanner,
    HttpError,
    ResponseHead,
    without_hop_by_hop,
)
from mkpolicy.sidecar.listener import READ_TIMEOUT, Exchange
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.upstream import AnswerBudget, UpstreamError, WorkerConnection

#: Headers of a worker response not copied onto a re-encoded (transformed) body.
REENCODED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "transfer-encoding",
        "content-length",
        "content-type",
        "content-encoding",
    }
)
#: Request bodies up to this size are kept while being sent, so that a request can be
#: sent again on a fresh connection when a reused one turns out closed.
REPLAY_LIMIT = 1024 * 1024


async def send_request(conn: WorkerConnection, head: bytes, body: bytes | None, exchange: Exchange | None) -> None:
    """Write a request: ``head`` then ``body``, or the client's body streamed from ``exchange``.

    ConnectionResetError when the client goes away inside its body.
    """
    if body is not None or exchange is None or exchange.body_done:
        conn.write(head + body if body else head)
        return
    first = await exchange.body_part()
    conn.write(head + first)
    while not exchange.body_done:
        part = await exchange.body_part()
        if conn.lost:
            raise ConnectionResetError("the worker closed the connection")
        conn.write(part)
        await conn.drain()


def client_head(resp: ResponseHead) -> bytes:
    """The head to relay to the client: as it came, unless it has hop-by-hop fields or ends by closing."""
    if not resp.hop and resp.framing != "close":
        return resp.raw
    status_line = resp.raw.split(b"\r\n", 1)[0]
    headers = without_hop_by_hop(resp.headers, resp.fields)
    if resp.framing == "close":
        headers.append(("Connection", "close"))
    lines = [f"{name}: {value}\r\n" for name, value in headers]
    return status_line + b"\r\n" + "".join(lines).encode("latin-1") + b"\r\n"


async def splice(
    exchange: Exchange, conn: WorkerConnection, resp: ResponseHead, *, watching: bool, watch_idle: float | None = None
) -> bool:
    """Relay the worker's answer (head and body) to the client as it comes.

    Returns whether the worker connection can be reused. The exchange is complete when
    the whole body was relayed (or a stream was ended cleanly). ``watch_idle``: a watch
    silent that long is ended (cleanly when at an event boundary; the client reconnects).
    """
    framing = resp.framing
    if framing == "close":
        exchange.close_after = True
    head = client_head(resp)
    scanner = ChunkedScanner() if framing == "chunked" else None
    left = resp.length if framing == "length" else 0 if framing == "none" else -1
    reusable = not resp.close
    client = exchange.conn
    client.on_lost = conn.wake  # a client gone while the worker is silent (an idle watch) is noticed at once
    try:
        while True:
            data = conn.take(left) if left > 0 else conn.take() if left < 0 else b""
            done = False
            if scanner is not None:
                try:
                    used = scanner.feed(data)
                except HttpError:
                    return False  # broken framing: stop here, the client sees the answer cut
                if used < len(data):
                    data = data[:used]
                    reusable = False  # bytes after the end of the answer
                done = scanner.done
            elif left >= 0:
                left -= len(data)
                done = left == 0
            if head:
                exchange.send(head + data, complete=done)
                head = b""
            elif data:
                exchange.send(data, complete=done)
            if done:
                return reusable
            if not client.writable:
                return False
            if exchange.stopping and scanner is not None and scanner.at_boundary:
                exchange.send(LAST_CHUNK)  # shutdown: end the stream cleanly, the client resumes elsewhere
                return False
            try:
                await client.drain()
                await conn.wait_readable(watch_idle if watching else READ_TIMEOUT)
            except TimeoutError:
                if watching and scanner is not None and scanner.at_boundary:
                    exchange.send(LAST_CHUNK)  # silent too long: the worker may be gone; the client reconnects
                return False
            except ConnectionResetError:
                return False
            if not conn.buffer and conn.eof:
                if framing == "close":
                    exchange.complete = True
                elif watching and scanner is not None and scanner.at_boundary:
                    exchange.send(LAST_CHUNK)  # the worker dropped the watch between events: end it cleanly
                return False
    finally:
        client.on_lost = None


#: The process's budget (``limits.answerBudgetBytes`` bounds it).
ANSWERS = AnswerBudget()


class AnswerTooLarge(Exception):
    """An answer exceeds what may be held whole (``busy``: the shared budget, not its own size)."""

    def __init__(self, message: str, busy: bool) -> None:
        super().__init__(message)
        self.busy = busy


async def read_answer(
    conn: WorkerConnection,
    resp: ResponseHead,
    timeout: float | None = READ_TIMEOUT,
    limit: int | None = None,
    budget: int | None = None,
    worker: tuple[AnswerBudget, int] | None = None,
    deadline: float | None = None,
) -> bytes:
    """The whole body of the worker's answer, decoded from its framing.

    UpstreamError (read, timeout) when the worker breaks off, or when the whole answer has
    not come within ``deadline`` seconds (a dripped body holds nothing for long);
    HttpError (502) when the framing is broken; AnswerTooLarge above ``limit`` bytes, or
    when holding it would take :data:`ANSWERS` over ``budget`` or this worker's budget
    (``worker``: its budget and limit) over its limit. Bytes are counted as they arrive,
    not as announced: a Content-Length reserves nothing.
    """
    framing = resp.framing
    if framing == "none":
        return b""
    if limit is not None and framing == "length" and resp.length > limit:
        raise AnswerTooLarge(f"the answer has {resp.length} bytes; at most {limit} are rewritten", busy=False)
    held = 0
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline if deadline is not None else None

    def hold(total: int) -> None:
        nonlocal held
        if limit is not None and total > limit:
            raise AnswerTooLarge(f"the answer exceeds {limit} bytes; at most that much is rewritten", busy=False)
        if total <= held:
            return
        more = total - held
        if budget is not None and not ANSWERS.take(more, budget):
            raise AnswerTooLarge(f"answers being rewritten hold {ANSWERS.used} bytes already", busy=True)
        if worker is not None and not worker[0].take(more, worker[1]):
            if budget is not None:
                ANSWERS.give(more)
            raise AnswerTooLarge(f"this worker's answers being rewritten hold {worker[0].used} bytes", busy=True)
        held = total

    parts: list[bytes] = []
    scanner = ChunkedScanner() if framing == "chunked" else None
    left = resp.length if framing == "length" else -1
    size = 0
    try:
        while True:
            if scanner is not None:
                data = conn.take()
                try:
                    used = scanner.feed(data, parts)
                except HttpError as exc:
                    raise HttpError(502, f"broken chunked answer: {exc.message}") from None
                if used < len(data):
                    conn.buffer[:0] = data[used:]  # not ours: the connection is not reused (see release)
                size += used
                hold(size)
                if scanner.done:
                    return b"".join(parts)
            elif left >= 0:
                data = conn.take(left)
                parts.append(data)
                left -= len(data)
                size += len(data)
                hold(size)
                if not left:
                    return b"".join(parts)
            else:
                data = conn.take()
                size += len(data)
                hold(size)
                parts.append(data)
            if conn.eof and not conn.buffer:
                if framing == "close":
                    return b"".join(parts)
                raise UpstreamError("read", "the connection closed inside the answer")
            wait = timeout
            if end is not None:
                left_time = end - loop.time()
                if left_time <= 0:
                    raise UpstreamError("timeout", f"the answer did not come whole within {deadline:.0f}s")
                wait = left_time if wait is None else min(wait, left_time)
            try:
                await conn.wait_readable(wait)
            except TimeoutError:
                if end is not None and loop.time() >= end:
                    raise UpstreamError("timeout", f"the answer did not come whole within {deadline:.0f}s") from None
                raise UpstreamError("timeout", f"no byte of the answer within {timeout:.0f}s") from None
    finally:
        if held:
            if budget is not None:
                ANSWERS.give(held)
            if worker is not None:
                worker[0].give(held)


def ref(namespace: str | None, name: str) -> str:
    """``namespace/name`` (``name`` alone when cluster-scoped)."""
    return f"{namespace}/{name}" if namespace else name


def relay_error(exchange: Exchange, resp: ResponseHead, body: bytes) -> None:
    """A worker's error answer for a policy kind, relayed as sent (its body decoded from its framing)."""
    headers = [(k, v) for k, v in resp.headers if k.lower() not in REENCODED]
    if "content-type" in resp.fields:
        headers.append(("Content-Type", resp.fields["content-type"]))
    if "content-encoding" in resp.fields:
        headers.append(("Content-Encoding", resp.fields["content-encoding"]))
    exchange.respond(resp.status, headers, body, resp.reason)


def respond_json(exchange: Exchange, resp: ResponseHead, doc: Any) -> None:
    """A worker's answer with a re-encoded JSON body ``doc``.

    StatusError 500 when ``doc`` holds a number JSON cannot carry (NaN, an infinity: a
    policy's arithmetic), which is never written as ``NaN``/``Infinity``.
    """
    try:
        body = dumps_kube(doc)
    except ValueError as exc:
        raise StatusError(500, f"mkpolicy sidecar: the rewritten object cannot be written as JSON: {exc}") from None
    headers = [(k, v) for k, v in resp.headers if k.lower() not in REENCODED]
    headers.append(("Content-Type", "application/json"))
    exchange.respond(resp.status, headers, body, resp.reason)
