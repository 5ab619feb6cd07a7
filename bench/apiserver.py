"""Benchmark of the loopback Kubernetes API server: GET/s and watch events/s on loopback.

The server runs in a child process pinned to one CPU, the clients in this process on
another (when the machine has two), so the figures are what one server core delivers
over TLS. Goals (issue #3): >= 1,000 GET/s and >= 5,000 watch events/s.

    python bench/apiserver.py                 # defaults: 3 s of GETs, 20,000 watch events
    python bench/apiserver.py --seconds 5 --events 50000 --connections 16

Measured:
- GET/s, aiohttp client, N keep-alive connections: the server's capacity for reads.
- GET/s, the kubernetes Python client on one thread: what a synchronous test sees.
- watch replay: a watch from an old resourceVersion streams N events from history.
- watch live: N writes committed inside the server process while one watcher streams
  them (the server pays for the writes and the stream).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import statistics
import subprocess
import sys
import time
from typing import Any

from mkpolicy.testing.peers.processes import guarded

NAMESPACE = "default"
OBJECTS = 100


def _pin(cpu: int) -> str:
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})
        return f"CPU {cpu}"
    return "unpinned"


def _configmap(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i:05d}", "namespace": NAMESPACE, "labels": {"app": "bench", "shard": str(i % 8)}},
        "data": {"config.yaml": "replicas: 3\nimage: registry.example.com/app:1.2.3\n", "index": str(i)},
    }


# -- the server process ---------------------------------------------------------------------


async def _serve(events: int) -> None:
    from mkpolicy.testing.apiserver import ApiServer

    pinned = _pin(0)
    srv = ApiServer("bench", history=max(events, 10) + OBJECTS + 10)
    await srv.start_async()
    for i in range(OBJECTS):
        srv.create(_configmap(i))
    start_rv = srv.resource_version
    # History for the replay: `events` updates of the first object.
    for i in range(events):
        srv.patch("v1", "ConfigMap", "cm-00000", {"data": {"index": f"replay-{i}"}}, namespace=NAMESPACE)
    assert srv.resource_version - start_rv == events, "every preload write must be a change"
    info = {"url": srv.url, "token": srv.token, "ca": srv.ca_pem.decode(), "replay_rv": start_rv, "cpu": pinned}
    print(json.dumps(info), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().strip():
        command, _, arg = line.partition(" ")
        if command == "live":
            # Commit writes in batches, yielding to the loop so the watch streams meanwhile.
            for i in range(int(arg)):
                srv.patch("v1", "ConfigMap", "cm-00001", {"data": {"index": f"live-{i}"}}, namespace=NAMESPACE)
                if i % 50 == 49:
                    await asyncio.sleep(0)
            print(json.dumps({"rv": srv.resource_version}), flush=True)
        elif command == "rv":
            print(json.dumps({"rv": srv.resource_version}), flush=True)
        elif command == "cpu":
            t = os.times()
            print(json.dumps({"cpu": t.user + t.system}), flush=True)
    await srv.stop_async()


# -- the client side ------------------------------------------------------------------------


class Target:
    def __init__(self, info: dict[str, Any]) -> None:
        self.url = info["url"]
        self.headers = {"Authorization": f"Bearer {info['token']}", "Accept": "application/json"}
        self.ssl = ssl.create_default_context(cadata=info["ca"])
        self.info = info


async def bench_get(t: Target, seconds: float, connections: int) -> tuple[float, float, float]:
    import aiohttp

    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker(session: aiohttp.ClientSession, offset: int) -> None:
        i = offset
        while time.perf_counter() < deadline:
            path = f"/api/v1/namespaces/{NAMESPACE}/configmaps/cm-{i % OBJECTS:05d}"
            start = time.perf_counter()
            async with session.get(t.url + path, ssl=t.ssl) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"GET {path}: {resp.status}")
            latencies.append(time.perf_counter() - start)
            i += connections

    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(headers=t.headers, connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session, k) for k in range(connections)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return len(latencies) / elapsed, statistics.median(latencies) * 1000, p99 * 1000


def bench_get_kubernetes_client(t: Target, seconds: float) -> float:
    import tempfile

    import kubernetes

    with tempfile.NamedTemporaryFile("w", suffix=".pem") as ca:
        ca.write(t.info["ca"])
        ca.flush()
        config = kubernetes.client.Configuration()
        config.host = t.url
        config.ssl_ca_cert = ca.name
        config.api_key = {"authorization": t.headers["Authorization"]}
        core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))
        count = 0
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()
        while time.perf_counter() < deadline:
            core.read_namespaced_config_map(f"cm-{count % OBJECTS:05d}", NAMESPACE)
            count += 1
        return count / (time.perf_counter() - started)


async def watch_count(t: Target, rv: int, expected: int, on_open: Any = None) -> float:
    """Open a watch from ``rv`` and read until ``expected`` events; returns events/s (from the request,
    or from ``on_open``, which starts the writes, when given)."""
    import aiohttp

    path = f"/api/v1/namespaces/{NAMESPACE}/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=120"
    async with aiohttp.ClientSession(headers=t.headers) as session:
        await (await session.get(t.url + "/version", ssl=t.ssl)).read()  # connect and handshake outside the clock
        started = time.perf_counter()
        resp = await session.get(t.url + path, ssl=t.ssl)
        if resp.status != 200:
            raise RuntimeError(f"watch: {resp.status}")
        if on_open is not None:
            on_open()  # the writes start now: the clock restarts
            started = time.perf_counter()
        seen = 0
        async for chunk in resp.content.iter_any():
            seen += chunk.count(b"\n")
            if seen >= expected:
                break
        elapsed = time.perf_counter() - started
        resp.close()
        return seen / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each GET run")
    parser.add_argument("--connections", type=int, default=8, help="concurrent keep-alive connections for GETs")
    parser.add_argument("--events", type=int, default=20_000, help="watch events per watch run")
    parser.add_argument("--rounds", type=int, default=3, help="repeat each measure, keep the best (shared machines)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.events))
        return 0

    child = guarded(
        subprocess.Popen(
            [sys.executable, __file__, "--serve", "--events", str(args.events)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        info = json.loads(child.stdout.readline())
        t = Target(info)
        client_cpu = _pin(1)

        def ask(command: str) -> dict[str, Any]:
            assert child.stdin is not None and child.stdout is not None
            child.stdin.write(command + "\n")
            child.stdin.flush()
            answer: dict[str, Any] = json.loads(child.stdout.readline())
            return answer

        def server_cpu() -> float:
            return float(ask("cpu")["cpu"])

        print(f"loopback API server benchmark: server on {info['cpu']}, client on {client_cpu}, TLS, "
              f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, best of {args.rounds} rounds")  # fmt: skip
        print("(per CPU-s: work divided by the server process's own CPU time, which other load does not inflate)")
        best_get = (0.0, 0.0, 0.0, 0.0)
        for _ in range(args.rounds):
            before = server_cpu()
            gets, p50, p99 = asyncio.run(bench_get(t, args.seconds, args.connections))
            per_cpu = gets * args.seconds / max(server_cpu() - before, 1e-9)
            best_get = max(best_get, (gets, p50, p99, per_cpu))
        gets, p50, p99, get_cpu = best_get
        print(f"GET, aiohttp client, {args.connections} connections, {args.seconds:.0f} s: {gets:8.0f} GET/s "
              f"({get_cpu:.0f} per server CPU-s)   p50 {p50:.2f} ms  p99 {p99:.2f} ms")  # fmt: skip
        sync_gets = max(bench_get_kubernetes_client(t, args.seconds) for _ in range(args.rounds))
        print(f"GET, kubernetes client, 1 thread, {args.seconds:.0f} s: {sync_gets:8.0f} GET/s")
        replay = replay_cpu = 0.0
        for _ in range(args.rounds):
            before = server_cpu()
            rate = asyncio.run(watch_count(t, info["replay_rv"], args.events))
            replay_cpu = max(replay_cpu, args.events / max(server_cpu() - before, 1e-9))
            replay = max(replay, rate)
        print(f"watch replay, {args.events} MODIFIED events from history: {replay:8.0f} events/s "
              f"({replay_cpu:.0f} per server CPU-s)")  # fmt: skip
        live = live_cpu = 0.0
        for _ in range(args.rounds):
            rv = ask("rv")["rv"]
            before = server_cpu()

            def start_writes() -> None:
                assert child.stdin is not None
                child.stdin.write(f"live {args.events}\n")
                child.stdin.flush()

            rate = asyncio.run(watch_count(t, rv, args.events, on_open=start_writes))
            child.stdout.readline()
            live_cpu = max(live_cpu, args.events / max(server_cpu() - before, 1e-9))
            live = max(live, rate)
        print(f"watch live, {args.events} writes in the server process, 1 watcher: {live:8.0f} events/s "
              f"({live_cpu:.0f} per server CPU-s, writes included)")  # fmt: skip
        ok_get = gets >= 1000
        ok_watch = min(replay, live) >= 5000
        print(f"goals: >= 1,000 GET/s {'met' if ok_get else 'NOT met'}; "
              f">= 5,000 watch events/s {'met' if ok_watch else 'NOT met'}")  # fmt: skip
        return 0 if ok_get and ok_watch else 1
    finally:
        child.stdin.close()
        child.wait(30)


if __name__ == "__main__":
    sys.exit(main())
