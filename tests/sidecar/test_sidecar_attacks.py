"""The sidecar attacked as a hostile client would: each attack fails, and the recording worker shows it.

Every test here is one attack on a worker endpoint (with a valid endpoint token unless it
says otherwise). The scripted worker records what reaches it: a refused attack reaches
nothing, or nothing that could be read two ways.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import stat
import time
from typing import Any

import pytest
from test_sidecar_wire import (
    JSON_ANSWER,
    Request,
    StubHub,
    read_response,
    replying,
    watch_script,
    wire,
)

from mkpolicy.jsonvalues import dumps_kube, loads_kube
from mkpolicy.kube.certs import make_ca, make_serving_cert
from mkpolicy.kube.kubeconfig import make_kubeconfig, write_kubeconfig
from mkpolicy.kube.rest import RestConfig, load_pem_chain
from mkpolicy.kube.target import parse_target
from mkpolicy.sidecar.config import Limits
from mkpolicy.sidecar.endpoints import load_or_create
from mkpolicy.sidecar.http1 import ResponseHead
from mkpolicy.sidecar.kueueconfig import KueueInfo
from mkpolicy.sidecar.paths import target_of
from mkpolicy.sidecar.relay import respond_json
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.upstream import Upstream

pytestmark = pytest.mark.timeout(30)

PR = "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns"


async def refused(w: Any, raw: bytes) -> bytes:
    """Send ``raw`` on a new connection; the whole answer until the sidecar closes."""
    reader, writer = await w.connect()
    writer.write(raw)
    return await asyncio.wait_for(reader.read(), 5)


# -- policy bypass through encoded paths ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", f"{PR}%2Fpr1"),
        ("PATCH", f"{PR}%2Fpr1%2Fstatus"),
        ("POST", "/apis/tekton.dev/v1/namespaces/team-a%2Fpipelineruns"),
        ("POST", "/apis/tekton.dev/v1/namespaces/team-a%2fpipelineruns"),
        ("PUT", f"{PR}/./pr1"),
        ("PUT", f"{PR}/x/../pr1"),
        ("PUT", f"{PR}/%2e%2e/pr1"),
        ("PUT", "/apis/tekton.dev/v1/namespaces/team-a//pipelineruns/pr1"),
        ("POST", f"{PR}/"),
        ("GET", f"{PR}/pr1%zz"),
    ],
)
def test_encoded_paths_are_refused_before_routing(method: str, path: str) -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            got = await refused(w, w.get(path, "Content-Length: 2", method=method) + b"{}")
            assert got.startswith(b"HTTP/1.1 400 "), got[:60]
            assert b"Status" in got
            assert w.worker.requests == []

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("query", "verb"),
    [
        ("watch=true", "watch"),
        ("watch=1", "watch"),
        ("watch=yes", "watch"),  # any value but 0/false: apimachinery's Convert_Slice_string_To_bool
        ("watch=", "watch"),
        ("watch", "watch"),
        ("watch=TRUE", "watch"),
        ("watch=0", "list"),
        ("watch=False", "list"),
        ("watch=false&watch=true", "list"),  # the first value decides
        ("watch=1;x=y", "list"),  # Go's url.ParseQuery drops a pair holding ';'
        ("watch=%zz", "list"),  # and one with a malformed escape
        ("wat%63h=1", "watch"),  # keys are decoded
        ("", "list"),
    ],
)
def test_watch_and_other_parameters_as_go_reads_them(query: str, verb: str) -> None:
    target = target_of("GET", parse_target(f"{PR}?{query}"))
    assert target is not None and target.verb == verb
    named = target_of("GET", parse_target(f"{PR}/pr1?{query}"))
    assert named is not None and named.verb == "get"  # ?watch counts on collections only
    create = target_of("POST", parse_target(f"{PR}?dryRun=All&dryRun=x&fieldManager=a+b&fieldManager=c"))
    assert create is not None and (create.verb, create.dry_run, create.field_manager) == ("create", ("All", "x"), "a b")


# -- request smuggling ------------------------------------------------------------------------------------


def test_connection_naming_content_length_is_refused() -> None:
    """Dropping the named Content-Length would leave the body to the worker: read as a second request."""

    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            smuggled = w.get("/api/v1/namespaces/kube-system/secrets")
            for connection in ("Content-Length", "close, content-length", "Transfer-Encoding", "Host"):
                raw = w.get(
                    "/api/v1/namespaces/x/configmaps",
                    f"Connection: {connection}",
                    f"Content-Length: {len(smuggled)}",
                    method="POST",
                )
                got = await refused(w, raw + smuggled)
                assert got.startswith(b"HTTP/1.1 400 ") and b"the Connection field names" in got
            assert w.worker.requests == []

    asyncio.run(scenario())


def test_framing_the_parser_refuses() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            for raw in (
                w.get("/api/v1/pods", "Content-Length: \xa05", method="POST") + b"hello",
                w.get("/api/v1/pods", "Transfer-Encoding: \x0bchunked", method="POST") + b"0\r\n\r\n",
                w.get("/api/v1/pods", "Content-Length: 5", "Transfer-Encoding: chunked", method="POST"),
                w.get("/api/v1/pods", "Transfer-Encoding: chunked", method="POST") + b"5 \r\nhello\r\n0\r\n\r\n",
                w.get("/api/v1/pods", "X-A: a\x01b"),
                w.get("/api/v1/pods", "Host: second"),
                w.get("/api/v1/pods", method="get"),
                b"GET /api/v1/pods HTTP/1.1\r\nAuthorization: Bearer " + w.token.encode() + b"\r\n\r\n",  # no Host
            ):
                got = await refused(w, raw)
                assert got.startswith(b"HTTP/1.1 400 "), (raw, got[:80])
            assert w.worker.requests == []

    asyncio.run(scenario())


def test_bare_lf_is_refused_at_once() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            start = time.monotonic()
            got = await refused(w, b"GET /api/v1/pods HTTP/1.1\nHost: x\n\n")
            assert got.startswith(b"HTTP/1.1 400 ") and time.monotonic() - start < 3

    asyncio.run(scenario())


# -- poisoned pool ----------------------------------------------------------------------------------------


def test_a_late_second_answer_never_reaches_the_next_client() -> None:
    async def double(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(JSON_ANSWER)
        await writer.drain()
        if request.head.target == "/api/v1/first":
            await asyncio.sleep(0.2)  # after the sidecar pooled the connection
            writer.write(JSON_ANSWER.replace(b'"kind"', b'"evil"'))

    async def scenario() -> None:
        async with wire(double) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/first"))
            assert await read_response(reader) == JSON_ANSWER
            await asyncio.sleep(0.4)
            writer.write(w.get("/api/v1/second"))
            assert await read_response(reader) == JSON_ANSWER
            assert [r.connection for r in w.worker.requests] == [1, 2]  # the poisoned one was closed

    asyncio.run(scenario())


def test_answers_in_one_write_with_extra_bytes_close_the_connection() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER + b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil")) as w:
            reader, writer = await w.connect()
            for path in ("/api/v1/a", "/api/v1/b"):
                writer.write(w.get(path))
                assert await read_response(reader) == JSON_ANSWER
            assert [r.connection for r in w.worker.requests] == [1, 2]

    asyncio.run(scenario())


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "slow"])
def test_switching_protocols_and_informational_answers_are_not_reused(fast: bool) -> None:
    upgrade = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: upgrade\r\n\r\n"
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"

    async def script(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(upgrade + b"raw bytes" if request.head.target == "/api/v1/up" else early + JSON_ANSWER)

    async def scenario() -> None:
        async with wire(script, fast=fast) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/up"))
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 502 ") and b"switched protocols" in got
            writer.write(w.get("/api/v1/hints"))
            assert await read_response(reader) == JSON_ANSWER
            writer.write(w.get("/api/v1/again"))
            assert await read_response(reader) == JSON_ANSWER
            assert [r.connection for r in w.worker.requests] == [1, 2, 3]

    asyncio.run(scenario())


# -- unauthenticated exhaustion -----------------------------------------------------------------------------


async def busy(w: Any, count: int, local: str = "127.0.0.1") -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``count`` connections from ``local``, each holding a watch open (nothing may end them to make room)."""
    held = []
    for _ in range(count):
        reader, writer = await connect_from(w, local)
        writer.write(w.get("/api/v1/pods?watch=true"))
        await reader.readuntil(b"}\n\r\n")  # the watch's first event: it is relayed, in progress
        held.append((reader, writer))
    return held


