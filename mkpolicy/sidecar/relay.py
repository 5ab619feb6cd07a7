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
from mkpolicy.sidecar.upstream import UpstreamError, WorkerConnection

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


async def splice(exchange: Exchange, conn: WorkerConnection, resp: ResponseHead, *, watching: bool) -> bool:
    """Relay the worker's answer (head and body) to the client as it comes.

    Returns whether the worker connection can be reused. The exchange is complete when
    the whole body was relayed (or a stream was ended cleanly).
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
                await conn.wait_readable(None if watching else READ_TIMEOUT)
            except (TimeoutError, ConnectionResetError):
                return False
            if not conn.buffer and conn.eof:
                if framing == "close":
                    exchange.complete = True
                elif watching and scanner is not None and scanner.at_boundary:
                    exchange.send(LAST_CHUNK)  # the worker dropped the watch between events: end it cleanly
                return False
    finally:
        client.on_lost = None


async def read_answer(conn: WorkerConnection, resp: ResponseHead, timeout: float | None = READ_TIMEOUT) -> bytes:
    """The whole body of the worker's answer, decoded from its framing.

    UpstreamError (read, timeout) when the worker breaks off; HttpError (502) when the
    framing is broken.
    """
    framing = resp.framing
    if framing == "none":
        return b""
    parts: list[bytes] = []
    scanner = ChunkedScanner() if framing == "chunked" else None
    left = resp.length if framing == "length" else -1
    while True:
        if scanner is not None:
            data = conn.take()
            try:
                used = scanner.feed(data, parts)
            except HttpError as exc:
                raise HttpError(502, f"broken chunked answer: {exc.message}") from None
            if used < len(data):
                conn.buffer[:0] = data[used:]  # not ours: the connection is not reused (see release)
            if scanner.done:
                return b"".join(parts)
        elif left >= 0:
            data = conn.take(left)
            parts.append(data)
            left -= len(data)
            if not left:
                return b"".join(parts)
        else:
            parts.append(conn.take())
        if conn.eof and not conn.buffer:
            if framing == "close":
                return b"".join(parts)
            raise UpstreamError("read", "the connection closed inside the answer")
        try:
            await conn.wait_readable(timeout)
        except TimeoutError:
            raise UpstreamError("timeout", f"no byte of the answer within {timeout:.0f}s") from None


def ref(namespace: str | None, name: str) -> str:
    """``namespace/name`` (``name`` alone when cluster-scoped)."""
    return f"{namespace}/{name}" if namespace else name


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, for error answers."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
