"""Pass-through on the wire: a worker endpoint in front of a scripted HTTP/1.1 worker.

The worker here answers with exactly the bytes a test gives it (chunked bodies, streams,
closes, garbage), so what reaches the client can be compared byte for byte, and what
the worker receives can be checked (credentials swapped, hop-by-hop fields dropped).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sidecar_harness import DATA

import mkpolicy
from mkpolicy.kube.rest import RestConfig
from mkpolicy.sidecar.config import WIRE_VERBS, AllowPath, AllowRule, Limits
from mkpolicy.sidecar.contract import Contract
from mkpolicy.sidecar.contract import build as build_contract
from mkpolicy.sidecar.endpoints import Credentials, load_or_create
from mkpolicy.sidecar.events import EventRecorder
from mkpolicy.sidecar.http1 import LAST_CHUNK, ChunkedScanner, RequestHead, chunk, parse_request_head
from mkpolicy.sidecar.kueueconfig import KueueInfo
from mkpolicy.sidecar.listener import Exchange, Listener
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.policies import PolicySet
from mkpolicy.sidecar.proxy import WorkerEndpoint
from mkpolicy.sidecar.requestlog import RequestLog
from mkpolicy.sidecar.upstream import Upstream

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=[True, False], ids=["fast", "slow"])
def fast(request: pytest.FixtureRequest) -> bool:
    """Each test runs with the callbacks' fast path on and off (the coroutine answers everything)."""
    return bool(request.param)


