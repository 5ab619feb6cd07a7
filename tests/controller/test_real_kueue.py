"""mkpolicy controller with real Kueue, v0.19.2 and v0.17.1 (built by the real-peer harness,
``mkpolicy.testing.peers``; the controller configured for the same version), on a real kube-apiserver: Kueue's own scheduler admits against quota, preempts for a higher
priority and re-admits; the controller creates the Workloads, starts, stops (restoring the pod
template in between), finishes and finalizes. Nothing plays Kueue here; the test plays the
BatchRun's own controller (its status). Skipped where the harness or Go is missing."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("mkpolicy.testing.peers.multikueue", reason="the real-peer harness (mkpolicy.testing.peers)")
from controller_harness import CRD, Kueue, batchrun, condition, controller, eventually

from mkpolicy.controller import ControllerOptions
from mkpolicy.engine.workload import workload_name
from mkpolicy.kube.kueueconfig import from_configuration
from mkpolicy.testing.apiserver import load_crds
from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.controlplane import ControlPlane
from mkpolicy.testing.peers.fixtures import require_go
from mkpolicy.testing.peers.onekueue import kueue_on

# (after the skip: the marks are registered where the harness is, with pytest-timeout)
pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(600)]

FRAMEWORK = "BatchRun.v1alpha1.batch.example.com"
NS = "team-a"
API = "kueue.x-k8s.io/v1beta2"


#: Kueue's configuration here: objects without a queue name managed too, in namespaces labelled kueue=on.
SETTINGS = {"manageJobsWithoutQueueName": True, "managedJobsNamespaceSelector": {"matchLabels": {"kueue": "on"}}}


@dataclass
class KueueCluster:
    """A real cluster with real Kueue at ``version``, configured with ``config`` (its Configuration)."""

    cluster: Any
    version: str
    config: dict[str, Any]

    @property
    def admin(self) -> Any:
        return self.cluster.admin

    def controller(self, **kwargs: Any) -> Any:
        """mkpolicy controller configured as this Kueue is (what ``--kueue-config`` reads, and
        ``--kueue-version``): a started controller, as the harness's."""
        options = ControllerOptions.from_kueue(from_configuration(self.config, version=self.version))
        return controller(self.cluster, options=options, **kwargs)


