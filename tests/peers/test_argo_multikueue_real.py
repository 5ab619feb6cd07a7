"""Argo Workflows through real Kueue MultiKueue (v0.19.2) on real kube-apiservers, the sidecar in between.

The manager is set up as docs/install.md's "Argo Workflows" says: Argo's real CRD (from the Go module
cache) given ``spec.managedBy`` by ``mkpolicy export crd-patch``, the admission policies of ``mkpolicy
export argo-admission``; the workers serve Argo's CRD as Argo ships it. A user's ``kubectl apply`` of a
Workflow labelled ``mkpolicy.io/managed-by: multikueue``. The test plays what no controller here does:
the integration that creates the manager's Workload, Argo's controller on the worker (status by
whole-object update) and the end of the job (the worker Workload's ``Finished``). Everything else is
real Kueue: the scheduler reserves quota, MultiKueue dispatches, the worker's Kueue admits, MultiKueue
creates the copy and reads it back through the sidecar, finishes, removes the copies.
Skipped where the harness, Go or kubectl is missing."""

from __future__ import annotations

import datetime as _dt
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
from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.lint.argo_admission import manifests
from mkpolicy.testing.kubectl import Kubectl
from mkpolicy.testing.kueue.simulate import workload_name
from mkpolicy.testing.peers.fixtures import require_go
from mkpolicy.testing.peers.multikueue import KUEUE_API, LOCAL_QUEUE, RealMultiKueue

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
WF = ("argoproj.io/v1alpha1", "Workflow")
WL = (KUEUE_API, "Workload")
MK = "kueue.x-k8s.io/multikueue"


@pytest.fixture(scope="module")
def argo_multikueue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealMultiKueue]:
    """Real Kueue 0.19.2 on a manager and two workers serving Argo's CRD, the sidecar with the Argo policy."""
    require_go()
    tmp = tmp_path_factory.mktemp("argo-real")
    policies = tmp / "policies"
    policies.mkdir()
    shutil.copy(ARGO, policies)
    shutil.copytree(ROOT / "schemas", tmp / "schemas")
    mk = RealMultiKueue(2, kueue_version="0.19.2", frameworks=[FRAMEWORK], quota={"worker1": "8", "worker2": "0"},
                        policies=policies, crds=[argo_crd()], log=lambda line: print(f"[peers] {line}", flush=True))  # fmt: skip
    with mk:
        _, patched = argo_crds()
        mk.manager.install_crds([patched])
        kubectl = Kubectl.for_kubeconfig(mk.kubeconfig_files["manager"], tmp)
        if kubectl is None:
            pytest.skip("kubectl is not installed")
        kubectl.run("apply", "-f", "-", input=yaml.safe_dump_all(manifests(mkpolicy.load(str(ARGO))[0])))
        yield mk