async def connect_from(w: Any, local: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TLS connection to the endpoint from the loopback address ``local`` (127.0.0.0/8 is all local)."""
    ctx = ssl.create_default_context(cadata=w.hub.credentials.ca.cert_pem.decode())
    return await asyncio.open_connection(
        "127.0.0.1", w.port, ssl=ctx, local_addr=(local, 0), server_hostname="127.0.0.1", limit=1 << 24
    )


HELD_WATCH = watch_script([b'{"type":"ADDED","object":{}}\n'], end=False)


def test_connections_above_the_limit_are_closed_before_tls() -> None:
    """Every slot held by a request in progress: a new connection is reset before any TLS work."""

    async def scenario() -> None:
        async with wire(HELD_WATCH, limits=Limits(max_connections=4, reserved_connections=0)) as w:
            held = await busy(w, 4)
            with pytest.raises((ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, OSError)):
                reader, writer = await w.connect()
                writer.write(w.get("/api/v1/pods"))
                await read_response(reader)
            assert w.listener.refused >= 1 and w.listener.evicted == 0
            for _, writer in held:
                writer.close()
            for _ in range(100):  # the slots come back as the connections close
                if w.listener.connections == 0:
                    break
                await asyncio.sleep(0.01)
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods?watch=true"))
            assert await reader.readuntil(b"}\n\r\n")

    asyncio.run(scenario())


def test_idle_unauthenticated_connections_cannot_lock_kueue_out() -> None:
    """The slots above ``maxConnections - reservedConnections`` are kept for authenticated clients:
    a new connection ends the oldest unauthenticated one, and Kueue's, once authenticated, stays."""

    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER), limits=Limits(max_connections=8, reserved_connections=2)) as w:
            idle = [await w.connect() for _ in range(8)]  # every slot an unauthenticated one may take
            reader, writer = await w.connect()  # Kueue
            writer.write(w.get("/api/v1/pods"))
            assert await read_response(reader) == JSON_ANSWER
            idle += [await w.connect() for _ in range(12)]  # more of them: they end each other
            writer.write(w.get("/api/v1/pods"))
            assert await read_response(reader) == JSON_ANSWER  # Kueue's connection is still there
            assert w.listener.evicted >= 12 and w.listener.refused == 0
            for _, idle_writer in idle:
                idle_writer.close()

    asyncio.run(scenario())


