"""The connections from the sidecar to one real worker API server (HTTP/1.1, keep-alive).

Requests are written as HTTP/1.1 heads of our own (the client's fields minus hop-by-hop
ones and its credentials, plus the worker's ``Host`` and credentials); bodies and
answers pass as bytes, never decompressed or re-encoded, so pass-through stays
byte-for-byte. Idle connections are kept for reuse (the most recent first) and
dropped as soon as the worker closes them.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Callable
from urllib.parse import urlsplit

from mkpolicy.kube.rest import RestConfig, TokenSource
from mkpolicy.sidecar.conn import Connection
from mkpolicy.sidecar.http1 import HOP_BY_HOP, MAX_HEAD, ResponseHead, parse_response_head

#: Seconds to connect (TCP and TLS handshake).
CONNECT_TIMEOUT = 10.0
#: Idle connections kept per worker, and for how long (seconds).
MAX_IDLE = 32
IDLE_SECONDS = 60.0
#: Connections open to one worker at most (watches included); more requests wait for one.
MAX_CONNECTIONS = 256

#: Request fields never forwarded: hop-by-hop, the client's credentials, what the sidecar sets itself.
_DROPPED = HOP_BY_HOP | {"authorization", "host", "expect", "proxy-authorization"}
#: Also dropped when the sidecar re-encodes the body (it sets them itself).
_DROPPED_REENCODED = _DROPPED | {"content-length", "transfer-encoding", "content-type", "accept", "accept-encoding"}


class UpstreamError(Exception):
    """The worker cannot be reached, or broke off (``reason``: connect, timeout, read)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class WorkerConnection(Connection):
    """One connection to the worker."""

    def __init__(self, pool: Upstream) -> None:
        super().__init__()
        self.pool = pool
        self.idle_since = 0.0
        #: Requests sent on this connection (a reused one may have been closed by the worker meanwhile).
        self.requests = 0
        #: The pool's configuration generation this connection was made with.
        self.generation = pool.generation
        #: Called on news (bytes, EOF, loss) instead of waking a coroutine, while set.
        self.on_event: Callable[[], None] | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.pool._forget(self)

    def wake(self) -> None:
        """News on the connection: to the callback answering from it, else to the waiting coroutine."""
        if self.on_event is not None:
            self.on_event()
        else:
            super().wake()

    async def response_head(self, method: str, timeout: float | None) -> ResponseHead:
        """The next final response head (informational 1xx answers skipped).

        UpstreamError when the worker closes first or sends no byte for ``timeout`` seconds;
        HttpError (502) when the answer is not HTTP.
        """
        while True:
            try:
                raw = await self.read_head(timeout, MAX_HEAD)
            except TimeoutError:
                raise UpstreamError("timeout", f"no answer within {timeout:.0f}s") from None
            except ConnectionResetError:
                raise UpstreamError("read", "the connection closed inside the answer's head") from None
            if raw is None:
                raise UpstreamError("read", "the connection closed before an answer")
            head = parse_response_head(raw, method)
            if head.status >= 200 or head.status == 101:
                return head


