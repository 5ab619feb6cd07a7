"""The sidecar on the wire: direct vs. through the sidecar, measured side by side in one run.

Three processes, as in production: the loopback API servers (a manager and a worker,
in a child process), the sidecar (``mkpolicy sidecar``, its own process) and the
client (this process, aiohttp with keep-alive over TLS, like client-go).

* pass-through GET of a ConfigMap: p50/p99 direct and through the sidecar, interleaved
  request by request in rounds (goal: sidecar <= 1.3x direct at p50); beside them, the
  same GET through a *floor* relay — the least any Python TLS-terminating proxy does
  (asyncio, TLS on both legs, bytes copied, no HTTP parsing, no credentials swapped) —
  and a GET of a ConfigMap the worker answers ``--worker-latency-ms`` later (a worker
  API server as slow as a real one over a network);
* transformed GET of a PipelineRun (status rewritten by the Tekton policy) and POST of
  a PipelineRun (the policy's create of the manager's object): p99 (goal <= 5 ms);
* watch events/s through the sidecar: a watch replaying the worker's history of
  PipelineRun status updates, passed through as Kueue's watches are (goal >= 2,000/s);
* the sidecar's RSS with ``--objects`` PipelineRuns on the manager, read live as the
  default ``manager.reads: direct`` does (goal <= 150 MiB for 10,000; ``--live-reads``
  below measures it against the manager's size);
* the transport under attack (peak RSS of the sidecar, goal: under the shipped 256Mi
  container limit with margin, <= 200 MiB): two LISTs at once of ``--list-objects``
  small ConfigMaps passed through, a flood of ``--flood`` idle TLS connections, 150
  half-sent 1 MiB heads, a 16 MiB create body; and (issue 18, with the slowest
  ``/healthz`` meanwhile, goal <= 100 ms; shown in the ratio column) 500 half-sent heads on
  the ops port, 300 unauthenticated requests with 60 KiB paths, a 3 MiB CBOR create of
  3 million values, twenty 3 MiB JSON creates at once, 120 clients that never read their
  LIST, a worker dripping 8 MiB answers to eight readers while worker1 is read (the sidecar
  serves a second worker, ``drip``, for it: worker1's reads must all succeed). The bench's
  ConfigMap probes and history watch are widened in the sidecar's ``wire.allow`` (Kueue
  sends neither).

``--uvloop`` runs the sidecar on uvloop's event loop instead of asyncio's (to compare).

``--live-reads 10000,100000`` measures instead the default ``manager.reads: direct``
(nothing cached): for each manager size, the sidecar's RSS after start and after Kueue's
reconciles (goal: flat, <= 100 MiB), and its CPU per reconcile (Kueue's metadata-only
ownership GET, passed through, then its JSON GET, transformed from a live manager read),
the median over ``--rounds`` rounds.

p50s are the best of ``--rounds`` rounds (the machine is shared; the best round is the
least disturbed one), p99s are taken over all rounds' samples.

    python bench/sidecar.py [--requests 3000] [--rounds 3] [--objects 10000] [--events 5000] [--posts 300]
                            [--list-objects 10000] [--flood 600] [--uvloop]
    python bench/sidecar.py --live-reads 10000,100000 [--reconciles 2000] [--rounds 3]

``--real`` measures instead against real peers (kube-apiserver, etcd, Kueue built by
``mkpolicy dev build-peers``; a Go toolchain): direct vs a Go reverse proxy vs mkpolicy on the
wire, the sidecar's CPU per Kueue reconcile, Kueue's end-to-end latencies with and without
the sidecar (``bench/sidecar_real.py``)::

    python bench/sidecar.py --real [--jobs 20] [--requests 1000] [--rounds 3] [--posts 200] [--kueue-version V]

``--real --against SRC`` compares this checkout's sidecar with the ``mkpolicy`` package in SRC (another
version), both in front of one real worker, request by request (``bench/sidecar_versus.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from mkpolicy.testing.peers.processes import guarded

ROOT = Path(__file__).resolve().parent.parent
PR_PATH = "/apis/tekton.dev/v1/namespaces/bench/pipelineruns"
ORIGIN = "kueue.x-k8s.io/multikueue-origin"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
#: POSTs per side before the measured ones.
POST_WARMUP = 10
#: The bench's pass-through probes (ConfigMap GETs and LISTs, a watch replaying history) are not
#: requests Kueue sends: the sidecar's wire contract is widened for them, explicitly.
BENCH_WIRE = {
    "allow": [
        {"reason": "bench: pass-through probes", "verbs": ["get", "list"], "group": "", "resource": "configmaps"},
        {
            "reason": "bench: a watch replaying history",
            "verbs": ["watch"],
            "group": "tekton.dev",
            "resource": "pipelineruns",
            "query": ["watch", "resourceVersion", "timeoutSeconds"],
        },
    ]
}


# -- the clusters (child process) ------------------------------------------------------------
def manager_run(i: int) -> dict[str, Any]:
    """A PipelineRun as users submit them (the example's shape), managed by MultiKueue."""
    obj = yaml.safe_load((ROOT / "examples" / "tekton" / "pipelinerun.yaml").read_text())
    obj = json.loads(json.dumps(obj, default=str))
    meta = obj["metadata"]
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp", "ownerReferences", "finalizers"):
        meta.pop(key, None)
    meta["name"], meta["namespace"] = f"run-{i:05d}", "bench"
    return obj


def worker_status(i: int) -> dict[str, Any]:
    return {
        "startTime": "2026-11-21T10:00:00Z",
        "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running", "message": f"step {i}"}],
        "childReferences": [{"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "name": f"t-{i}"}],
        "pipelineSpec": {"tasks": [{"name": "build"}, {"name": "test"}]},
        "observedGeneration": 1,
    }


def serve_clusters(objects: int, events: int, latency_ms: float, list_objects: int) -> None:
    """Child process: start the servers, seed them, print their coordinates, wait for stdin to close."""
    from mkpolicy.testing import ApiServer

    crds = ["pipelineruns.tekton.dev"]
    manager = ApiServer("manager", bundled=crds, namespaces=["default", "bench"], history=max(events, 1000) * 2)
    worker = ApiServer(
        "worker1", bundled=crds, namespaces=["default", "bench", "list"], history=max(events, 1000) * 2 + list_objects
    )
    manager.start()
    worker.start()
    for i in range(objects):
        manager.create(manager_run(i))
    worker.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "bench"},
            "data": {f"key-{i}": "value " * 10 for i in range(20)},
        }
    )
    worker.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm-slow", "namespace": "bench"},
            "data": {f"key-{i}": "value " * 10 for i in range(20)},
        }
    )
    worker.faults.delay(latency_ms / 1000, verb="get", resource="configmaps", name="cm-slow")
    for i in range(list_objects):  # small objects for the LIST through the sidecar
        worker.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c-{i:05d}", "namespace": "list"},
             "data": {"k": "v"}}
        )  # fmt: skip
    copy = manager_run(0)
    copy["spec"].pop("managedBy")
    copy["metadata"].setdefault("labels", {})[ORIGIN] = "multikueue"
    copy["metadata"].setdefault("annotations", {})[PREBUILT] = "wl-0"
    worker.create(copy)
    start_rv = worker.resource_version
    for i in range(events):
        worker.patch(
            "tekton.dev/v1",
            "PipelineRun",
            "run-00000",
            {"status": worker_status(i)},
            namespace="bench",
            subresource="status",
        )
    info = {
        name: {"url": s.url, "ca": s.ca_pem.decode(), "token": s.token, "kubeconfig": s.kubeconfig()}
        for name, s in (("manager", manager), ("worker1", worker))
    }
    info["watch_from"] = str(start_rv)
    print(json.dumps(info), flush=True)
    sys.stdin.read()
    worker.stop()
    manager.stop()


