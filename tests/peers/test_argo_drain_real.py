"""Argo Workflows on one cluster (no MultiKueue) with real Kueue v0.19.2: eviction drains.

One real kube-apiserver serving Argo's full Workflow CRD as Argo ships it (read from the Go
module cache), real Kueue with ``Workflow.v1alpha1.argoproj.io`` as an external framework,
the admission policies of ``mkpolicy export admission`` applied, and ``mkpolicy controller
--policies`` running the Argo policy's integration (a process, reading Kueue's configuration
with ``--kueue-config``, as a user runs it). The test plays Argo's controller only (status by
whole-object update, as the other Argo real-peer tests do).

What the policy's integration section says, checked here: on eviction the controller stops the
Workflow with the default stop (``spec.suspend``, marked: Argo starts no new step, running pods
finish) and keeps the quota while ``active`` holds (Argo's ``PodRunning`` condition, or a Pod
node Running); once the node is done, the quota is released. That ordering is Kueue's
``ReconcileGenericJob`` step 6, "handle eviction" (``pkg/controller/jobframework/reconciler.go``,
v0.19.2): ``stopJob`` first, then, only ``if !job.IsActive()``, ``UnsetQuotaReservationWithCondition``
with ``SetRequeuedCondition`` (True only for ``Preempted`` and ``NodeFailures``).

Preempted, the draining Workflow's quota is really held: the ClusterQueue still counts it and
the preemptor waits until the pod is done. Deactivated, the Workload keeps ``QuotaReserved``
just as long, but Kueue itself stops counting a Workload that is not active at once (the second
test). Skipped where the harness or Go is missing."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from peer_waits import condition, eventually, exists

pytest.importorskip("mkpolicy.testing.peers.onekueue", reason="the real-peer harness (mkpolicy.testing.peers)")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sidecar"))
from argo_harness import ARGO, FRAMEWORK, argo_crds, argo_status
from sidecar_harness import policy_dir

from mkpolicy.testing.kueue.simulate import workload_name
from mkpolicy.testing.peers.admission import create_admitted
from mkpolicy.testing.peers.controlplane import ControlPlane, KubeCluster
from mkpolicy.testing.peers.fixtures import require_go
from mkpolicy.testing.peers.onekueue import kueue_on
from mkpolicy.testing.peers.processes import Process, free_port, wait_until
from mkpolicy.testing.peers.sidecar import http_ok

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(900)]

VERSION = "v0.19.2"
API = "kueue.x-k8s.io/v1beta2"
WF = ("argoproj.io/v1alpha1", "Workflow")
WL = (API, "Workload")
NS = "team-a"
QUEUE = "team-a-queue"
MARKER = "kueue.mkpolicy.io/suspended-by-kueue"
#: How long the test watches the evicted Workload keep its quota while a pod still runs (the
#: controller reconciles a Workload's change within a second or two on a quiet machine).
HELD_FOR = 10.0


def probe_marked(kube: KubeCluster, attempt: int) -> bool:
    """Whether the exported suspension policy acts on a new queued Workflow (the probe deleted)."""
    probe = workflow(f"probe-{attempt}")
    stored = create_admitted(kube, probe, timeout=180)
    kube.admin.delete(*WF, probe["metadata"]["name"], NS)
    return bool(stored["spec"].get("suspend") is True and (stored["metadata"].get("annotations") or {}).get(MARKER))


def workflow(name: str, priority: str = "low") -> dict[str, Any]:
    """The user's Workflow: queued at ``priority``, declaring 6 of the queue's 8 CPUs, one container step."""
    return {
        "apiVersion": WF[0], "kind": WF[1],
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"kueue.x-k8s.io/queue-name": QUEUE, "kueue.x-k8s.io/priority-class": priority},
                     "annotations": {"kueue.mkpolicy.io/requests-cpu": "6"}},
        "spec": {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}]},
    }  # fmt: skip


@pytest.fixture(scope="module")
def argo_kueue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """A kube-apiserver with Argo's CRD, real Kueue v0.19.2 (8 CPUs in ClusterQueue ``cq``, which
    preempts lower priorities; LocalQueue ``team-a-queue``; WorkloadPriorityClasses ``low`` and
    ``high``), the exported admission policies in effect, and ``mkpolicy controller``."""
    require_go()
    tmp = tmp_path_factory.mktemp("argo-drain")
    policies = policy_dir(tmp, ARGO)
    shipped, _ = argo_crds()
    with ControlPlane(log=lambda line: print(f"[peers] {line}", flush=True), kueue_versions=[VERSION]) as plane:
        kube = plane.add_cluster("kube")
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        with kueue_on(kube, VERSION, [FRAMEWORK], crds=[shipped]) as kueue:
            kube.apply({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}})
            kube.apply({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
                "namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}]}})  # fmt: skip
            kube.apply({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NS},
                        "spec": {"clusterQueue": "cq"}})  # fmt: skip
            for priority, value in (("low", 10), ("high", 1000)):
                kube.apply({"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": priority},
                            "value": value})  # fmt: skip
            exported = subprocess.run([sys.executable, "-m", "mkpolicy", "export", "admission", "--policies",
                                       str(policies), "--kueue-config", str(kueue.config_file)],
                                      capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
            for manifest in yaml.safe_load_all(exported.stdout):
                if manifest:
                    kube.apply(manifest)
            attempts = iter(range(10_000))
            eventually(lambda: probe_marked(kube, next(attempts)), "the exported admission policies in effect", 180)
            port = free_port()
            controller = Process("mkpolicy controller", [
                sys.executable, "-m", "mkpolicy", "controller", "--policies", str(policies),
                "--kubeconfig", str(kube.write_kubeconfig(tmp / "kube.kubeconfig")),
                "--kueue-config", str(kueue.config_file), "--kueue-version", VERSION,
                "--ops-address", "127.0.0.1", "--ops-port", str(port),
            ], tmp / "controller.log").start()  # fmt: skip
            try:
                wait_until(controller, lambda: http_ok(f"http://127.0.0.1:{port}/readyz"), "mkpolicy controller ready",
                           60)  # fmt: skip
                yield kube
            finally:
                print(controller.tail(30), flush=True)
                controller.stop()


class Run:
    """One Workflow of a scenario: submitted, its Workload, Argo's part."""

    def __init__(self, kube: KubeCluster, name: str, priority: str = "low") -> None:
        self.kube = kube
        self.admin = kube.admin
        self.name = name
        created = create_admitted(kube, workflow(name, priority))
        # the exported admission policies: suspended and marked at creation
        assert created["spec"]["suspend"] is True and created["metadata"]["annotations"][MARKER] == "true"
        self.workload_name = workload_name("Workflow", name, created["metadata"]["uid"], "argoproj.io")
        wl = eventually(lambda: exists(kube, NS, WL, self.workload_name) and self.workload(),
                        f"the controller's Workload {self.workload_name}")  # fmt: skip
        [pod_set] = wl["spec"]["podSets"]
        assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "6"}

    def workload(self) -> dict[str, Any]:
        wl: dict[str, Any] = self.admin.get(*WL, self.workload_name, NS)
        return wl

    def workflow(self) -> dict[str, Any]:
        obj: dict[str, Any] = self.admin.get(*WF, self.name, NS)
        return obj

    def started(self) -> None:
        """Kueue admitted the Workload (the ClusterQueue counts it, alone) and the controller lifted its
        own suspension (the field removed) and the marker, the podset label injected."""
        eventually(lambda: condition(self.workload(), "Admitted").get("status") == "True", f"{self.name} admitted")
        # (the ClusterQueue's status follows Kueue's cache a moment later)
        eventually(lambda: reserving(self.kube) == 1, f"the ClusterQueue counting {self.name}")
        started = eventually(lambda: "suspend" not in (w := self.workflow())["spec"] and w,
                             f"{self.name} started by the controller")  # fmt: skip
        assert MARKER not in (started["metadata"].get("annotations") or {})
        assert started["spec"]["podMetadata"]["labels"]["kueue.x-k8s.io/podset"] == "workflow"

    def stopped(self, reason: str) -> None:
        """Evicted for ``reason``; the controller suspended the Workflow (marked: Kueue's suspension)."""
        evicted = eventually(lambda: condition(w := self.workload(), "Evicted").get("status") == "True" and w,
                             f"{self.name} evicted")  # fmt: skip
        assert condition(evicted, "Evicted")["reason"] == reason
        stopped = eventually(lambda: (w := self.workflow())["spec"].get("suspend") is True and w,
                             f"{self.name} suspended by the controller")  # fmt: skip
        assert stopped["metadata"]["annotations"][MARKER] == "true"

    def play_argo(self, *, node: str, pod_running: str) -> None:
        """Argo's controller: the Workflow Running, its one Pod node in phase ``node``, ``PodRunning``
        as given; a whole-object update (Argo's Workflow has no status subresource)."""
        obj = self.workflow()
        status = argo_status("Running", self.name)
        status["nodes"][self.name]["phase"] = node
        status["conditions"] = [{"type": "PodRunning", "status": pod_running}]
        if node == "Succeeded":
            status["progress"] = "1/2"  # one step done, the next not started: the Workflow is not finished
        obj["status"] = status
        self.admin.update(obj)

    def held_while_running(self, also: Callable[[], None]) -> None:
        """For :data:`HELD_FOR` seconds the evicted Workload keeps ``QuotaReserved`` (and
        ``Evicted``): its pod still runs; ``also`` checked each time."""
        deadline = time.monotonic() + HELD_FOR
        while time.monotonic() < deadline:
            now = self.workload()
            conditions = {c["type"]: (c["status"], c["reason"]) for c in now["status"]["conditions"]}
            assert condition(now, "QuotaReserved").get("status") == "True", (
                f"quota released while a pod runs: {conditions}"
            )
            assert condition(now, "Evicted").get("status") == "True"
            also()
            time.sleep(0.5)

    def released(self, requeued: tuple[str, str]) -> None:
        """The quota reservation cleared, ``Requeued`` (status, reason) as Kueue sets it; the
        Workflow still suspended (to resume where it stopped)."""
        done = eventually(lambda: condition(w := self.workload(), "QuotaReserved").get("status") == "False" and w,
                          f"{self.name}'s quota released once its pod is done")  # fmt: skip
        got = condition(done, "Requeued")
        assert (got.get("status"), got.get("reason")) == requeued
        assert self.workflow()["spec"]["suspend"] is True


