"""``bench/sidecar.py --real --against SRC``: this checkout's sidecar and another version's, request by request.

One MultiKueue on the real peers, and two sidecar processes in front of its worker: this
checkout's (wired, as ``--real`` runs it) and one running the ``mkpolicy`` package found in
SRC (e.g. main: ``git archive main mkpolicy | tar -x -C SRC``), started from a copy of the
first one's configuration (the same state folder, so the same CA and token; the worker's
kubeconfig from a file, nothing wired). The manager's Kueue is stopped first (it would
talk to the wired sidecar alone: its reads, and the watch events of the bench's
creations). Each kind of request Kueue sends a worker goes to one sidecar and then the
other, each first in turn, over kept-alive connections (client-go's), so both see the same
machine load; the figure is each process's own CPU time (``/proc``) over a kind's
requests, its idle rate (reloads, manager watch) measured beforehand and subtracted. The
kinds are Kueue's mix (bench/README.md): a Workload GET (its object over 2 KiB, which
kube-apiserver sends chunked), a GET answered 404, the metadata-only ownership GET
(protobuf, ``as=PartialObjectMetadata``), the transformed GET of a copy (a live manager
read and the policy's sync), a Workload create and its DELETE (small bodies, passed
through), the transformed create of a copy and its DELETE.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import os
import time
from pathlib import Path
from typing import Any

from sidecar import Side, cpu_seconds, timed, worker_status
from sidecar_real import WORKER, SecondSidecar, copy_body, log, multikueue_alone, print_run, wired_side

from mkpolicy.testing.peers.multikueue import KUEUE_API, RealMultiKueue
from mkpolicy.testing.peers.processes import free_port

#: Seconds each sidecar's idle CPU is measured over (10 ms ticks).
IDLE_S = 10.0
#: Kueue's ownership check (controller-runtime's metadata client).
METADATA = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)
#: What controller-runtime's Delete sends (a DeleteOptions body).
DELETE_OPTIONS = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}


class Other(SecondSidecar):
    """The second sidecar: SRC's mkpolicy, the first one's configuration on other ports, nothing wired."""

    def __init__(self, mk: RealMultiKueue, src: Path, folder: Path) -> None:
        self.port = free_port()
        super().__init__(mk, folder, "mkpolicy sidecar (other)", {WORKER: self.port}, src=src)


def workload(name: str, ns: str) -> dict[str, Any]:
    """A Workload as Kueue creates it on a worker (a pod template with requests)."""
    container = {"name": "c", "image": "registry.example/train:1", "resources": {"requests": {"cpu": "1"}}}
    pod = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"}},
        "spec": {"queueName": "none", "podSets": [{"name": "main", "count": 1, "template": pod}]},
    }


async def compare(mk: RealMultiKueue, other: Other, ns: str, requests: int) -> dict[str, Any]:
    """Each kind, ``requests`` times per sidecar in turn: CPU ms per request of each."""
    import aiohttp

    assert mk.sidecar is not None and mk.sidecar.process.pid is not None and other.process.pid is not None
    this = wired_side(mk)
    that = copy.copy(this)  # the same token and CA (the same state folder)
    that.base = f"https://127.0.0.1:{other.port}"
    sides = {"this": (this, mk.sidecar.process.pid), "other": (that, other.process.pid)}
    order = [list(sides.items()), list(sides.items())[::-1]]
    idle0 = {name: cpu_seconds(pid) for name, (_, pid) in sides.items()}
    time.sleep(IDLE_S)
    idle = {name: (cpu_seconds(pid) - idle0[name]) / IDLE_S for name, (_, pid) in sides.items()}
    base = f"/apis/{KUEUE_API}/namespaces/{ns}/workloads"
    runs = f"/apis/tekton.dev/v1/namespaces/{ns}/pipelineruns"
    results: dict[str, Any] = {"idle_ms_per_s": {k: v * 1000 for k, v in idle.items()}}
    workloads, copies = itertools.count(), itertools.count(1)  # (run 0's copy is the one read)

    async def kind(label: str, once: Any) -> None:
        """``once(session, side, name)`` ``requests`` times per side in turn; CPU ms per request each."""
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=8)) as session:
            for name, (side, _) in sides.items():  # warm the connections and the evaluator
                for _ in range(5):
                    await once(session, side, name)
            cpu0 = {name: cpu_seconds(pid) for name, (_, pid) in sides.items()}
            t0 = time.monotonic()
            for i in range(requests):
                for name, (side, _) in order[i % 2]:  # each first in turn
                    await once(session, side, name)
            window = time.monotonic() - t0
            results[label] = {
                name: max(0.0, cpu_seconds(pid) - cpu0[name] - idle[name] * window) / requests * 1000
                for name, (_, pid) in sides.items()
            }
        log(f"{label}: " + ", ".join(f"{n} {v:.3f} ms" for n, v in results[label].items()))

    async def workload_get(session: Any, side: Side, name: str) -> None:
        await timed(session, side, "GET", f"{base}/admitted")

    async def missing_get(session: Any, side: Side, name: str) -> None:
        with contextlib.suppress(RuntimeError):  # (404, as Kueue's reads of copies already deleted)
            await timed(session, side, "GET", f"{base}/absent")

    async def metadata_get(session: Any, side: Side, name: str) -> None:
        headers = dict(side.headers, Accept=METADATA)
        async with session.get(side.base + f"{runs}/run-00000", headers=headers, ssl=side.ssl) as resp:
            await resp.read()
            assert resp.status == 200, resp.status

    async def transformed_get(session: Any, side: Side, name: str) -> None:
        await timed(session, side, "GET", f"{runs}/run-00000")

    async def create_delete(session: Any, side: Side, name: str) -> None:
        wl = f"wl-{name}-{next(workloads)}"
        await timed(session, side, "POST", base, workload(wl, ns))
        await timed(session, side, "DELETE", f"{base}/{wl}", DELETE_OPTIONS)

    async def transformed_create_delete(session: Any, side: Side, name: str) -> None:
        body = copy_body(next(copies), ns)
        await timed(session, side, "POST", runs, body)
        await timed(session, side, "DELETE", f"{runs}/{body['metadata']['name']}", DELETE_OPTIONS)

    await kind("workload_get", workload_get)
    await kind("missing_get", missing_get)
    await kind("metadata_get", metadata_get)
    await kind("transformed_get", transformed_get)
    await kind("create_delete", create_delete)
    await kind("transformed_create_delete", transformed_create_delete)
    return results


def seed(mk: RealMultiKueue, requests: int) -> str:
    """The namespace: manager PipelineRuns for every transformed create, a copy on the worker, an admitted Workload."""
    from sidecar import manager_run

    ns = mk.new_namespace("bench-versus")
    worker = mk.workers[WORKER].admin
    for i in range(2 * requests + 20):
        obj = manager_run(i)
        obj["metadata"]["namespace"] = ns
        mk.manager.admin.create(obj)
    copy = copy_body(0, ns)
    worker.create(copy)
    worker.patch("tekton.dev/v1", "PipelineRun", copy["metadata"]["name"], {"status": worker_status(0)},
                 namespace=ns, subresource="status")  # fmt: skip
    worker.create(workload("admitted", ns))
    now = "2026-11-27T04:00:00Z"
    conditions = [
        {"type": kind, "status": "True", "reason": kind, "message": f"The workload is {kind.lower()} by MultiKueue",
         "lastTransitionTime": now, "observedGeneration": 1}
        for kind in ("QuotaReserved", "Admitted")
    ]  # fmt: skip
    admission = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1,
                 "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}}]}  # fmt: skip
    worker.patch(KUEUE_API, "Workload", "admitted", {"status": {"conditions": conditions, "admission": admission}},
                 namespace=ns, subresource="status")  # fmt: skip
    return ns


def run(src: Path, requests: int, kueue_version: str, tmp: Path) -> dict[str, Any]:
    """Both sidecars on one MultiKueue; the CPU per request of each kind on each."""
    with multikueue_alone(kueue_version, tmp) as mk:
        ns = seed(mk, requests)
        # the manager's Kueue stopped: it would send requests (and get watch events) through the wired sidecar alone
        mk.kueues["manager"].process.stop()
        with Other(mk, src, tmp / "other") as other:
            results = asyncio.run(compare(mk, other, ns, requests))
    results.update(loadavg=os.getloadavg()[0], against=str(src), requests=requests)
    return results


def report(r: dict[str, Any]) -> None:
    """Each kind: CPU ms per request of this checkout's sidecar and the other one's."""
    print(f"sidecar CPU per request (ms), this checkout vs {r['against']}, {r['requests']} of each kind, in turn")
    print(f"{'kind':28} {'other':>8} {'this':>8} {'this/other':>11}")
    for key, value in r.items():
        if isinstance(value, dict) and "this" in value and key != "idle_ms_per_s":
            ratio = f"{value['this'] / value['other']:10.2f}x" if value["other"] else f"{'n/a':>11}"
            print(f"{key:28} {value['other']:8.3f} {value['this']:8.3f} {ratio}")
    idle = r["idle_ms_per_s"]
    print(f"idle background (ms per s, subtracted): other {idle['other']:.2f}, this {idle['this']:.2f}")
    print(f"(load average {r['loadavg']:.1f})")


def main(src: str, requests: int, kueue_version: str, as_json: bool) -> int:
    """Run and print."""
    return print_run(
        "mkpolicy-bench-versus-", lambda tmp: run(Path(src).resolve(), requests, kueue_version, tmp), report, as_json
    )
