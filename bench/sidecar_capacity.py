"""``bench/sidecar.py --real --capacity N``: N workers at Kueue's client limits through one sidecar, measured.

The ``--real`` run judges "one sidecar core serves >= 100 workers" from the CPU of each
request while Kueue drives a few jobs: a request every 200 ms or so, each
waking an idle event loop. This mode measures the goal as it is stated: **N workers, each
at Kueue's client limits** (15 requests/s: 3 REST clients of 5 QPS, ``sidecar_real``),
through **one sidecar process** serving an endpoint per worker (the configuration a user
writes, nothing else changed), then the same load through the **Go reverse proxy**.
The figure is the process's CPU time over the requests it answered under that load; one
core serves ``1000 / (15 x CPU ms per request)`` workers.

The peers are the ``--real`` ones (``sidecar_real.multikueue_alone``: etcd, a manager and a
worker kube-apiserver); the manager's Kueue is stopped and this script plays its part. Every
worker of the sidecar is the same real worker API server (its own kubeconfig file, its
own namespace on both clusters). Each simulated worker runs Kueue's requests for one job
after another, paced at 15 per second, over three kept-alive connections (one per REST
client: Workloads, the job kind, metadata-only reads) and holds Kueue's two watches
(Workloads and PipelineRuns, the origin label selector, bookmarks) on its namespace. A
job is Kueue's mix as the ``--real`` run counts it through the sidecar's ``/metrics``
(bench/README.md): the GET of the copy before it exists (404), the copy's transformed
create and the remote Workload's create, 5 Workload GETs, 5 GETs answered 404, 4
metadata-only ownership GETs (protobuf), 2-3 transformed GETs of a copy (a live manager
read and the policy's sync each), and the two DELETEs: 21.5 requests a job, a fifth of
them transformed. The Go proxy relays the same requests to the same worker (nothing
transformed: what a proxy in Go costs for the traffic, not for the policy).
With ``--floor`` the same load also goes through the floor relay (``sidecar.serve_floor``:
two TLS legs, bytes copied, nothing parsed, the admin's client certificate shown to the
worker): the least a Python TLS relay costs on this machine, before any HTTP or policy.

Sides alternate for ``--rounds`` rounds (sidecar, Go proxy, Go proxy, sidecar, ...) so
both see the same machine; each round warms up, then measures ``--seconds``. The goal is
read on the 95% interval of workers per core over the rounds (bootstrap): met when all of
it is at or above 100, missed when none of it is, unresolved (more ``--rounds``) otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import platform
import random
import statistics
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sidecar import ORIGIN, Side, cpu_seconds, floor_relay, manager_run, pct, worker_status
from sidecar_real import (
    CLIENT_QPS,
    CLIENTS_PER_WORKER,
    WORKER,
    SecondSidecar,
    copy_body,
    go_proxy,
    log,
    middle_95,
    multikueue_alone,
    print_run,
)
from sidecar_versus import DELETE_OPTIONS, METADATA, workload

from mkpolicy.testing.peers.multikueue import KUEUE_API, RealMultiKueue
from mkpolicy.testing.peers.pki import write_private
from mkpolicy.testing.peers.processes import free_port

#: Requests a second one worker sends at most (Kueue's client limits).
RATE = CLIENT_QPS * CLIENTS_PER_WORKER
#: Seconds of load before each measured window (connections, watches, the evaluator warm).
WARMUP_S = 3.0
#: Seconds each process's idle CPU is measured over before the load.
IDLE_S = 10.0
#: The two sides every run measures, in the order they are reported.
SIDES = ("sidecar", "goproxy")
#: The side ``--floor`` adds: the least any Python TLS relay costs (``sidecar.serve_floor``).
FLOOR = "floor"
#: Seconds a request may take before it counts as failed (a stalled load is an error, not a hang).
REQUEST_TIMEOUT = 60.0
#: The goal: workers one sidecar core serves at those limits.
GOAL_WORKERS = 100
#: The copy each worker creates and deletes once a job, and the one it reads (seeded with a status).
CREATED, READ = 1, 0
#: Kueue's watch (``multikueuecluster.go`` ``establishWatch``: the origin label, bookmarks).
WATCH_QUERY = urllib.parse.urlencode(
    {"allowWatchBookmarks": "true", "labelSelector": f"{ORIGIN}=multikueue", "watch": "true"}
)


@dataclass(frozen=True)
class Call:
    """One of Kueue's requests: its client (connection), method, path under the namespace, expected code."""

    kind: str
    client: int
    method: str
    path: str
    expect: int
    body: dict[str, Any] | None = None
    accept: str = "application/json"


