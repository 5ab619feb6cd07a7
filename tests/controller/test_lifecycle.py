"""mkpolicy controller on the loopback API server: a BatchRun's life, step by step, as Kueue's
job reconciler (pkg/controller/jobframework/reconciler.go, v0.19.2) drives a batch/Job's.
The test plays Kueue's scheduler (admission, QuotaReserved, Admitted, Evicted)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from controller_harness import MARKER, NS, WL, Kueue, batchrun, condition, controller, eventually, server

from mkpolicy.controller import Controller
from mkpolicy.testing.apiserver import ApiServer


def run_with_controller(scenario: Callable[[ApiServer, Kueue, Controller], Awaitable[None]]) -> None:
    """Run ``scenario(srv, kueue, ctl)`` against a fresh loopback server (``srv``, seen by ``kueue``, the
    test's Kueue) and a started controller (``ctl``); stop both after it, also when it fails."""
    with server() as srv:
        kueue = Kueue(srv)

        async def run() -> None:
            async with controller(srv) as ctl:
                await scenario(srv, kueue, ctl)

        asyncio.run(run())


async def admitted_and_started(srv: ApiServer, kueue: Kueue) -> dict[str, Any]:
    """A BatchRun created, its Workload admitted, the job started; returns the Workload as created."""
    srv.create(batchrun())
    wl: dict[str, Any] = await eventually(kueue.workload, what="the Workload")
    kueue.admit(wl)
    await eventually(lambda: kueue.job()["spec"]["suspend"] is False, what="started")
    return wl


def test_queue_start_evict_requeue_restart_finish_delete() -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        job = srv.create(batchrun())
        # ConstructWorkload: name, owner, finalizer, job-uid label, queue name, podSets.
        wl = await eventually(kueue.workload, what="the Workload")
        uid = job["metadata"]["uid"]
        assert wl["metadata"]["name"].startswith("batchrun-nightly-etl-")
        assert wl["metadata"]["ownerReferences"] == [{
            "apiVersion": "batch.example.com/v1alpha1", "kind": "BatchRun", "name": "nightly-etl",
            "uid": uid, "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
        assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
        assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": uid}
        assert wl["spec"]["queueName"] == "team-a-queue"
        assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 3)]
        assert kueue.job()["spec"]["suspend"] is True  # never resumed without an admission

        # Admission: started with the flavor's node labels and tolerations, marker gone.
        kueue.admit(wl)
        started = await eventually(lambda: (j := kueue.job())["spec"]["suspend"] is False and j,
                                   what="the job started")  # fmt: skip
        template = started["spec"]["template"]
        assert template["spec"]["nodeSelector"] == {"cloud.example.com/pool": "spot"}
        assert template["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
        assert template["metadata"]["labels"] == {"app": "etl", "kueue.x-k8s.io/podset": "main"}
        assert MARKER not in (started["metadata"].get("annotations") or {})

        # Running pods (the job's own controller would write this).
        running = copy.deepcopy(started)
        running["status"] = {"active": 3}
        srv.update(running, subresource="status")

        # Eviction: stopped and restored at once; the quota stays while pods run.
        wl = kueue.evict(kueue.the_workload())
        stopped = await eventually(lambda: (j := kueue.job())["spec"]["suspend"] is True and j,
                                   what="the job stopped")  # fmt: skip
        assert stopped["metadata"]["annotations"] == {MARKER: "true"}
        assert "cloud.example.com/pool" not in (stopped["spec"]["template"]["spec"].get("nodeSelector") or {})
        assert stopped["spec"]["template"]["metadata"]["labels"] == {"app": "etl"}
        await asyncio.sleep(0.5)
        assert condition(kueue.workload(), "QuotaReserved")["status"] == "True"  # type: ignore[index]

        # Pods gone: the quota is released, Requeued (Preempted), Admitted false, no admission.
        gone = kueue.job()
        gone["status"] = {"active": 0}
        srv.update(gone, subresource="status")
        wl = await eventually(lambda: (w := kueue.workload()) and
                              condition(w, "QuotaReserved")["status"] == "False" and w,  # type: ignore[index]
                              what="the quota released")  # fmt: skip
        assert "admission" not in wl["status"]
        assert condition(wl, "QuotaReserved")["reason"] == "Pending"  # type: ignore[index]
        requeued = condition(wl, "Requeued")
        assert requeued is not None and (requeued["status"], requeued["reason"]) == ("True", "Preempted")
        assert condition(wl, "Admitted")["status"] == "False"  # type: ignore[index]

        # Re-admitted (the scheduler clears Evicted when it admits again): started again.
        kueue.admit(wl)
        await eventually(lambda: kueue.job()["spec"]["suspend"] is False, what="restarted")

        # Finished: the Workload is finished Succeeded, its finalizer removed.
        done = kueue.job()
        done["status"] = {
            "active": 0,
            "succeeded": 3,
            "conditions": [{"type": "Complete", "status": "True", "message": "3 pods succeeded"}],
        }
        srv.update(done, subresource="status")
        wl = await eventually(lambda: (w := kueue.workload()) and condition(w, "Finished") and
                              not w["metadata"].get("finalizers") and w, what="finished")  # fmt: skip
        finished = condition(wl, "Finished")
        assert finished is not None and (finished["reason"], finished["message"]) == (
            "Succeeded",
            "3 pods succeeded",
        )

        # Deletion: the Workload goes with its owner (garbage collection).
        srv.delete("batch.example.com/v1alpha1", "BatchRun", "nightly-etl", NS)
        await eventually(lambda: kueue.workloads() == [], what="the Workload deleted")
        reasons = [r for _, r, _ in ctl.recorder.recorded]
        assert reasons[:3] == ["CreatedWorkload", "Started", "Stopped"]
        assert "FinishedWorkload" in reasons

    run_with_controller(scenario)


def test_deleting_a_job_releases_its_workload_finalizer() -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        await admitted_and_started(srv, kueue)
        srv.delete("batch.example.com/v1alpha1", "BatchRun", "nightly-etl", NS)
        # The finalizer would keep the Workload for ever: the controller finishes and releases it.
        await eventually(lambda: kueue.workloads() == [], what="the Workload gone")

    run_with_controller(scenario)


def test_a_running_job_without_admission_is_suspended_then_queued() -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        srv.create(batchrun(marked=False, suspend=False))  # no admission policy installed
        job = await eventually(lambda: (j := kueue.job())["spec"]["suspend"] is True and j, what="suspended")
        assert job["metadata"]["annotations"] == {MARKER: "true"}
        wl = await eventually(kueue.workload, what="the Workload")
        kueue.admit(wl)
        await eventually(lambda: kueue.job()["spec"]["suspend"] is False, what="started")

    run_with_controller(scenario)


def test_a_job_its_user_suspended_is_not_queued_until_resumed() -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        srv.create(batchrun(marked=False, suspend=True))
        await asyncio.sleep(1.0)
        assert kueue.workloads() == []  # held by its user
        job = kueue.job()
        job["spec"]["suspend"] = False  # the user resumes it
        srv.update(job)
        wl = await eventually(kueue.workload, what="the Workload")
        assert kueue.job()["spec"]["suspend"] is True  # suspended by Kueue meanwhile
        kueue.admit(wl)
        await eventually(lambda: kueue.job()["spec"]["suspend"] is False, what="started")

    run_with_controller(scenario)


def test_a_podsets_error_is_an_event_and_no_workload() -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        broken = batchrun()
        broken["spec"]["template"] = {"spec": {"containers": []}}
        srv.create(broken)
        await eventually(lambda: any(r == "InvalidPodSets" for _, r, _ in ctl.recorder.recorded),
                         what="the Event")  # fmt: skip
        events = srv.list("v1", "Event", NS)
        (event,) = [e for e in events if e["reason"] == "InvalidPodSets"]
        assert event["type"] == "Warning" and event["involvedObject"]["name"] == "nightly-etl"
        assert "podSets[0].template.spec.containers: expected a non-empty list" in event["message"]
        assert "policies/batchrun.yaml:" in event["message"]
        assert kueue.workloads() == []
        assert kueue.job()["spec"]["suspend"] is True

    run_with_controller(scenario)


def check(name: str, **update: Any) -> dict[str, Any]:
    """A Ready admission check with a podSetUpdate for podSet main."""
    return {"name": name, "state": "Ready", "message": "", "lastTransitionTime": "2026-11-26T20:00:00Z",
            "podSetUpdates": [{"name": "main", **update}]}  # fmt: skip


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        # The update contradicts the template (RunWithPodSetsInfo's podset.Merge).
        ([check("prov", labels={"app": "other"})],
         "invalid admission check PodSetUpdate: conflict for labels: conflict for key=app, value1=etl, value2=other"),
        # Two checks disagree (getPodSetsInfoFromStatus).
        ([check("a", nodeSelector={"zone": "z1"}), check("b", nodeSelector={"zone": "z2"})],
         'in admission check "b": invalid admission check PodSetUpdate: conflict for nodeSelector: '
         "conflict for key=zone, value1=z1, value2=z2"),
    ],
    ids=["against-the-template", "between-checks"],
)  # fmt: skip
def test_a_conflicting_admission_check_update_fails_the_workload(checks: list[dict[str, Any]], message: str) -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        srv.create(batchrun())
        kueue.admit(await eventually(kueue.workload, what="the Workload"), checks=checks)
        finished = await eventually(lambda: condition(kueue.workload(), "Finished"), what="finished")
        assert (finished["reason"], finished["message"]) == ("FailedToStart", message)
        assert kueue.job()["spec"]["suspend"] is True

    run_with_controller(scenario)


