"""The connections from the sidecar to one real worker API server (HTTP/1.1, keep-alive).

Requests are written as HTTP/1.1 heads of our own (the client's fields minus hop-by-hop
ones and its credentials, plus the worker's ``Host`` and credentials); bodies and
answers pass as bytes, never decompressed or re-encoded, so pass-through stays
byte-for-byte. Idle connections are kept for reuse (the most recent first) and
dropped as soon as the worker closes them.

A connection goes back to the pool only when its exchange ended exactly at a message
boundary: nothing left unread, no informational (1xx) or upgrade answer on the way, no
byte arriving while it is idle (a late second answer, unsolicited bytes). Anything else
closes it, so no client ever reads another exchange's answer.

A worker's kubeconfig ``proxy-url`` (an ``http://`` proxy) is honoured as client-go does
for https servers: a CONNECT tunnel, then TLS to the worker through it.

The client's identity fields (``Impersonate-*``, the front-proxy ``X-Remote-*`` ones) are
never forwarded: the worker would apply them with the sidecar's credentials.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from mkpolicy.kube.rest import RestConfig, TokenSource
from mkpolicy.sidecar.config import Limits
from mkpolicy.sidecar.conn import Connection, expire
from mkpolicy.sidecar.http1 import HOP_BY_HOP, IDENTITY_PREFIXES, MAX_HEAD, HttpError, ResponseHead, parse_response_head

#: Seconds to connect (TCP and TLS handshake).
CONNECT_TIMEOUT = 10.0
#: Idle connections kept per worker, and for how long (seconds).
MAX_IDLE = 32
IDLE_SECONDS = 60.0

#: Request fields never forwarded: hop-by-hop, the client's credentials, what the sidecar sets itself.
_DROPPED = (
    HOP_BY_HOP
    | {"authorization", "host", "expect", "proxy-authorization"}
    | {
        # what a client says about where a request came from is not relayed: the worker's audit log
        # would record it as the sidecar's word (the sidecar itself adds nothing)
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-real-ip",
    }
)
#: Also dropped when the sidecar re-encodes the body (it sets them itself).
_DROPPED_REENCODED = _DROPPED | {"content-length", "transfer-encoding", "content-type", "accept", "accept-encoding"}


class AnswerBudget:
    """Bytes of worker answers held whole at once (to be rewritten): the process's, or one worker's."""

    def __init__(self) -> None:
        self.used = 0

    def take(self, size: int, limit: int) -> bool:
        """Hold ``size`` more bytes if that stays within ``limit``."""
        if self.used + size > limit:
            return False
        self.used += size
        return True

    def give(self, size: int) -> None:
        """Release ``size`` bytes."""
        self.used -= size


#: TCP keepalive of worker connections, as client-go's dialer sets it (k8s.io/client-go/transport/cache.go:
#: ``net.Dialer{KeepAlive: 30 * time.Second}``, which Go applies as idle time and interval; Linux's 9
#: probes): a worker connection that dies silently is noticed even when no byte is due on it.
KEEPALIVE_SECONDS = 30
KEEPALIVE_PROBES = 9


def keepalive(transport: asyncio.BaseTransport | None) -> None:
    """Turn TCP keepalive on for ``transport``'s socket (where the platform has the options)."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in (
            ("TCP_KEEPIDLE", KEEPALIVE_SECONDS),
            ("TCP_KEEPINTVL", KEEPALIVE_SECONDS),
            ("TCP_KEEPCNT", KEEPALIVE_PROBES),
        ):
            if hasattr(socket, option):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


