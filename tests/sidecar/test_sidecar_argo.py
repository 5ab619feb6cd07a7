"""Argo Workflows through stock Kueue's generic adapter, the sidecar between (Kueue played by its model).

Argo's Workflow has no status subresource and no ``spec.managedBy``. The clusters serve Argo's
real CRD, read from the Go module cache (``go mod download github.com/argoproj/argo-workflows/v4``)
or ``../shared/crds``: the workers as Argo ships it, the manager with ``spec.managedBy`` declared by
``mkpolicy export crd-patch``. The manager's Workflow is what the admission policy leaves (the
marker label, ``spec.managedBy``, the manager-only controller instance id). The test plays Argo's
controller on the worker: status written by whole-object update, as ``operator.go`` persists it.

Throughout: Kueue's model never writes status (it gets the worker's Workflow without it, so it
never patches the ``/status`` the CRD does not serve), and the manager's Workflow carries exactly
the policy's sync of the worker's, written by the sidecar to the main resource.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from argo_harness import (
    ARGO,
    FRAMEWORK,
    INSTANCE_ID,
    MARKER,
    WF,
    argo_clusters,
    argo_crds,
    argo_status,
    workflow,
)
from sidecar_harness import (
    Clusters,
    PolicyChecks,
    client,
    kueue,
    metric,
    multikueue,
    policy_dir,
    running,
)

from mkpolicy.sidecar import Sidecar
from mkpolicy.testing.kueue import Kueue
from mkpolicy.testing.kueue.env import MultiKueueEnv

pytestmark = [pytest.mark.timeout(180), pytest.mark.loopback_only("runs Kueue's model on loopback clusters")]


@contextlib.asynccontextmanager
async def on_the_wire(
    env: Clusters, tmp_path: Path, **settings: Any
) -> AsyncIterator[tuple[MultiKueueEnv, Sidecar, Kueue, ArgoChecks]]:
    """MultiKueue for Workflows through the sidecar with the Argo policy, Kueue (``settings``: the
    model's) connected to both workers."""
    async with multikueue(env, policy_dir(tmp_path, ARGO), frameworks=[FRAMEWORK], **settings) as (mk, sidecar, model):
        await model.wait_connected("worker1", "worker2")
        yield mk, sidecar, model, ArgoChecks(mk, model)


class ArgoChecks(PolicyChecks):
    """What the Argo policy says, to compare the wire with."""

    def __init__(self, mk: MultiKueueEnv, model: Kueue) -> None:
        super().__init__(mk, model, ARGO, WF)

    async def copy_created(self, name: str, workload: str, cluster: str) -> dict[str, Any]:
        """The worker's copy is the policy's ``create``: no managedBy, no marker, no manager-only instance id."""
        copy = await super().copy_created(name, workload, cluster)
        labels = copy["metadata"]["labels"]
        assert not set(labels) & {*MARKER, *INSTANCE_ID}, labels
        return copy

    async def dispatched(self, name: str, cluster: str = "worker1") -> str:
        """A Workflow submitted, dispatched, admitted by ``cluster``'s Kueue, its copy there adopted; its Workload."""
        mk, ns = self.mk, self.ns
        wl = mk.core.submit(mk.manager.create(workflow(name, ns)))
        await self.model.wait_for(lambda: self.model.outcome_kinds(ns, wl).count("dispatched") == 2, what="dispatch")
        mk.worker_kueue[cluster].admit(wl, ns)
        await self.copy_created(name, wl, cluster)
        mk.worker_kueue[cluster].adopt(wl, ns, *WF)
        return wl

    def play_argo(self, cluster: str, name: str, step: str) -> dict[str, Any]:
        """Argo's controller on ``cluster``: status and phase label written by a whole-object PUT."""
        worker = self.mk.workers[cluster]
        obj = worker.get(*WF, name, self.ns)
        obj["status"] = argo_status(step, name)
        obj["metadata"]["labels"]["workflows.argoproj.io/phase"] = step
        if step != "Running":
            obj["metadata"]["labels"]["workflows.argoproj.io/completed"] = "true"
        updated: dict[str, Any] = worker.update(obj)
        return updated

    async def status_written(self, name: str, workload: str, cluster: str, step: str) -> None:
        """Argo writes ``step`` on the worker; the manager's main resource ends with the policy's sync."""
        remote = self.play_argo(cluster, name, step)
        status = await self.synced(name, remote, workload, cluster, f"status {step}")
        assert status["phase"] == step
        assert not {"nodes", "offloadNodeStatusVersion", "compressedNodes"} & set(status), status


def test_a_workflow_runs_through_kueue_and_its_status_comes_back_to_the_main_resource(tmp_path: Path) -> None:
    """Dispatch, status by whole-object updates, eviction, re-dispatch, finish, the copies deleted."""
    with argo_clusters(tmp_path) as env:

        async def scenario() -> None:
            async with on_the_wire(env, tmp_path) as (mk, sidecar, model, check):
                ns = mk.namespace
                (entry,) = sidecar.policies.entries if sidecar.policies else ()
                assert entry.main_status and entry.info.status_subresource is False

                wl = await check.dispatched("etl")
                await check.status_written("etl", wl, "worker1", "Running")
                assert metric(
                    sidecar, "mkpolicy_sidecar_status_writes_total", cluster="worker1", policy="argo-workflow",
                    result="written",
                ) >= 1  # fmt: skip

                # eviction on the worker: the copy goes, the Workflow is dispatched again, to worker2
                mk.worker_kueue["worker1"].evict(wl, ns)
                await model.wait_for(lambda: mk.core.check_state(wl, ns) == "Retry", what="check Retry")
                mk.core.evict(wl, ns)
                mk.core.release_quota(wl, ns)  # the integration's part: the job stopped
                await check.nothing_left("worker1")
                mk.core.admit(wl, ns)
                await model.wait_for(lambda: model.outcome_kinds(ns, wl).count("dispatched") >= 4, what="re-dispatch")
                mk.worker_kueue["worker2"].admit(wl, ns)
                await check.copy_created("etl", wl, "worker2")
                mk.worker_kueue["worker2"].adopt(wl, ns, *WF)
                await check.status_written("etl", wl, "worker2", "Running")
                await check.status_written("etl", wl, "worker2", "Succeeded")

                # finish: the manager's Workload finishes (its quota released), every copy goes
                mk.worker_kueue["worker2"].finish(wl, ns)
                await model.wait_for(lambda: "finished" in model.outcome_kinds(ns, wl), what="finished")
                for worker in ("worker1", "worker2"):
                    await check.nothing_left(worker)
                status = env.manager.get(*WF, "etl", ns)["status"]
                assert status == {
                    "phase": "Succeeded",
                    "startedAt": "2026-11-26T10:00:00Z",
                    "finishedAt": "2026-11-26T10:05:00Z",
                    "progress": "1/1",
                    "message": "done",
                    "conditions": [
                        {"type": "PodRunning", "status": "False"},
                        {"type": "Completed", "status": "True"},
                    ],
                }
                # Kueue never failed a sync, and never wrote a Workflow on the manager (the sidecar did)
                assert "error" not in model.outcome_kinds(ns, wl), model.outcome_kinds(ns, wl)
                assert not [s for s in model.requests("manager") if "/workflows/" in s.path and s.method != "GET"], (
                    "Kueue wrote a Workflow on the manager"
                )
                # the manager's Workflow kept its marker, managedBy and instance id (status only was written)
                final = env.manager.get(*WF, "etl", ns)
                assert final["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
                assert {**MARKER, **INSTANCE_ID}.items() <= final["metadata"]["labels"].items()

        asyncio.run(scenario())


def test_kueue_reads_the_worker_workflow_without_status(tmp_path: Path) -> None:
    """A full read of the worker's Workflow through the sidecar has no status (what Kueue copies: nothing),
    while the worker's own has it; the manager's main resource has the policy's summary."""
    with argo_clusters(tmp_path) as env:

        async def scenario() -> None:
            async with on_the_wire(env, tmp_path) as (mk, sidecar, _, check):
                ns = mk.namespace
                wl = await check.dispatched("read")
                await check.status_written("read", wl, "worker1", "Running")
                async with client(sidecar.kubeconfig("worker1")) as kueue_side:
                    path = f"/apis/argoproj.io/v1alpha1/namespaces/{ns}/workflows/read"
                    seen = await kueue_side.get(path)
                assert "status" not in seen
                assert env.worker("worker1").get(*WF, "read", ns)["status"]["phase"] == "Running"

        asyncio.run(scenario())


def test_without_the_sidecar_kueue_status_patch_fails_and_the_workload_never_finishes() -> None:
    """The problem the wire solves: Kueue talking to the worker directly copies Argo's status and
    merge-patches the manager's ``/status``, which the CRD does not serve (404): every sync fails."""
    from mkpolicy.testing.kueue.env import loopback_multikueue

    crd, manager_crd = argo_crds()
    with loopback_multikueue() as mk:
        mk.manager.register_crd(manager_crd)
        for worker in mk.workers.values():
            worker.register_crd(crd)

        async def scenario() -> None:
            async with mk.kueue(frameworks=[FRAMEWORK], time_scale=0.01) as model:
                ns = mk.namespace
                await model.wait_connected("worker1", "worker2")
                wl = mk.core.submit(mk.manager.create(workflow("direct", ns)))
                await model.wait_for(lambda: model.outcome_kinds(ns, wl).count("dispatched") == 2, what="dispatch")
                mk.worker_kueue["worker1"].admit(wl, ns)
                await model.wait_for(lambda: mk.workers["worker1"].list(*WF, namespace=ns), what="a copy")
                mk.worker_kueue["worker1"].adopt(wl, ns, *WF)
                obj = mk.workers["worker1"].get(*WF, "direct", ns)
                obj["status"] = argo_status("Succeeded", "direct")
                mk.workers["worker1"].update(obj)
                mk.worker_kueue["worker1"].finish(wl, ns)
                await model.wait_for(
                    lambda: (
                        sum(kind == "error" and "404" in str(detail) for kind, detail in _outcomes(model, ns, wl)) >= 3
                    ),
                    what="failed status patches, retried",
                )
                patches = [s for s in model.requests("manager") if s.method == "PATCH" and "/workflows/" in s.path]
                assert patches and all(s.path.endswith("/direct/status") and s.status == 404 for s in patches)
                assert "finished" not in model.outcome_kinds(ns, wl)  # quota held: the Workload never finishes
                assert "status" not in mk.manager.get(*WF, "direct", ns)

        asyncio.run(scenario())


def _outcomes(model: Kueue, namespace: str, name: str) -> list[tuple[str, Any]]:
    return [(o.kind, o.detail) for o in model.outcomes.get((namespace, name), [])]


def _events(env: Clusters, reason: str) -> list[dict[str, Any]]:
    return [e for e in env.manager.list("v1", "Event", namespace=env.ns) if e["reason"] == reason]


def _writes(sidecar: Any, cluster: str, result: str) -> float:
    return metric(
        sidecar, "mkpolicy_sidecar_status_writes_total", cluster=cluster, policy="argo-workflow", result=result
    )


def test_a_status_write_the_manager_refuses_becomes_an_event_and_kueue_goes_on(tmp_path: Path) -> None:
    """An admission policy on the manager refusing mkpolicy's status write (injected as the API
    server's 403): an Event on the Workflow, counted; Kueue's reads still succeed, so the Workload
    finishes and releases its quota. Once the refusal is lifted, the next status is written."""
    with argo_clusters(tmp_path) as env:

        async def scenario() -> None:
            async with on_the_wire(env, tmp_path) as (mk, sidecar, model, check):
                ns = mk.namespace
                wl = await check.dispatched("denied")
                denial = (
                    'workflows.argoproj.io "denied" is forbidden: ValidatingAdmissionPolicy "status-only" with '
                    'binding "status-only" denied request: only status may change'
                )
                rule = env.manager.faults.fail(403, times=None, message=denial, verb="patch", resource="workflows")
                check.play_argo("worker1", "denied", "Running")
                await model.wait_for(lambda: _events(env, "StatusWriteRefused"), what="an Event")
                (event,) = _events(env, "StatusWriteRefused")
                assert event["involvedObject"]["kind"] == "Workflow" and event["involvedObject"]["name"] == "denied"
                assert event["type"] == "Warning" and "only status may change" in event["message"]
                assert event["message"].startswith("mkpolicy: the status from worker1 is not written")
                assert _writes(sidecar, "worker1", "refused") >= 1
                assert "status" not in env.manager.get(*WF, "denied", ns)
                # the refusal lifted: the next status Argo writes reaches the manager
                env.manager.faults.remove(rule)
                await check.status_written("denied", wl, "worker1", "Succeeded")
                mk.worker_kueue["worker1"].finish(wl, ns)
                await model.wait_for(lambda: "finished" in model.outcome_kinds(ns, wl), what="finished")
                assert "error" not in model.outcome_kinds(ns, wl)

        asyncio.run(scenario())


def test_a_conflict_is_read_again_and_a_failing_manager_fails_kueues_read_until_it_recovers(tmp_path: Path) -> None:
    """A 409 (the Workflow changed between the read and the write) is read again and written at once;
    a manager failing the write (500) answers Kueue's read 503, Kueue retries, and the status arrives."""
    with argo_clusters(tmp_path) as env:

        async def scenario() -> None:
            async with on_the_wire(env, tmp_path) as (mk, sidecar, model, check):
                ns = mk.namespace
                wl = await check.dispatched("flaky")
                conflict = env.manager.faults.fail(409, verb="patch", resource="workflows")
                await check.status_written("flaky", wl, "worker1", "Running")
                assert conflict.hits == 1 and "error" not in model.outcome_kinds(ns, wl)
                failing = env.manager.faults.fail(500, times=2, verb="patch", resource="workflows")
                await check.status_written("flaky", wl, "worker1", "Succeeded")
                assert failing.hits == 2
                errors = [d for k, d in _outcomes(model, ns, wl) if k == "error"]
                assert errors and all("cannot write the status of Workflow" in str(d) for d in errors), errors
                assert _writes(sidecar, "worker1", "error") == 2

        asyncio.run(scenario())


def test_the_status_is_written_only_when_it_changes_with_the_watch_cache(tmp_path: Path) -> None:
    """Kueue's generic adapter step by step, the sidecar reading the manager through its watch cache
    (answers from the fast path when nothing is to be written): Kueue always finds nothing to copy,
    and the sidecar writes once per change of the worker's status, however often Kueue reads."""
    with argo_clusters(tmp_path) as env:

        async def scenario() -> None:
            config = env.config(manager={"reads": "cache"})
            async with (
                running(config, policy_dir(tmp_path, ARGO)) as sidecar,
                kueue(env, sidecar, framework=FRAMEWORK) as driver,
            ):
                ns = env.ns
                env.manager.create(workflow("cached", ns))
                assert await driver.sync_job("worker1", ns, "cached", "wl-1") == "created"
                worker = env.worker("worker1")
                for step, writes in (("Running", 1), ("Succeeded", 2)):
                    obj = worker.get(*WF, "cached", ns)
                    obj["status"] = argo_status(step, "cached")
                    worker.update(obj)
                    for _ in range(4):
                        assert await driver.sync_job("worker1", ns, "cached", "wl-1") == "unchanged"
                    assert env.manager.get(*WF, "cached", ns)["status"]["phase"] == step
                    assert _writes(sidecar, "worker1", "written") == writes
                assert sidecar.readiness()[0]
                reads = "mkpolicy_sidecar_manager_reads_total"
                assert metric(sidecar, reads, policy="argo-workflow", source="cache") > 0

        asyncio.run(scenario())


def test_a_worker_lost_mid_run(tmp_path: Path) -> None:
    """worker1 becomes unreachable while the Workflow runs there: after Kueue's worker-lost timeout
    the Workflow is dispatched again, runs on worker2, its status comes back from there through the
    sidecar's write to the main resource, and the Workload finishes (its quota released) while
    worker1 is still away; the sidecar says worker1 is unreachable."""
    with argo_clusters(tmp_path) as env:

        async def scenario() -> None:
            async with on_the_wire(env, tmp_path, worker_lost_timeout=100.0) as (mk, sidecar, model, check):
                ns = mk.namespace
                wl = await check.dispatched("lost")
                await check.status_written("lost", wl, "worker1", "Running")
                env.worker("worker1").faults.unreachable()
                try:
                    await model.wait_for(lambda: mk.core.check_state(wl, ns) == "Retry", what="check Retry", timeout=30)
                    mk.core.evict(wl, ns)
                    mk.core.release_quota(wl, ns)  # the integration's part: the job stopped
                    mk.core.admit(wl, ns)
                    await model.wait_for(
                        lambda: model.outcome_kinds(ns, wl).count("dispatched") >= 3, what="re-dispatch", timeout=30
                    )
                    mk.worker_kueue["worker2"].admit(wl, ns)
                    await check.copy_created("lost", wl, "worker2")
                    mk.worker_kueue["worker2"].adopt(wl, ns, *WF)
                    await check.status_written("lost", wl, "worker2", "Succeeded")
                    mk.worker_kueue["worker2"].finish(wl, ns)
                    await model.wait_for(lambda: "finished" in model.outcome_kinds(ns, wl), what="finished")
                    await check.nothing_left("worker2")
                    assert env.manager.get(*WF, "lost", ns)["status"]["phase"] == "Succeeded"
                    assert "warn worker worker1: unreachable" in "\n".join(sidecar.readiness()[1])
                finally:
                    env.worker("worker1").faults.reachable()

        asyncio.run(scenario())


def test_a_kind_without_status_subresource_is_detected_from_discovery(tmp_path: Path) -> None:
    """A policy that does not say ``sync.subresource: none`` for a CRD without ``/status``: the sidecar
    finds it in the manager's discovery and writes the status itself (Kueue's patch would 404)."""
    policies = tmp_path / "policies"
    policies.mkdir()
    text = ARGO.read_text().replace("  sync:\n    subresource: none\n", "  sync:\n")
    assert "subresource: none" not in text
    (policies / ARGO.name).write_text(text.replace("../schemas/", str(ARGO.parents[1] / "schemas") + "/"))
    with argo_clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policies) as sidecar, kueue(env, sidecar, framework=FRAMEWORK) as driver:
                (entry,) = sidecar.policies.entries if sidecar.policies else ()
                assert entry.adapter.sync_subresource == "status" and entry.main_status
                env.manager.create(workflow("found", env.ns))
                assert await driver.sync_job("worker1", env.ns, "found", "wl-1") == "created"
                worker = env.worker("worker1")
                obj = worker.get(*WF, "found", env.ns)
                obj["status"] = argo_status("Running", "found")
                worker.update(obj)
                assert await driver.sync_job("worker1", env.ns, "found", "wl-1") == "unchanged"
                assert env.manager.get(*WF, "found", env.ns)["status"]["phase"] == "Running"

        asyncio.run(scenario())