# -- the floor: the least a Python TLS-terminating relay does (child process) ----------------------
def serve_floor(upstream: str, ca: str, cert: str | None = None, key: str | None = None) -> None:
    """Child process: a TLS relay in front of ``upstream`` — bytes copied both ways, nothing parsed.

    One upstream connection per client connection, asyncio protocols writing what they
    read straight to the other side: no HTTP, no credentials swapped (clients send the
    worker's own token through it; or the relay shows the client certificate ``cert``,
    ``key`` (files) on every upstream connection). What any proxy in Python pays at
    least: two TLS legs, two more hops through the kernel and the event loop.
    """
    from urllib.parse import urlsplit

    from mkpolicy.kube.certs import make_ca, make_serving_cert
    from mkpolicy.kube.rest import load_pem_chain

    url = urlsplit(upstream)
    host, port = url.hostname or "127.0.0.1", url.port or 443
    client_ctx = ssl.create_default_context(cadata=ca)
    if cert and key:
        client_ctx.load_cert_chain(cert, key)
    own_ca = make_ca("floor-ca")
    pair = make_serving_cert(own_ca, ["127.0.0.1"], "floor")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.set_alpn_protocols(["http/1.1"])
    load_pem_chain(server_ctx, pair.cert_pem, pair.key_pem)

    class Up(asyncio.Protocol):
        def __init__(self, down: Down) -> None:
            self.down = down

        def data_received(self, data: bytes) -> None:
            assert self.down.transport is not None
            self.down.transport.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.down.transport is not None:
                self.down.transport.close()

    class Down(asyncio.Protocol):
        def __init__(self) -> None:
            self.transport: asyncio.Transport | None = None
            self.up: asyncio.Transport | None = None
            self.pending: list[bytes] = []

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport
            asyncio.get_running_loop().create_task(self.connect())

        async def connect(self) -> None:
            up, _ = await asyncio.get_running_loop().create_connection(
                lambda: Up(self), host, port, ssl=client_ctx, server_hostname=host
            )
            self.up = up
            for data in self.pending:
                up.write(data)

        def data_received(self, data: bytes) -> None:
            if self.up is None:
                self.pending.append(data)
            else:
                self.up.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.up is not None:
                self.up.close()

    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Down, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        print(json.dumps({"url": f"https://127.0.0.1:{port}", "ca": own_ca.cert_pem.decode()}), flush=True)
        await loop.run_in_executor(None, sys.stdin.read)

    asyncio.run(run())


def floor_relay(upstream: str, ca: str, *client_cert: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """The floor relay in front of ``upstream`` (:func:`serve_floor`, a child process); its ``url`` and ``ca``.
    ``client_cert``: the certificate and key files it shows the upstream. Stopped by closing its stdin."""
    proc = guarded(
        subprocess.Popen([sys.executable, __file__, "--serve-floor", upstream, ca, *client_cert],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"bench: the floor relay exited ({proc.wait()}) before it listened")
    return proc, json.loads(line)


# -- measuring -----------------------------------------------------------------------------------
#: The dripping worker: each read of a PipelineRun is answered 8 MiB long, 64 KiB every 50 ms.
DRIP_BYTES = 8 * 1024 * 1024
DRIP_PIECE = 64 * 1024
DRIP_INTERVAL = 0.05


def serve_drip() -> None:
    """Child process: a hostile or slow worker (plain HTTP) that drips every PipelineRun read; prints
    its port, serves until stdin closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if b"/pipelineruns/" in head.partition(b"\r\n")[0]:
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % DRIP_BYTES
                    )
                    for _ in range(DRIP_BYTES // DRIP_PIECE):
                        writer.write(b" " * DRIP_PIECE)
                        await writer.drain()
                        await asyncio.sleep(DRIP_INTERVAL)
                else:
                    body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}'
                    head = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                    writer.write(head % len(body) + body)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # (cancelled: the bench is over)
        finally:
            writer.close()

    async def run() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        print(json.dumps({"port": server.sockets[0].getsockname()[1]}), flush=True)
        await asyncio.to_thread(sys.stdin.read)

    asyncio.run(run())


def drip_kubeconfig(port: int) -> dict[str, Any]:
    """A kubeconfig for the dripping worker (plain HTTP, any token)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "drip", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "drip", "user": {"token": "drip"}}],
        "contexts": [{"name": "drip", "context": {"cluster": "drip", "user": "drip"}}],
        "current-context": "drip",
    }


