"""Kueue's model held against real Kueue, request by request, through the sidecar.

The same lifecycles — connect, dispatch, status write-back, finish; and eviction (the
manager's Workload deactivated), the quota released, re-dispatch to the other worker —
played twice per Kueue version: on real peers (real Kueue, ``real_multikueue``) and on
loopback API servers with Kueue's model at the same version (``Kueue(version=...)``), the
sidecar between Kueue and the workers both times, its request log on
(:mod:`mkpolicy.sidecar.requestlog`). The two logs are compared as request shapes per phase
(:mod:`mkpolicy.testing.requestshapes`): every difference left is listed in docs/testing.md
("The model against real Kueue, request by request") with its reason, and asserted exactly
here, so a new difference fails and so does a fixed one.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from peer_waits import condition, eventually, exists
from test_multikueue_real import PR, WL, Scenario, pipelinerun, tekton_status

from mkpolicy.sidecar.requestlog import read_log
from mkpolicy.testing.kueue.simulate import DEACTIVATED, workload_name
from mkpolicy.testing.peers.multikueue import KUEUE_API, LOCAL_QUEUE, RealMultiKueue
from mkpolicy.testing.requestshapes import Shape, compare, phases, shape_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sidecar"))
from sidecar_harness import clusters, multikueue, policy_dir

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
TEKTON = ROOT / "policies" / "tekton-pipelinerun.yaml"
#: Seconds for the reconciles a step set off to end before the next phase starts (real Kueue
#: batches a Workload's events for a second; the model at time_scale 0.01 for 10 ms).
SETTLE = {"real": 3.0, "model": 0.5}
#: What the model sends otherwise than real Kueue, per version (docs/testing.md, "The model
#: against real Kueue, request by request", says why).
DIFFERENCES: dict[str, list[str]] = {
    "v0.19.2": [],
    "v0.17.1": [
        # the manager's whole object is the creation body before 0.17.7; kube-apiserver keeps
        # managedFields in it, the loopback server keeps none
        "dispatch: worker1 POST /apis/tekton.dev/v1/namespaces/{ns}/pipelineruns: body: only real: metadata.managedFields",
    ],
}
#: Kueue's garbage collector's LIST (the remote Workloads of its origin, every namespace).
GC_LIST = "/apis/kueue.x-k8s.io/v1beta2/workloads"
#: The job's name (distinctive: it is replaced by ``{job}`` wherever it appears).
JOB = "mvrjob"
#: What the model sends otherwise than real Kueue in the eviction lifecycle, per version.
EVICTION_DIFFERENCES: dict[str, list[str]] = {
    "v0.19.2": [],
    "v0.17.1": [
        # each job creation: the manager's whole object before 0.17.7 (as in DIFFERENCES)
        "dispatch: worker1 POST /apis/tekton.dev/v1/namespaces/{ns}/pipelineruns: body: only real: metadata.managedFields",
        "evict: {worker} POST /apis/tekton.dev/v1/namespaces/{ns}/pipelineruns: body: only real: metadata.managedFields",
        "redispatch: worker2 POST /apis/tekton.dev/v1/namespaces/{ns}/pipelineruns: body: only real: metadata.managedFields",
    ],
}
#: The eviction's window (the manager's Workload evicted, its quota not yet released) and the
#: release after it: which worker the job is synced to there is real Kueue's
#: ``bestMatchByCondition``, the earliest ``Evicted`` remote — the two workers' Kueue evict theirs
#: within milliseconds, nearly always in the same second (``metav1.Time``), and then Go's map
#: order picks one, at random per reconcile (so a run may sync it to both). These phases' job
#: requests name ``{worker}`` instead of the worker, on both sides: every request stays, only
#: which worker it went to is not compared.
WINDOW = ("evict", "release")


def recorded(log: Path, marks: list[tuple[str, float]], ns: str, names: dict[str, str]) -> dict[str, set[Shape]]:
    """A run's shapes per phase: ``connect`` — the requests outside any namespace (discovery,
    watches, garbage collection) of Kueue's first connection (before the log's first namespaced
    request) and during the scenario (not those of other tests sharing the peers, which may
    restart the sidecar or stop a worker); then the scenario's phases, the requests in its
    namespace."""
    entries = read_log(str(log))
    start = marks[0][1]
    first = min((e["t"] for e in entries if "/namespaces/" in e["path"]), default=start)
    connect = {
        shape_of(e, names) for e in entries if "/namespaces/" not in e["path"] and (e["t"] < first or e["t"] >= start)
    }
    inside = [e for e in entries if f"/namespaces/{ns}/" in e["path"]]
    return {"connect": connect, **phases(inside, marks, names)}


def gc_ran(log: Path, since: float) -> bool:
    """Whether Kueue's garbage collector has LISTed both workers' Workloads since ``since``
    (``runGC``, every ``gcInterval``: 30 s on the real peers)."""
    entries = read_log(str(log))
    lists = {e["cluster"] for e in entries
             if e["t"] >= since and e["method"] == "GET" and e["path"] == GC_LIST and "watch" not in e["query"]}  # fmt: skip
    return lists == {"worker1", "worker2"}


def real_run(mk: RealMultiKueue, ns: str, tmp: Path) -> tuple[dict[str, set[Shape]], bool]:
    """The lifecycle on real Kueue (what ``test_multikueue_real`` plays, phase by phase); the
    shapes per phase and whether MultiKueue reconciled the Workload before its quota was reserved."""
    s = Scenario(mk, ns, tmp)
    marks: list[tuple[str, float]] = []
    settle = SETTLE["real"]
    marks.append(("dispatch", time.time()))
    wl = s.submit(JOB)
    s.copy_created(JOB, wl, "worker1")
    s.admitted_on(wl, "worker1")
    s.nothing_left(JOB, wl, "worker2")
    time.sleep(settle)
    marks.append(("status", time.time()))
    s.status_written(JOB, wl, "worker1", 2)
    time.sleep(settle)
    marks.append(("finish", time.time()))
    s.finish(wl, "worker1")
    eventually(lambda: condition(s.manager().get(*WL, wl, ns), "Finished").get("status") == "True",
               "the manager's Workload finished")  # fmt: skip
    s.nothing_left(JOB, wl, "worker1")
    time.sleep(settle)
    assert mk.sidecar is not None
    log = mk.sidecar.request_log
    eventually(lambda: gc_ran(log, marks[0][1]), "Kueue's garbage collection LISTs")
    return recorded(log, marks, ns, {ns: "{ns}", wl: "{workload}", JOB: "{job}"}), before_quota(log, ns, marks[0][1])


def before_quota(log: Path, ns: str, since: float) -> bool:
    """Whether real Kueue's MultiKueue reconciled the Workload submitted (or reactivated) at ``since``
    before its scheduler reserved the quota (a race inside Kueue): the workload controller adds the
    check, Pending, first (``workload_controller.go`` ``reconcileSyncAdmissionChecks``), and a
    reconcile without quota removes the remote objects (``workload.go`` step 2: the job's
    ownership GET, or before 0.17.6 its DELETE) before any remote Workload is created."""
    entries = [e for e in read_log(str(log)) if e["t"] >= since and f"/namespaces/{ns}/" in e["path"]]
    created = min((e["t"] for e in entries if e["method"] == "POST" and e["path"].endswith("/workloads")),
                  default=float("inf"))  # fmt: skip
    return any(e["t"] < created and "/pipelineruns" in e["path"] for e in entries)


async def dispatched_to_worker1(env: Any, mk: Any, model: Any, log: Path, reconciled_first: bool) -> str:
    """The model's dispatch phase: the job and its Workload created, quota reserved (after
    MultiKueue's reconcile of the Workload without quota when ``reconciled_first``, as in the real
    run), dispatched to both workers, worker1 admits (the job created there), worker2's remote
    Workload removed; the Workload's name."""
    ns = env.ns
    job = pipelinerun(JOB, ns)
    job["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    since = time.time()
    wl = submit(env.manager, job)
    if reconciled_first:
        mk.core.queue(wl, ns)
        await model.wait_for(
            lambda: settled(log, ns, SETTLE["model"], since), what="the Workload without quota reconciled"
        )
    mk.core.admit(wl, ns)
    await model.wait_for(lambda: model.outcome_kinds(ns, wl).count("dispatched") == 2, what="dispatch")
    mk.worker_kueue["worker1"].admit(wl, ns, finalizer=False)
    await model.wait_for(lambda: mk.workers["worker1"].list(*PR, namespace=ns), what="the copy on worker1")
    await model.wait_for(
        lambda: not mk.workers["worker2"].list(*WL, namespace=ns), what="worker2's remote Workload gone"
    )
    await model.wait_for(lambda: settled(log, ns, SETTLE["model"]), what="dispatch settled")
    return wl


def submit(manager: Any, job: dict[str, Any]) -> str:
    """The PipelineRun created, then its Workload as the real run's integration makes it
    (``Scenario.submit``: a controller ownerReference, LocalQueue ``lq``, one pod set); its name."""
    job = manager.create(job)
    meta = job["metadata"]
    name = workload_name("PipelineRun", meta["name"], meta["uid"], "tekton.dev")
    owner = {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    pod = {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip
    manager.create({"apiVersion": KUEUE_API, "kind": "Workload",
                    "metadata": {"name": name, "namespace": meta["namespace"], "ownerReferences": [owner]},
                    "spec": {"queueName": LOCAL_QUEUE, "podSets": [{"name": "main", "count": 1, "template": pod}]}})  # fmt: skip
    return name


@asynccontextmanager
async def model_kueue(env: Any, tmp: Path, version: str, log: Path) -> AsyncIterator[tuple[Any, Any]]:
    """Kueue's model at ``version`` on ``env``'s loopback servers, the sidecar between it and the
    workers with its request log in ``log``; once connected to both workers."""
    config = {"logging": {"requestLog": {"file": str(log)}}}
    async with multikueue(env, policy_dir(tmp, TEKTON), version=version.lstrip("v"),
                          sidecar_config=config) as (mk, _, model):  # fmt: skip
        await model.wait_connected("worker1", "worker2")
        yield mk, model


def model_run(version: str, tmp: Path, reconciled_first: bool) -> dict[str, set[Shape]]:
    """The same lifecycle with Kueue's model at ``version`` on loopback servers; the test plays the
    manager's scheduler and the workers' Kueue as real Kueue does them (worker1 admits, worker2 has
    no quota and never does) and Tekton as the real run does."""
    log = tmp / "model-requests.jsonl"
    marks: list[tuple[str, float]] = []
    settle = SETTLE["model"]
    with clusters(tmp) as env:
        ns = env.ns

        async def scenario() -> str:
            async with model_kueue(env, tmp, version, log) as (mk, model):
                worker1 = mk.workers["worker1"]

                async def until(check: Callable[[], Any], what: str) -> None:
                    await model.wait_for(check, what=what)

                marks.append(("dispatch", time.time()))
                wl = await dispatched_to_worker1(env, mk, model, log, reconciled_first)
                marks.append(("status", time.time()))
                worker1.patch(*PR, JOB, {"status": tekton_status(2)}, namespace=ns, subresource="status")
                await until(lambda: "status" in env.manager.get(*PR, JOB, ns), "status written back")
                await asyncio.sleep(settle)
                marks.append(("finish", time.time()))
                mk.worker_kueue["worker1"].finish(wl, ns)
                await until(lambda: "finished" in model.outcome_kinds(ns, wl), "finished")
                await until(lambda: not worker1.list(*PR, namespace=ns) and not worker1.list(*WL, namespace=ns),
                            "nothing left on worker1")  # fmt: skip
                await asyncio.sleep(settle)
                return wl

        wl = asyncio.run(scenario())
    return recorded(log, marks, ns, {ns: "{ns}", wl: "{workload}", JOB: "{job}"})


def test_model_sends_what_real_kueue_sends(
    real_multikueue: RealMultiKueue, real_namespace: str, tmp_path: Path
) -> None:
    """Per Kueue version: the model's requests and real Kueue's, shape by shape and phase by phase;
    what differs is exactly the list in docs/testing.md."""
    version = real_multikueue.kueue_version
    real, reconciled_first = real_run(real_multikueue, real_namespace, tmp_path)
    model = model_run(version, tmp_path, reconciled_first)
    assert [d.line() for d in compare(model, real)] == DIFFERENCES[version]


def settled(log: Path, ns: str, quiet: float, since: float = 0.0) -> bool:
    """Whether no request in ``ns`` has reached the sidecar for ``quiet`` seconds (the reconciles a
    step set off have ended: the next phase starts clean), the last one after ``since``."""
    last = max((e["t"] for e in read_log(str(log)) if f"/namespaces/{ns}/" in e["path"]), default=0.0)
    return last > since and time.time() - last >= quiet


def evicted_at(workload: dict[str, Any]) -> str:
    """When a worker's Kueue evicted a remote Workload (its ``Evicted`` condition's time, seconds)."""
    return str(condition(workload, "Evicted").get("lastTransitionTime") or "")


def window_order(evicted: dict[str, str]) -> list[str]:
    """The workers in the order their Kueue evicted the remote Workload (within one second: by name)."""
    return sorted(evicted, key=lambda worker: (evicted[worker], worker))


def worker_merged(shapes: dict[str, set[Shape]]) -> dict[str, set[Shape]]:
    """``shapes`` with the job's requests in the eviction's window and release naming ``{worker}``
    (see :data:`WINDOW`): every request stays, only which worker it went to is not compared."""
    return {phase: {replace(s, cluster="{worker}") if phase in WINDOW and "/pipelineruns" in s.path else s
                    for s in found} for phase, found in shapes.items()}  # fmt: skip


def real_eviction(
    mk: RealMultiKueue, ns: str, tmp: Path
) -> tuple[dict[str, set[Shape]], dict[str, str], dict[str, bool]]:
    """Eviction and re-dispatch on real Kueue (``test_multikueue_real.test_eviction_and_redispatch``),
    each step's requests settled before the next; the shapes per phase and when each worker's Kueue
    evicted the remote Workload MultiKueue created in the window, and :func:`before_quota` for
    the dispatch and the re-dispatch."""
    s = Scenario(mk, ns, tmp)
    assert mk.sidecar is not None
    log = mk.sidecar.request_log
    quiet = SETTLE["real"]
    marks: list[tuple[str, float]] = []

    def settle() -> None:
        eventually(lambda: settled(log, ns, quiet), f"no request in {ns} for {quiet:.0f}s")

    marks.append(("dispatch", time.time()))
    wl = s.submit(JOB)
    s.copy_created(JOB, wl, "worker1")
    s.admitted_on(wl, "worker1")
    s.nothing_left(JOB, wl, "worker2")
    settle()
    try:
        # Kueue's workload controller evicts the deactivated Workload and keeps its quota; MultiKueue
        # removes worker1's copies (their spec now differs), dispatches the inactive Workload to both
        # workers, whose Kueue evicts it, and syncs the job to the earliest evicted
        marks.append(("evict", time.time()))
        s.manager().patch(*WL, wl, {"spec": {"active": False}}, namespace=ns)
        eventually(lambda: condition(s.manager().get(*WL, wl, ns), "Evicted").get("status") == "True",
                   "the manager's Workload evicted")  # fmt: skip
        evicted = {}
        for w in ("worker1", "worker2"):
            remote = eventually(lambda w=w: exists(mk.workers[w], ns, WL, wl) and  # type: ignore[misc]
                                (r := s.worker(w).get(*WL, wl, ns)) and evicted_at(r) and r,
                                f"the remote Workload evicted on {w}")  # fmt: skip
            evicted[w] = evicted_at(remote)
        settle()
        marks.append(("release", time.time()))
        s.release_quota(wl)
        s.nothing_left(JOB, wl, "worker1")
        s.nothing_left(JOB, wl, "worker2")
        settle()
        marks.append(("redispatch", time.time()))
        mk.set_quota("worker1", "0")
        mk.set_quota("worker2", "8")
        s.manager().patch(*WL, wl, {"spec": {"active": True}}, namespace=ns)
        s.copy_created(JOB, wl, "worker2")
        s.admitted_on(wl, "worker2")
        s.nothing_left(JOB, wl, "worker1")
        settle()
        marks.append(("finish", time.time()))
        s.finish(wl, "worker2")
        eventually(lambda: condition(s.manager().get(*WL, wl, ns), "Finished").get("status") == "True",
                   "the manager's Workload finished")  # fmt: skip
        s.nothing_left(JOB, wl, "worker2")
        settle()
    finally:
        mk.set_quota("worker1", "8")
        mk.set_quota("worker2", "0")
    inside = [e for e in read_log(str(log)) if f"/namespaces/{ns}/" in e["path"]]
    first = {phase: before_quota(log, ns, t) for phase, t in marks if phase in ("dispatch", "redispatch")}
    return phases(inside, marks, {ns: "{ns}", wl: "{workload}", JOB: "{job}"}), evicted, first


def model_eviction(
    version: str, tmp: Path, order: list[str], reconciled_first: dict[str, bool]
) -> dict[str, set[Shape]]:
    """The same with Kueue's model at ``version``: the test plays what real Kueue's other parts do —
    the workload controller's eviction of the deactivated Workload (:meth:`ManagerKueue.evict`),
    the workers' Kueue evicting the inactive remote Workloads in ``order`` (a second apart, as the
    real workers did), the integration releasing the quota, the scheduler re-admitting, worker2
    admitting."""
    log = tmp / "model-eviction.jsonl"
    marks: list[tuple[str, float]] = []
    quiet = SETTLE["model"]
    with clusters(tmp) as env:
        ns = env.ns

        async def scenario() -> str:
            async with model_kueue(env, tmp, version, log) as (mk, model):
                workers, kueues = mk.workers, mk.worker_kueue

                async def until(check: Callable[[], Any], what: str) -> None:
                    await model.wait_for(check, what=what)

                async def settle() -> None:
                    await until(lambda: settled(log, ns, quiet), f"no request in {ns} for {quiet}s")

                def remote(worker: str) -> dict[str, Any] | None:
                    return next(iter(workers[worker].list(*WL, namespace=ns)), None)

                marks.append(("dispatch", time.time()))
                wl = await dispatched_to_worker1(env, mk, model, log, reconciled_first["dispatch"])

                marks.append(("evict", time.time()))
                # the user's write, then Kueue's eviction: real Kueue's MultiKueue reconciled the
                # spec change (worker1's copies out of sync, removed) before it saw the eviction
                mk.core.deactivate(wl, ns)
                await until(lambda: remote("worker1") is None, "worker1's copies removed")
                mk.core.evict(wl, ns, *DEACTIVATED)
                await until(lambda: all((r := remote(w)) and r["spec"].get("active") is False for w in order),
                            "the inactive Workload dispatched to both workers")  # fmt: skip
                for i, worker in enumerate(order):
                    if i:  # into the next second: a later eviction time, as on the real workers
                        await asyncio.sleep(1.05 - time.time() % 1)
                    kueues[worker].evict(wl, ns, *DEACTIVATED)
                    await settle()

                marks.append(("release", time.time()))
                mk.core.release_quota(wl, ns)
                for worker in ("worker1", "worker2"):
                    await until(lambda w=worker: not workers[w].list(*PR, namespace=ns) and remote(w) is None,  # type: ignore[misc]
                                f"nothing left on {worker}")  # fmt: skip
                await settle()

                marks.append(("redispatch", time.time()))
                since = time.time()
                mk.core.activate(wl, ns)
                if reconciled_first["redispatch"]:  # the reactivated Workload reconciled without quota
                    await until(lambda: settled(log, ns, quiet, since), "the reactivated Workload reconciled")
                mk.core.admit(wl, ns)
                await until(lambda: remote("worker1") and remote("worker2"), "dispatched to both workers")
                kueues["worker2"].admit(wl, ns, finalizer=False)
                await until(lambda: workers["worker2"].list(*PR, namespace=ns), "the copy on worker2")
                await until(lambda: remote("worker1") is None, "worker1's remote Workload gone")
                await settle()

                marks.append(("finish", time.time()))
                kueues["worker2"].finish(wl, ns)
                await until(lambda: "finished" in model.outcome_kinds(ns, wl), "finished")
                await until(lambda: not workers["worker2"].list(*PR, namespace=ns) and remote("worker2") is None,
                            "nothing left on worker2")  # fmt: skip
                await settle()
                return wl

        wl = asyncio.run(scenario())
    inside = [e for e in read_log(str(log)) if f"/namespaces/{ns}/" in e["path"]]
    return phases(inside, marks, {ns: "{ns}", wl: "{workload}", JOB: "{job}"})


def test_model_evicts_as_real_kueue_does(real_multikueue: RealMultiKueue, real_namespace: str, tmp_path: Path) -> None:
    """Per Kueue version: eviction (deactivated), the window while the evicted Workload holds its
    quota, the quota released, re-dispatch to worker2 and finish — the model's requests and real
    Kueue's, phase by phase; what differs is exactly the list in docs/testing.md."""
    version = real_multikueue.kueue_version
    real, evicted, reconciled_first = real_eviction(real_multikueue, real_namespace, tmp_path)
    model = model_eviction(version, tmp_path, window_order(evicted), reconciled_first)
    assert [d.line() for d in compare(worker_merged(model), worker_merged(real))] == EVICTION_DIFFERENCES[version]
