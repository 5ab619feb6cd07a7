"""Argo Workflows through real Kueue MultiKueue on real kube-apiservers, ``mkpolicy controller`` on the manager.

The manager is set up as docs/install.md's "Argo Workflows" says: Argo's real CRD (from the Go module
cache) given ``spec.managedBy`` by ``mkpolicy export crd-patch``, the admission policies of ``mkpolicy
export argo-admission`` (managedBy, the instance id) and of ``mkpolicy export admission`` (Kueue's
suspension with the marker, the default queue, Kueue's job validation), and ``mkpolicy controller
--policies`` running the policy's integration (a process, as a user runs it). The workers serve Argo's
CRD as Argo ships it and run nothing but the test, which plays Argo's controller there (status by
whole-object update). A user's ``kubectl apply`` of a Workflow labelled ``mkpolicy.io/managed-by:
multikueue`` and queued; everything else is real: the controller creates the Workload, Kueue reserves
quota, MultiKueue dispatches through the sidecar, the worker's Kueue admits, the controller starts the
manager's Workflow, the sidecar writes the status back, the controller finishes the Workload from the
phase, MultiKueue removes the copies. Eviction on the manager, and a worker lost mid-run, end with the
Workflow dispatched to the other worker. Once per Kueue version the harness has. Skipped where the
harness, Go or kubectl is missing."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from peer_waits import condition, eventually, exists

pytest.importorskip("mkpolicy.testing.peers.multikueue", reason="the real-peer harness (mkpolicy.testing.peers)")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sidecar"))
from argo_harness import ARGO, FRAMEWORK, argo_crd, argo_crds, argo_status

import mkpolicy
from mkpolicy.engine.admission_policies import admission_manifests
from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.lint.argo_admission import manifests
from mkpolicy.testing.kubectl import Kubectl
from mkpolicy.testing.kueue.simulate import workload_name
from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.fixtures import require_go
from mkpolicy.testing.peers.multikueue import CLUSTER_QUEUE, KUEUE_API, KUEUE_NAMESPACE, LOCAL_QUEUE, RealMultiKueue
from mkpolicy.testing.peers.processes import Process, free_port, wait_until
from mkpolicy.testing.peers.sidecar import http_ok

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
WF = ("argoproj.io/v1alpha1", "Workflow")
WL = (KUEUE_API, "Workload")
MK = "kueue.x-k8s.io/multikueue"
MARKER = "kueue.mkpolicy.io/suspended-by-kueue"
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
#: Short, so that a lost worker's Workflow is dispatched again within the test (Kueue's default: 15m).
WORKER_LOST_TIMEOUT = "20s"


def marked(kubectl: Kubectl) -> bool:
    """Whether every CREATE admission policy acts on a new queued, labelled Workflow (server-side dry run)."""
    probe = {"apiVersion": WF[0], "kind": WF[1], "metadata": {"name": "probe", "namespace": "default",
             "labels": {"mkpolicy.io/managed-by": "multikueue", "kueue.x-k8s.io/queue-name": LOCAL_QUEUE}},
             "spec": {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}]}}  # fmt: skip
    out = kubectl.run("create", "--dry-run=server", "-o", "json", "-f", "-", input=yaml.safe_dump(probe), check=False)
    if out.returncode != 0:
        return False  # e.g. the CRD not yet known to admission
    obj = yaml.safe_load(out.stdout)
    labels, annotations = obj["metadata"].get("labels") or {}, obj["metadata"].get("annotations") or {}
    return bool(
        obj["spec"].get("managedBy") == MK
        and obj["spec"].get("suspend") is True
        and annotations.get(MARKER) == "true"
        and labels.get("workflows.argoproj.io/controller-instanceid") == "mkpolicy-multikueue"
    )


@pytest.fixture(scope="module", params=build.KUEUE_VERSIONS, ids=[f"kueue-{v}" for v in build.KUEUE_VERSIONS])
def argo_multikueue(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealMultiKueue]:
    """Real Kueue on a manager and two workers serving Argo's CRD, the sidecar with the Argo policy, the
    manager's admission policies, and ``mkpolicy controller`` on the manager."""
    require_go()
    tmp = tmp_path_factory.mktemp("argo-real")
    policies = tmp / "policies"
    policies.mkdir()
    shutil.copy(ARGO, policies)
    shutil.copytree(ROOT / "schemas", tmp / "schemas")
    mk = RealMultiKueue(2, kueue_version=request.param, frameworks=[FRAMEWORK], quota={"worker1": "8", "worker2": "0"},
                        policies=policies, crds=[argo_crd()], worker_lost_timeout=WORKER_LOST_TIMEOUT,
                        log=lambda line: print(f"[peers] {line}", flush=True))  # fmt: skip
    with mk:
        _, patched = argo_crds()
        mk.manager.install_crds([patched])
        kubectl = Kubectl.for_kubeconfig(mk.kubeconfig_files["manager"], tmp)
        if kubectl is None:
            pytest.skip("kubectl is not installed")
        policy = mkpolicy.load(str(ARGO))[0]
        kubectl.run("apply", "-f", "-", input=yaml.safe_dump_all([*manifests(policy), *admission_manifests(policy)]))
        eventually(lambda: marked(kubectl), "the manager's admission policies in effect")
        port = free_port()
        controller = Process("mkpolicy controller", [
            sys.executable, "-m", "mkpolicy", "controller", "--policies", str(policies),
            "--kubeconfig", str(mk.kubeconfig_files["manager"]), "--ops-address", "127.0.0.1",
            "--ops-port", str(port), "--lease-namespace", KUEUE_NAMESPACE,
        ], mk.run_dir / "controller.log").start()  # fmt: skip
        try:
            wait_until(controller, lambda: http_ok(f"http://127.0.0.1:{port}/readyz"), "mkpolicy controller ready", 60)
            yield mk
        finally:
            print(controller.tail(30), flush=True)
            controller.stop()