def test_one_address_cannot_take_every_slot() -> None:
    """``maxConnectionsPerAddress``: a flood from one address ends its own oldest connections (so a probe
    from the same address still gets in) and leaves the other addresses their slots; slots held by
    requests in progress are never ended: a newcomer from that address is reset then."""

    async def scenario() -> None:
        limits = Limits(max_connections=8, max_connections_per_address=3, reserved_connections=0)
        async with wire(HELD_WATCH, limits=limits) as w:
            flood = [await w.connect() for _ in range(3)]
            reader, writer = await w.connect()  # from the flood's own address
            writer.write(w.get("/api/v1/pods?watch=true"))
            assert await reader.readuntil(b"}\n\r\n")
            assert await asyncio.wait_for(flood[0][0].read(), 5) == b""  # the oldest made room
            assert w.listener.evicted == 1 and w.listener.refused == 0
            held = [(reader, writer), *await busy(w, 2)]  # the address's three slots are busy now
            with pytest.raises((ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, OSError)):
                reader, writer = await w.connect()
                writer.write(w.get("/api/v1/pods"))
                await read_response(reader)
            assert w.listener.refused >= 1
            reader, writer = await connect_from(w, "127.0.0.2")
            writer.write(w.get("/api/v1/pods?watch=true"))
            assert await reader.readuntil(b"}\n\r\n")
            for _, held_writer in flood + held:
                held_writer.close()

    asyncio.run(scenario())


