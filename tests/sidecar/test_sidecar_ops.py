"""The ops port (probes, Prometheus) is bounded as the worker endpoints are: connections, head size and time."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sidecar_harness import POLICIES, clusters, policy_dir, running

from mkpolicy.sidecar import ops
from mkpolicy.sidecar.config import Limits
from mkpolicy.sidecar.listener import Listener
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.ops import ops_handler
from mkpolicy.sidecar.server import Sidecar

pytestmark = pytest.mark.timeout(60)

TEKTON = POLICIES / "tekton-pipelinerun.yaml"


async def get(port: int, path: str, method: str = "GET") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    try:
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


def test_probes_and_metrics(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar:
                port = sidecar.ops_port
                assert (await get(port, "/healthz")).startswith(b"HTTP/1.1 200 ")
                assert (await get(port, "/livez")).endswith(b"\r\n\r\nok\n")
                verbose = await get(port, "/readyz?verbose")
                assert verbose.startswith(b"HTTP/1.1 200 ") and b"ok " in verbose
                assert b"mkpolicy_sidecar_requests_total" in await get(port, "/metrics")
                assert (await get(port, "/nothing")).startswith(b"HTTP/1.1 404 ")
                assert (await get(port, "/healthz", "POST")).startswith(b"HTTP/1.1 405 ")
                head = await get(port, "/healthz", "HEAD")
                assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")  # no body

        asyncio.run(scenario())


def test_a_flood_of_half_sent_heads_is_bounded(tmp_path: Path) -> None:
    """Connections are capped (``maxConnections``), the oldest unauthenticated ones make room for new
    ones, the others are cut at ``headSeconds``: a probe is answered during the flood (aiohttp kept
    every connection and every half-sent head)."""
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            config = env.config(limits={"maxConnections": 4, "headSeconds": 0.5})
            async with running(config, policy_dir(tmp_path, TEKTON)) as sidecar:
                port = sidecar.ops_port
                flood = []
                for _ in range(12):
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.write(b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"x" * 1000)
                    flood.append((reader, writer))
                assert (await get(port, "/healthz")).startswith(b"HTTP/1.1 200 ")  # during the flood
                ends = await asyncio.wait_for(asyncio.gather(*(r.read() for r, _ in flood), return_exceptions=True), 10)
                # every connection ended: reset, made room for a newer one, or cut at the head deadline
                assert len(ends) == 12 and all(e == b"" or isinstance(e, ConnectionError) for e in ends)
                listener = sidecar._ops.listener if sidecar._ops is not None else None
                assert listener is not None and listener.refused + listener.evicted >= 8
                for _, writer in flood:
                    writer.close()

        asyncio.run(scenario())


def probe(port: int, path: str, timeout: float) -> bytes:
    """A blocking GET on the ops port (from a thread: the test's event loop may be the one blocked)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        return out


def test_probes_are_answered_while_the_endpoints_loop_is_busy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ops port runs on a thread of its own: /healthz answers while the endpoints' event loop is
    blocked, and fails once it has been blocked for ``LOOP_STALL_SECONDS`` (a stuck sidecar is restarted);
    /readyz, computed on that loop, answers 503 when the loop does not answer in time."""
    monkeypatch.setattr(ops, "LOOP_STALL_SECONDS", 3.0)
    monkeypatch.setattr(ops, "READY_WAIT_SECONDS", 0.5)
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar:
                port = sidecar.ops_port
                assert (await asyncio.to_thread(probe, port, "/readyz", 5)).startswith(b"HTTP/1.1 200 ")
                answers: list[bytes] = []

                def probes() -> None:
                    answers.append(probe(port, "/healthz", 5))  # the loop just got blocked
                    answers.append(probe(port, "/readyz?verbose", 5))
                    time.sleep(4)  # past LOOP_STALL_SECONDS
                    answers.append(probe(port, "/healthz", 5))

                thread = threading.Thread(target=probes)
                thread.start()
                time.sleep(7)  # the endpoints' loop does nothing else meanwhile
                await asyncio.to_thread(thread.join)
                assert answers[0].startswith(b"HTTP/1.1 200 ") and answers[0].endswith(b"ok\n")
                assert answers[1].startswith(b"HTTP/1.1 503 ") and b"fail loop: " in answers[1]
                assert answers[2].startswith(b"HTTP/1.1 503 ") and b"event loop has not run" in answers[2]
                await asyncio.sleep(0.1)  # the loop turns again (its heartbeat among what it does)
                assert (await asyncio.to_thread(probe, port, "/healthz", 5)).startswith(b"HTTP/1.1 200 ")

        asyncio.run(scenario())


def test_healthz_answers_during_floods_from_its_own_address(tmp_path: Path) -> None:
    """Half-sent heads on the ops port and slow TLS clients on the endpoint, all from the probes' own
    address: every /healthz probe is answered (the flood ends its own oldest connections)."""
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            limits = {"maxConnections": 16, "maxConnectionsPerAddress": 8}
            async with running(env.config(limits=limits), policy_dir(tmp_path, TEKTON)) as sidecar:
                port = sidecar.ops_port
                endpoint = sidecar.port("worker1")
                flood = []
                for _ in range(40):
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.write(b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"x" * 30_000)
                    flood.append(writer)
                    _, writer = await asyncio.open_connection("127.0.0.1", endpoint)  # no TLS: stalls it
                    writer.write(b"\x16\x03\x01")
                    flood.append(writer)
                for _ in range(5):
                    got = await asyncio.to_thread(probe, port, "/healthz", 10)
                    assert got.startswith(b"HTTP/1.1 200 "), got[:80]
                for writer in flood:
                    writer.close()

        asyncio.run(scenario())


def test_a_request_inside_a_burst_of_connections_is_answered() -> None:
    """Connections waiting in the listen backlog are accepted one loop turn apart: a probe among a burst
    from its own address is read and answered before the burst's newer connections end it to make room."""

    async def scenario() -> None:
        async def ready() -> tuple[bool, list[str]]:
            return True, []

        limits = Limits(max_connections=64, max_connections_per_address=8)
        listener = Listener(ops_handler(ready, Metrics()), None, None, limits)
        port = await listener.start("127.0.0.1", 0)
        burst = []
        try:
            for i in range(40):  # the loop is not running: they all wait in the backlog
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" if i == 2 else b"G")
                burst.append(sock)
            answer = await asyncio.to_thread(burst[2].recv, 65536)
            assert answer.startswith(b"HTTP/1.1 200 ")
            for _ in range(500):  # the rest of the burst: 8 of its connections kept, the others (but the probe, answered) ended
                if listener.evicted >= 31:
                    break
                await asyncio.sleep(0.01)
            assert listener.evicted >= 31
        finally:
            for sock in burst:
                sock.close()
            await listener.close(1.0)

    asyncio.run(scenario())


def test_not_ready_until_the_endpoints_listen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/readyz is served (on its own thread) from early in the start: it says ok only once every endpoint
    listens, whatever else is ready by then."""
    seen: list[tuple[bool, list[str]]] = []
    start_endpoint = Sidecar._start_endpoint

    async def starting(self: Sidecar, worker: Any, port: int) -> None:
        seen.append(self.readiness())
        await start_endpoint(self, worker, port)

    monkeypatch.setattr(Sidecar, "_start_endpoint", starting)
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar:
                assert sidecar.ready
                ready, checks = seen[0]
                assert not ready and "fail start: the endpoints are not listening yet" in checks

        asyncio.run(scenario())