def endpoint_side(kubeconfig_path: Path) -> Side:
    """The sidecar endpoint a written kubeconfig points at."""
    kubeconfig = yaml.safe_load(kubeconfig_path.read_text())
    return Side(
        kubeconfig["clusters"][0]["cluster"]["server"],
        kubeconfig["users"][0]["user"]["token"],
        base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]).decode(),
    )


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def keep_round(got: dict[str, list[float]], samples: dict[str, list[float]], best: dict[str, float]) -> None:
    """Add one round's samples to all rounds', keep each kind's best p50 (the least disturbed round)."""
    for key, values in got.items():
        samples[key] += values
        best[key] = min(best.get(key, float("inf")), pct(values, 0.5))


class Side:
    def __init__(self, base: str, token: str, ca: str) -> None:
        self.base = base
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.ssl = ssl.create_default_context(cadata=ca)


async def timed(session: Any, side: Side, method: str, path: str, body: Any = None) -> float:
    data = json.dumps(body).encode() if body is not None else None
    headers = dict(side.headers, **({"Content-Type": "application/json"} if data else {}))
    t0 = time.perf_counter()
    async with session.request(method, side.base + path, data=data, headers=headers, ssl=side.ssl) as resp:
        await resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status}")
    return time.perf_counter() - t0