def test_a_token_holders_idle_connections_cannot_lock_kueue_out() -> None:
    """A client with the endpoint token, from two addresses, fills every slot with authenticated
    keep-alive connections it leaves idle: Kueue, from a third, still connects (the connection of the
    fullest address idle the longest makes room), and Kueue's own watch is never ended."""

    async def scenario() -> None:
        script = replying(JSON_ANSWER)

        async def worker(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await (HELD_WATCH if "watch" in request.head.target else script)(request, reader, writer)

        limits = Limits(max_connections=8, max_connections_per_address=5, reserved_connections=0)
        async with wire(worker, limits=limits) as w:
            kueue_watch = await busy(w, 1, "127.0.0.1")
            hostile = []
            for local in ("127.0.0.2", "127.0.0.3") * 4:
                reader, writer = await connect_from(w, local)
                writer.write(w.get("/api/v1/pods"))
                assert await read_response(reader) == JSON_ANSWER  # authenticated, then left idle
                hostile.append((reader, writer))
            reader, writer = await connect_from(w, "127.0.0.1")  # Kueue's next connection
            writer.write(w.get("/api/v1/pods"))
            assert await read_response(reader) == JSON_ANSWER
            assert w.listener.evicted >= 1 and w.listener.refused == 0
            watch_reader, _ = kueue_watch[0]
            assert not watch_reader.at_eof()
            assert [r.head.target for r in w.worker.requests].count("/api/v1/pods") == 9
            for _, hostile_writer in hostile + kueue_watch:
                hostile_writer.close()

    asyncio.run(scenario())


WATCHES = "?watch=true&allowWatchBookmarks=true&labelSelector=kueue.x-k8s.io%2Fmultikueue-origin%3Dm"
KUEUE_WATCHES = ("/apis/kueue.x-k8s.io/v1beta2/workloads" + WATCHES, "/apis/batch/v1/jobs" + WATCHES)


def test_a_token_holders_watches_cannot_lock_kueue_out() -> None:
    """A client with the endpoint token, from two addresses, opens a watch on every connection it may
    hold: each address gets ``maxWatchesPerAddress`` (by default twice the kinds Kueue watches, plus 4),
    the others are answered 429 naming the limit, and Kueue (a third address) still opens its watches,
    reconnects included, and reads. The recording worker shows every watch that reached it."""

    async def scenario() -> None:
        hub = StubHub()
        hub.kueue = KueueInfo(version=(0, 19, 2), integrations=frozenset({"batch/job"}), external_frameworks=())

        async def worker(request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await (HELD_WATCH if "watch=" in request.head.target else replying(JSON_ANSWER))(request, reader, writer)

        limits = Limits(max_connections=24, max_connections_per_address=12, reserved_connections=0)
        async with wire(worker, hub=hub, limits=limits) as w:
            hostile, refusals = [], []
            for local in ("127.0.0.2", "127.0.0.3"):
                for i in range(12):
                    reader, writer = await connect_from(w, local)
                    writer.write(w.get(KUEUE_WATCHES[i % 2]))
                    head = await reader.readuntil(b"\r\n\r\n")
                    if head.startswith(b"HTTP/1.1 429 "):
                        refusals.append(head + await reader.readexactly(int(head.split(b"Content-Length: ")[1][:3])))
                    else:
                        await reader.readuntil(b"}\n\r\n")
                    hostile.append((reader, writer))
            assert len(refusals) == 8  # 8 watches held per address (Kueue watches 2 kinds: 2 x 2 + 4)
            status = json.loads(refusals[0].partition(b"\r\n\r\n")[2])
            assert status["code"] == 429 and status["reason"] == "TooManyRequests"
            assert (
                "limits.maxWatchesPerAddress is 8 (Kueue watches 2 kinds here: Workloads, integration batch/job)"
                in (status["message"])
            )
            assert b"Retry-After: 5\r\n" in refusals[0]
            assert w.metric("mkpolicy_sidecar_refusals_total", cluster="w", policy="", reason="WatchLimit") == 8
            kueue = []
            for path in KUEUE_WATCHES * 2:  # its watches, and their reconnects before the old ones ended
                reader, writer = await connect_from(w, "127.0.0.1")
                writer.write(w.get(path))
                assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
                await reader.readuntil(b"}\n\r\n")
                kueue.append((reader, writer))
            reader, writer = await connect_from(w, "127.0.0.1")
            writer.write(w.get("/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/wl"))
            assert await read_response(reader) == JSON_ANSWER
            watches = [r for r in w.worker.requests if "watch=" in r.head.target]
            assert len(watches) == 2 * 8 + 4
            for _, held_writer in hostile + kueue:
                held_writer.close()

    asyncio.run(scenario())


def test_a_head_sent_slowly_is_cut_at_its_deadline() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER), limits=Limits(head_seconds=0.5)) as w:
            reader, writer = await w.connect()
            raw = w.get("/api/v1/pods")
            start = time.monotonic()
            with pytest.raises((ConnectionError, OSError)):
                for byte in raw:  # a byte every 0.1 s: each one well within any idle limit
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(0.1)
                    if reader.at_eof():
                        raise ConnectionResetError
            assert time.monotonic() - start < 5  # cut at 0.5 s; 10x for a busy machine
            assert await reader.read() == b""
            # a new connection that sends nothing is cut at the same deadline
            reader, writer = await w.connect()
            assert await asyncio.wait_for(reader.read(), 3) == b""
            assert w.worker.requests == []

    asyncio.run(scenario())


def test_large_and_repeated_heads_are_bounded() -> None:
    async def scenario() -> None:
        limits = Limits(max_head_bytes=8192, max_header_fields=50)
        async with wire(replying(JSON_ANSWER), limits=limits) as w:
            got = await refused(w, w.get("/api/v1/pods", "X: " + "a" * 10_000))
            assert got.startswith(b"HTTP/1.1 431 ")
            got = await refused(w, w.get("/api/v1/pods", *["X: a"] * 60))
            assert got.startswith(b"HTTP/1.1 431 ")
            # repeated fields within the limits are joined once (linear time)
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods", *["X-Repeated: a"] * 40))
            assert await read_response(reader) == JSON_ANSWER
            assert w.worker.requests[0].head.fields["x-repeated"] == ", ".join(["a"] * 40)

    asyncio.run(scenario())


def test_an_unauthenticated_client_is_disconnected_and_its_body_never_read() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            raw = w.get("/api/v1/pods", "Content-Length: 1000000", method="POST", token="x" * 43)
            reader, writer = await w.connect()
            writer.write(raw + b"x" * 1000)
            got = await asyncio.wait_for(reader.read(), 5)
            assert got.startswith(b"HTTP/1.1 401 ")
            assert w.worker.requests == []

    asyncio.run(scenario())