class Upstream:
    """A pool of HTTP/1.1 connections to one worker, authenticating as its kubeconfig says."""

    def __init__(self, name: str, config: RestConfig) -> None:
        self.name = name
        #: Bumped by :meth:`update_config`; connections of an older one are not reused.
        self.generation = 0
        self._configure(config)
        self._idle: list[WorkerConnection] = []
        #: Every open connection, idle or busy.
        self.connections: set[WorkerConnection] = set()
        self._connecting = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._closed = False

    def _configure(self, config: RestConfig) -> None:
        tokens = TokenSource(config)
        context = config.ssl_context()
        url = urlsplit(config.server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"worker {self.name}: not an http(s) URL: {config.server!r}")
        self.config = config
        self._tokens = tokens
        self._ssl: ssl.SSLContext | None = context
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        #: The ``Host`` field: the URL's authority as written.
        self.authority = url.netloc.rpartition("@")[2]
        #: A path prefix of the server URL (kept before every request path).
        self.prefix = url.path.rstrip("/")
        self.server_hostname = (config.tls_server_name or self.host) if context is not None else None

    def update_config(self, config: RestConfig) -> None:
        """The worker's kubeconfig changed (a rotated token or CA, another server).

        New connections use ``config``; idle connections are closed. Exchanges in flight
        finish on the connection they have. ValueError when ``config`` has no http(s) server.
        """
        self._configure(config)
        self.generation += 1
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.abort()

    # -- requests ------------------------------------------------------------------------------
    def head(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        *,
        reencoded: bool = False,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> bytes:
        """The request head for the worker: the client's fields minus hop-by-hop ones and its credentials.

        ``reencoded``: the sidecar sends a body of its own (or none) and asks for
        uncompressed JSON; the client's framing, content and accept fields are left out,
        ``extra`` fields (the body's) are added.
        """
        dropped = _DROPPED_REENCODED if reencoded else _DROPPED
        connection = [v for k, v in headers if k.lower() == "connection"]
        if connection:
            dropped = dropped | {t.strip().lower() for v in connection for t in v.split(",")}
        lines = [f"{method} {self.prefix}{target} HTTP/1.1", f"Host: {self.authority}"]
        lines.extend(f"{name}: {value}" for name, value in headers if name.lower() not in dropped)
        token = self._tokens.token()
        if token:
            lines.append(f"Authorization: Bearer {token}")
        if reencoded:
            lines.append("Accept: application/json")
        lines.extend(f"{name}: {value}" for name, value in extra)
        lines.append("\r\n")
        return "\r\n".join(lines).encode("latin-1")

    # -- connections -----------------------------------------------------------------------------
    def take_idle(self) -> WorkerConnection | None:
        """The most recently used idle connection, if one is ready (never waits)."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.eof and now - conn.idle_since < IDLE_SECONDS:
                return conn
            conn.abort()
        return None

    async def acquire(self, *, fresh: bool = False) -> WorkerConnection:
        """A connection: the most recently used idle one (unless ``fresh``), else a new one.

        UpstreamError (connect or timeout) when the worker cannot be reached.
        """
        if not fresh:
            idle = self.take_idle()
            if idle is not None:
                return idle
        while len(self.connections) + self._connecting >= MAX_CONNECTIONS:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
            if not fresh and self._idle:
                return await self.acquire()
        self._connecting += 1
        try:
            return await self._connect()
        finally:
            self._connecting -= 1
            self._wake_one()

    async def _connect(self) -> WorkerConnection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                _, conn = await loop.create_connection(
                    lambda: WorkerConnection(self),
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.server_hostname,
                )
        except TimeoutError:
            raise UpstreamError("timeout", f"no connection within {CONNECT_TIMEOUT:.0f}s") from None
        except (OSError, ssl.SSLError) as exc:
            text = str(exc)
            raise UpstreamError("connect", f"{type(exc).__name__}: {text}" if text else type(exc).__name__) from None
        if conn.lost:  # closed already (the worker's accept backlog): counted down by _forget
            raise UpstreamError("connect", "the connection closed at once")
        self.connections.add(conn)
        return conn

    def release(self, conn: WorkerConnection, reusable: bool) -> None:
        """Give a connection back: kept idle when ``reusable`` (its exchange complete), else closed."""
        if (
            reusable
            and not conn.eof
            and not conn.buffer
            and not self._closed
            and conn.generation == self.generation
            and len(self._idle) < MAX_IDLE
        ):
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
            self._wake_one()
        elif not conn.lost:
            conn.abort()

    def _forget(self, conn: WorkerConnection) -> None:
        """A connection is gone (closed by either side)."""
        if conn in self._idle:
            self._idle.remove(conn)
        self.connections.discard(conn)
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        """Close every connection (after the endpoints drained: what is left has no client any more)."""
        self._closed = True
        self._idle = []
        for conn in list(self.connections):
            conn.abort()
        await asyncio.sleep(0)