def job(ns: str, j: int) -> list[Call]:
    """Kueue's requests for job ``j`` of a worker whose namespace is ``ns``, in order (the creations first, the
    deletions last, the reads between them in a seeded order)."""
    wl, runs = f"/apis/{KUEUE_API}/namespaces/{ns}/workloads", f"/apis/tekton.dev/v1/namespaces/{ns}/pipelineruns"
    created = copy_body(CREATED, ns)["metadata"]["name"]
    read = f"{runs}/{copy_body(READ, ns)['metadata']['name']}"
    reads = (
        [Call("workload GET", 0, "GET", f"{wl}/admitted", 200)] * 5
        + [Call("GET 404", 0, "GET", f"{wl}/absent", 404)] * 5
        + [Call("metadata GET", 2, "GET", read, 200, accept=METADATA)] * 4
        + [Call("transformed GET", 1, "GET", read, 200)] * (2 + j % 2)
    )
    random.Random(j).shuffle(reads)
    return [
        Call("transformed GET 404", 1, "GET", f"{runs}/{created}", 404),
        Call("transformed create", 1, "POST", runs, 201, copy_body(CREATED, ns)),
        Call("workload create", 0, "POST", wl, 201, workload("job", ns)),
        *reads,
        Call("DELETE", 0, "DELETE", f"{wl}/job", 200, DELETE_OPTIONS),
        Call("DELETE", 1, "DELETE", f"{runs}/{created}", 200, DELETE_OPTIONS),
    ]


#: Requests a job sends on average (the transformed GETs alternate 2 and 3).
PER_JOB = (len(job("x", 0)) + len(job("x", 1))) / 2


class CapacitySidecar(SecondSidecar):
    """A sidecar process with an endpoint per simulated worker, all reaching the one real worker API server:
    the ``--real`` sidecar's configuration (manager, Kueue's version) with its own state and ports, the
    reload interval and limits left at their defaults, nothing wired."""

    def __init__(self, mk: RealMultiKueue, workers: int, folder: Path) -> None:
        self.names = [f"w{i:03d}" for i in range(workers)]
        self.ports = {name: free_port() for name in self.names}
        self.state = folder / "state"

        def defaults(config: dict[str, Any]) -> None:
            for key in ("reload", "logging"):
                config.pop(key, None)
            config["state"] = {"dir": str(self.state)}

        super().__init__(mk, folder, "mkpolicy sidecar (capacity)", self.ports, defaults)

    def sides(self) -> list[Side]:
        """Each worker's endpoint, its token and the sidecar's CA (from its state folder)."""
        tokens = json.loads((self.state / "tokens.json").read_text())
        ca = (self.state / "ca.crt").read_text()
        return [Side(f"https://127.0.0.1:{self.ports[n]}", tokens[n], ca) for n in self.names]