class Scenario:
    def __init__(self, mk: RealMultiKueue, ns: str, tmp: Path) -> None:
        self.mk = mk
        self.ns = ns
        self.tmp = tmp
        self.adapter = mkpolicy.compile(mkpolicy.load(str(ARGO))[0])
        # Kueue 0.18+ puts the prebuilt-workload name in an annotation (gate on by default), 0.17 in a label
        self.identifier = "label" if mk.kueue_version.startswith("v0.17.") else "annotation"

    def manager(self) -> Any:
        return self.mk.manager.view(self.ns)

    def worker(self, name: str) -> Any:
        return self.mk.workers[name].view(self.ns)

    def submit(self, name: str) -> str:
        """The user's ``kubectl apply`` (the admission policies mark and suspend it); the Workload the
        controller creates for it (its name)."""
        obj = {
            "apiVersion": WF[0], "kind": WF[1],
            "metadata": {"name": name, "namespace": self.ns,
                         "labels": {"mkpolicy.io/managed-by": "multikueue", "kueue.x-k8s.io/queue-name": LOCAL_QUEUE},
                         "annotations": {"kueue.mkpolicy.io/requests-cpu": "2"}},
            "spec": {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}]},
        }  # fmt: skip
        kubectl = Kubectl.for_kubeconfig(self.mk.kubeconfig_files["manager"], self.tmp)
        assert kubectl is not None
        kubectl.run("apply", "-f", "-", input=yaml.safe_dump(obj))
        job: dict[str, Any] = self.manager().get(*WF, name, self.ns)
        assert job["spec"]["managedBy"] == MK and job["spec"]["suspend"] is True
        assert job["metadata"]["annotations"][MARKER] == "true"
        assert job["metadata"]["labels"]["workflows.argoproj.io/controller-instanceid"] == "mkpolicy-multikueue"
        wl = workload_name("Workflow", name, job["metadata"]["uid"], "argoproj.io")
        created = eventually(lambda: exists(self.mk.manager, self.ns, WL, wl) and self.manager().get(*WL, wl, self.ns),
                             f"the controller's Workload {wl}")  # fmt: skip
        assert created["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        [pod_set] = created["spec"]["podSets"]
        assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}
        return wl

    def ctx(self, workload: str, cluster: str) -> mkpolicy.Context:
        return mkpolicy.Context(workload, "multikueue", cluster, None, self.identifier)  # type: ignore[arg-type]

    def copy_created(self, name: str, workload: str, cluster: str) -> None:
        """The copy on ``cluster`` is the policy's ``create`` of the manager's Workflow: runnable (Kueue's
        suspension and marker dropped). What the controller injects or restores at admission or
        eviction (``podMetadata``, ``nodeSelector``, ``tolerations``) may have changed since."""
        copy = eventually(
            lambda: (
                exists(self.mk.workers[cluster], self.ns, WF, name) and self.worker(cluster).get(*WF, name, self.ns)
            ),
            f"the copy of {name} on {cluster}",
        )
        expected = self.adapter.create(self.manager().get(*WF, name, self.ns), self.ctx(workload, cluster))
        for obj in (copy, expected):
            for key in SERVER_METADATA:
                obj["metadata"].pop(key, None)
            obj.pop("status", None)
            for key in ("podMetadata", "nodeSelector", "tolerations"):
                obj["spec"].pop(key, None)
        assert copy == expected
        assert not {"managedBy", "suspend"} & set(copy["spec"])
        assert MARKER not in (copy["metadata"].get("annotations") or {})
        assert not {"mkpolicy.io/managed-by", "workflows.argoproj.io/controller-instanceid"} & set(
            copy["metadata"]["labels"]
        )

    def admitted_on(self, name: str, workload: str, cluster: str) -> None:
        """Admitted on the manager after ``cluster`` admitted the copy's Workload; the controller starts
        the manager's Workflow (Kueue's suspension lifted, the podset label injected)."""

        wl = eventually(lambda: (w := self.manager().get(*WL, workload, self.ns))
                        and condition(w, "Admitted").get("status") == "True" and w, f"{workload} admitted")  # fmt: skip
        assert [c["state"] for c in wl["status"]["admissionChecks"]] == ["Ready"]
        assert wl["status"].get("clusterName") == cluster
        started = eventually(lambda: (j := self.manager().get(*WF, name, self.ns)) and not j["spec"].get("suspend") and j,
                             f"the manager's {name} started by the controller")  # fmt: skip
        assert MARKER not in (started["metadata"].get("annotations") or {})
        assert started["spec"]["podMetadata"]["labels"]["kueue.x-k8s.io/podset"] == "workflow"
        assert started["spec"]["managedBy"] == MK

    def play_argo(self, cluster: str, name: str, step: str) -> dict[str, Any]:
        """Argo's controller on the worker: status and phase label by a whole-object update."""
        worker = self.worker(cluster)
        obj = worker.get(*WF, name, self.ns)
        obj["status"] = argo_status(step, name)
        obj["metadata"]["labels"]["workflows.argoproj.io/phase"] = step
        updated: dict[str, Any] = worker.update(obj)
        return updated

    def status_written(self, name: str, workload: str, cluster: str, step: str) -> None:
        remote = self.play_argo(cluster, name, step)

        def synced() -> bool:
            manager_obj = self.manager().get(*WF, name, self.ns)
            patch = self.adapter.sync(manager_obj, remote, self.ctx(workload, cluster))
            return "status" in manager_obj and (patch is None or apply_merge_patch(manager_obj, patch) == manager_obj)

        eventually(synced, f"status {step} written back from {cluster}")
        status = self.manager().get(*WF, name, self.ns)["status"]
        assert status["phase"] == step and not {"nodes", "offloadNodeStatusVersion"} & set(status)

    def finished(self, workload: str, reason: str, message: str) -> None:
        """The controller finished the manager's Workload from the phase written back; its quota released."""
        done = eventually(lambda: condition(self.manager().get(*WL, workload, self.ns), "Finished").get("status") == "True"
                          and self.manager().get(*WL, workload, self.ns), "the manager's Workload finished")  # fmt: skip
        assert (condition(done, "Finished")["reason"], condition(done, "Finished")["message"]) == (reason, message)
        eventually(lambda: "kueue.x-k8s.io/resource-in-use" not in (
            self.manager().get(*WL, workload, self.ns)["metadata"].get("finalizers") or []), "the finalizer removed")  # fmt: skip
        eventually(lambda: not self.reserving(), "the ClusterQueue's quota released")

    def reserving(self) -> int:
        cq = self.mk.manager.admin.get(KUEUE_API, "ClusterQueue", CLUSTER_QUEUE)
        return int((cq.get("status") or {}).get("reservingWorkloads") or 0)

    def nothing_left(self, name: str, workload: str, cluster: str, timeout: float = 120) -> None:
        eventually(lambda: not exists(self.mk.workers[cluster], self.ns, WF, name), f"no copy of {name} on {cluster}",
                   timeout)  # fmt: skip
        eventually(lambda: not exists(self.mk.workers[cluster], self.ns, WL, workload),
                   f"no remote workload {workload} on {cluster}", timeout)  # fmt: skip

    def stopped(self, name: str) -> None:
        """Evicted: the controller stopped the manager's Workflow (Kueue's suspension) and, its pods being
        on a worker, released the quota at once (an Event: the Workflow may be re-admitted meanwhile)."""

        def stop_events() -> list[dict[str, Any]]:
            return [e for e in self.manager().list("v1", "Event", namespace=self.ns)
                    if e["reason"] == "Stopped" and e["involvedObject"]["name"] == name]  # fmt: skip

        eventually(stop_events, f"the controller's Stopped event on {name}")


