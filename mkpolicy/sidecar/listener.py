"""A worker endpoint's listener: TLS, HTTP/1.1 keep-alive, one request at a time per connection.

Each accepted connection runs one coroutine that reads a request head, hands an
:class:`Exchange` to the handler and, once the answer is complete, reads the next
request on the same connection. The handler answers through the exchange: a whole
response, or a head followed by a streamed body.

Shutdown (:meth:`Listener.close`): stop accepting, close idle connections, end streamed
answers (watches) at a clean boundary, let requests in flight finish within the grace
period, then cut what is left.

Bounds (:class:`~mkpolicy.sidecar.config.Limits`), all before a client is authenticated:
the listener accepts sockets itself and closes those above ``maxConnections`` before any
TLS work; a handshake has ``handshakeSeconds``; a request head is read as it arrives by
llhttp (:class:`~mkpolicy.sidecar.http1.HeadReader`), refused at its first bad byte or
above ``maxHeadBytes``/``maxHeaderFields``, and must be whole within ``headSeconds`` of
its first byte. A client answered 401 is disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable

from mkpolicy.sidecar.config import Limits
from mkpolicy.sidecar.conn import Connection
from mkpolicy.sidecar.http1 import (
    ChunkedScanner,
    HeadReader,
    HttpError,
    RequestHead,
    response_head,
)
from mkpolicy.sidecar.status import StatusError

log = logging.getLogger("mkpolicy.sidecar.listener")

#: Seconds to wait for the next byte of a request head or body.
READ_TIMEOUT = 60.0
#: An unread request body up to this size is read and dropped to keep the connection.
DISCARD_LIMIT = 1024 * 1024
#: Seconds and bytes at most that a refused connection is read (and dropped) before it is closed.
LINGER = 2.0
LINGER_BYTES = 256 * 1024

Handler = Callable[["Exchange"], Awaitable[None]]
#: Takes a request from a connection's buffer and answers it from callbacks (True), or declines.
FastHook = Callable[["ClientConnection"], bool]


class Exchange:
    """One request and its answer on a client connection."""

    def __init__(self, conn: ClientConnection, head: RequestHead) -> None:
        self.conn = conn
        self.head = head
        self.started = time.perf_counter()
        #: The response head has been written.
        self.responded = False
        #: The status code answered (0 until :meth:`respond`; pass-through answers leave it 0).
        self.status = 0
        #: The response is complete (the connection may carry another request).
        self.complete = False
        #: The connection must close after this exchange.
        self.close_after = head.close
        #: Set by the listener's shutdown: end a streamed answer at the next clean boundary.
        self.stopping = False
        self._wake_stream: Callable[[], None] | None = None
        self._body_left = head.length if head.framing == "length" else 0
        self._scanner = ChunkedScanner() if head.framing == "chunked" else None
        #: Payload bytes of a chunked body so far (bounded by ``maxBodyBytes``).
        self._payload = 0
        self._continue = head.fields.get("expect", "").lower() == "100-continue"
        #: When a list: the body's payload is appended to it as it is read (the request log's copy).
        self.tap: list[bytes] | None = None

    # -- the request body ------------------------------------------------------------------------
    @property
    def body_done(self) -> bool:
        """The request body has been read completely (or there is none)."""
        return self._scanner.done if self._scanner is not None else self._body_left == 0

    def body_now(self) -> bytes:
        """The whole Content-Length body, when the connection has received all of it (the fast path's)."""
        assert self._scanner is None and len(self.conn.buffer) >= self._body_left and not self._continue
        data = self.conn.take(self._body_left) if self._body_left else b""
        self._body_left = 0
        return data

    def _send_continue(self) -> None:
        if self._continue:
            self._continue = False
            self.conn.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    async def body_part(self, payload: list[bytes] | None = None) -> bytes:
        """The next bytes of the request body as they came (chunked framing included); b"" at its end.

        ``payload``: a chunked body's data (its framing taken off) is appended to it too.
        ConnectionResetError when the client goes away inside the body.
        """
        if self.body_done:
            return b""
        self._send_continue()
        conn = self.conn
        while not conn.buffer:
            if conn.eof:
                raise ConnectionResetError("the client closed inside the request body")
            await conn.wait_readable(READ_TIMEOUT)
        if self._scanner is not None:
            data = conn.take()
            chunks: list[bytes] = []
            try:
                used = self._scanner.feed(data, chunks)
            except HttpError as exc:
                self.close_after = True
                raise StatusError(400, f"mkpolicy sidecar: {exc.message}") from None
            self._payload += sum(len(p) for p in chunks)
            if self._payload > conn.limits.max_body_bytes:
                self.close_after = True
                raise StatusError(413, f"mkpolicy sidecar: the request body exceeds {conn.limits.max_body_bytes} bytes")
            if payload is not None:
                payload += chunks
            if self.tap is not None:
                self.tap += chunks
            if used < len(data):  # the next request (pipelined): back to the buffer
                conn.buffer[:0] = data[used:]
                data = data[:used]
            return data
        data = conn.take(self._body_left)
        self._body_left -= len(data)
        if self.tap is not None:
            self.tap.append(data)
        return data

    async def read_body(self, limit: int) -> bytes:
        """The whole request body, decoded from its framing (StatusError 413 above ``limit`` or ``maxBodyBytes``)."""
        limit = min(limit, self.conn.limits.max_body_bytes)
        parts: list[bytes] = []
        if self._scanner is not None:
            while not self.body_done:
                await self.body_part(parts)  # the chunks' data, as the connection's scanner reads them
                if self._payload > limit:
                    self.close_after = True
                    raise StatusError(413, f"mkpolicy sidecar: the request body exceeds {limit} bytes")
            return b"".join(parts)
        if self._body_left > limit:
            self.close_after = True
            raise StatusError(413, f"mkpolicy sidecar: the request body exceeds {limit} bytes")
        while not self.body_done:
            parts.append(await self.body_part())
        return b"".join(parts)

    # -- the response ------------------------------------------------------------------------------
    def send(self, data: bytes, *, complete: bool = True) -> None:
        """Write response bytes (the head first); ``complete`` when these end the response."""
        self.responded = True
        self.conn.write(data)
        if complete:
            self.complete = True

    def respond(self, code: int, headers: list[tuple[str, str]], body: bytes, reason: str | None = None) -> None:
        """A whole response with ``body`` (Content-Length set here)."""
        self.status = code
        head = response_head(code, [*headers, ("Content-Length", str(len(body)))], reason)
        if self.head.method == "HEAD":
            body = b""  # the length a GET would have, no body (RFC 9110 9.3.2)
        self.send(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self.conn.write(body)

    def respond_status(self, exc: StatusError) -> None:
        """A Kubernetes ``Status`` error answer (with ``Retry-After`` when its details say when)."""
        body = json.dumps(exc.body()).encode()
        headers = [("Content-Type", "application/json")]
        retry = (exc.details or {}).get("retryAfterSeconds")
        if retry is not None:
            headers.append(("Retry-After", str(retry)))
        self.respond(exc.code, headers, body)

    def streaming(self, wake: Callable[[], None] | None) -> None:
        """Mark a long streamed answer (a watch): shutdown sets ``stopping`` and calls ``wake``."""
        self._wake_stream = wake
        if wake is None:
            self.conn.listener._streams.discard(self)
        else:
            self.conn.listener._streams.add(self)
            if self.conn.listener.closing:
                self.stop_stream()

    def stop_stream(self) -> None:
        """Ask the streamed answer to end at its next clean boundary."""
        self.stopping = True
        if self._wake_stream is not None:
            self._wake_stream()


class ClientConnection(Connection):
    """One client connection: reads requests one after the other and hands them to the handler.

    Request heads are read by llhttp as their bytes arrive (:meth:`_scan`), in the
    protocol callback. The listener's ``fast`` hook may then take the request at once
    and answer it from callbacks as well (``fast_busy``): the connection's coroutine
    stays parked meanwhile. The hook hands the exchange back to the coroutine
    (:meth:`hand_over`) whenever it needs to wait for anything else, and declines
    requests it does not serve (leaving their parsed head in ``next_head``).
    """

    def __init__(self, listener: Listener) -> None:
        super().__init__()
        self.listener = listener
        self.limits = listener.limits
        #: A request on this connection carried a valid credential (it holds a reserved slot).
        self.trusted = False
        #: The client's address (its connections are counted against ``maxConnectionsPerAddress``).
        self.peer = ""
        #: No exchange in progress (shutdown closes idle connections at once).
        self.idle = True
        self.exchange: Exchange | None = None
        #: An exchange answered from callbacks is in progress.
        self.fast_busy = False
        #: The rest of an exchange started from callbacks, for the coroutine to finish.
        self.handover: Callable[[], Awaitable[None]] | None = None
        #: The next request's head, parsed (and taken from the buffer); the fast hook leaves
        #: here the heads it declines.
        self.next_head: RequestHead | None = None
        #: Why the next request head cannot be read (answered, then the connection closes).
        self.head_error: HttpError | None = None
        #: The coroutine waits for a request (the fast hook may take it).
        self.parked = False
        #: The fast hook declined ``next_head`` already (the coroutine does not offer it again).
        self.offered = False
        self.last_active = self.loop.time()
        #: When the request head being read must be whole (None: no head begun).
        self.head_deadline: float | None = self.last_active + self.limits.head_seconds
        self._reader: HeadReader | None = None
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.listener._connections.add(self)
        self.head_deadline = self.loop.time() + self.limits.head_seconds
        self._task = self.loop.create_task(self._serve())

    def authenticated(self) -> None:
        """A request on this connection was authenticated: it no longer counts as unauthenticated."""
        if not self.trusted:
            self.trusted = True
            self.listener._untrusted.pop(self, None)

    @property
    def between_requests(self) -> bool:
        """Idle between two requests: no exchange in progress, nothing of the next one received."""
        return self.idle and self.exchange is None and not self.fast_busy and not self.buffer

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.listener._untrusted.pop(self, None)
        if self in self.listener._connections:
            self.listener._connections.discard(self)
            self.listener._release(self.peer)

    # -- reading request heads ---------------------------------------------------------------------
    def _scan(self) -> bool:
        """Read what arrived of the next request head: True when a head (or why it is refused) is ready."""
        if self.next_head is not None or self.head_error is not None:
            return True
        if not self.buffer:
            return False
        reader = self._reader
        if reader is None:
            reader = self._reader = HeadReader(self.limits.max_head_bytes, self.limits.max_header_fields)
            if self.head_deadline is None:
                self.head_deadline = self.loop.time() + self.limits.head_seconds
        try:
            end = reader.scan(self.buffer)
            if end is None:
                return False
            head = reader.head()
        except HttpError as exc:
            self.head_error = exc
            self._in_head = False
            return True
        self.take(end)
        self._reader = None
        self._in_head = False
        self.head_deadline = None
        self.next_head = head
        return True

    # -- the fast hook's side --------------------------------------------------------------------
    def _on_data(self) -> None:
        if self.fast_busy:
            return  # the next request (pipelined) waits in the buffer
        if self.idle and self.exchange is None and self._scan() and self.head_error is None:
            fast = self.listener.fast
            if self.parked and not self.listener.closing and fast is not None and not self.offered:
                if fast(self):
                    return
                self.offered = True
        self.wake()

    def fast_started(self, exchange: Exchange) -> None:
        """The fast hook took ``exchange``."""
        self.fast_busy = True
        self.idle = False
        self.exchange = exchange

    def fast_done(self, exchange: Exchange) -> None:
        """The fast hook answered ``exchange`` completely; go on with the next request."""
        self.fast_busy = False
        self.exchange = None
        self.idle = True
        self.last_active = self.loop.time()
        if exchange.close_after or self.listener.closing or not self.writable:
            self.close()
        elif self.buffer:
            self._on_data()

    def hand_over(self, job: Callable[[], Awaitable[None]]) -> None:
        """The coroutine finishes the exchange the fast hook started (``job``)."""
        self.fast_busy = False
        self.handover = job
        self.wake()

    # -- the coroutine --------------------------------------------------------------------------
    async def _park(self, timeout: float) -> None:
        """Wait for news between requests, ``timeout`` seconds at most."""
        self.parked = True
        self._in_head = True  # a partial head may exceed HIGH_WATER (maxHeadBytes bounds it)
        if self._read_paused and self.transport is not None:
            self._read_paused = False
            self.transport.resume_reading()
        try:
            await self.wait_readable(max(timeout, 0.0))
        except TimeoutError:
            pass
        finally:
            self.parked = False
            self._in_head = False

    def _wait_limit(self) -> float:
        """Seconds left to wait for the next request: the head's deadline, else the idle limit (<= 0: over)."""
        now = self.loop.time()
        if self.head_deadline is not None:
            return self.head_deadline - now
        return self.last_active + self.limits.idle_seconds - now

    async def _serve(self) -> None:
        listener = self.listener
        try:
            while True:
                job = self.handover
                if job is not None:
                    self.handover = None
                    exchange = self.exchange
                    await job()
                    self.exchange = None
                    if exchange is None or not await self._after(exchange):
                        return
                    continue
                if self.fast_busy:
                    if self.eof:
                        return  # the answer from callbacks goes nowhere (or out as the connection closes)
                    await self._park(self.limits.idle_seconds)
                    continue
                if listener.closing:
                    return
                if not self._scan():
                    left = self._wait_limit()
                    if self.eof or left <= 0:
                        return  # a client too slow to send its head is dropped, as Go's ReadHeaderTimeout does
                    await self._park(left)
                    continue
                if self.head_error is not None:
                    await self._refuse(self.head_error)
                    return
                head = self.next_head
                assert head is not None
                if listener.fast is not None and not self.offered and listener.fast(self):
                    continue
                head = self.next_head
                if head is None:  # (the hook took it)
                    continue
                self.next_head = None
                self.offered = False
                if head.framing == "length" and head.length > self.limits.max_body_bytes:
                    await self._refuse(HttpError(413, f"the request body exceeds {self.limits.max_body_bytes} bytes"))
                    return
                self.idle = False
                exchange = self.exchange = Exchange(self, head)
                try:
                    await listener.handler(exchange)
                finally:
                    self.exchange = None
                if not await self._after(exchange):
                    return
        except (TimeoutError, ConnectionError):
            pass
        except Exception:
            log.exception("request handling failed")
            self.abort()
        finally:
            self.idle = True
            self.close()

    async def _after(self, exchange: Exchange) -> bool:
        """After an exchange: whether the connection carries another request."""
        self.last_active = self.loop.time()
        if exchange.status == 401:
            exchange.close_after = True  # an unauthenticated client holds nothing between requests
        if not exchange.complete or not self.writable:
            self.abort()  # the client must see the answer broken off
            return False
        if exchange.close_after or not await self._finish_body(exchange):
            return False
        self.idle = True
        return True

    async def _finish_body(self, exchange: Exchange) -> bool:
        """Read and drop what the handler left of the request body; False when the connection must close."""
        if exchange._continue and not exchange.body_done:
            return False  # the client waits for our go before it sends the body: it never got it
        dropped = 0
        while not exchange.body_done:
            dropped += len(await exchange.body_part())
            if dropped > DISCARD_LIMIT:
                return False
        return True

    async def _refuse(self, exc: HttpError) -> None:
        """Answer a request that cannot be read, then close (after the client stops sending)."""
        body = json.dumps(StatusError(exc.code, f"mkpolicy sidecar: {exc.message}").body()).encode()
        head = response_head(
            exc.code,
            [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Connection", "close")],
        )
        self.write(head + body)
        # Closing with unread bytes would reset the connection and could lose the answer:
        # drop what the client still sends until it pauses (a lingering close, bounded in
        # time and bytes: a client that goes on sending is cut).
        deadline = self.loop.time() + LINGER
        dropped = 0
        while not self.eof and self.loop.time() < deadline and dropped <= LINGER_BYTES:
            dropped += len(self.take())
            try:
                await self.wait_readable(0.1)
            except TimeoutError:
                break


def _close_if_cancelled(client: socket.socket, task: asyncio.Task[None]) -> None:
    if task.cancelled():
        client.close()


def small_tls_buffers() -> None:
    """Give asyncio's TLS connections a receive buffer of one TLS record instead of 256 KiB.

    asyncio's ``SSLProtocol`` (``Lib/asyncio/sslproto.py``) allocates a zero-filled
    (so resident) ``max_size`` buffer, 256 KiB, for every TLS connection and reads that
    much at a time: 600 idle connections held 160 MiB. A TLS record carries at most
    16 KiB, so reading 64 KiB at a time costs nothing in throughput. Only the class
    default is changed, and only when it is the value this was measured against.
    """
    from asyncio import sslproto

    if getattr(sslproto.SSLProtocol, "max_size", None) == 256 * 1024:
        sslproto.SSLProtocol.max_size = TLS_READ_SIZE


#: Bytes read from a TLS connection at a time (see :func:`small_tls_buffers`).
TLS_READ_SIZE = 64 * 1024


class Listener:
    """The TLS listener of one worker endpoint."""

    def __init__(
        self,
        handler: Handler,
        ssl_context: ssl.SSLContext | None,
        fast: FastHook | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.handler = handler
        self.fast = fast
        self.ssl_context = ssl_context
        self.limits = limits or Limits()
        self.closing = False
        #: Client connections refused because ``maxConnections`` were open.
        self.refused = 0
        self._socks: list[socket.socket] = []
        self._accepting: list[asyncio.Task[None]] = []
        self._handshakes: set[asyncio.Task[None]] = set()
        self._connections: set[ClientConnection] = set()
        #: Connections counted against the limit: handshaking or open.
        self._count = 0
        #: Handshakes and connections not authenticated yet, oldest first -> (client address, how to end them).
        self._untrusted: dict[object, tuple[str, Callable[[], object]]] = {}
        #: Unauthenticated connections ended to make room (``reservedConnections``).
        self.evicted = 0
        #: Connections (handshaking or open) per client address.
        self._per_peer: dict[str, int] = {}
        #: Handshakes ended to make room, whose slot was freed already.
        self._evicted: set[asyncio.Task[None]] = set()
        self._streams: set[Exchange] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: an ephemeral port) at every address it resolves to; returns the bound port."""
        small_tls_buffers()
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        seen: set[tuple[int, object]] = set()
        try:
            for family, kind, proto, _, address in infos:
                if (family, address[0]) in seen:
                    continue
                seen.add((family, address[0]))
                sock = socket.socket(family, kind, proto)
                self._socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], port, *address[2:]))
                sock.listen(256)
                sock.setblocking(False)
                port = sock.getsockname()[1]  # the others bind the same (ephemeral) port
        except OSError:
            for sock in self._socks:
                sock.close()
            self._socks = []
            raise
        for sock in self._socks:
            self._accepting.append(loop.create_task(self._accept(sock), name=f"accept-{port}"))
        return port

    async def _accept(self, sock: socket.socket) -> None:
        """Accept connections; those above the limit are closed before any TLS work."""
        loop = asyncio.get_running_loop()
        while not self.closing:
            try:
                client, address = await loop.sock_accept(sock)
            except OSError as exc:  # out of file descriptors: wait for some to be released
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            peer = str(address[0]) if isinstance(address, tuple) else str(address)
            limits = self.limits
            if (self._per_peer.get(peer, 0) >= limits.max_connections_per_address and not self._make_room(peer)) or (
                self._count >= limits.max_connections and not self._make_room(None)
            ):
                self.refused += 1
                with contextlib.suppress(OSError):  # a reset, not a lingering close: nothing is kept
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()
                continue
            if len(self._untrusted) >= self.limits.max_connections - self.limits.reserve:
                # the slots left are kept for authenticated clients (Kueue): the oldest
                # unauthenticated connection makes room, so idle or slow ones cannot lock Kueue out
                self._end_untrusted(None)
            self._count += 1
            self._per_peer[peer] = self._per_peer.get(peer, 0) + 1
            task = loop.create_task(self._handshake(client, peer))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)
            # a handshake ended before it ran (made room for a newer one) never closed its socket
            task.add_done_callback(functools.partial(_close_if_cancelled, client))
            self._untrusted[task] = (peer, functools.partial(self._evict_handshake, task, peer))
            # sock_accept returns at once while the backlog holds connections: without a turn of the
            # loop here a burst would be accepted (and its oldest ended to make room) before any of
            # them is read, a probe among them included
            await asyncio.sleep(0)

    async def _handshake(self, client: socket.socket, peer: str) -> None:
        loop = asyncio.get_running_loop()
        made: list[ClientConnection] = []

        def protocol() -> ClientConnection:
            made.append(ClientConnection(self))
            made[0].peer = peer
            return made[0]

        task = asyncio.current_task()
        try:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is None:
                await loop.connect_accepted_socket(protocol, client)
            else:
                await loop.connect_accepted_socket(
                    protocol, client, ssl=self.ssl_context, ssl_handshake_timeout=self.limits.handshake_seconds
                )
        except BaseException:  # a failed or timed-out handshake (or shutdown): nothing was made
            self._untrusted.pop(task, None)
            if task in self._evicted:
                self._evicted.discard(task)  # counted out when it was evicted
            elif not made or made[0] not in self._connections:
                self._release(peer)
            client.close()
            if made and made[0].transport is not None:
                made[0].abort()
            return
        if self._untrusted.pop(task, None) is not None and made and not made[0].trusted and made[0].writable:
            self._untrusted[made[0]] = (peer, functools.partial(self._evict_connection, made[0]))

    def _make_room(self, peer: str | None) -> bool:
        """End one connection to make room for a new one from ``peer`` (None: from anywhere); False: none may.

        The oldest unauthenticated connection (of ``peer``) goes first, else the authenticated
        connection idle the longest between two requests (of ``peer``, else of the address
        holding the most connections): a client may close an idle keep-alive connection at any
        time (RFC 9112 9.6), and Go's transport then sends its next request on a new one. So
        neither a flood from the probes' own address nor a token holder's idle connections
        keep the kubelet or Kueue out; a request or a watch in progress is never ended.
        """
        if self._end_untrusted(peer):
            return True
        idle = [c for c in self._connections if c.trusted and c.between_requests and (peer is None or c.peer == peer)]
        if not idle:
            return False
        if peer is None:
            top = max(self._per_peer.get(c.peer, 0) for c in idle)
            idle = [c for c in idle if self._per_peer.get(c.peer, 0) == top]
        self._evict_connection(min(idle, key=lambda c: c.last_active))
        self.evicted += 1
        return True

    def _end_untrusted(self, peer: str | None) -> bool:
        """End the oldest unauthenticated connection or handshake (of ``peer``); False: there is none."""
        for key, (owner, evict) in self._untrusted.items():
            if peer is None or owner == peer:
                del self._untrusted[key]
                evict()
                self.evicted += 1
                return True
        return False

    def _evict_handshake(self, task: asyncio.Task[None], peer: str) -> None:
        """End a handshake to make room; its slot is free at once (a burst of accepts sees it)."""
        self._evicted.add(task)
        self._release(peer)
        task.cancel()

    def _evict_connection(self, conn: ClientConnection) -> None:
        """End an unauthenticated connection to make room; its slot is free at once."""
        if conn in self._connections:
            self._connections.discard(conn)
            self._release(conn.peer)
        conn.abort()

    def _release(self, peer: str) -> None:
        """A connection's slot (and its address's) is free."""
        self._count -= 1
        left = self._per_peer.get(peer, 0) - 1
        if left > 0:
            self._per_peer[peer] = left
        else:
            self._per_peer.pop(peer, None)

    @property
    def connections(self) -> int:
        """Open client connections."""
        return len(self._connections)

    def end_streams(self) -> None:
        """End every streamed answer (the watches) at its next clean boundary; its clients watch again."""
        for stream in list(self._streams):
            stream.stop_stream()

    async def close(self, grace: float) -> None:
        """Stop listening, end watches cleanly, drain requests in flight (at most ``grace`` seconds)."""
        self.closing = True
        for task in self._accepting:
            task.cancel()
        await asyncio.gather(*self._accepting, return_exceptions=True)
        self._accepting = []
        for sock in self._socks:
            sock.close()
        self._socks = []
        for task in list(self._handshakes):
            task.cancel()
        self.end_streams()
        deadline = time.monotonic() + grace
        while True:
            for conn in list(self._connections):
                if conn.idle and not conn.buffer:
                    conn.close()
            busy = [c for c in self._connections if not c.idle or c.buffer]
            if not busy or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.01)
        for conn in list(self._connections):
            conn.abort()
        tasks = [c._task for c in self._connections if c._task is not None and not c._task.done()]
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