@pytest.fixture(scope="module", params=build.KUEUE_VERSIONS, ids=[f"kueue-{v}" for v in build.KUEUE_VERSIONS])
def kueue_cluster(request: pytest.FixtureRequest) -> Iterator[KueueCluster]:
    """etcd, a kube-apiserver and Kueue at the parameter's version (BatchRun as an external framework);
    a ClusterQueue of 8 CPUs that preempts lower priorities, LocalQueue ``team-a-queue``,
    WorkloadPriorityClasses."""
    require_go()
    version = str(request.param)
    with ControlPlane(log=lambda line: print(f"[peers] {line}", flush=True), kueue_versions=[version]) as plane:
        cluster = plane.add_cluster("kube")
        for name in (NS, "opted-in"):
            cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name,
                           "labels": {"kueue": "on"}}})  # fmt: skip
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "opted-out"}})
        crds = [json.loads(json.dumps(c)) for c in load_crds(str(CRD))]
        with kueue_on(cluster, version, [FRAMEWORK], crds=crds, settings=SETTINGS) as kueue:
            cluster.apply({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "spot"},
                           "spec": {"nodeLabels": {"cloud.example.com/pool": "spot"}}})  # fmt: skip
            cluster.apply({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "spot", "resources": [
                    {"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}})  # fmt: skip
            cluster.apply({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "team-a-queue", "namespace": NS},
                           "spec": {"clusterQueue": "cq"}})  # fmt: skip
            for name, value in (("low", 10), ("high", 1000)):
                cluster.apply({"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                               "value": value})  # fmt: skip
            yield KueueCluster(cluster, version, kueue.config)


def test_quota_preemption_requeue_finish_and_deletion_with_real_kueue(kueue_cluster: KueueCluster) -> None:
    admin = kueue_cluster.admin
    kueue = Kueue(admin, NS)

    def workload_of(job: str) -> dict[str, Any] | None:
        for wl in kueue.workloads():
            if (wl["metadata"].get("ownerReferences") or [{}])[0].get("name") == job:
                return wl
        return None

    def job_status(name: str, **status: Any) -> None:
        obj = kueue.job(name)
        obj["status"] = status
        admin.update(obj, subresource="status")

    async def scenario() -> None:
        async with kueue_cluster.controller(lease_name="real-kueue"):
            # 3 pods x 2 CPUs of 8: admitted by Kueue's scheduler, then started by the controller.
            low = batchrun("low", namespace=NS, labels={"kueue.x-k8s.io/priority-class": "low"})
            await asyncio.to_thread(admin.create, low)
            started = await eventually(lambda: (j := kueue.job("low"))["spec"]["suspend"] is False and j,
                                       timeout=60, what="low started by real Kueue")  # fmt: skip
            assert started["spec"]["template"]["spec"]["nodeSelector"] == {"cloud.example.com/pool": "spot"}
            wl = workload_of("low")
            assert wl is not None and wl["spec"]["priority"] == 10
            assert wl["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                      "name": "low"}  # fmt: skip
            await asyncio.to_thread(job_status, "low", active=3)

            # A higher priority that does not fit: Kueue preempts "low"; the controller stops and
            # restores it, and releases the quota once its pods are gone.
            high = batchrun("high", namespace=NS, labels={"kueue.x-k8s.io/priority-class": "high"})
            await asyncio.to_thread(admin.create, high)
            stopped = await eventually(lambda: (j := kueue.job("low"))["spec"]["suspend"] is True and j,
                                       timeout=60, what="low stopped")  # fmt: skip
            assert (
                "nodeSelector" not in stopped["spec"]["template"]["spec"]
                or not stopped["spec"]["template"]["spec"]["nodeSelector"]
            )
            evicted = condition(workload_of("low"), "Evicted")
            assert evicted is not None and evicted["reason"] == "Preempted"
            await asyncio.sleep(1.0)
            assert kueue.job("high")["spec"]["suspend"] is True  # the quota is still held by low's pods
            await asyncio.to_thread(job_status, "low", active=0)
            await eventually(lambda: kueue.job("high")["spec"]["suspend"] is False, timeout=60, what="high started")
            requeued = condition(workload_of("low"), "Requeued")
            assert requeued is not None and requeued["status"] == "True"

            # "high" finishes: its Workload is finished, the quota freed, "low" admitted and started again.
            await asyncio.to_thread(job_status, "high", conditions=[
                {"type": "Complete", "status": "True", "message": "done"}])  # fmt: skip
            await eventually(lambda: condition(workload_of("high"), "Finished"), timeout=60, what="high finished")
            await eventually(lambda: kueue.job("low")["spec"]["suspend"] is False, timeout=60, what="low restarted")

            # Deleting "low": its Workload is finished (OwnerNotFound) and loses its finalizer.
            name = workload_of("low")["metadata"]["name"]  # type: ignore[index]
            await asyncio.to_thread(admin.delete, "batch.example.com/v1alpha1", "BatchRun", "low", NS)

            def released() -> bool:
                with contextlib.suppress(Exception):
                    wl = admin.get(API, "Workload", name, NS)
                    return not wl["metadata"].get("finalizers") and bool(condition(wl, "Finished"))
                return True  # gone

            await eventually(released, timeout=60, what="low's Workload released")

    asyncio.run(scenario())


def test_the_same_workload_and_start_as_kueues_own_batch_job_integration(kueue_cluster: KueueCluster) -> None:
    """Side by side on the same Kueue: a batch/Job (Kueue's Go integration) and a BatchRun (the
    policy) with the same pod template get the same Workload and the same start."""
    admin = kueue_cluster.admin
    kueue = Kueue(admin, NS)
    template = {"metadata": {"labels": {"app": "parity"}}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "parity", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "team-a-queue"}},
           "spec": {"suspend": True, "parallelism": 3, "completions": 3, "template": template}}  # fmt: skip
    run = batchrun("parity", namespace=NS)
    run["spec"]["template"] = template

    def owned_by(kind: str) -> dict[str, Any] | None:
        for wl in kueue.workloads():
            owner = (wl["metadata"].get("ownerReferences") or [{}])[0]
            if (owner.get("kind"), owner.get("name")) == (kind, "parity"):
                return wl
        return None

    async def scenario() -> None:
        async with kueue_cluster.controller(lease_name="parity"):
            created_job = await asyncio.to_thread(admin.create, job)
            created_run = await asyncio.to_thread(admin.create, run)
            by_go = await eventually(lambda: owned_by("Job"), timeout=60, what="Kueue's Workload for the Job")
            by_policy = await eventually(lambda: owned_by("BatchRun"), timeout=60, what="the BatchRun's Workload")
            # Kueue's own name for the Job is what mkpolicy computes (GetWorkloadNameForOwnerWithGVK).
            assert by_go["metadata"]["name"] == workload_name("parity", created_job["metadata"]["uid"], "Job", "batch")
            for wl, obj in ((by_go, created_job), (by_policy, created_run)):
                meta = wl["metadata"]
                assert meta["labels"] == {"kueue.x-k8s.io/job-uid": obj["metadata"]["uid"]}
                assert meta["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
                (owner,) = meta["ownerReferences"]
                assert (owner["controller"], owner["blockOwnerDeletion"], owner["uid"]) == (
                    True,
                    True,
                    obj["metadata"]["uid"],
                )
            same = ("queueName", "priority")
            assert {k: by_go["spec"].get(k) for k in same} == {k: by_policy["spec"].get(k) for k in same}
            for a, b in zip(by_go["spec"]["podSets"], by_policy["spec"]["podSets"], strict=True):
                assert (a["name"], a["count"]) == (b["name"], b["count"]) == ("main", 3)
                assert (
                    a["template"]["spec"]["containers"][0]["resources"]
                    == b["template"]["spec"]["containers"][0]["resources"]
                )
            # Both admitted by Kueue and started with the flavor's node labels and the podset label.
            started_job = await eventually(lambda: (j := admin.get("batch/v1", "Job", "parity", NS))["spec"]["suspend"] is False and j,
                                           timeout=60, what="the Job started")  # fmt: skip
            started_run = await eventually(lambda: (r := kueue.job("parity"))["spec"]["suspend"] is False and r,
                                           timeout=60, what="the BatchRun started")  # fmt: skip
            for obj in (started_job, started_run):
                tpl = obj["spec"]["template"]
                assert tpl["spec"]["nodeSelector"] == {"cloud.example.com/pool": "spot"}
                assert tpl["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "main"
            # Deleted, both release their quota: the controller finishes the BatchRun's Workload
            # (OwnerNotFound) and drops its finalizer. Kueue drops the Job's finalizer and finishes it
            # too (v0.19.2), or leaves the finishing to its Workload controller's orphan check (v0.17.1,
            # FinishOrphanedWorkloads), which can miss the owner's deletion: without a garbage collector
            # here, the test deletes a Workload left unfinished, as the collector would.
            await asyncio.to_thread(admin.delete, "batch/v1", "Job", "parity", NS)
            await asyncio.to_thread(admin.delete, "batch.example.com/v1alpha1", "BatchRun", "parity", NS)
            await eventually(lambda: (w := owned_by("BatchRun")) is None or condition(w, "Finished"), timeout=60,
                             what="the BatchRun's Workload released")  # fmt: skip
            released = await eventually(lambda: (w := owned_by("Job")) is None or (not w["metadata"].get("finalizers")
                                        and w), timeout=60, what="the Job's Workload released")  # fmt: skip
            if isinstance(released, dict) and not condition(released, "Finished"):
                assert kueue_cluster.version == "v0.17.1", "Kueue v0.19.2 finishes the Workload of a deleted Job"
                await asyncio.to_thread(admin.delete, API, "Workload", released["metadata"]["name"], NS)

    asyncio.run(scenario())


def test_a_deactivated_workload_stops_its_job_until_reactivated(kueue_cluster: KueueCluster) -> None:
    admin = kueue_cluster.admin
    kueue = Kueue(admin, NS)

    def workload() -> dict[str, Any] | None:
        found = [w for w in kueue.workloads() if w["metadata"]["ownerReferences"][0]["name"] == "deactivated"]
        return found[0] if found else None

    def set_active(value: bool) -> None:
        wl = workload()
        assert wl is not None
        wl["spec"]["active"] = value
        admin.update(wl)

    async def scenario() -> None:
        async with kueue_cluster.controller(lease_name="deactivation"):
            await asyncio.to_thread(admin.create, batchrun("deactivated", namespace=NS))
            await eventually(lambda: kueue.job("deactivated")["spec"]["suspend"] is False, timeout=60, what="started")
            await asyncio.to_thread(set_active, False)
            await eventually(lambda: kueue.job("deactivated")["spec"]["suspend"] is True, timeout=60, what="stopped")
            evicted = await eventually(lambda: condition(workload(), "Evicted"), timeout=60, what="evicted")
            assert evicted["reason"] == "Deactivated"  # WorkloadDeactivated
            released = await eventually(lambda: (w := workload()) and condition(w, "QuotaReserved")["status"] == "False" and w,  # type: ignore[index]
                                        timeout=60, what="the quota released")  # fmt: skip
            assert condition(released, "Requeued")["status"] == "False"  # type: ignore[index]
            await asyncio.to_thread(set_active, True)
            await eventually(lambda: kueue.job("deactivated")["spec"]["suspend"] is False, timeout=60, what="restarted")

    asyncio.run(scenario())


def test_without_a_queue_name_and_outside_the_selected_namespaces_as_kueues_batch_job(
    kueue_cluster: KueueCluster,
) -> None:
    """Kueue configured with manageJobsWithoutQueueName and managedJobsNamespaceSelector (kueue=on),
    the controller reading the same configuration: a running batch/Job (Kueue's Go integration) and
    a running BatchRun without a queue name are both suspended and get a Workload with no queue name
    in a selected namespace, and are both left alone, running, in one the selector leaves out."""
    admin = kueue_cluster.admin
    template = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip

    def job(ns: str) -> dict[str, Any]:
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "unqueued", "namespace": ns},
                "spec": {"suspend": False, "parallelism": 1, "completions": 1, "template": template}}  # fmt: skip

    def run(ns: str) -> dict[str, Any]:
        obj = batchrun("unqueued", namespace=ns, marked=False, suspend=False)
        del obj["metadata"]["labels"]
        return obj

    def owned_by(kind: str, ns: str) -> dict[str, Any] | None:
        found = [w for w in Kueue(admin, ns).workloads() if w["metadata"]["ownerReferences"][0]["kind"] == kind]
        return found[0] if found else None

    def suspended(api: str, kind: str, ns: str) -> bool:
        return bool(admin.get(api, kind, "unqueued", ns)["spec"].get("suspend"))

    async def scenario() -> None:
        async with kueue_cluster.controller(lease_name="without-queue-name"):
            for ns in ("opted-in", "opted-out"):
                await asyncio.to_thread(admin.create, job(ns))
                await asyncio.to_thread(admin.create, run(ns))
            for kind in ("Job", "BatchRun"):
                wl = await eventually(lambda k=kind: owned_by(k, "opted-in"), timeout=60,  # type: ignore[misc]
                                      what=f"the {kind}'s Workload")  # fmt: skip
                assert "queueName" not in wl["spec"] or not wl["spec"]["queueName"]
            for api, kind in (("batch/v1", "Job"), ("batch.example.com/v1alpha1", "BatchRun")):
                await eventually(lambda a=api, k=kind: suspended(a, k, "opted-in"), timeout=60,  # type: ignore[misc]
                                 what=f"the {kind} suspended")  # fmt: skip
            await asyncio.sleep(2.0)
            for api, kind in (("batch/v1", "Job"), ("batch.example.com/v1alpha1", "BatchRun")):
                assert owned_by(kind, "opted-out") is None, f"Kueue's rule leaves the {kind} in opted-out alone"
                assert not suspended(api, kind, "opted-out")
            for ns in ("opted-in", "opted-out"):
                await asyncio.to_thread(admin.delete, "batch/v1", "Job", "unqueued", ns)
                await asyncio.to_thread(admin.delete, "batch.example.com/v1alpha1", "BatchRun", "unqueued", ns)

    asyncio.run(scenario())