@dataclass
class Tally:
    """What the simulated workers saw: completions (their monotonic time), latencies, errors, watch events."""

    done: list[tuple[float, str, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    events: int = 0

    def window(self, t0: float, t1: float) -> list[tuple[float, str, float]]:
        return [d for d in self.done if t0 <= d[0] <= t1]


class SimulatedWorker:
    """Kueue's traffic to one worker: its requests paced at :data:`RATE` over three connections, two watches."""

    def __init__(self, side: Side, ns: str, tally: Tally) -> None:
        self.side, self.ns, self.tally = side, ns, tally

    async def run(self, start: float, stop: Callable[[], bool]) -> None:
        """Jobs one after another until ``stop()`` says so at a job's end (a job is never left half done)."""
        import aiohttp

        loop = asyncio.get_running_loop()
        # a connection per REST client, and one per watch (client-go's HTTP/1.1 transport)
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), timeout=timeout)
                    for _ in range(CLIENTS_PER_WORKER + 2)]  # fmt: skip
        watches = [asyncio.ensure_future(self.watch(sessions[CLIENTS_PER_WORKER + i], resource))
                   for i, resource in enumerate(("workloads", "pipelineruns"))]  # fmt: skip
        await asyncio.sleep(0.5)  # (the watches open first, as Kueue's do)
        due = max(start, loop.time())
        try:
            for j in itertools.count():
                for call in job(self.ns, j):
                    await asyncio.sleep(max(0.0, due - loop.time()))
                    due += 1 / RATE
                    await self.send(sessions[call.client], call)
                if stop():
                    return
        finally:
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
            for session in sessions:
                await session.close()

    async def send(self, session: Any, call: Call) -> None:
        side = self.side
        data = json.dumps(call.body).encode() if call.body is not None else None
        headers = dict(side.headers, Accept=call.accept, **({"Content-Type": "application/json"} if data else {}))
        t0 = time.monotonic()
        try:
            async with session.request(call.method, side.base + call.path, data=data, headers=headers,
                                       ssl=side.ssl) as resp:  # fmt: skip
                await resp.read()
                status = resp.status
        except Exception as exc:  # (counted: a refused or reset connection is the load's answer)
            self.tally.errors.append(f"{call.kind} {call.method} {call.path}: {type(exc).__name__}: {exc}")
            return
        t1 = time.monotonic()
        if status != call.expect:
            self.tally.errors.append(f"{call.kind} {call.method} {call.path}: {status}, expected {call.expect}")
        self.tally.done.append((t1, call.kind, t1 - t0))

    async def watch(self, session: Any, resource: str) -> None:
        import aiohttp

        group = KUEUE_API if resource == "workloads" else "tekton.dev/v1"
        url = f"{self.side.base}/apis/{group}/namespaces/{self.ns}/{resource}?{WATCH_QUERY}"
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with session.get(url, headers=self.side.headers, ssl=self.side.ssl, timeout=timeout) as resp:
            if resp.status != 200:
                self.tally.errors.append(f"watch {resource}: {resp.status}")
                return
            async for _ in resp.content:
                self.tally.events += 1


async def load(sides: list[Side], namespaces: list[str], pid: int, seconds: float) -> dict[str, Any]:
    """Every worker's traffic through ``sides`` for a warm-up and ``seconds``; ``pid``'s CPU over the window."""
    tally = Tally()
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.5
    stopping = False
    # each worker starts at its own point of the 1/RATE period: the workers' requests spread evenly
    workers = [
        asyncio.ensure_future(SimulatedWorker(side, ns, tally).run(start + i / (RATE * len(sides)), lambda: stopping))
        for i, (side, ns) in enumerate(zip(sides, namespaces, strict=True))
    ]
    await asyncio.sleep(start - loop.time() + WARMUP_S)
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, t1 = cpu_seconds(pid), time.monotonic()
    stopping = True
    await asyncio.gather(*workers)
    done = tally.window(t0, t1)
    latencies = [d[2] for d in done]
    return {
        "cpu_s": cpu1 - cpu0,
        "window_s": t1 - t0,
        "requests": len(done),
        "rate": len(done) / (t1 - t0),
        "p50_ms": pct(latencies, 0.5) if latencies else 0.0,
        "p99_ms": pct(latencies, 0.99) if latencies else 0.0,
        "by_kind_p50_ms": {
            kind: statistics.median(d[2] for d in done if d[1] == kind) * 1000 for kind in sorted({d[1] for d in done})
        },
        "errors": len(tally.errors),
        "first_errors": tally.errors[:5],
        "watch_events": tally.events,
    }


def seed(mk: RealMultiKueue, workers: int) -> list[str]:
    """A namespace per simulated worker: the manager's PipelineRuns (the one read, the one created), on the
    worker the copy read (with a status) and an admitted Workload."""
    namespaces = []
    worker = mk.workers[WORKER].admin
    for i in range(workers):
        ns = mk.new_namespace(f"bench-capacity-{i:03d}")
        for n in (READ, CREATED):
            obj = manager_run(n)
            obj["metadata"]["namespace"] = ns
            mk.manager.admin.create(obj)
        body = copy_body(READ, ns)
        worker.create(body)
        worker.patch("tekton.dev/v1", "PipelineRun", body["metadata"]["name"], {"status": worker_status(READ)},
                     namespace=ns, subresource="status")  # fmt: skip
        worker.create(workload("admitted", ns))
        namespaces.append(ns)
    return namespaces