class Proxy:
    """An HTTP proxy the worker is reached through: a CONNECT tunnel, as client-go's transport opens one.

    Go's ``net/http`` Transport (``transport.go``, ``dialConn``) sends ``CONNECT host:port``
    with ``Proxy-Authorization: Basic`` from the proxy URL's user information, expects a
    2xx answer, then speaks TLS to the worker through the tunnel.
    """

    def __init__(self, host: str, port: int, target: str, authorization: str | None) -> None:
        self.host = host
        self.port = port
        #: ``host:port`` of the worker (IPv6 in brackets), the CONNECT request target.
        self.target = target
        self.authorization = authorization

    def request(self) -> bytes:
        """The CONNECT request head."""
        lines = [f"CONNECT {self.target} HTTP/1.1", f"Host: {self.target}"]
        if self.authorization:
            lines.append(f"Proxy-Authorization: {self.authorization}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def tunnel(self) -> socket.socket:
        """A connected socket through which the worker is reached. OSError when the proxy refuses."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
            await loop.sock_sendall(sock, self.request())
            raw = b""
            while b"\r\n\r\n" not in raw:  # the proxy sends nothing after its answer before we speak
                data = await loop.sock_recv(sock, 4096)
                if not data:
                    raise ConnectionResetError(f"proxy {self.host}:{self.port} closed the connection")
                raw += data
                if len(raw) > MAX_HEAD:
                    raise ConnectionError(f"proxy {self.host}:{self.port} sent an answer head over {MAX_HEAD} bytes")
            if not raw.endswith(b"\r\n\r\n"):
                raise ConnectionError(f"proxy {self.host}:{self.port} sent bytes after its answer to CONNECT")
            try:
                resp = parse_response_head(raw, "CONNECT")
            except HttpError as exc:
                raise ConnectionError(f"proxy {self.host}:{self.port}: {exc.message}") from None
            if not 200 <= resp.status < 300:
                raise ConnectionError(
                    f"proxy {self.host}:{self.port} refused CONNECT {self.target}: {resp.status} {resp.reason}".rstrip()
                )
        except BaseException:
            sock.close()
            raise
        return sock


def _proxy(name: str, config: RestConfig, host: str, port: int) -> Proxy | None:
    """The proxy of ``config`` (its ``proxy-url``), None without one. ValueError for one it cannot use."""
    if not config.proxy_url:
        return None
    url = urlsplit(config.proxy_url)
    if url.scheme != "http" or not url.hostname:
        raise ValueError(
            f"worker {name}: proxy-url {config.proxy_url!r}: expected an http:// proxy (CONNECT tunnel); "
            "https:// and socks5:// proxies are not supported by the sidecar"
        )
    if not config.uses_tls:
        raise ValueError(f"worker {name}: proxy-url is honoured for https servers only; found {config.server!r}")
    authorization = None
    if url.username is not None:
        secret = f"{unquote(url.username)}:{unquote(url.password or '')}"
        authorization = "Basic " + base64.b64encode(secret.encode()).decode("ascii")
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return Proxy(url.hostname, url.port or 80, target, authorization)


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
        #: In the idle pool (a byte arriving now poisons it: it is closed at once).
        self.pooled = False
        #: An informational (1xx) or upgrade answer came on it: never reused.
        self.tainted = False

    def _on_data(self) -> None:
        if self.pooled:  # unsolicited bytes (a late answer, garbage): nobody may read them
            self.pooled = False
            self.abort()
            return
        super()._on_data()

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
            if head.status >= 200:
                return head
            self.tainted = True  # what else it sent before its answer is not the next client's
            if head.status == 101:  # the sidecar never asks for an upgrade
                raise HttpError(502, "the worker switched protocols (101) on a request that did not ask for it")


class Upstream:
    """A pool of HTTP/1.1 connections to one worker, authenticating as its kubeconfig says."""

    def __init__(self, name: str, config: RestConfig, limits: Limits | None = None) -> None:
        self.name = name
        self.limits = limits or Limits()
        #: Bytes of this worker's answers being rewritten (``limits.workerAnswerBudgetBytes``).
        self.answers = AnswerBudget()
        #: Bumped by :meth:`update_config`; connections of an older one are not reused.
        self.generation = 0
        self._configure(config)
        self._idle: list[WorkerConnection] = []
        #: Every open connection, idle or busy.
        self.connections: set[WorkerConnection] = set()
        self._connecting = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._closed = False
        #: When the worker last answered (a new connection, or an exchange completed): monotonic seconds.
        self.answered_at = 0.0

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
        self.proxy = _proxy(self.name, config, self.host, self.port)

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
        for name, value in headers:
            key = name.lower()
            if key not in dropped and not key.startswith(IDENTITY_PREFIXES):
                lines.append(f"{name}: {value}")
        authorization = self._tokens.authorization()
        if authorization:
            lines.append(f"Authorization: {authorization}")
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
            conn.pooled = False
            if not conn.eof and not conn.lost and not conn.buffer and now - conn.idle_since < IDLE_SECONDS:
                return conn
            conn.abort()
        return None

    async def acquire(self, *, fresh: bool = False) -> WorkerConnection:
        """A connection: the most recently used idle one (unless ``fresh``), else a new one.

        UpstreamError (connect or timeout) when the worker cannot be reached, or no
        connection is free within ``workerWaitSeconds`` (all taken by watches and requests).
        """
        if not fresh:
            idle = self.take_idle()
            if idle is not None:
                return idle
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.worker_wait_seconds
        while len(self.connections) + self._connecting >= self.limits.max_worker_connections:
            waiter = loop.create_future()
            self._waiting.append(waiter)
            timer = loop.call_at(deadline, expire, waiter)
            try:
                await waiter
            except TimeoutError:
                raise UpstreamError(
                    "timeout",
                    f"all {self.limits.max_worker_connections} connections to the worker stayed busy for "
                    f"{self.limits.worker_wait_seconds:.0f}s",
                ) from None
            finally:
                timer.cancel()
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
            if not fresh:
                idle = self.take_idle()
                if idle is not None:
                    return idle
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
                if self.proxy is None:
                    _, conn = await loop.create_connection(
                        lambda: WorkerConnection(self),
                        self.host,
                        self.port,
                        ssl=self._ssl,
                        server_hostname=self.server_hostname,
                    )
                else:
                    sock = await self.proxy.tunnel()
                    _, conn = await loop.create_connection(
                        lambda: WorkerConnection(self), sock=sock, ssl=self._ssl, server_hostname=self.server_hostname
                    )
        except TimeoutError:
            raise UpstreamError("timeout", f"no connection within {CONNECT_TIMEOUT:.0f}s") from None
        except (OSError, ssl.SSLError) as exc:
            text = str(exc)
            raise UpstreamError("connect", f"{type(exc).__name__}: {text}" if text else type(exc).__name__) from None
        if conn.lost:  # closed already (the worker's accept backlog): counted down by _forget
            raise UpstreamError("connect", "the connection closed at once")
        keepalive(conn.transport)
        self.connections.add(conn)
        self.answered_at = time.monotonic()
        return conn

    def release(self, conn: WorkerConnection, reusable: bool) -> None:
        """Give a connection back: kept idle when ``reusable`` (its exchange complete), else closed."""
        if reusable:
            self.answered_at = time.monotonic()
        if (
            reusable
            and not conn.tainted
            and not conn.eof
            and not conn.buffer
            and not self._closed
            and conn.generation == self.generation
            and len(self._idle) < MAX_IDLE
        ):
            conn.idle_since = time.monotonic()
            conn.pooled = True
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