class Scenario:
    def __init__(self, mk: RealMultiKueue, ns: str, tmp: Path) -> None:
        self.mk = mk
        self.ns = ns
        self.tmp = tmp
        self.adapter = mkpolicy.compile(mkpolicy.load(str(ARGO))[0])

    def manager(self) -> Any:
        return self.mk.manager.view(self.ns)

    def worker(self, name: str) -> Any:
        return self.mk.workers[name].view(self.ns)

    def submit(self, name: str) -> str:
        """The user's ``kubectl apply`` (the admission policies mark it), then the integration's Workload."""
        obj = {
            "apiVersion": WF[0], "kind": WF[1],
            "metadata": {"name": name, "namespace": self.ns,
                         "labels": {"mkpolicy.io/managed-by": "multikueue", "kueue.x-k8s.io/queue-name": LOCAL_QUEUE}},
            "spec": {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}]},
        }  # fmt: skip
        kubectl = Kubectl.for_kubeconfig(self.mk.kubeconfig_files["manager"], self.tmp)
        assert kubectl is not None

        def marked() -> dict[str, Any] | None:
            # the admission policies act once kube-apiserver's informers see them
            kubectl.run("apply", "-f", "-", input=yaml.safe_dump(obj))
            job: dict[str, Any] = self.manager().get(*WF, name, self.ns)
            if job["spec"].get("managedBy") == MK:
                return job
            self.manager().delete(*WF, name, self.ns)
            return None

        job = eventually(marked, "the Workflow marked by the admission policy")
        assert job["metadata"]["labels"]["workflows.argoproj.io/controller-instanceid"] == "mkpolicy-multikueue"
        uid = job["metadata"]["uid"]
        wl = workload_name("Workflow", name, uid, "argoproj.io")
        owner = {"apiVersion": WF[0], "kind": WF[1], "name": name, "uid": uid, "controller": True,
                 "blockOwnerDeletion": True}  # fmt: skip
        pod = {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip
        self.manager().create({"apiVersion": KUEUE_API, "kind": "Workload",
                               "metadata": {"name": wl, "namespace": self.ns, "ownerReferences": [owner]},
                               "spec": {"queueName": LOCAL_QUEUE,
                                        "podSets": [{"name": "main", "count": 1, "template": pod}]}})  # fmt: skip
        return wl

    def ctx(self, workload: str, cluster: str) -> mkpolicy.Context:
        return mkpolicy.Context(workload, "multikueue", cluster, None, "annotation")

    def copy_created(self, name: str, workload: str, cluster: str) -> None:
        copy = eventually(
            lambda: (
                exists(self.mk.workers[cluster], self.ns, WF, name) and self.worker(cluster).get(*WF, name, self.ns)
            ),
            f"the copy of {name} on {cluster}",
        )
        expected = self.adapter.create(self.manager().get(*WF, name, self.ns), self.ctx(workload, cluster))
        for key in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
            copy["metadata"].pop(key, None)
        copy.pop("status", None)
        assert copy == expected
        assert "managedBy" not in copy["spec"]
        assert not {"mkpolicy.io/managed-by", "workflows.argoproj.io/controller-instanceid"} & set(
            copy["metadata"]["labels"]
        )

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

    def finish(self, workload: str, cluster: str) -> None:
        now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        finished = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                    "lastTransitionTime": now}  # fmt: skip
        self.worker(cluster).patch(*WL, workload, [{"op": "add", "path": "/status/conditions/-", "value": finished}],
                                   namespace=self.ns, patch_type="json", subresource="status")  # fmt: skip

    def nothing_left(self, name: str, workload: str, cluster: str) -> None:
        eventually(lambda: not exists(self.mk.workers[cluster], self.ns, WF, name), f"no copy of {name} on {cluster}")
        eventually(lambda: not exists(self.mk.workers[cluster], self.ns, WL, workload),
                   f"no remote workload {workload} on {cluster}")  # fmt: skip

    def admitted_on(self, workload: str, cluster: str) -> None:
        def admitted() -> bool:
            wl = self.manager().get(*WL, workload, self.ns)
            checks = (wl.get("status") or {}).get("admissionChecks") or []
            return condition(wl, "Admitted").get("status") == "True" and any(c["state"] == "Ready" for c in checks)

        eventually(admitted, f"{workload} admitted")
        assert self.manager().get(*WL, workload, self.ns)["status"].get("clusterName") == cluster

    def finished(self, workload: str) -> None:
        eventually(lambda: condition(self.manager().get(*WL, workload, self.ns), "Finished").get("status") == "True",
                   "the manager's Workload finished")  # fmt: skip


@pytest.fixture
def scenario(argo_multikueue: RealMultiKueue, tmp_path: Path) -> Iterator[Scenario]:
    ns = argo_multikueue.new_namespace()
    yield Scenario(argo_multikueue, ns, tmp_path)
    argo_multikueue.delete_namespace(ns)


def test_a_workflow_dispatched_its_status_written_back_finished(scenario: Scenario) -> None:
    s = scenario
    wl = s.submit("etl")
    s.copy_created("etl", wl, "worker1")
    s.admitted_on(wl, "worker1")
    s.nothing_left("etl", wl, "worker2")
    s.status_written("etl", wl, "worker1", "Running")
    s.status_written("etl", wl, "worker1", "Succeeded")
    s.finish(wl, "worker1")
    s.finished(wl)  # real Kueue's SyncJob succeeded: it never patched the /status Argo's CRD does not serve
    s.nothing_left("etl", wl, "worker1")
    final = s.manager().get(*WF, "etl", s.ns)
    assert final["status"]["phase"] == "Succeeded" and final["status"]["finishedAt"] == "2026-11-26T10:05:00Z"
    assert final["spec"]["managedBy"] == MK
    assert "mkpolicy-sidecar" in {m["manager"] for m in final["metadata"]["managedFields"]}