def idle_rate(pid: int) -> float:
    """CPU seconds a second ``pid`` spends with nothing to do (reloads, the manager's watch)."""
    cpu0 = cpu_seconds(pid)
    time.sleep(IDLE_S)
    return (cpu_seconds(pid) - cpu0) / IDLE_S


def workers_interval(rounds: list[dict[str, Any]], resamples: int = 2000) -> tuple[float, float]:
    """The 95% bootstrap interval of workers per core over ``rounds`` (resampled with replacement, each
    resample's CPU over its requests; seeded, so the same rounds give the same interval)."""
    rng = random.Random(0)
    return middle_95(
        [
            sum(w["requests"] for w in pick) / (RATE * sum(w["cpu_s"] for w in pick))
            for pick in (rng.choices(rounds, k=len(rounds)) for _ in range(resamples))
        ]
    )


def goal_verdict(low: float, high: float) -> str:
    """The workers-per-core goal read on its interval: met when all of it is at or above the goal, missed
    when none of it is."""
    if low >= GOAL_WORKERS:
        return "ok"
    if high < GOAL_WORKERS:
        return "MISSED"
    return "unresolved: more --rounds"


@contextlib.contextmanager
def floor(mk: RealMultiKueue, folder: Path) -> Iterator[tuple[str, str, int]]:
    """The floor relay in front of the real worker, showing it the admin's client certificate: its URL, CA and
    pid."""
    pki = mk.plane.pki
    cert = write_private(folder / "admin.crt", pki.admin.cert_pem)
    key = write_private(folder / "admin.key", pki.admin.key_pem)
    proc, info = floor_relay(mk.workers[WORKER].url, pki.ca.cert_pem.decode(), str(cert), str(key))
    try:
        yield info["url"], info["ca"], proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run(
    workers: int, seconds: float, rounds: int, kueue_version: str, tmp: Path, with_floor: bool = False
) -> dict[str, Any]:
    """The sidecar and the Go proxy (and the floor relay) in turn under ``workers`` workers' load; the figures
    of each."""
    from mkpolicy.testing.peers import build

    build.ensure([*build.all_peers([kueue_version]), build.goproxy()], log=log)
    results: dict[str, Any] = {"kueue": kueue_version, "workers": workers, "seconds": seconds, "rounds": rounds,
                               "python": platform.python_version(), "cpu": cpu_model()}  # fmt: skip
    with multikueue_alone(kueue_version, tmp) as mk:
        # this script plays the manager's Kueue (the worker's stays: its webhooks admit the Workloads)
        mk.kueues["manager"].process.stop()
        namespaces = seed(mk, workers)
        with contextlib.ExitStack() as stack:
            sidecar = stack.enter_context(CapacitySidecar(mk, workers, tmp / "capacity"))
            go = stack.enter_context(go_proxy(mk, WORKER, tmp / "goproxy"))
            assert sidecar.process.pid is not None and go.process.pid is not None
            sides: dict[str, tuple[list[Side], int]] = {
                "sidecar": (sidecar.sides(), sidecar.process.pid),
                "goproxy": ([Side(go.url, go.token, go.ca.cert_pem.decode())] * workers, go.process.pid),
            }
            if with_floor:  # (the relay passes no token: the worker takes its client certificate)
                url, ca, pid = stack.enter_context(floor(mk, tmp / "floor"))
                sides[FLOOR] = ([Side(url, "none", ca)] * workers, pid)
            idle = {name: idle_rate(pid) for name, (_, pid) in sides.items()}
            order = list(sides)
            windows: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
            for r in range(rounds):
                for name in order if r % 2 == 0 else order[::-1]:  # each side first in turn
                    targets, pid = sides[name]
                    log(f"round {r + 1}/{rounds}: {workers} workers x {RATE}/s through the {name}, {seconds:.0f}s")
                    window = asyncio.run(load(targets, namespaces, pid, seconds))
                    if window["errors"]:
                        raise SystemExit(f"bench: {window['errors']} requests through the {name} failed, e.g. "
                                         + "; ".join(window["first_errors"]))  # fmt: skip
                    windows[name].append(window)
    for name, got in windows.items():
        results[name] = summary(got, idle[name])
    results.update(offered=workers * RATE, loadavg=os.getloadavg()[0], cpus=os.cpu_count())
    return results