@pytest.fixture
def scenario(argo_multikueue: RealMultiKueue, tmp_path: Path) -> Iterator[Scenario]:
    ns = argo_multikueue.new_namespace()
    yield Scenario(argo_multikueue, ns, tmp_path)
    argo_multikueue.delete_namespace(ns)


@pytest.fixture
def worker2_only(argo_multikueue: RealMultiKueue) -> Iterator[None]:
    """Quota on worker2 instead of worker1 (set by the test once dispatched to worker1), back after."""
    yield
    argo_multikueue.set_quota("worker1", "8")
    argo_multikueue.set_quota("worker2", "0")


def test_a_workflow_queued_dispatched_written_back_finished(scenario: Scenario) -> None:
    s = scenario
    wl = s.submit("etl")
    s.copy_created("etl", wl, "worker1")
    s.admitted_on("etl", wl, "worker1")
    s.nothing_left("etl", wl, "worker2")
    s.status_written("etl", wl, "worker1", "Running")
    s.status_written("etl", wl, "worker1", "Succeeded")
    # the controller read the phase the sidecar wrote back; real Kueue never patched Argo's missing /status
    s.finished(wl, "Succeeded", "done")
    s.nothing_left("etl", wl, "worker1")
    final = s.manager().get(*WF, "etl", s.ns)
    assert final["status"]["phase"] == "Succeeded" and final["status"]["finishedAt"] == "2026-11-26T10:05:00Z"
    assert final["spec"]["managedBy"] == MK
    assert "mkpolicy-sidecar" in {m["manager"] for m in final["metadata"]["managedFields"]}