Script = Callable[["Request", asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Request:
    """What the worker received."""

    raw_head: bytes
    head: RequestHead
    body: bytes  # as it came (chunked framing included)
    connection: int


@dataclass
class FakeWorker:
    """A scripted HTTP/1.1 worker (plain TCP): records requests, answers what the script writes."""

    script: Script
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    closed: int = 0
    port: int = 0
    server: asyncio.Server | None = None
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def start(self) -> FakeWorker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.writers.append(writer)
        try:
            while True:
                try:
                    raw = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                head = parse_request_head(raw)
                body = b""
                if head.framing == "length":
                    body = await reader.readexactly(head.length)
                elif head.framing == "chunked":
                    scanner = ChunkedScanner()
                    while not scanner.done:
                        data = await reader.read(1)
                        if not data:
                            return
                        scanner.feed(data)
                        body += data
                request = Request(raw, head, body, number)
                self.requests.append(request)
                await self.script(request, reader, writer)
                if writer.is_closing():
                    return
        finally:
            self.closed += 1
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in self.writers:
            writer.close()
        await asyncio.sleep(0.01)


#: The transport tests use any path: the wire contract widened to every request of the groups they use
#: (tests/sidecar/test_sidecar_contract.py holds the sidecar to the contract itself).
ALLOW_ALL = [
    AllowRule(
        reason="transport tests",
        verbs=list(WIRE_VERBS),
        group=group,
        resource="*",
        subresource="*",
        query=["*"],
        accept=["*"],
        content_types=["*"],
    )
    for group in ("", "tekton.dev", "batch")
]


class StubHub:
    """The sidecar as an endpoint sees it, with no policy kinds: everything passes through."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self.origin = "multikueue"
        self.credentials: Credentials = load_or_create(None, ["w"], ["127.0.0.1"])
        self.policies: PolicySet | None = PolicySet((), "none")
        self.events = EventRecorder(lambda: None, self.metrics)
        self.kueue: KueueInfo | None = None
        self.request_log: RequestLog | None = None
        #: The wire contract's widening (``wire.allow``).
        self.allow: list[AllowRule] = list(ALLOW_ALL)
        self.allow_paths: list[AllowPath] = [AllowPath(reason="transport tests", path="/*", methods=["GET", "HEAD"])]
        self.failures: list[str] = []

    @property
    def contract(self) -> Contract:
        return build_contract(self.kueue, self.policies, self.allow, self.allow_paths)

    def worker_problem(self, cluster: str) -> str | None:
        return None

    def worker_failed(self, cluster: str, message: str) -> None:
        self.failures.append(message)

    async def manager_object(self, *args: Any) -> Any:
        raise AssertionError("no policy kinds here")

    def cached_manager_object(self, *args: Any) -> Any:
        raise AssertionError("no policy kinds here")

    async def offload(self, key: object, fn: Callable[..., Any], *args: Any, items: int = 1) -> Any:
        return fn(*args)


@dataclass
class Wire:
    worker: FakeWorker
    hub: StubHub
    listener: Listener
    upstream: Upstream
    port: int
    #: Requests the connection coroutine answered or finished (not the callbacks' fast path alone).
    slow: list[str]

    @property
    def token(self) -> str:
        return self.hub.credentials.tokens["w"]

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        ctx = ssl.create_default_context(cadata=self.hub.credentials.ca.cert_pem.decode())
        return await asyncio.open_connection("127.0.0.1", self.port, ssl=ctx, limit=1 << 24)

    def get(self, path: str, *extra: str, method: str = "GET", token: str | None = None) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", "Host: sidecar", f"Authorization: Bearer {token or self.token}", *extra]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def metric(self, name: str, **labels: str) -> float:
        return self.hub.metrics.registry.get_sample_value(name, labels) or 0.0


@contextlib.asynccontextmanager
async def wire(
    script: Script,
    *,
    worker_port: int | None = None,
    fast: bool = True,
    hub: StubHub | None = None,
    limits: Limits | None = None,
) -> AsyncIterator[Wire]:
    worker = await FakeWorker(script).start()
    hub = hub or StubHub()
    upstream = Upstream(
        "w", RestConfig(server=f"http://127.0.0.1:{worker_port or worker.port}", token="worker-token"), limits
    )
    endpoint = WorkerEndpoint(hub, upstream)
    slow: list[str] = []
    answer_request = endpoint.answer_request

    async def recording(exchange: Exchange, sent: Any) -> None:
        slow.append(exchange.head.target)
        await answer_request(exchange, sent)

    endpoint.answer_request = recording  # type: ignore[method-assign]
    listener = Listener(endpoint.handle, hub.credentials.server_context(), endpoint.fast if fast else None, limits)
    port = await listener.start("127.0.0.1", 0)
    try:
        yield Wire(worker, hub, listener, upstream, port, slow)
    finally:
        await listener.close(1.0)
        await upstream.close()
        await worker.stop()


async def read_response(reader: asyncio.StreamReader, method: str = "GET") -> bytes:
    """One whole response as raw bytes (head and body in their framing)."""
    head = await reader.readuntil(b"\r\n\r\n")
    fields = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        if line:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
    status = int(head.split(b" ")[1])
    if method == "HEAD" or status in (204, 304) or status < 200:
        return head
    if fields.get("transfer-encoding") == "chunked":
        scanner, body = ChunkedScanner(), b""
        while not scanner.done:
            data = await reader.read(1)
            if not data:
                raise ConnectionResetError("cut inside a chunked body")
            scanner.feed(data)
            body += data
        return head + body
    if "content-length" in fields:
        return head + await reader.readexactly(int(fields["content-length"]))
    return head + await reader.read()


def answer(*lines: str, body: bytes = b"") -> bytes:
    return ("\r\n".join(["HTTP/1.1 200 OK", *lines]) + "\r\n\r\n").encode() + body


def replying(*responses: bytes, close: bool = False) -> Script:
    """A script answering each request with the next response (the last one repeated)."""
    count = 0

    async def script(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        writer.write(responses[min(count, len(responses) - 1)])
        count += 1
        await writer.drain()
        if close:
            writer.close()

    return script


JSON_ANSWER = answer(
    "Audit-Id: 1", "Content-Type: application/json", "Content-Length: 11", "X-Order: z", body=b'{"kind":"x"}'[:11]
)


def test_keep_alive_credentials_and_headers(fast: bool) -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER), fast=fast) as w:
            reader, writer = await w.connect()
            for i in range(3):
                writer.write(
                    w.get(
                        f"/api/v1/namespaces/{i}",
                        "X-Custom: keep me",
                        "Connection: X-Hop",
                        "X-Hop: 1",
                        "Keep-Alive: timeout=5",
                        "TE: trailers",
                        "Accept: application/json",
                    )
                )
                assert await read_response(reader) == JSON_ANSWER
            # pipelined: two requests in one write, answered in order
            writer.write(w.get("/api/v1/a") + w.get("/api/v1/b"))
            assert await read_response(reader) == JSON_ANSWER
            assert await read_response(reader) == JSON_ANSWER
            writer.close()
            assert w.worker.connections == 1  # one worker connection for everything, kept alive
            first = w.worker.requests[0]
            assert first.raw_head == (
                b"GET /api/v1/namespaces/0 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Custom: keep me\r\n"
                b"Accept: application/json\r\nAuthorization: Bearer worker-token\r\n\r\n" % w.worker.port
            )
            assert [r.head.target for r in w.worker.requests] == [
                "/api/v1/namespaces/0",
                "/api/v1/namespaces/1",
                "/api/v1/namespaces/2",
                "/api/v1/a",
                "/api/v1/b",
            ]
            assert w.metric("mkpolicy_sidecar_requests_total", cluster="w", policy="", verb="get", code="200") == 3
            assert w.metric("mkpolicy_sidecar_requests_total", cluster="w", policy="", verb="list", code="200") == 2
            assert w.metric("mkpolicy_sidecar_request_duration_seconds_count", cluster="w", policy="", verb="get") == 3
            assert w.metric("mkpolicy_sidecar_inflight_requests") == 0
            # the first request opens the worker connection; with it kept alive, plain GETs go
            # the fast way (callbacks only)
            assert w.slow == (["/api/v1/namespaces/0"] if fast else [r.head.target for r in w.worker.requests])

    asyncio.run(scenario())


def test_chunked_answers_and_trailers_pass_as_they_came(fast: bool) -> None:
    body = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nX-Trailer: t\r\n\r\n"
    raw = answer("Content-Type: application/json", "Transfer-Encoding: chunked", "Trailer: X-Trailer", body=body)

    async def scenario() -> None:
        async with wire(replying(raw), fast=fast) as w:
            reader, writer = await w.connect()
            for _ in range(2):
                writer.write(w.get("/api/v1/pods"))
                assert await read_response(reader) == raw
            assert w.worker.connections == 1

    asyncio.run(scenario())


def test_plain_chunked_answers_and_small_bodies_the_fast_way(fast: bool) -> None:
    """kube-apiserver chunks every answer over 2 KiB, and Kueue's creates and deletes carry small bodies:
    answered from callbacks when plain and whole, byte for byte as the coroutine relays them."""
    chunked = answer(
        "Content-Type: application/json", "Transfer-Encoding: chunked", body=chunk(b"x" * 3000) + LAST_CHUNK
    )
    extended = answer("Transfer-Encoding: chunked", body=b"3;ext=1\r\nabc\r\n0\r\n\r\n")
    created = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"
    options = b'{"propagationPolicy":"Background"}'
    big = b'{"k":"' + b"v" * (64 * 1024) + b'"}'

    async def script(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if request.head.method != "GET":
            writer.write(created)
        elif request.head.target == "/api/v1/chunked":
            for piece in (chunked[:200], chunked[200:2000], chunked[2000:]):  # the head, then the chunk in two
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.01)
        else:
            writer.write(extended if request.head.target == "/api/v1/extended" else JSON_ANSWER)

    async def scenario() -> None:
        async with wire(script, fast=fast) as w:

            def body(method: str, path: str, data: bytes) -> bytes:
                return (
                    w.get(path, "Content-Type: application/json", f"Content-Length: {len(data)}", method=method) + data
                )

            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/warm"))  # opens the worker connection
            assert await read_response(reader) == JSON_ANSWER
            for _ in range(2):
                writer.write(w.get("/api/v1/chunked"))
                assert await read_response(reader) == chunked
            writer.write(w.get("/api/v1/extended"))
            assert await read_response(reader) == extended
            # a DELETE with its options and a GET pipelined after it, in one write
            writer.write(body("DELETE", "/api/v1/namespaces/x/configmaps/c", options) + w.get("/api/v1/chunked"))
            assert await read_response(reader) == created
            assert await read_response(reader) == chunked
            writer.write(body("POST", "/api/v1/namespaces/x/configmaps", big))  # over 64 KiB: streamed
            assert await read_response(reader) == created
            head = body("POST", "/api/v1/namespaces/x/configmaps", b"{}")
            writer.write(head[:-2])  # the body after the head: the coroutine waits for it
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(head[-2:])
            assert await read_response(reader) == created
            bodies = [(r.head.method, r.body) for r in w.worker.requests if r.head.method != "GET"]
            assert bodies == [("DELETE", options), ("POST", big), ("POST", b"{}")]
            assert w.worker.connections == 1
            assert w.metric("mkpolicy_sidecar_inflight_requests") == 0
            if fast:
                assert w.slow == [
                    "/api/v1/warm",
                    "/api/v1/extended",  # a chunk extension: llhttp reads it, in the coroutine
                    "/api/v1/namespaces/x/configmaps",
                    "/api/v1/namespaces/x/configmaps",
                ]

    asyncio.run(scenario())


def test_answer_delimited_by_close(fast: bool) -> None:
    raw = answer("Content-Type: text/plain", body=b"until the end")

    async def scenario() -> None:
        async with wire(replying(raw, close=True), fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/version"))
            got = await read_response(reader)
            assert got == answer("Content-Type: text/plain", "Connection: close", body=b"until the end")
            assert await reader.read() == b""  # the client's connection ends with the body

    asyncio.run(scenario())


def test_head_and_no_content_answers_have_no_body(fast: bool) -> None:
    head_answer = answer("Content-Type: application/json", "Content-Length: 99")
    no_content = b"HTTP/1.1 204 No Content\r\nAudit-Id: 2\r\n\r\n"

    async def scenario() -> None:
        async with wire(replying(head_answer, no_content), fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods", method="HEAD"))
            assert await read_response(reader, "HEAD") == head_answer
            writer.write(w.get("/api/v1/namespaces/x/pods/p", method="DELETE"))
            assert await read_response(reader) == no_content
            writer.write(w.get("/api/v1/namespaces/x/pods/p", method="DELETE"))
            assert await read_response(reader) == no_content
            assert w.worker.connections == 1

    asyncio.run(scenario())


def test_request_bodies_pass_as_they_came(fast: bool) -> None:
    big = json.dumps({"data": {"k": "v" * (2 * 1024 * 1024)}}).encode()  # under the 3 MiB body limit
    chunked_body = chunk(b'{"a":') + chunk(b"1}") + b"0\r\n\r\n"
    created = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"

    async def scenario() -> None:
        async with wire(replying(created), fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(
                w.get(
                    "/api/v1/namespaces/x/configmaps",
                    "Content-Type: application/json",
                    "Transfer-Encoding: chunked",
                    method="POST",
                )
                + chunked_body
            )
            assert await read_response(reader) == created
            writer.write(
                w.get(
                    "/api/v1/namespaces/x/configmaps",
                    "Content-Type: application/json",
                    f"Content-Length: {len(big)}",
                    method="POST",
                )
            )
            for i in range(0, len(big), 256 * 1024):  # sent in pieces: relayed as they come
                writer.write(big[i : i + 256 * 1024])
                await writer.drain()
            assert await read_response(reader) == created
            # 100-continue: the sidecar answers it, the worker never sees Expect
            writer.write(
                w.get("/api/v1/namespaces/x/configmaps", "Content-Length: 2", "Expect: 100-continue", method="POST")
            )
            assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(b"{}")
            assert await read_response(reader) == created
            first, second, third = w.worker.requests
            assert first.body == chunked_body and b"Transfer-Encoding: chunked" in first.raw_head
            assert second.body == big
            assert third.body == b"{}" and b"Expect" not in third.raw_head

    asyncio.run(scenario())


def test_large_answer_to_a_slow_client(fast: bool) -> None:
    payload = bytes(range(256)) * (32 * 1024)  # 8 MiB
    raw = answer("Content-Type: application/octet-stream", f"Content-Length: {len(payload)}", body=payload)

    async def scenario() -> None:
        async with wire(replying(raw), fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods"))
            await asyncio.sleep(0.3)
            # the client does not read: the sidecar holds a bounded part of the answer, the
            # rest waits in the worker's socket (reading from the worker paused)
            held = sum(c.transport.get_write_buffer_size() for c in w.listener._connections if c.transport)
            held += sum(len(c.buffer) for c in w.upstream.connections)
            assert w.upstream.connections
            assert held < 3 * 1024 * 1024, held
            got = await read_response(reader)
            assert got == raw

    asyncio.run(scenario())


def watch_script(events: list[bytes], gate: asyncio.Event | None = None, end: bool = True) -> Script:
    async def script(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(answer("Content-Type: application/json", "Transfer-Encoding: chunked"))
        for i, event in enumerate(events):
            writer.write(chunk(event))
            await writer.drain()
            if i == 0 and gate is not None:
                await gate.wait()
        if end:
            writer.write(b"0\r\n\r\n")
        else:
            await reader.read()  # hold the stream open until the sidecar closes it

    return script


EVENTS = [b'{"type":"ADDED","object":{"n":%d}}\n' % i for i in range(3)]


def test_watch_events_stream_as_they_come_and_the_end_passes(fast: bool) -> None:
    gate = asyncio.Event()

    async def scenario() -> None:
        async with wire(watch_script(EVENTS, gate), fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods?watch=true&resourceVersion=1"))
            await reader.readuntil(b"\r\n\r\n")
            # the first event arrives while the worker holds the rest back
            assert await asyncio.wait_for(reader.readuntil(b"}}\n\r\n"), 5)
            assert w.metric("mkpolicy_sidecar_active_watches", cluster="w") == 1
            gate.set()
            rest = await reader.readuntil(b"0\r\n\r\n")
            assert rest == chunk(EVENTS[1]) + chunk(EVENTS[2]) + b"0\r\n\r\n"
            assert w.metric("mkpolicy_sidecar_active_watches", cluster="w") == 0
            # the watch ended cleanly: the same connections carry the next request
            writer.write(w.get("/api/v1/pods?watch=1"))
            assert (await read_response(reader)).endswith(b"0\r\n\r\n")
            assert w.worker.connections == 1

    asyncio.run(scenario())


def test_client_gone_mid_watch_closes_the_worker_connection(fast: bool) -> None:
    async def scenario() -> None:
        async with wire(watch_script(EVENTS[:1], end=False), fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods?watch=true"))
            await reader.readuntil(b"}}\n\r\n")
            writer.close()
            deadline = time.monotonic() + 5
            while w.worker.closed < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert w.worker.closed == 1
            assert w.metric("mkpolicy_sidecar_active_watches", cluster="w") == 0

    asyncio.run(scenario())


def test_shutdown_ends_watches_at_a_chunk_boundary_and_drains_requests(fast: bool) -> None:
    async def slow(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if "watch" in request.head.target:
            writer.write(answer("Transfer-Encoding: chunked") + chunk(EVENTS[0]) + b"1")  # half a chunk size line
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.write(b"0\r\n" + b"x" * 16 + b"\r\n")  # the chunk completes later: the end comes after it
            await reader.read()
        else:
            await asyncio.sleep(0.3)
            writer.write(JSON_ANSWER)

    async def scenario() -> None:
        async with wire(slow, fast=fast) as w:
            watcher, watch_writer = await w.connect()
            watch_writer.write(w.get("/api/v1/pods?watch=true"))
            await watcher.readuntil(b"}}\n\r\n")
            idle_reader, idle_writer = await w.connect()
            idle_writer.write(w.get("/version"))
            busy_reader, busy_writer = await w.connect()
            await read_response(idle_reader)
            busy_writer.write(w.get("/version"))
            await asyncio.sleep(0.05)
            closing = asyncio.create_task(w.listener.close(2.0))
            assert await read_response(busy_reader) == JSON_ANSWER  # in flight: answered
            assert await idle_reader.read() == b""  # idle: closed
            rest = await watcher.read()
            assert rest == b"10\r\n" + b"x" * 16 + b"\r\n0\r\n\r\n"  # the pending chunk, then a clean end
            await closing
            with pytest.raises(OSError):
                await w.connect()

    asyncio.run(scenario())


def test_worker_errors(fast: bool) -> None:
    async def script(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = request.head.target
        if target == "/garbage":
            writer.write(b"NOT HTTP\r\n\r\n")
        elif target == "/cut":
            writer.write(answer("Content-Length: 100", body=b"only this"))
            await writer.drain()
            writer.close()
        elif target == "/cut-chunked":
            writer.write(answer("Transfer-Encoding: chunked") + b"5\r\nab")
            await writer.drain()
            writer.close()
        elif target == "/silent":
            writer.close()
        else:
            writer.write(JSON_ANSWER)

    async def scenario() -> None:
        async with wire(script, fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/garbage"))
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 502 Bad Gateway\r\n")
            assert json.loads(got.split(b"\r\n\r\n", 1)[1])["message"].startswith("mkpolicy sidecar: worker w sent")
            writer.write(w.get("/silent"))
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 503 Service Unavailable\r\n") and b"worker w is unreachable" in got
            for path in ("/cut", "/cut-chunked"):
                reader, writer = await w.connect()
                writer.write(w.get(path))
                await reader.readuntil(b"\r\n\r\n")
                rest = await reader.read()  # the client sees the answer broken off, not a shorter one
                assert rest in (b"only this", b"5\r\nab")
            assert w.metric("mkpolicy_sidecar_upstream_errors_total", cluster="w", reason="read") >= 3
            reader, writer = await w.connect()
            writer.write(w.get("/fine"))
            assert await read_response(reader) == JSON_ANSWER

    asyncio.run(scenario())


def test_worker_unreachable_and_stale_idle_connections(fast: bool) -> None:
    async def scenario() -> None:
        # nothing listens on the worker port
        probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = probe.sockets[0].getsockname()[1]
        probe.close()
        await probe.wait_closed()
        async with wire(replying(JSON_ANSWER), worker_port=port, fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods"))
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 503 ") and b"worker w is unreachable: connect" in got
            assert w.metric("mkpolicy_sidecar_upstream_errors_total", cluster="w", reason="connect") == 1
        # the worker closes every connection after one answer (keep-alive not honoured): a GET is
        # sent again on a fresh connection; a POST is not (the worker may have acted on it)
        async with wire(replying(JSON_ANSWER, close=True), fast=fast) as w:
            reader, writer = await w.connect()
            for _ in range(3):
                writer.write(w.get("/api/v1/pods"))
                assert await read_response(reader) == JSON_ANSWER
            assert w.worker.connections >= 3

        # the worker drops a kept-alive connection just as the next request goes out on it
        async def racing(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if sum(r.connection == request.connection for r in w.worker.requests) > 1:
                writer.close()  # not answered
            else:
                writer.write(JSON_ANSWER)

        async with wire(racing, fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods"))
            assert await read_response(reader) == JSON_ANSWER
            writer.write(w.get("/api/v1/pods"))
            assert await read_response(reader) == JSON_ANSWER  # sent again on a fresh connection
            assert w.worker.connections == 2 and len(w.worker.requests) == 3
            writer.write(w.get("/api/v1/namespaces/x/configmaps", "Content-Length: 2", method="POST") + b"{}")
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 503 ") and b"closed before an answer" in got
            assert len(w.worker.requests) == 4  # never sent twice

    asyncio.run(scenario())


def test_refusals(fast: bool) -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER), fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods", token="x" * 43))
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 401 Unauthorized\r\n")
            assert await reader.read() == b""  # an unauthenticated client is disconnected
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods", "Connection: Upgrade", "Upgrade: websocket"))
            assert (await read_response(reader)).startswith(b"HTTP/1.1 400 ")
            # a POST refused before its body was read: the body is not read, the client disconnected
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods", "Content-Length: 4", method="POST", token="y" * 43) + b"body")
            assert (await read_response(reader)).startswith(b"HTTP/1.1 401 ")
            assert await reader.read() == b""
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods"))
            assert await read_response(reader) == JSON_ANSWER
            assert w.worker.requests[0].head.method == "GET" and len(w.worker.requests) == 1
            for raw, code in (
                (b"GET / HTTP/1.0\r\n\r\n", b"505"),
                (b"GET /a b HTTP/1.1\r\n\r\n", b"400"),
                (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", b"400"),
                (b"GET / HTTP/1.1\r\nX: " + b"x" * (1024 * 1024 + 10) + b"\r\n\r\n", b"431"),
            ):
                reader, writer = await w.connect()
                writer.write(raw)
                got = await reader.read()
                assert got.startswith(b"HTTP/1.1 " + code), got[:40]
                assert json.loads(got.split(b"\r\n\r\n", 1)[1])["kind"] == "Status"
            # before the first policy set: reads pass (a refused watch would drop Kueue's whole
            # connection to the worker), writes wait (it is not known yet which kinds are policy kinds)
            w.hub.policies = None
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods"))
            assert await read_response(reader) == JSON_ANSWER
            writer.write(w.get("/api/v1/namespaces/x/pods", "Content-Length: 2", method="POST") + b"{}")
            assert (await read_response(reader)).startswith(b"HTTP/1.1 503 ")

    asyncio.run(scenario())


def test_answers_in_pieces_and_what_the_fast_path_hands_over(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Answers split over several reads, large, informational first, late: all end as the worker sent them."""
    big = b"y" * (1024 * 1024)

    async def script(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = request.head.target
        if target == "/split":
            raw = JSON_ANSWER
            for piece in (raw[:10], raw[10:60], raw[60:-3], raw[-3:]):
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.01)
        elif target == "/big":
            writer.write(answer(f"Content-Length: {len(big)}", body=big))
        elif target == "/early-hints":
            writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
            writer.write(JSON_ANSWER)
        elif target == "/late":
            await asyncio.sleep(0.5)
            writer.write(JSON_ANSWER)
        else:
            writer.write(JSON_ANSWER)

    monkeypatch.setattr("mkpolicy.sidecar.proxy.READ_TIMEOUT", 0.2)
    monkeypatch.setattr("mkpolicy.sidecar.forward.READ_TIMEOUT", 0.2)
    monkeypatch.setattr("mkpolicy.sidecar.fastpath.READ_TIMEOUT", 0.2)
    monkeypatch.setattr("mkpolicy.sidecar.listener.READ_TIMEOUT", 0.2)

    async def scenario() -> None:
        async with wire(script, fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/warm"))
            assert await read_response(reader) == JSON_ANSWER
            for _ in range(2):
                writer.write(w.get("/split"))
                assert await read_response(reader) == JSON_ANSWER
            writer.write(w.get("/big"))
            assert await read_response(reader) == answer(f"Content-Length: {len(big)}", body=big)
            writer.write(w.get("/early-hints"))
            assert await read_response(reader) == JSON_ANSWER
            writer.write(w.get("/late"))
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 503 ") and b"timeout" in got
            assert w.metric("mkpolicy_sidecar_upstream_errors_total", cluster="w", reason="timeout") == 1
            reader, writer = await w.connect()
            writer.write(w.get("/after"))
            assert await read_response(reader) == JSON_ANSWER
            if fast:
                assert "/split" not in w.slow  # waited for the pieces without handing over
                assert "/big" in w.slow and "/early-hints" in w.slow  # streamed / informational: the coroutine

    asyncio.run(scenario())


def test_client_gone_before_the_answer(fast: bool) -> None:
    released = asyncio.Event()

    async def script(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if request.head.target == "/slow":
            await released.wait()
        writer.write(JSON_ANSWER)

    async def scenario() -> None:
        async with wire(script, fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/warm"))
            await read_response(reader)
            writer.write(w.get("/slow"))
            await asyncio.sleep(0.05)
            writer.close()
            await asyncio.sleep(0.05)
            released.set()
            await asyncio.sleep(0.05)
            # the answer went nowhere; the worker connection is still good for the next client
            reader, writer = await w.connect()
            writer.write(w.get("/next"))
            assert await read_response(reader) == JSON_ANSWER
            assert w.worker.connections == 1
            assert w.metric("mkpolicy_sidecar_inflight_requests") == 0

    asyncio.run(scenario())


# -- transformed reads (policy kinds) on the wire ---------------------------------------------------
FAILING_SYNC = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: failing-sync}
spec:
  framework: PipelineRun.v1.tekton.dev
  sync:
    patches:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "replace", path: "/status/does/not/exist", value: 1}]'
"""


class PolicyHub(StubHub):
    """A hub with one policy, the manager's objects in a dict (the watch cache), a real evaluator."""

    def __init__(self, policy: Any, managers: dict[str, dict[str, Any]]) -> None:
        from mkpolicy.kube.client import ResourceInfo
        from mkpolicy.sidecar.execution import Evaluator
        from mkpolicy.sidecar.policies import Entry

        super().__init__()
        self.entry = Entry(policy, ResourceInfo("tekton.dev", "v1", "PipelineRun", "pipelineruns", True))
        self.policies = PolicySet((self.entry,), "test")
        self.managers = managers
        self.cached = True
        self.evaluator = Evaluator(1)
        self.hits = 0
        self.direct_reads = 0

    async def manager_object(self, entry: Any, namespace: str | None, name: str) -> Any:
        found = self.cached_manager_object(entry, namespace, name)
        if found is None:  # as the sidecar: the watch cache first, else a direct read
            self.direct_reads += 1
            found = self.managers.get(name)
        return found

    def cached_manager_object(self, entry: Any, namespace: str | None, name: str, *, count: bool = True) -> Any:
        found = self.managers.get(name) if self.cached else None
        if found is not None and count:
            self.hits += 1
        return found

    def caches(self, entry: Any) -> bool:
        return self.cached

    def inline(self, key: object, items: int = 1) -> bool:
        return self.evaluator.inline(key)

    def run_here(self, key: object, fn: Callable[..., Any], *args: Any, items: int = 1) -> Any:
        return self.evaluator.run_here(key, fn, *args)

    async def offload(self, key: object, fn: Callable[..., Any], *args: Any, items: int = 1) -> Any:
        return await self.evaluator.run(key, fn, *args)


def pipelinerun(name: str, *, worker: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team-a", "labels": {}, "annotations": {}}
    obj: dict[str, Any] = {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": meta,
        "spec": {"pipelineRef": {"name": "p"}},
    }
    if worker:
        meta["labels"]["kueue.x-k8s.io/multikueue-origin"] = "multikueue"
        meta["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] = f"wl-{name}"
        obj["status"] = {
            "conditions": [{"type": "Succeeded", "status": "True"}],
            "startTime": "t0",
            "provenance": {"x": 1},
        }
    else:
        obj["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
        obj["status"] = {"conditions": [{"type": "Succeeded", "status": "Unknown"}]}
    return obj


def json_answer(doc: Any, status: str = "200 OK") -> bytes:
    body = json.dumps(doc).encode()
    return (
        f"HTTP/1.1 {status}\r\nAudit-Id: a\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def test_transformed_reads_the_same_either_way(fast: bool) -> None:
    """GET of a policy kind: the policy's sync in the status, errors relayed, whichever path answers; LIST passes."""
    policy = mkpolicy.compile(mkpolicy.load(str(DATA / "tekton-policy.yaml"))[0])
    runs = {n: pipelinerun(n, worker=True) for n in ("a", "b")}
    managers = {n: pipelinerun(n, worker=False) for n in ("a", "b")}
    listing = {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRunList",
        "metadata": {"resourceVersion": "9"},
        "items": list(runs.values()),
    }
    missing = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound"}

    async def script(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        name = request.head.target.rsplit("/", 1)[1]
        if name in runs:
            writer.write(json_answer(runs[name]))
        elif name == "pipelineruns":
            writer.write(json_answer(listing))
        else:
            writer.write(json_answer(missing, "404 Not Found"))

    async def scenario() -> list[bytes]:
        base = "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns"
        got = []
        hub = PolicyHub(policy, managers)
        async with wire(script, fast=fast, hub=hub) as w:
            reader, writer = await w.connect()
            for path in [f"{base}/a"] * 5 + [base, f"{base}/b", f"{base}/ghost"]:
                writer.write(w.get(path, "Accept: application/vnd.kubernetes.protobuf, application/json"))
                got.append(await read_response(reader))
            # the manager object is not cached: read from the manager (the coroutine's way)
            hub.cached = False
            writer.write(w.get(f"{base}/a"))
            got.append(await read_response(reader))
            assert hub.direct_reads == 1
            # JSON only upstream for transformed reads, whatever the client asked for; the LIST as it came
            transformed = [r for r in w.worker.requests if r.head.target != base]
            assert all(b"Accept: application/json\r\n" in r.raw_head for r in transformed)
            assert all(b"protobuf" not in r.raw_head for r in transformed)
            assert [b"protobuf" in r.raw_head for r in w.worker.requests if r.head.target == base] == [True]
            assert hub.hits == 5 + 1  # every cached manager object counted once
            ok = w.metric(
                "mkpolicy_sidecar_transforms_total", cluster="w", policy="test-pipelinerun", phase="sync", result="ok"
            )
            assert ok == 5 + 1 + 1
            assert (
                w.metric(
                    "mkpolicy_sidecar_requests_total", cluster="w", policy="test-pipelinerun", verb="get", code="200"
                )
                == 7
            )
            assert w.metric("mkpolicy_sidecar_inflight_requests") == 0
            # fast: the policy's probation (3 evaluations) and the direct manager read take the coroutine's
            # way, later reads are answered from callbacks; slow: every read of a takes it
            assert w.slow.count(f"{base}/a") == (4 if fast else 6), w.slow
        return got

    answers = asyncio.run(scenario())
    first = json.loads(answers[0].split(b"\r\n\r\n", 1)[1])
    assert first["status"] == {
        "conditions": [{"type": "Succeeded", "status": "True"}],
        "startTime": "t0",
        "results": [{"name": "cluster", "value": "w"}],
    }
    assert first["metadata"] == runs["a"]["metadata"] and first["spec"] == runs["a"]["spec"]
    assert len(set(answers[:5])) == 1 and answers[-1] == answers[0]
    assert answers[5] == json_answer(listing)  # LIST: the worker's answer as it came
    head = answers[0].split(b"\r\n\r\n", 1)[0]
    assert b"Content-Type: application/json" in head and b"Audit-Id: a" in head
    assert answers[7].startswith(b"HTTP/1.1 404 Not Found\r\n")
    assert json.loads(answers[7].split(b"\r\n\r\n")[1]) == missing


def test_transformed_read_without_status_when_the_sync_fails(fast: bool, tmp_path: Path) -> None:
    """A failing sync patch: the read answers the copy without a status (Kueue copies nothing,
    writes nothing, and is not stopped: it finishes a workload only after a successful read),
    the failure counted and said on the job."""
    (tmp_path / "p.yaml").write_text(FAILING_SYNC)
    policy = mkpolicy.compile(mkpolicy.load(str(tmp_path / "p.yaml"))[0])
    run = pipelinerun("a", worker=True)

    async def scenario() -> None:
        hub = PolicyHub(policy, {"a": pipelinerun("a", worker=False)})
        async with wire(replying(json_answer(run)), fast=fast, hub=hub) as w:
            reader, writer = await w.connect()
            for _ in range(5):  # through the probation and past it
                writer.write(w.get("/apis/tekton.dev/v1/namespaces/team-a/pipelineruns/a"))
                got = await read_response(reader)
                assert got.startswith(b"HTTP/1.1 200 OK\r\n"), got[:60]
                body = json.loads(got.split(b"\r\n\r\n", 1)[1])
                assert body["metadata"]["name"] == "a" and "status" not in body
            assert (
                w.metric("mkpolicy_sidecar_requests_total", cluster="w", policy="failing-sync", verb="get", code="200")
                == 5
            )
            assert (
                w.metric("mkpolicy_sidecar_transform_errors_total", cluster="w", policy="failing-sync", phase="sync")
                == 5
            )
            assert (
                w.metric("mkpolicy_sidecar_refusals_total", cluster="w", policy="failing-sync", reason="SyncFailed")
                == 5
            )

    asyncio.run(scenario())


def test_bodies_nesting_too_deeply_are_refused(fast: bool) -> None:
    """JSON nested past Python's recursion limit: a 400 for Kueue's body, a 502 for the worker's, no crash."""
    policy = mkpolicy.compile(mkpolicy.load(str(DATA / "tekton-policy.yaml"))[0])
    deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(deep) + deep
    base = "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns"

    async def scenario() -> None:
        hub = PolicyHub(policy, {"a": pipelinerun("a", worker=False)})
        async with wire(replying(answer), fast=fast, hub=hub) as w:
            reader, writer = await w.connect()
            writer.write(w.get(base, f"Content-Length: {len(deep)}", "Content-Type: application/json", method="POST"))
            writer.write(deep)
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 400 "), got[:60]
            assert "the body nests too deeply" in json.loads(got.split(b"\r\n\r\n", 1)[1])["message"]
            assert w.worker.requests == []  # nothing sent upstream
            writer.write(w.get(f"{base}/a"))
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 502 "), got[:60]
            assert "not JSON (or nests too deeply)" in json.loads(got.split(b"\r\n\r\n", 1)[1])["message"]

    asyncio.run(scenario())