def summary(got: list[dict[str, Any]], idle: float) -> dict[str, Any]:
    """One side's figures over its measured rounds ``got``; ``idle``: its CPU seconds a second with no load."""
    cpu = sum(w["cpu_s"] for w in got)
    span = sum(w["window_s"] for w in got)
    served = sum(w["requests"] for w in got)
    per_request = cpu / served * 1000
    return {
        "rounds": got,
        "idle_ms_per_s": idle * 1000,
        "rate": served / span,
        "cores": cpu / span,
        "cpu_per_request_ms": per_request,
        "net_cpu_per_request_ms": max(0.0, cpu - idle * span) / served * 1000,
        "workers_per_core": 1000 / (RATE * per_request),
        "workers_per_core_interval": workers_interval(got),
        "workers_per_core_by_round": [w["requests"] / (RATE * w["cpu_s"]) for w in got],
        "p50_ms": statistics.median(w["p50_ms"] for w in got),
        "p99_ms": max(w["p99_ms"] for w in got),
    }


#: What a pooled run's rounds must share: they measure the same load.
SAME_LOAD = ("kueue", "workers", "seconds")
#: ... and on the same kind of machine, where the output says (key -> what it is, why it must be one).
SAME_MACHINE = {
    "python": ("Python", "the sidecar's CPU is the interpreter's; rounds of different interpreters do not pool"),
    # the same sidecar read 102 workers per core on one host and 140 on a newer one (bench/README.md)
    "cpu": ("CPU", "the figures are the processor's; rounds of different processors do not pool"),
}


def cpu_model() -> str:
    """The processor: its model name with its family and model numbers (``/proc/cpuinfo``: a VM may name
    every generation "AMD EPYC"), else what the platform says."""
    info: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if not name.strip():
                break  # (the first processor's block is enough)
            info.setdefault(name.strip(), value.strip())
    if not info.get("model name"):
        return platform.processor() or platform.machine()
    numbers = ", ".join(f"{key} {info[key]}" for key in ("cpu family", "model") if info.get(key))
    return f"{info['model name']} ({numbers})" if numbers else info["model name"]


#: What the figures are made of, in each measured round.
ROUND_KEYS = frozenset({"cpu_s", "window_s", "requests", "p50_ms", "p99_ms", "by_kind_p50_ms"})


def pool(files: list[Path]) -> dict[str, Any]:
    """The rounds of several ``--capacity --json`` outputs taken together, as one run of all of them (each
    side's idle rate: the runs' own, weighted by their measured time). ValueError naming the file that is not
    such an output, or whose load differs from the first's."""
    runs: list[dict[str, Any]] = []
    for path in files:
        try:
            run_ = json.loads(path.read_text())
        except OSError as exc:
            raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}:{exc.colno}: expected a --capacity --json output; "
                             f"found invalid JSON ({exc.msg})") from None  # fmt: skip
        try:
            complete = all(run_[key] is not None for key in (*SAME_LOAD, "cpus", "loadavg"))
        except (KeyError, TypeError):
            complete = False
        if not complete or not all(_complete(run_, side) for side in SIDES):
            raise ValueError(
                f"{path}: expected a --capacity --json output ({', '.join(SAME_LOAD)}, and the rounds of the "
                f"{' and the '.join(SIDES)}); found {str(run_)[:80]!r}"
            )
        for key in SAME_LOAD:
            if runs and run_[key] != runs[0][key]:
                raise ValueError(f"{path}: {key} {run_[key]}, where {files[0]} has {runs[0][key]}: "
                                 "rounds of different loads do not pool")  # fmt: skip
        for key, (what, why) in SAME_MACHINE.items():
            seen = {r.get(key) for r in (*runs, run_)} - {None}  # (outputs before 2026-11-27 do not say)
            if len(seen) > 1:
                raise ValueError(f"{path}: {what} {run_.get(key)}, where an earlier file has "
                                 f"{' and '.join(sorted(seen - {run_.get(key)}))}: {why}")  # fmt: skip
        runs.append(run_)
    first = runs[0]
    results: dict[str, Any] = {key: first[key] for key in SAME_LOAD}
    results.update(files=[str(f) for f in files], rounds=sum(r["rounds"] for r in runs))
    for key in SAME_MACHINE:
        for value in {r.get(key) for r in runs} - {None}:  # (at most one: checked above)
            results[key] = value
    for side in (*SIDES, *((FLOOR,) if all(_complete(r, FLOOR) for r in runs) else ())):
        got = [w for r in runs for w in r[side]["rounds"]]
        spans = [sum(w["window_s"] for w in r[side]["rounds"]) for r in runs]
        idle = sum(r[side]["idle_ms_per_s"] / 1000 * span for r, span in zip(runs, spans, strict=True)) / sum(spans)
        results[side] = summary(got, idle)
    results.update(offered=first["workers"] * RATE, loadavg=max(r["loadavg"] for r in runs), cpus=first["cpus"])
    return results