def test_an_edited_suspended_job_updates_its_workload() -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        srv.create(batchrun())
        wl = await eventually(kueue.workload, what="the Workload")
        job = kueue.job()
        job["spec"]["parallelism"] = 5
        srv.update(job)
        updated = await eventually(
            lambda: (w := kueue.workload()) and w["spec"]["podSets"][0]["count"] == 5 and w, what="updated"
        )
        assert updated["metadata"]["name"] == wl["metadata"]["name"]  # updated, not replaced

    run_with_controller(scenario)


ORIGIN = "kueue.x-k8s.io/multikueue-origin"


def create_prebuilt(srv: Any, name: str, count: int, labels: dict[str, str]) -> dict[str, Any]:
    """A Workload named ``name`` of ``count`` pods (as MultiKueue creates it on a worker), then the
    BatchRun naming it as its prebuilt Workload (with ``labels``)."""
    pod_sets = [{"name": "main", "count": count, "template": batchrun()["spec"]["template"]}]
    srv.create({"apiVersion": WL, "kind": "Workload", "metadata": {"name": name, "namespace": NS, "labels": labels},
                "spec": {"queueName": "team-a-queue", "podSets": pod_sets}})  # fmt: skip
    job = batchrun(labels=labels)
    job["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] = name
    return dict(srv.create(job))


def test_prebuilt_workloads_are_adopted_on_a_worker() -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        # MultiKueue creates the Workload first, then the job naming it.
        created = create_prebuilt(srv, "batchrun-nightly-etl-abcde", 3, {ORIGIN: "multikueue"})
        wl = await eventually(lambda: (w := kueue.workload()) and w["metadata"].get("ownerReferences") and w,
                              what="adopted")  # fmt: skip
        assert wl["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
        assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == created["metadata"]["uid"]
        assert len(kueue.workloads()) == 1  # no Workload of its own
        kueue.admit(wl)
        started = await eventually(lambda: (j := kueue.job())["spec"]["suspend"] is False and j, what="started")
        labels = started["spec"]["template"]["metadata"]["labels"]
        assert labels["kueue.x-k8s.io/multikueue-worker-workload-pod"] == "true"

    run_with_controller(scenario)


def test_an_out_of_sync_prebuilt_workload_is_finished() -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        create_prebuilt(srv, "prebuilt", 7, {})  # 7 pods, the job runs 3
        finished = await eventually(lambda: condition(kueue.workload(), "Finished"), what="finished")
        assert (finished["reason"], finished["message"]) == (
            "OutOfSync",
            "The prebuilt workload is out of sync with its user job",
        )

    run_with_controller(scenario)


def test_a_running_job_edited_out_of_its_workload_is_stopped_and_requeued() -> None:
    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        first = await admitted_and_started(srv, kueue)
        job = kueue.job()
        job["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example.com/etl:2.0"
        srv.update(job)  # a running job no Workload matches any more
        stopped = await eventually(lambda: (j := kueue.job())["spec"]["suspend"] is True and j, what="stopped")
        assert stopped["spec"]["template"]["spec"].get("nodeSelector") in (
            None,
            {},
        )  # restored from the old one
        second = await eventually(
            lambda: (w := kueue.workload()) and w["metadata"]["uid"] != first["metadata"]["uid"] and w,
            what="a new Workload")  # fmt: skip
        assert second["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["image"].endswith(":2.0")
        reasons = [r for _, r, _ in ctl.recorder.recorded]
        assert "DeletedWorkload" in reasons

    run_with_controller(scenario)


def test_a_running_job_its_user_suspends_is_put_on_hold() -> None:
    """JobWithOnHold: the user's suspension releases the quota (QuotaReserved False, OnHold) and is
    never lifted by Kueue; once the user resumes the job it is queued again."""

    async def user_sets_suspend(srv: ApiServer, kueue: Kueue, suspend: bool, key: str, value: str, what: str) -> Any:
        """The user sets the job's suspend; the Workload once its QuotaReserved ``key`` is ``value``."""
        job = kueue.job()
        job["spec"]["suspend"] = suspend
        srv.update(job)
        return await eventually(
            lambda: (w := kueue.workload()) and condition(w, "QuotaReserved")[key] == value and w,  # type: ignore[index]
            what=what)  # fmt: skip

    async def scenario(srv: ApiServer, kueue: Kueue, ctl: Controller) -> None:
        await admitted_and_started(srv, kueue)
        held = await user_sets_suspend(srv, kueue, True, "status", "False", "on hold")  # the user pauses it
        assert condition(held, "QuotaReserved")["reason"] == "OnHold"  # type: ignore[index]
        assert "admission" not in held["status"]
        await asyncio.sleep(0.5)
        assert MARKER not in (kueue.job()["metadata"].get("annotations") or {})
        requeued = await user_sets_suspend(srv, kueue, False, "reason", "Pending", "queued again")  # ... resumes it
        assert requeued["metadata"]["uid"] == held["metadata"]["uid"]
        stopped = await eventually(
            lambda: (j := kueue.job())["spec"]["suspend"] is True and j, what="suspended by Kueue"
        )
        assert stopped["metadata"]["annotations"] == {MARKER: "true"}
        kueue.admit(kueue.the_workload())
        await eventually(lambda: kueue.job()["spec"]["suspend"] is False, what="started again")

    run_with_controller(scenario)