# -- memory under load ------------------------------------------------------------------------------------------


def test_request_bodies_above_the_limit_are_refused_unread() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER), limits=Limits(max_body_bytes=4096)) as w:
            got = await refused(w, w.get(PR, "Content-Length: 16777216", method="POST") + b"{" * 100)
            assert got.startswith(b"HTTP/1.1 413 ")
            chunked = w.get("/api/v1/namespaces/x/configmaps", "Transfer-Encoding: chunked", method="POST")
            reader, writer = await w.connect()
            writer.write(chunked + (b"1000\r\n" + b"y" * 4096 + b"\r\n") * 3 + b"0\r\n\r\n")
            got = await asyncio.wait_for(reader.read(), 5)
            assert got == b"" or b" 413 " in got.split(b"\r\n", 1)[0]
            assert w.worker.requests == []  # the stream to the worker is cut: no whole request reached it

    asyncio.run(scenario())


def test_a_request_waits_for_a_worker_connection_within_its_deadline() -> None:
    async def scenario() -> None:
        gate = asyncio.Event()
        limits = Limits(max_worker_connections=1, worker_wait_seconds=0.3)
        async with wire(watch_script([b'{"type":"ADDED"}\n'], gate, end=False), limits=limits) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods?watch=yes"))  # holds the only worker connection
            await reader.readuntil(b"\r\n\r\n")
            other, other_writer = await w.connect()
            start = time.monotonic()
            other_writer.write(w.get("/api/v1/pods/p"))
            got = await read_response(other)
            assert got.startswith(b"HTTP/1.1 503 ") and b"stayed busy" in got
            assert time.monotonic() - start < 3
            gate.set()

    asyncio.run(scenario())


# -- least privilege -------------------------------------------------------------------------------------


def test_identity_fields_are_refused_and_never_forwarded() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            for field in ("Impersonate-User: system:admin", "Impersonate-Group: system:masters", "X-Remote-User: a"):
                got = await refused(w, w.get("/api/v1/pods", field))
                assert got.startswith(b"HTTP/1.1 403 ")
            assert w.worker.requests == []
            # and a head built by the transport never carries them
            out = w.upstream.head("GET", "/api/v1/pods", [("Impersonate-Uid", "1"), ("X-Remote-Extra-A", "b")])
            assert b"Impersonate" not in out and b"X-Remote" not in out

    asyncio.run(scenario())


def test_the_auth_scheme_is_matched_in_any_case() -> None:
    creds = load_or_create(None, ["w"], ["127.0.0.1"])
    token = creds.tokens["w"]
    for header in (f"Bearer {token}", f"bearer {token}", f"BEARER {token}"):
        assert creds.check_token("w", header)
    for header in (f"Basic {token}", f"Bearer  {token}", f"Bearer {token}x", "Bearer ", token):
        assert not creds.check_token("w", header)


def test_secret_files_are_created_exclusively_and_private(tmp_path: Any) -> None:
    path = tmp_path / "w.kubeconfig"
    planted = tmp_path / f"w.kubeconfig.tmp-{os.getpid()}"
    planted.write_text("planted")
    os.chmod(planted, 0o666)
    write_kubeconfig(str(path), make_kubeconfig("https://x", b"ca", "secret-token", cluster="w", user="u"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and "secret-token" in path.read_text()
    assert planted.read_text() == "planted"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, planted.name])  # no temporary left
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    load_or_create(str(state), ["w"], ["127.0.0.1"])
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for name in ("ca.key", "tls.key", "tokens.json"):
        assert stat.S_IMODE((state / name).stat().st_mode) == 0o600


@pytest.mark.parametrize("name", ["tokens.json", "ca.key", "ca.crt", "tls.key"])
def test_state_files_others_may_write_are_not_trusted(tmp_path: Any, name: str) -> None:
    """A pre-existing world-writable state file (a planted token or CA) stops the start, saying which."""
    from mkpolicy.sidecar.config import ConfigError

    state = tmp_path / "state"
    tokens = load_or_create(str(state), ["w"], ["127.0.0.1"]).tokens
    (state / "tokens.json").write_text(json.dumps({"w": "planted-" + "x" * 40}))
    os.chmod(state / name, 0o666)
    with pytest.raises(ConfigError) as info:
        load_or_create(str(state), ["w"], ["127.0.0.1"])
    assert f"{state / name}: mode 0666 lets others write it" in info.value.message
    os.chmod(state / name, 0o600)
    assert load_or_create(str(state), ["w"], ["127.0.0.1"]).tokens != tokens  # trusted again once private


# -- bad input elsewhere -----------------------------------------------------------------------------------