def _complete(run_: Any, side: str) -> bool:
    """``run_`` holds ``side``'s measured rounds."""
    try:
        got = run_[side]
        return bool(got["idle_ms_per_s"] >= 0 and got["rounds"] and all(set(w) >= ROUND_KEYS for w in got["rounds"]))
    except (KeyError, TypeError):
        return False


def sides(r: dict[str, Any]) -> list[str]:
    """The sides a run or a pool measured, in the order they are reported."""
    return [*SIDES, *((FLOOR,) if FLOOR in r else ())]


def report(r: dict[str, Any]) -> None:
    """The table: each side's rate, latency and CPU; workers per core against the goal."""
    print(
        f"{r['workers']} workers at Kueue's client limits ({RATE} requests/s each, {PER_JOB:g} a job: Kueue's mix), "
        f"{r['offered']}/s offered; {r['rounds']} rounds of {r['seconds']:.0f}s a side, alternating; Kueue "
        f"{r['kueue']}"
        + (f"; the sidecar on Python {r['python']}" if r.get("python") else "")
        + (f"; CPU: {r['cpu']}" if r.get("cpu") else "")
    )
    print(f"{'':10} {'served/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'cores':>6} {'CPU ms/request':>15} "
          f"{'(no idle)':>9} {'workers/core':>13}")  # fmt: skip
    for name in sides(r):
        s = r[name]
        print(
            f"{name:10} {s['rate']:9.0f} {s['p50_ms']:7.1f} {s['p99_ms']:7.1f} {s['cores']:6.2f} "
            f"{s['cpu_per_request_ms']:15.3f} {s['net_cpu_per_request_ms']:9.3f} {s['workers_per_core']:13.0f}"
        )
    side, go = r["sidecar"], r["goproxy"]
    low, high = side["workers_per_core_interval"]
    print(
        f"one sidecar core serves 1000 / ({side['cpu_per_request_ms']:.3f} ms x {RATE}/s) = "
        f"{side['workers_per_core']:.0f} workers, 95% interval over the rounds {low:.0f}-{high:.0f} (goal >= "
        f"{GOAL_WORKERS}: {goal_verdict(low, high)}); the Go proxy {go['workers_per_core']:.0f}; sidecar/Go CPU per "
        f"request {side['cpu_per_request_ms'] / go['cpu_per_request_ms']:.2f}x"
    )
    if FLOOR in r:
        floor_ms = r[FLOOR]["cpu_per_request_ms"]
        print(
            f"the floor relay (two TLS legs, bytes copied, nothing parsed) {floor_ms:.3f} ms a request: the sidecar "
            f"{side['cpu_per_request_ms'] / floor_ms:.2f}x it, the Go proxy {go['cpu_per_request_ms'] / floor_ms:.2f}x"
        )
    for name in sides(r):
        figures = ", ".join(f"{f:.0f}" for f in r[name]["workers_per_core_by_round"])
        print(f"{name} workers per core, round by round: {figures}")
    kinds = side["rounds"][0]["by_kind_p50_ms"]
    print("sidecar p50 by kind (ms, first round): " + ", ".join(f"{k} {v:.1f}" for k, v in kinds.items()))
    load = "highest load average of the runs" if "files" in r else "load average"
    print(f"({load} {r['loadavg']:.1f} on {r['cpus']} CPUs)")


def main(workers: int, seconds: float, rounds: int, kueue_version: str, as_json: bool, with_floor: bool = False) -> int:
    """Run and print."""
    return print_run(
        "mkpolicy-bench-capacity-",
        lambda tmp: run(workers, seconds, rounds, kueue_version, tmp, with_floor),
        report,
        as_json,
    )