async def watch_rate(session: Any, side: Side, rv: str, events: int) -> float:
    """Events/s of a watch replaying ``events`` changes from ``rv``."""
    import aiohttp

    url = f"{side.base}{PR_PATH}?watch=true&resourceVersion={rv}&timeoutSeconds=60"
    count = 0
    t0 = time.perf_counter()
    async with session.get(url, headers=side.headers, ssl=side.ssl, timeout=aiohttp.ClientTimeout(total=120)) as resp:
        async for _ in resp.content:
            count += 1
            if count >= events:
                break
    return count / (time.perf_counter() - t0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process: the scheduler's nanoseconds on a CPU summed over its threads
    (``/proc/<pid>/task/*/schedstat``), else ``/proc/<pid>/stat``, which counts in 10 ms ticks: too coarse
    for a process idle at a few ms a second. (The first misses threads that have ended: the processes
    measured keep theirs.)"""
    total, tasks = 0, Path(f"/proc/{pid}/task")
    try:
        for task in tasks.iterdir():
            with contextlib.suppress(FileNotFoundError):  # (a thread ending meanwhile)
                total += int((task / "schedstat").read_text().split()[0])
        if total:
            return total / 1e9
    except OSError:
        pass
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    info: dict[str, Any],
    sidecar: Side,
    floor: Side | None,
    requests: int,
    rounds: int,
    posts: int,
    events: int,
    pid: int,
) -> dict[str, Any]:
    import aiohttp

    w = info["worker1"]
    direct = Side(w["url"], w["token"], w["ca"])
    results: dict[str, Any] = {}
    cm = "/api/v1/namespaces/bench/configmaps/cm"
    slow = "/api/v1/namespaces/bench/configmaps/cm-slow"
    run = f"{PR_PATH}/run-00000"
    # one client, one pool of kept-alive connections for every side (as Kueue has per worker)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=8)) as session:
        kinds: list[tuple[str, Side, str]] = [("pt_direct", direct, cm), ("pt_sidecar", sidecar, cm)]
        if floor is not None:
            kinds.append(("pt_floor", floor, cm))
        kinds += [("tr_direct", direct, run), ("tr_sidecar", sidecar, run)]
        slow_kinds = [("slow_direct", direct, slow), ("slow_sidecar", sidecar, slow)]
        for _, side, path in kinds + slow_kinds:  # warm up connections, caches, the evaluator
            for _ in range(50):
                await timed(session, side, "GET", path)
        samples: dict[str, list[float]] = {key: [] for key, _, _ in kinds + slow_kinds}
        best: dict[str, float] = {}
        per_round = max(1, requests // rounds)
        for _ in range(rounds):
            round_samples: dict[str, list[float]] = {key: [] for key in samples}
            for i in range(per_round):  # interleaved request by request
                for key, side, path in kinds:
                    round_samples[key].append(await timed(session, side, "GET", path))
                if i % 4 == 0:
                    for key, side, path in slow_kinds:
                        round_samples[key].append(await timed(session, side, "GET", path))
            keep_round(round_samples, samples, best)
        for key, values in samples.items():
            results[key] = {"p50": best[key], "p99": pct(values, 0.99), "mean": statistics.mean(values) * 1000}
        # the sidecar's CPU per request (robust to a noisy machine: no waiting counted)
        for key, path in (("cpu_passthrough_ms", cm), ("cpu_transformed_get_ms", run)):
            before = cpu_seconds(pid)
            for _ in range(requests):
                await timed(session, sidecar, "GET", path)
            results[key] = (cpu_seconds(pid) - before) / requests * 1000
        post_direct, post_sidecar = [], []
        post_cpu = 0.0
        for i in range(1, POST_WARMUP + posts + 1):  # the first ones warm up (the policy's probation, caches)
            body = manager_run(i)
            body["spec"].pop("managedBy")
            body["metadata"].setdefault("labels", {})[ORIGIN] = "multikueue"
            body["metadata"].setdefault("annotations", {})[PREBUILT] = f"wl-{i}"
            before = cpu_seconds(pid)
            through = await timed(session, sidecar, "POST", PR_PATH, body)
            cpu = cpu_seconds(pid) - before
            body["metadata"]["name"] += "-direct"
            straight = await timed(session, direct, "POST", PR_PATH, body)
            if i > POST_WARMUP:
                post_sidecar.append(through)
                post_direct.append(straight)
                post_cpu += cpu
        results["post_direct"] = {"p50": pct(post_direct, 0.5), "p99": pct(post_direct, 0.99)}
        results["post_sidecar"] = {"p50": pct(post_sidecar, 0.5), "p99": pct(post_sidecar, 0.99)}
        results["cpu_post_ms"] = post_cpu / posts * 1000
        results["watch_direct"] = await watch_rate(session, direct, info["watch_from"], events)
        before = cpu_seconds(pid)
        results["watch_sidecar"] = await watch_rate(session, sidecar, info["watch_from"], events)
        results["cpu_watch_event_us"] = (cpu_seconds(pid) - before) / events * 1e6
    return results


class PeakRss:
    """The highest RSS of a process while the ``async with`` block runs (sampled every 5 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, rss_mib(self.pid))
            await asyncio.sleep(0.005)

    async def __aenter__(self) -> PeakRss:
        self.peak = rss_mib(self.pid)
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        self.peak = max(self.peak, rss_mib(self.pid))


#: The /healthz prober (its own process, so that the bench's attack clients do not slow its timing):
#: probes every 20 ms until its stdin closes, then prints the slowest answer in ms (10 s: none came).
HEALTHZ_PROBER = """
import socket, sys, threading, time
port, worst, done = int(sys.argv[1]), 0.0, threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
while not done.is_set():
    t0 = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
            while s.recv(65536):
                pass
        worst = max(worst, (time.perf_counter() - t0) * 1000)
    except OSError:
        worst = max(worst, 10000.0)
    time.sleep(0.02)
print(worst)
"""


class Healthz:
    """The slowest ``/healthz`` answer of the ops port while the ``async with`` block runs (a probe every
    20 ms from a process of its own)."""

    def __init__(self, ops: int) -> None:
        self.ops = ops
        self.worst_ms = 0.0
        self._proc: subprocess.Popen[str] | None = None

    async def __aenter__(self) -> Healthz:
        self._proc = guarded(
            subprocess.Popen(
                [sys.executable, "-c", HEALTHZ_PROBER, str(self.ops)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
        await asyncio.sleep(0.1)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._proc is not None
        out, _ = await asyncio.to_thread(self._proc.communicate, "")
        self.worst_ms = float(out.strip() or 10000.0)


async def issue18_attacks(side: Side, pid: int, ops: int, drip: Side | None) -> dict[str, float]:
    """Peak RSS (MiB) and the slowest /healthz (ms) under the attacks of issue 18: an ops-port flood of
    half-sent heads, unauthenticated requests with 64 KiB paths, a 3 MiB CBOR create of tiny values,
    twenty 3 MiB JSON creates at once, clients that stop reading a LIST, and (``drip``: the endpoint of a
    worker that drips its answers) a dripping worker read while worker1 is."""
    from urllib.parse import urlsplit

    import cbor2

    url = urlsplit(side.base)
    host, port = url.hostname or "127.0.0.1", url.port or 443
    out: dict[str, float] = {}

    async def send(raw: bytes, where: tuple[str, int], tls: bool, seconds: float, read: bool = True) -> bytes:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*where, ssl=side.ssl if tls else None), 10)
        except (OSError, ssl.SSLError, TimeoutError):
            return b""
        try:
            writer.write(raw)
            if not read:
                await asyncio.sleep(seconds)
                return b""
            return await asyncio.wait_for(reader.read(), seconds)
        except (OSError, ssl.SSLError, TimeoutError):
            return b""
        finally:
            writer.close()

    async def row(name: str, work: Any) -> None:
        async with PeakRss(pid) as peak, Healthz(ops) as health:
            await work
        out[f"rss_{name}_mib"], out[f"healthz_{name}_ms"] = peak.peak, health.worst_ms

    half = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (60 * 1024)
    await row("ops_flood", asyncio.gather(*(send(half, ("127.0.0.1", ops), False, 3.0) for _ in range(500))))
    long_path = b"GET /api/v1/namespaces/" + b"x" * (60 * 1024) + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    await row("long_paths", asyncio.gather(*(send(long_path, (host, port), True, 10.0) for _ in range(300))))

    def create(body: bytes, kind: str) -> bytes:
        head = (
            f"POST {PR_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: {side.headers['Authorization']}\r\n"
            f"Content-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        return head.encode() + body

    tiny = {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "metadata": {"name": "x"}, "spec": {}}
    cbor_body = cbor2.dumps({**tiny, "spec": {"x": [0] * (3 * 1024 * 1024 - 100)}})
    answers: list[bytes] = []

    async def keep(coro: Any) -> None:
        answers.append(await coro)

    await row("cbor_create", keep(send(create(cbor_body, "application/cbor"), (host, port), True, 60.0)))
    out["cbor_create_status"] = float(answers[-1][9:12] or 0)
    json_body = json.dumps({**tiny, "spec": {"x": [0] * (3 * 1024 * 1024 // 2 - 100)}}).encode()
    json_creates = [send(create(json_body, "application/json"), (host, port), True, 60.0) for _ in range(20)]
    await row("json_creates", keep(asyncio.gather(*json_creates)))
    list_path = "/api/v1/namespaces/list/configmaps"
    listing = f"GET {list_path} HTTP/1.1\r\nHost: x\r\nAuthorization: {side.headers['Authorization']}\r\n\r\n".encode()
    await row(
        "stalled_readers", asyncio.gather(*(send(listing, (host, port), True, 5.0, read=False) for _ in range(120)))
    )
    if drip is not None:
        await row("dripping_worker", dripping_worker(side, drip, out))
    return out


#: Seconds the dripping-worker row lasts; reads of the dripping worker at once.
DRIP_SECONDS = 10.0
DRIP_READERS = 8


async def dripping_worker(side: Side, drip: Side, out: dict[str, float]) -> None:
    """``DRIP_READERS`` clients read PipelineRuns (transformed: read whole) of the dripping worker, again and
    again, while one client reads worker1's: worker1's reads keep their latency and never fail."""
    import aiohttp

    run = f"{PR_PATH}/run-00000"
    end = time.monotonic() + DRIP_SECONDS
    samples: list[float] = []
    failed: dict[int, int] = {}
    dripped: dict[int, int] = {}

    async def read_dripping(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < end:
            try:
                async with session.get(
                    drip.base + run,
                    headers=drip.headers,
                    ssl=drip.ssl,
                    timeout=aiohttp.ClientTimeout(total=max(end - time.monotonic(), 0.1)),
                ) as resp:
                    await resp.read()
                    dripped[resp.status] = dripped.get(resp.status, 0) + 1
                    if resp.status == 429:
                        await asyncio.sleep(0.2)
            except (aiohttp.ClientError, TimeoutError):
                pass

    async def read_worker1(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < end:
            t0 = time.perf_counter()
            async with session.get(side.base + run, headers=side.headers, ssl=side.ssl) as resp:
                await resp.read()
            if resp.status == 200:
                samples.append(time.perf_counter() - t0)
            else:
                failed[resp.status] = failed.get(resp.status, 0) + 1

    async with aiohttp.ClientSession() as hostile, aiohttp.ClientSession() as kueue:
        await asyncio.gather(*(read_dripping(hostile) for _ in range(DRIP_READERS)), read_worker1(kueue))
    out["drip_reads_ok"] = float(len(samples))
    out["drip_reads_failed"] = float(sum(failed.values()))
    out["drip_read_p50_ms"] = pct(samples, 0.5) if samples else float("nan")
    out["drip_read_p99_ms"] = pct(samples, 0.99) if samples else float("nan")
    out["drip_answers"] = float(sum(dripped.values()))
    out["drip_429"] = float(dripped.get(429, 0))


async def attacks(side: Side, pid: int, flood: int) -> dict[str, float]:
    """Peak RSS of the sidecar under each attack of issue 12 on its transport (MiB)."""
    from urllib.parse import urlsplit

    import aiohttp

    url = urlsplit(side.base)
    host, port = url.hostname or "127.0.0.1", url.port or 443
    out: dict[str, float] = {"rss_idle_mib": rss_mib(pid)}
    async with aiohttp.ClientSession() as session:
        path = "/api/v1/namespaces/list/configmaps"

        async def listing() -> int:
            async with session.get(side.base + path, headers=side.headers, ssl=side.ssl) as resp:
                return len(await resp.read())

        async with PeakRss(pid) as peak:
            sizes = await asyncio.gather(listing(), listing())
        out["list_bytes"] = float(sizes[0])
        out["rss_two_lists_mib"] = peak.peak
        body = b"{" + b" " * (16 * 1024 * 1024)
        async with PeakRss(pid) as peak:
            head = {**side.headers, "Content-Type": "application/json"}
            async with session.post(side.base + PR_PATH, data=body, headers=head, ssl=side.ssl) as resp:
                out["big_body_status"] = float(resp.status)
        out["rss_16mib_body_mib"] = peak.peak

    async def hold(send: bytes, seconds: float) -> bool:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=side.ssl), 10)
        except (OSError, ssl.SSLError, TimeoutError):
            return False
        try:
            if send:
                writer.write(send)
            await asyncio.sleep(seconds)
        finally:
            writer.close()
        return True

    async with PeakRss(pid) as peak:
        opened = await asyncio.gather(*(hold(b"", 2.0) for _ in range(flood)))
    out["flood_accepted"] = float(sum(opened))
    out["rss_flood_mib"] = peak.peak
    half = b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (1024 * 1024)
    async with PeakRss(pid) as peak:
        await asyncio.gather(*(hold(half, 2.0) for _ in range(150)))
    out["rss_half_heads_mib"] = peak.peak
    return out


# -- live manager reads (manager.reads: direct): memory and CPU per Kueue reconcile ---------------
#: Kueue's ownership check (jobframework.ValidateRemoteObjectOwnership): metadata only.
METADATA_ACCEPT = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)
#: Worker copies the reconciles cycle over (created through the sidecar first).
LIVE_COPIES = 200


def start_sidecar(tmp: Path, info: dict[str, Any], reads: str) -> tuple[subprocess.Popen[bytes], int, Side]:
    """A sidecar process for the bench clusters, ready; (process, ops port, its endpoint)."""
    import socket

    for name in ("manager", "worker1"):
        (tmp / f"{name}.kubeconfig").write_text(yaml.safe_dump(info[name]["kubeconfig"]))
    if not (tmp / "policies").exists():
        (tmp / "policies").mkdir()
        shutil.copy(ROOT / "policies" / "tekton-pipelinerun.yaml", tmp / "policies")
        shutil.copytree(ROOT / "schemas", tmp / "schemas")
    with socket.socket() as s1, socket.socket() as s2:
        s1.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        port, ops = s1.getsockname()[1], s2.getsockname()[1]
    (tmp / "sidecar.yaml").write_text(
        yaml.safe_dump(
            {
                "listen": {"basePort": port},
                "ops": {"address": "127.0.0.1", "port": ops},
                "manager": {"kubeconfig": str(tmp / "manager.kubeconfig"), "reads": reads},
                "workers": [{"name": "worker1", "kubeconfig": {"file": str(tmp / "worker1.kubeconfig")}}],
                "state": {"dir": None},
                "wire": BENCH_WIRE,
                "logging": {"level": "warning"},
            }
        )
    )
    out = tmp / "out"
    proc = guarded(
        subprocess.Popen(
            [
                *(sys.executable, "-m", "mkpolicy", "sidecar", "--policies", str(tmp / "policies")),
                *("--config", str(tmp / "sidecar.yaml"), "--kubeconfig-dir", str(out)),
            ]
        )
    )
    while not ready(ops) or not (out / "worker1.kubeconfig").exists():
        if proc.poll() is not None:
            raise SystemExit("the sidecar exited")
        time.sleep(0.05)
    return proc, ops, endpoint_side(out / "worker1.kubeconfig")


async def kueue_reconciles(side: Side, pid: int, reconciles: int, rounds: int) -> dict[str, float]:
    """Create the worker copies, then Kueue's reconciles of them; CPU ms per reconcile (median of rounds)."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        for i in range(1, LIVE_COPIES + 1):
            copy = manager_run(i)
            copy["spec"].pop("managedBy")
            copy["metadata"].setdefault("labels", {})[ORIGIN] = "multikueue"
            copy["metadata"].setdefault("annotations", {})[PREBUILT] = f"wl-{i}"
            await timed(session, side, "POST", PR_PATH, copy)
        per_round = max(1, reconciles // rounds)
        cpu, wall = [], []
        meta = Side.__new__(Side)
        meta.base, meta.ssl = side.base, side.ssl
        meta.headers = dict(side.headers, Accept=METADATA_ACCEPT)
        for _ in range(rounds):
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            for n in range(per_round):
                path = f"{PR_PATH}/run-{1 + n % LIVE_COPIES:05d}"
                await timed(session, meta, "GET", path)  # the ownership check: passes through
                await timed(session, side, "GET", path)  # the read whose status is copied: transformed
            cpu.append((cpu_seconds(pid) - c0) / per_round * 1000)
            wall.append((time.perf_counter() - t0) / per_round * 1000)
    return {"cpu_ms": statistics.median(cpu), "wall_ms": statistics.median(wall)}


def live_reads(sizes: list[int], reconciles: int, rounds: int) -> list[dict[str, Any]]:
    """For each manager size: the sidecar's RSS (ready, after the reconciles), CPU per reconcile."""
    out = []
    for objects in sizes:
        tmp = Path(tempfile.mkdtemp(prefix="mkpolicy-bench-live-"))
        clusters = guarded(
            subprocess.Popen(
                [
                    *(sys.executable, __file__, "--serve-clusters", "--objects", str(objects)),
                    *("--events", "0", "--worker-latency-ms", "0", "--list-objects", "0"),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
        proc = None
        try:
            assert clusters.stdout is not None
            info = json.loads(clusters.stdout.readline())
            proc, _, side = start_sidecar(tmp, info, "direct")
            rss_ready = rss_mib(proc.pid)
            figures = asyncio.run(kueue_reconciles(side, proc.pid, reconciles, rounds))
            out.append({"objects": objects, "rss_ready_mib": rss_ready, "rss_after_mib": rss_mib(proc.pid), **figures})
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
            if clusters.stdin is not None:
                clusters.stdin.close()
            clusters.wait(60)
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def print_live_reads(results: list[dict[str, Any]], rounds: int) -> None:
    print(f"{'manager objects':>16} {'RSS ready':>10} {'RSS after':>10} {'CPU/reconcile':>14} {'wall/reconcile':>15}")
    for r in results:
        print(
            f"{r['objects']:>16,} {r['rss_ready_mib']:>7.0f} MiB {r['rss_after_mib']:>7.0f} MiB "
            f"{r['cpu_ms']:>11.2f} ms {r['wall_ms']:>12.2f} ms"
        )
    flat = max(r["rss_after_mib"] for r in results) - min(r["rss_after_mib"] for r in results)
    worst = max(r["rss_after_mib"] for r in results)
    verdict = "ok" if worst <= 100 else "MISSED"
    print(f"RSS spread {flat:.0f} MiB, largest {worst:.0f} MiB (goal: flat, <= 100 MiB): {verdict}")
    print(
        f"(reconcile = Kueue's metadata-only ownership GET + its JSON GET; medians of {rounds} rounds; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def main() -> int:
    if "--real" in sys.argv[1:]:
        import sidecar_real

        return sidecar_real.main(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000, help="GETs per side and kind (all rounds)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of interleaved GETs (best p50 kept)")
    parser.add_argument(
        "--worker-latency-ms", type=float, default=2.0, help="how much later the worker answers the 'slow' GET"
    )
    parser.add_argument("--no-floor", action="store_true", help="leave out the floor relay")
    parser.add_argument(
        "--load", type=int, default=0, metavar="N", help="N busy processes competing for the CPUs while measuring"
    )
    parser.add_argument("--objects", type=int, default=10_000, help="manager PipelineRuns (read live by the sidecar)")
    parser.add_argument("--events", type=int, default=5000, help="watch events to replay")
    parser.add_argument("--posts", type=int, default=300, help="POSTs per side")
    parser.add_argument("--list-objects", type=int, default=10_000, help="worker ConfigMaps for the LIST")
    parser.add_argument("--flood", type=int, default=600, help="idle TLS connections opened at once")
    parser.add_argument("--uvloop", action="store_true", help="run the sidecar on uvloop's event loop")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--profile", metavar="FILE", help="run the sidecar under cProfile, write the stats to FILE")
    parser.add_argument(
        "--live-reads",
        metavar="N,N",
        help="measure manager.reads: direct instead: RSS and CPU per Kueue reconcile for these manager sizes",
    )
    parser.add_argument("--reconciles", type=int, default=2000, help="Kueue reconciles per size (--live-reads)")
    parser.add_argument("--serve-clusters", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", nargs="+", metavar="URL CA [CERT KEY]", help=argparse.SUPPRESS)
    parser.add_argument("--serve-drip", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.live_reads and not args.serve_clusters:
        sizes = [int(n) for n in args.live_reads.split(",")]
        if min(sizes) <= LIVE_COPIES:
            parser.error(f"--live-reads: each size must exceed {LIVE_COPIES} (the copies reconciled)")
        results = live_reads(sizes, args.reconciles, args.rounds)
        if args.json:
            print(json.dumps(results, indent=2))
        else:
            print_live_reads(results, args.rounds)
        return 0
    if args.posts + POST_WARMUP >= args.objects and not args.serve_clusters:
        parser.error(f"--posts must stay below --objects - {POST_WARMUP} (each POST copies a manager object)")
    if args.serve_clusters:
        serve_clusters(args.objects, args.events, args.worker_latency_ms, args.list_objects)
        return 0
    if args.serve_floor:
        if len(args.serve_floor) not in (2, 4):
            parser.error(f"--serve-floor: expected URL CA [CERT KEY]; found {len(args.serve_floor)} values")
        serve_floor(*args.serve_floor)
        return 0
    if args.serve_drip:
        serve_drip()
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="mkpolicy-bench-"))
    clusters = guarded(
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve-clusters",
                "--objects",
                str(args.objects),
                "--events",
                str(args.events),
                "--worker-latency-ms",
                str(args.worker_latency_ms),
                "--list-objects",
                str(args.list_objects),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
    )
    sidecar_proc = None
    floor_proc = None
    drip_proc = None
    try:
        assert clusters.stdout is not None
        t0 = time.monotonic()
        info = json.loads(clusters.stdout.readline())
        seeded = time.monotonic() - t0
        for name in ("manager", "worker1"):
            (tmp / f"{name}.kubeconfig").write_text(yaml.safe_dump(info[name]["kubeconfig"]))
        drip_proc = guarded(
            subprocess.Popen(
                [sys.executable, __file__, "--serve-drip"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        )
        assert drip_proc.stdout is not None
        drip_port = json.loads(drip_proc.stdout.readline())["port"]
        (tmp / "drip.kubeconfig").write_text(yaml.safe_dump(drip_kubeconfig(drip_port)))
        (tmp / "policies").mkdir()
        shutil.copy(ROOT / "policies" / "tekton-pipelinerun.yaml", tmp / "policies")
        shutil.copytree(ROOT / "schemas", tmp / "schemas")
        import socket

        with socket.socket() as s1, socket.socket() as s2:
            s1.bind(("127.0.0.1", 0))
            s2.bind(("127.0.0.1", 0))
            port, ops = s1.getsockname()[1], s2.getsockname()[1]
        (tmp / "sidecar.yaml").write_text(
            yaml.safe_dump(
                {
                    "listen": {"basePort": port},
                    "ops": {"address": "127.0.0.1", "port": ops},
                    "manager": {"kubeconfig": str(tmp / "manager.kubeconfig")},
                    "workers": [
                        {"name": "worker1", "kubeconfig": {"file": str(tmp / "worker1.kubeconfig")}},
                        {"name": "drip", "kubeconfig": {"file": str(tmp / "drip.kubeconfig")}},
                    ],
                    "wire": BENCH_WIRE,
                    "logging": {"level": "warning"},
                }
            )
        )
        t1 = time.monotonic()
        profile = ["-m", "cProfile", "-o", args.profile] if args.profile else []
        # uvloop: its policy set, then the CLI as "python -m mkpolicy" runs it
        entry = (
            ["-c", "import asyncio,sys,uvloop; asyncio.set_event_loop_policy(uvloop.EventLoopPolicy()); "
             "from mkpolicy.cli.main import main; sys.argv[0] = 'mkpolicy'; sys.exit(main())"]
            if args.uvloop
            else ["-m", "mkpolicy"]
        )  # fmt: skip
        sidecar_proc = guarded(
            subprocess.Popen(
                [
                    sys.executable,
                    *profile,
                    *entry,
                    "sidecar",
                    "--policies",
                    str(tmp / "policies"),
                    "--config",
                    str(tmp / "sidecar.yaml"),
                    "--kubeconfig-dir",
                    str(tmp / "out"),
                ],
            )
        )
        while not ready(ops) or not (tmp / "out" / "drip.kubeconfig").exists():
            if sidecar_proc.poll() is not None:
                raise SystemExit("the sidecar exited")
            time.sleep(0.05)
        synced = time.monotonic() - t1
        rss_ready = rss_mib(sidecar_proc.pid)
        side = endpoint_side(tmp / "out" / "worker1.kubeconfig")
        floor = None
        if not args.no_floor:
            worker = info["worker1"]
            floor_proc, floor_info = floor_relay(worker["url"], worker["ca"])
            floor = Side(floor_info["url"], worker["token"], floor_info["ca"])
        # other work on the machine, the same for both sides (--load): plain busy loops
        hogs = [guarded(subprocess.Popen([sys.executable, "-c", "while True: pass"])) for _ in range(args.load)]
        try:
            results = asyncio.run(
                measure(info, side, floor, args.requests, args.rounds, args.posts, args.events, sidecar_proc.pid)
            )
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        rss_cached = rss_mib(sidecar_proc.pid)  # before the attacks grow the heap
        results.update(asyncio.run(attacks(side, sidecar_proc.pid, args.flood)))
        drip = endpoint_side(tmp / "out" / "drip.kubeconfig")
        results.update(asyncio.run(issue18_attacks(side, sidecar_proc.pid, ops, drip)))
        with urllib.request.urlopen(f"http://127.0.0.1:{ops}/metrics", timeout=5) as resp:
            metrics = resp.read().decode()
        results["manager_reads"] = {
            line.split('source="')[1].split('"')[0]: float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("mkpolicy_sidecar_manager_reads_total{")
        }
        results.update(
            loadavg=os.getloadavg()[0],
            load=args.load,
            latency_ms=args.worker_latency_ms,
            objects=args.objects,
            seeded_s=seeded,
            ready_s=synced,
            rss_ready_mib=rss_ready,
            rss_after_mib=rss_cached,
            rss_end_mib=rss_mib(sidecar_proc.pid),
            loop="uvloop" if args.uvloop else "asyncio",
        )
    finally:
        for child in (floor_proc, drip_proc):
            if child is not None and child.stdin is not None:
                child.stdin.close()
                child.wait(30)
        if sidecar_proc is not None:
            sidecar_proc.send_signal(signal.SIGTERM)
            sidecar_proc.wait(30)
        if clusters.stdin is not None:
            clusters.stdin.close()
        clusters.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    r = results
    ratio = r["pt_sidecar"]["p50"] / r["pt_direct"]["p50"]
    rows = [
        (
            "pass-through GET p50",
            f"{r['pt_direct']['p50']:.2f} ms",
            f"{r['pt_sidecar']['p50']:.2f} ms",
            f"{ratio:.2f}x",
            "<= 1.3x",
            ratio <= 1.3,
        ),
        (
            "pass-through GET p99",
            f"{r['pt_direct']['p99']:.2f} ms",
            f"{r['pt_sidecar']['p99']:.2f} ms",
            f"{r['pt_sidecar']['p99'] / r['pt_direct']['p99']:.2f}x",
            "",
            None,
        ),
        *(
            [
                (
                    "  floor: raw TLS relay p50",
                    f"{r['pt_direct']['p50']:.2f} ms",
                    f"{r['pt_floor']['p50']:.2f} ms",
                    f"{r['pt_floor']['p50'] / r['pt_direct']['p50']:.2f}x",
                    "(lower bound)",
                    None,
                )
            ]
            if "pt_floor" in r
            else []
        ),
        (
            f"  worker +{r['latency_ms']:g} ms: GET p50",
            f"{r['slow_direct']['p50']:.2f} ms",
            f"{r['slow_sidecar']['p50']:.2f} ms",
            f"{r['slow_sidecar']['p50'] / r['slow_direct']['p50']:.2f}x",
            "",
            None,
        ),
        (
            "transformed GET p50",
            f"{r['tr_direct']['p50']:.2f} ms",
            f"{r['tr_sidecar']['p50']:.2f} ms",
            f"+{r['tr_sidecar']['p50'] - r['tr_direct']['p50']:.2f} ms",
            "",
            None,
        ),
        (
            "transformed GET p99",
            f"{r['tr_direct']['p99']:.2f} ms",
            f"{r['tr_sidecar']['p99']:.2f} ms",
            f"+{r['tr_sidecar']['p99'] - r['tr_direct']['p99']:.2f} ms",
            "<= 5 ms",
            r["tr_sidecar"]["p99"] <= 5,
        ),
        (
            "transformed POST p50",
            f"{r['post_direct']['p50']:.2f} ms",
            f"{r['post_sidecar']['p50']:.2f} ms",
            f"+{r['post_sidecar']['p50'] - r['post_direct']['p50']:.2f} ms",
            "",
            None,
        ),
        (
            "transformed POST p99",
            f"{r['post_direct']['p99']:.2f} ms",
            f"{r['post_sidecar']['p99']:.2f} ms",
            f"+{r['post_sidecar']['p99'] - r['post_direct']['p99']:.2f} ms",
            "<= 5 ms",
            r["post_sidecar"]["p99"] <= 5,
        ),
        (
            "watch events/s",
            f"{r['watch_direct']:,.0f}",
            f"{r['watch_sidecar']:,.0f}",
            f"{r['watch_sidecar'] / r['watch_direct']:.2f}x",
            ">= 2,000/s",
            r["watch_sidecar"] >= 2000,
        ),
        (
            f"RSS, {r['objects']:,} manager objects",
            "",
            f"{r['rss_after_mib']:.0f} MiB",
            "",
            "<= 150 MiB",
            r["rss_after_mib"] <= 150,
        ),
    ]
    for label, key in (
        (f"RSS, two LISTs of {args.list_objects:,} at once", "rss_two_lists_mib"),
        ("RSS, a 16 MiB create body", "rss_16mib_body_mib"),
        (f"RSS, {args.flood} idle TLS connections", "rss_flood_mib"),
        ("RSS, 150 half-sent 1 MiB heads", "rss_half_heads_mib"),
    ):
        rows.append((label, f"{r['rss_idle_mib']:.0f} MiB", f"{r[key]:.0f} MiB", "", "<= 200 MiB", r[key] <= 200))
    for label, name in (
        ("ops port: 500 half-sent heads", "ops_flood"),
        ("300 unauthenticated 60 KiB paths", "long_paths"),
        ("a 3 MiB CBOR create (3M values)", "cbor_create"),
        ("20 3 MiB JSON creates at once", "json_creates"),
        ("120 LISTs never read", "stalled_readers"),
        (f"a worker dripping {DRIP_READERS} reads", "dripping_worker"),
    ):
        rss, health = r[f"rss_{name}_mib"], r[f"healthz_{name}_ms"]
        goal = "<= 200 MiB, /healthz <= 100 ms"
        idle = f"{r['rss_idle_mib']:.0f} MiB"
        rows.append((f"RSS, {label}", idle, f"{rss:.0f} MiB", f"{health:.0f} ms", goal, rss <= 200 and health <= 100))
    print(f"{'measure':32} {'direct':>12} {'sidecar':>12} {'ratio':>10}  goal")
    for name, d, s, ratio_text, goal, ok in rows:
        mark = "" if ok is None else ("  ok" if ok else "  MISSED")
        print(f"{name:32} {d:>12} {s:>12} {ratio_text:>10}  {goal}{mark}")
    print(
        f"manager reads by the sidecar: {r['manager_reads']}; busy processes beside: {r['load']}; "
        f"load average {r['loadavg']:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"attacks: {r['flood_accepted']:.0f} of {args.flood} flood connections accepted; the 16 MiB body was "
        f"answered {r['big_body_status']:.0f}; a LIST is {r['list_bytes'] / 1e6:.1f} MB; event loop: {r['loop']} "
        "(RSS 'direct' column: the sidecar before the attacks)"
    )
    print(
        f"dripping worker ({DRIP_READERS} reads of {DRIP_BYTES >> 20} MiB answers, {DRIP_PIECE >> 10} KiB every "
        f"{DRIP_INTERVAL * 1000:.0f} ms, for {DRIP_SECONDS:.0f} s): worker1's transformed GETs meanwhile "
        f"{r['drip_reads_ok']:.0f} ok, {r['drip_reads_failed']:.0f} failed, p50 {r['drip_read_p50_ms']:.2f} ms, "
        f"p99 {r['drip_read_p99_ms']:.2f} ms; the dripping worker's reads answered {r['drip_answers']:.0f} times "
        f"({r['drip_429']:.0f} of them 429: its own budget, workerAnswerBudgetBytes)"
    )
    print(
        f"sidecar CPU: pass-through GET {r['cpu_passthrough_ms']:.2f} ms, transformed GET "
        f"{r['cpu_transformed_get_ms']:.2f} ms, POST {r['cpu_post_ms']:.2f} ms, watch event "
        f"{r['cpu_watch_event_us']:.0f} us"
    )
    print(
        f"(seeded {r['objects']:,} manager objects in {r['seeded_s']:.1f}s; sidecar ready, cache synced, "
        f"in {r['ready_s']:.1f}s at {r['rss_ready_mib']:.0f} MiB; pid {os.getpid()})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