def test_json_numbers_as_kubernetes_reads_them() -> None:
    assert loads_kube("[1, 9223372036854775807, 9223372036854775808, 1.5]") == [1, 2**63 - 1, 2.0**63, 1.5]
    for bad in ("1e400", "-1e400", "NaN", "[Infinity]", "1" * 100_000):
        with pytest.raises(ValueError):
            loads_kube(bad)
    with pytest.raises(ValueError):
        dumps_kube({"x": float("inf")})
    assert dumps_kube({"x": 1e308}) == b'{"x":1e+308}'

    class Sink:
        def respond(self, *args: Any) -> None:
            raise AssertionError("a NaN must never be written")

    resp = ResponseHead(200, "OK", [], {}, "length", 0, False, b"", False)
    with pytest.raises(StatusError) as info:
        respond_json(Sink(), resp, {"status": {"x": float("nan")}})  # type: ignore[arg-type]
    assert info.value.code == 500


# -- proxy-url: a CONNECT tunnel --------------------------------------------------------------------------


def test_proxy_url_tunnels_with_connect(tmp_path: Any) -> None:
    ca = make_ca("test-ca")
    serving = make_serving_cert(ca, ["127.0.0.1"], "worker")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_pem_chain(server_ctx, serving.cert_pem, serving.key_pem)
    seen: list[bytes] = []
    connects: list[bytes] = []

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(JSON_ANSWER)
        await writer.drain()

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        connects.append(head)
        if b"Proxy-Authorization: Basic dXNlcjpwIHc=" not in head:
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        host, port = head.split(b" ")[1].decode().rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

    async def scenario() -> None:
        worker_server = await asyncio.start_server(worker, "127.0.0.1", 0, ssl=server_ctx)
        proxy_server = await asyncio.start_server(proxy, "127.0.0.1", 0)
        wport = worker_server.sockets[0].getsockname()[1]
        pport = proxy_server.sockets[0].getsockname()[1]
        try:
            config = RestConfig(
                server=f"https://127.0.0.1:{wport}",
                ca_pem=ca.cert_pem,
                token="t",
                proxy_url=f"http://user:p%20w@127.0.0.1:{pport}",
            )
            upstream = Upstream("w", config)
            conn = await upstream.acquire()
            conn.write(upstream.head("GET", "/api/v1/pods", [("Host", "x")]))
            resp = await conn.response_head("GET", 5)
            assert resp.status == 200
            assert connects[0].startswith(f"CONNECT 127.0.0.1:{wport} HTTP/1.1\r\nHost: 127.0.0.1:{wport}\r\n".encode())
            assert seen[0].startswith(b"GET /api/v1/pods HTTP/1.1\r\n")  # through TLS to the worker
            await upstream.close()
            refused_config = RestConfig(server=config.server, ca_pem=ca.cert_pem, proxy_url=f"http://127.0.0.1:{pport}")
            with pytest.raises(Exception, match="407"):
                await Upstream("w", refused_config).acquire()
        finally:
            worker_server.close()
            proxy_server.close()

    asyncio.run(scenario())
    with pytest.raises(ValueError, match="http:// proxy"):
        Upstream("w", RestConfig(server="https://w", proxy_url="socks5://p:1080"))


def test_answers_read_whole_are_bounded_in_size_and_in_total() -> None:
    from mkpolicy.sidecar.conn import Connection
    from mkpolicy.sidecar.http1 import parse_response_head
    from mkpolicy.sidecar.relay import ANSWERS, AnswerTooLarge, read_answer

    async def scenario() -> None:
        def answer(body: bytes, chunked: bool = False) -> tuple[Connection, ResponseHead]:
            conn = Connection()
            framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
            resp = parse_response_head(f"HTTP/1.1 200 OK\r\n{framing}\r\n\r\n".encode(), "GET")
            conn.buffer += b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body) if chunked else body
            conn.eof = True
            return conn, resp

        conn, resp = answer(b"x" * 5000)
        with pytest.raises(AnswerTooLarge) as info:
            await read_answer(conn, resp, 5, limit=4096, budget=1 << 20)  # type: ignore[arg-type]
        assert not info.value.busy and conn.buffer  # refused from its head: nothing read
        conn, resp = answer(b"x" * 5000, chunked=True)
        with pytest.raises(AnswerTooLarge):
            await read_answer(conn, resp, 5, limit=4096, budget=1 << 20)  # type: ignore[arg-type]
        ANSWERS.used += 1 << 20  # other answers being rewritten
        try:
            conn, resp = answer(b"x" * 100)
            with pytest.raises(AnswerTooLarge) as info:
                await read_answer(conn, resp, 5, limit=4096, budget=1 << 20)  # type: ignore[arg-type]
            assert info.value.busy
        finally:
            ANSWERS.used -= 1 << 20
        conn, resp = answer(b"x" * 100)
        assert await read_answer(conn, resp, 5, limit=4096, budget=1 << 20) == b"x" * 100  # type: ignore[arg-type]
        assert ANSWERS.used == 0  # given back

    asyncio.run(scenario())