def reserving(kube: KubeCluster) -> int:
    """The ClusterQueue's ``status.reservingWorkloads`` (the Workloads Kueue's cache counts)."""
    return int((kube.admin.get(API, "ClusterQueue", "cq").get("status") or {}).get("reservingWorkloads") or 0)


@pytest.fixture
def kube(argo_kueue: KubeCluster) -> Iterator[KubeCluster]:
    """``argo_kueue``; afterwards every Workflow deleted (the controller finishes their Workloads)
    and the ClusterQueue empty again, for the next test."""
    yield argo_kueue
    for obj in argo_kueue.admin.list(*WF, namespace=NS):
        argo_kueue.admin.delete(*WF, obj["metadata"]["name"], NS)
    eventually(lambda: reserving(argo_kueue) == 0, "the ClusterQueue empty after the deletions")


def test_preempted_on_one_cluster_the_workflow_drains_and_keeps_its_quota_until_its_pod_is_done(
    kube: KubeCluster,
) -> None:
    low = Run(kube, "low")
    low.started()
    low.play_argo(node="Running", pod_running="True")

    # A higher priority that does not fit beside it: real Kueue preempts "low".
    high = Run(kube, "high", priority="high")
    low.stopped("Preempted")

    def high_waits() -> None:
        assert reserving(kube) == 1, "the ClusterQueue counts only the draining Workflow"
        assert condition(high.workload(), "QuotaReserved").get("status") != "True"
        assert high.workflow()["spec"]["suspend"] is True

    low.held_while_running(high_waits)

    # Its pod done (the Workflow still Running, suspended: no new step): inactive, so the controller
    # releases the quota, Requeued True for a preemption; "high" is admitted and started.
    low.play_argo(node="Succeeded", pod_running="False")
    low.released(("True", "Preempted"))
    high.started()


def test_deactivated_on_one_cluster_the_workload_keeps_quota_reserved_until_its_pod_is_done(
    kube: KubeCluster,
) -> None:
    """The same drain for a deactivated Workload. Real Kueue drops a Workload that is not active from
    its scheduler's cache at once (``Update`` in ``pkg/controller/core/workload_controller.go``,
    v0.19.2: ``case status == workload.StatusFinished || !active`` deletes it from the cache), so the
    ClusterQueue stops counting it while ``QuotaReserved`` stays True on the Workload until the
    controller clears it."""
    run = Run(kube, "deactivated")
    run.started()
    run.play_argo(node="Running", pod_running="True")
    run.admin.patch(*WL, run.workload_name, {"spec": {"active": False}}, namespace=NS)
    run.stopped("Deactivated")
    eventually(lambda: reserving(kube) == 0, "Kueue's cache no longer counting the deactivated Workload")
    run.held_while_running(lambda: None)
    run.play_argo(node="Succeeded", pod_running="False")
    run.released(("False", "Deactivated"))
    assert "admission" not in run.workload()["status"]