def test_a_failed_workflow_finishes_its_workload_failed(scenario: Scenario) -> None:
    s = scenario
    wl = s.submit("etl")
    s.copy_created("etl", wl, "worker1")
    s.admitted_on("etl", wl, "worker1")
    s.status_written("etl", wl, "worker1", "Failed")
    s.finished(wl, "Failed", "main failed")
    s.nothing_left("etl", wl, "worker1")


def test_evicted_on_the_manager_removed_from_its_worker_and_dispatched_to_the_other(
    scenario: Scenario, worker2_only: None
) -> None:
    s = scenario
    wl = s.submit("etl")
    s.copy_created("etl", wl, "worker1")
    s.admitted_on("etl", wl, "worker1")
    s.status_written("etl", wl, "worker1", "Running")  # PodRunning True on the manager too
    s.mk.set_quota("worker1", "0")
    s.mk.set_quota("worker2", "8")
    s.manager().patch(*WL, wl, {"spec": {"active": False}}, namespace=s.ns)
    s.stopped("etl")
    held = s.manager().get(*WF, "etl", s.ns)
    assert held["spec"]["suspend"] is True and held["metadata"]["annotations"][MARKER] == "true"
    eventually(lambda: condition(s.manager().get(*WL, wl, s.ns), "QuotaReserved").get("status") == "False",
               "the quota reservation cleared by the controller")  # fmt: skip
    s.nothing_left("etl", wl, "worker1")  # MultiKueue deleted the copy (its pods with it)

    s.manager().patch(*WL, wl, {"spec": {"active": True}}, namespace=s.ns)
    s.copy_created("etl", wl, "worker2")
    s.admitted_on("etl", wl, "worker2")
    s.status_written("etl", wl, "worker2", "Succeeded")
    s.finished(wl, "Succeeded", "done")
    s.nothing_left("etl", wl, "worker2")
    assert not exists(s.mk.workers["worker1"], s.ns, WF, "etl")


def test_a_worker_lost_mid_run_the_workflow_runs_on_the_other(scenario: Scenario, worker2_only: None) -> None:
    """worker1's kube-apiserver stops while the Workflow runs there. MultiKueue waits workerLostTimeout
    (from when the loss was seen on 0.19, from the admission check's last transition on 0.17:
    pkg/controller/admissionchecks/multikueue/workload.go), then sets the check to Retry; Kueue evicts
    the manager's Workload, the controller stops the Workflow and releases the quota, and it is
    dispatched to worker2. Once worker1 is back, MultiKueue removes the copy left there."""
    s = scenario
    wl = s.submit("etl")
    s.copy_created("etl", wl, "worker1")
    s.admitted_on("etl", wl, "worker1")
    s.status_written("etl", wl, "worker1", "Running")
    s.mk.set_quota("worker1", "0")
    s.mk.set_quota("worker2", "8")
    worker1 = s.mk.workers["worker1"]
    worker1.stop()
    try:
        s.stopped("etl")
        s.copy_created("etl", wl, "worker2")
        s.admitted_on("etl", wl, "worker2")
        s.status_written("etl", wl, "worker2", "Succeeded")
        s.finished(wl, "Succeeded", "done")
        s.nothing_left("etl", wl, "worker2")
    finally:
        worker1.start()
    s.nothing_left("etl", wl, "worker1", timeout=240)