def test_the_loopback_api_server_decodes_paths_as_kube_apiserver() -> None:
    """What the sidecar refuses, a real API server would read as another resource: so does the loopback one."""
    import http.client

    from mkpolicy.testing import ApiServer

    server = ApiServer("w", namespaces=["a"])
    server.start()
    try:
        server.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a"}})
        ctx = ssl.create_default_context(cadata=server.ca_pem.decode())
        host, port = server.url.removeprefix("https://").rsplit(":", 1)

        def get(path: str) -> tuple[int, Any]:
            conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
            conn.request("GET", path, headers={"Authorization": f"Bearer {server.token}"})
            reply = conn.getresponse()
            data = reply.read()
            conn.close()
            return reply.status, json.loads(data) if data else None

        status, obj = get("/api/v1/namespaces/a/configmaps%2Fc")  # decoded, then split: a GET of c
        assert status == 200 and obj["metadata"]["name"] == "c"
        status, obj = get("/api/v1/namespaces/a%2Fconfigmaps")  # a LIST in namespace a
        assert status == 200 and obj["kind"] == "ConfigMapList"
        status, _ = get("/api/v1/namespaces/a/configmaps/c%zz")
        assert status == 400
    finally:
        server.stop()


@pytest.mark.parametrize("loader", ["yamldata", "policy"])
def test_yaml_alias_bombs_of_large_strings_and_huge_integers(loader: str) -> None:
    """A 1 MB string aliased 100 times (100 MB expanded) and a 100,000-digit integer: clean, located errors."""
    from mkpolicy.errors import InputError
    from mkpolicy.policy.source import parse_documents
    from mkpolicy.yamldata import load_all

    def load(text: str) -> Any:
        return load_all(text, "f.yaml") if loader == "yamldata" else list(parse_documents(text, "f.yaml"))

    bomb = 'a: &a "' + "x" * 1_000_000 + '"\nb: [' + ", ".join(["*a"] * 100) + "]\n"
    with pytest.raises(InputError, match="expands to more than 64 MiB"):
        load(bomb)
    with pytest.raises(InputError) as info:
        load("x: 1\nn: " + "1" * 100_000 + "\n")
    assert "an integer of 100,000" in info.value.message and info.value.location is not None
    assert info.value.location.line == 2


# -- the small slips ----------------------------------------------------------------------------------------


def test_connection_naming_accept_is_refused() -> None:
    """Dropping Accept upstream would turn the metadata-only read the sidecar let pass into a full one."""

    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            accept = "Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
            got = await refused(w, w.get(f"{PR}/pr1", accept, "Connection: accept"))
            assert got.startswith(b"HTTP/1.1 400 ") and b"names accept" in got
            assert w.worker.requests == []

    asyncio.run(scenario())


def test_a_worker_answer_whose_connection_names_its_framing_is_not_relayed() -> None:
    async def scenario() -> None:
        bad = b"HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 2\r\n\r\n{}"
        async with wire(replying(bad)) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/namespaces/a/configmaps/c"))
            got = await read_response(reader)
            assert got.startswith(b"HTTP/1.1 502 ") and b"frames the answer" in got

    asyncio.run(scenario())


def test_forwarding_fields_are_not_relayed() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            reader, writer = await w.connect()
            spoofed = ("X-Forwarded-For: 10.0.0.1", "Forwarded: for=10.0.0.1", "X-Real-Ip: 10.0.0.1")
            writer.write(w.get("/api/v1/namespaces/a/configmaps/c", *spoofed))
            assert await read_response(reader) == JSON_ANSWER
            sent = w.worker.requests[0].head.fields
            assert not {"x-forwarded-for", "forwarded", "x-real-ip"} & set(sent)

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("target", "path"),
    [
        ("http://sidecar?x=/api/v1/secrets", "/?x=/api/v1/secrets"),
        ("https://sidecar#/api", "/#/api"),
        ("http://sidecar/apis?x=/y", "/apis?x=/y"),
        ("http://sidecar", "/"),
    ],
)
def test_an_absolute_form_target_keeps_its_path(target: str, path: str) -> None:
    from mkpolicy.sidecar.http1 import HttpError, parse_request_head

    try:
        head = parse_request_head(f"GET {target} HTTP/1.1\r\nHost: sidecar\r\n\r\n".encode())
    except HttpError:
        assert "#" in target  # llhttp refuses a fragment: never the query's '/' as the path
        return
    assert head.target == path


