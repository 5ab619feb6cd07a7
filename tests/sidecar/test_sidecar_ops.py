"""The ops port (probes, Prometheus) is bounded as the worker endpoints are: connections, head size and time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sidecar_harness import POLICIES, clusters, policy_dir, running

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
                ops = sidecar._ops.listener if sidecar._ops is not None else None
                assert ops is not None and ops.refused + ops.evicted >= 8
                for _, writer in flood:
                    writer.close()

        asyncio.run(scenario())