def test_a_clients_malformed_body_is_not_the_workers_failure() -> None:
    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            reader, writer = await w.connect()
            writer.write(
                w.get("/api/v1/namespaces/a/configmaps", "Transfer-Encoding: chunked", method="POST") + b"zz\r\n"
            )
            got = await asyncio.wait_for(reader.read(), 5)
            assert got.startswith(b"HTTP/1.1 400 ") or got == b""
            assert w.hub.failures == []

    asyncio.run(scenario())


def test_a_silent_watch_is_ended_and_its_worker_connection_closed() -> None:
    """A worker that died silently (no bookmark, no byte) no longer holds Kueue's watch open forever:
    after ``watchIdleSeconds`` the watch ends at an event boundary and Kueue reconnects."""

    async def scenario() -> None:
        limits = Limits(watch_idle_seconds=0.5)
        async with wire(watch_script([b'{"type":"BOOKMARK","object":{}}\n'], end=False), limits=limits) as w:
            reader, writer = await w.connect()
            writer.write(w.get("/api/v1/pods?watch=true&allowWatchBookmarks=true"))
            await reader.readuntil(b"\r\n\r\n")
            assert await asyncio.wait_for(reader.readuntil(b"}\n\r\n"), 5)
            assert await asyncio.wait_for(reader.readuntil(b"0\r\n\r\n"), 10) == b"0\r\n\r\n"
            for _ in range(500):  # the worker connection is closed, not pooled
                if w.worker.closed == 1:
                    break
                await asyncio.sleep(0.01)
            assert w.worker.closed == 1
            assert w.metric("mkpolicy_sidecar_active_watches", cluster="w") == 0

    asyncio.run(scenario())


def test_worker_connections_have_tcp_keepalive() -> None:
    import socket

    async def scenario() -> None:
        async with wire(replying(JSON_ANSWER)) as w:
            conn = await w.upstream.acquire()
            sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
            assert sock is not None and sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0
            if hasattr(socket, "TCP_KEEPIDLE"):
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 30
            w.upstream.release(conn, False)

    asyncio.run(scenario())


def test_a_dripping_worker_reserves_nothing_and_is_cut_at_the_answer_deadline() -> None:
    """An announced Content-Length holds no budget (bytes count as they come), a dripped body ends
    at ``answerSeconds``, and one worker's answers cannot take more than its own budget."""
    from mkpolicy.sidecar.conn import Connection
    from mkpolicy.sidecar.http1 import parse_response_head
    from mkpolicy.sidecar.relay import ANSWERS, AnswerTooLarge, read_answer
    from mkpolicy.sidecar.upstream import AnswerBudget, UpstreamError

    async def scenario() -> None:
        resp = parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 8000000\r\n\r\n", "GET")
        conn = Connection()
        worker = AnswerBudget()
        reading = asyncio.ensure_future(
            read_answer(conn, resp, 5, 8 << 20, 64 << 20, (worker, 24 << 20), 0.5)  # type: ignore[arg-type]
        )
        for _ in range(3):  # the worker drips a byte now and then
            await asyncio.sleep(0.05)
            conn.buffer += b"x"
            conn.wake()
        for _ in range(100):  # (the reader takes the last byte on its next turn)
            if ANSWERS.used == 3:
                break
            await asyncio.sleep(0.01)
        assert ANSWERS.used == 3 and worker.used == 3  # what came, not what was announced
        with pytest.raises(UpstreamError, match="did not come whole within"):
            await asyncio.wait_for(reading, 10)
        assert ANSWERS.used == 0 and worker.used == 0
        # one worker's budget is its own
        full = AnswerBudget()
        full.used = 24 << 20
        body = b"x" * 100
        conn = Connection()
        conn.buffer += body
        conn.eof = True
        resp = parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", "GET")
        with pytest.raises(AnswerTooLarge, match="this worker's answers") as info:
            await read_answer(conn, resp, 5, 8 << 20, 64 << 20, (full, 24 << 20))  # type: ignore[arg-type]
        assert info.value.busy and ANSWERS.used == 0

    asyncio.run(scenario())


def test_long_paths_are_not_kept() -> None:
    """Nothing a client sends before its token is checked stays: parsed-path caches keep short paths only
    (300 refused requests with 64 KiB paths took the sidecar to 561 MiB)."""
    from mkpolicy.kube import target as kube_target
    from mkpolicy.sidecar import paths

    before = (kube_target._parse_path_cached.cache_info().currsize, paths._target_cached.cache_info().currsize)
    for i in range(20):
        long_path = f"/api/v1/namespaces/{i}" + "x" * (64 * 1024) + "/pods"
        assert target_of("GET", parse_target(long_path)) is not None
    after = (kube_target._parse_path_cached.cache_info().currsize, paths._target_cached.cache_info().currsize)
    assert after == before
    target_of("GET", parse_target("/api/v1/namespaces/short/pods"))  # short ones are still cached
    assert paths._target_cached.cache_info().currsize >= before[1]
