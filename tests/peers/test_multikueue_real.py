"""The MultiKueue lifecycle on real peers: real kube-apiservers, real Kueue, the sidecar in between.

One RealMultiKueue per Kueue version for the whole session (``real_multikueue``); each test
works in a namespace of its own. The test plays what no Kueue controller does for an
external kind: the integration that creates the manager's Workload (a controller
ownerReference to the PipelineRun, as Kueue's jobframework would), and on the worker Tekton
(it writes the PipelineRun's status) and the end of the job (the worker Workload's
``Finished``). Everything else is real Kueue: the manager's scheduler reserves quota,
MultiKueue dispatches to the workers, the worker's Kueue admits, MultiKueue creates the
copy (through the sidecar), copies status back, finishes and removes copies.

Throughout: every copy on a worker is exactly the policy's ``create`` of the manager's object
(so nothing reached a worker untransformed), the manager's status the policy's ``sync``.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from peer_waits import condition, eventually, exists

import mkpolicy
from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.testing.kubectl import Kubectl
from mkpolicy.testing.kueue.simulate import workload_name
from mkpolicy.testing.peers.multikueue import KUEUE_API, LOCAL_QUEUE, RealMultiKueue

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
TEKTON = ROOT / "policies" / "tekton-pipelinerun.yaml"
PR = ("tekton.dev/v1", "PipelineRun")
WL = (KUEUE_API, "Workload")
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def pipelinerun(name: str, ns: str) -> dict[str, Any]:
    """The example PipelineRun as a user submits it (kubectl apply), marked for MultiKueue."""
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "tekton" / "pipelinerun.yaml").read_text())
    meta = obj["metadata"]
    for key in (*SERVER_METADATA, "ownerReferences", "finalizers", "annotations"):
        meta.pop(key, None)
    meta["name"], meta["namespace"] = name, ns
    meta["labels"]["kueue.x-k8s.io/queue-name"] = LOCAL_QUEUE
    meta["annotations"] = {"team.example.com/owner": "alice"}
    return json.loads(json.dumps(obj, default=str))


class Scenario:
    """One test's view of the session's MultiKueue: its namespace, the policy, the steps it plays."""

    def __init__(self, mk: RealMultiKueue, ns: str, tmp: Path) -> None:
        self.mk = mk
        self.ns = ns
        self.tmp = tmp
        self.adapter = mkpolicy.compile(mkpolicy.load(str(TEKTON))[0])
        # Kueue 0.18+ puts the prebuilt-workload name in an annotation (gate on by default), 0.17 in a label
        self.identifier = "label" if mk.kueue_version.startswith("v0.17.") else "annotation"

    def manager(self) -> Any:
        return self.mk.manager.view(self.ns)

    def worker(self, name: str) -> Any:
        return self.mk.workers[name].view(self.ns)

    def kubectl(self, cluster: str) -> Kubectl:
        kubectl = Kubectl.for_kubeconfig(self.mk.kubeconfig_files[cluster], self.tmp)
        assert kubectl is not None, "kubectl is not installed"
        return kubectl

    def submit(self, name: str, **labels: str) -> str:
        """The user's ``kubectl apply`` of the PipelineRun, then the integration's Workload for it; its name."""
        obj = pipelinerun(name, self.ns)
        obj["metadata"]["labels"].update(labels)
        file = self.tmp / f"{name}.yaml"
        file.write_text(yaml.safe_dump(obj))
        self.kubectl("manager").run("apply", "-f", str(file))
        job = self.manager().get(*PR, name, self.ns)
        uid = job["metadata"]["uid"]
        wl = workload_name("PipelineRun", name, uid, "tekton.dev")
        owner = {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "name": name, "uid": uid,
                 "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        pod = {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}  # fmt: skip
        self.manager().create({"apiVersion": KUEUE_API, "kind": "Workload",
                               "metadata": {"name": wl, "namespace": self.ns, "ownerReferences": [owner]},
                               "spec": {"queueName": LOCAL_QUEUE,
                                        "podSets": [{"name": "main", "count": 1, "template": pod}]}})  # fmt: skip
        return wl

    def ctx(self, workload: str, cluster: str) -> mkpolicy.Context:
        return mkpolicy.Context(workload, "multikueue", cluster, None, self.identifier)  # type: ignore[arg-type]

    def copy_created(self, name: str, workload: str, cluster: str) -> dict[str, Any]:
        """The copy appears on ``cluster`` and is exactly the policy's ``create`` of the manager's object."""
        worker = self.worker(cluster)
        copy = eventually(lambda: exists(self.mk.workers[cluster], self.ns, PR, name) and worker.get(*PR, name, self.ns),
                          f"the copy of {name} on {cluster}")  # fmt: skip
        expected = self.adapter.create(self.manager().get(*PR, name, self.ns), self.ctx(workload, cluster))
        got = json.loads(json.dumps(copy))
        for key in SERVER_METADATA:
            got["metadata"].pop(key, None)
            expected["metadata"].pop(key, None)
        got.pop("status", None)
        expected.pop("status", None)
        assert got == expected
        # what only the policy does: the user's last-applied annotation and the pending state gone,
        # the manager object's uid recorded
        assert "kubectl.kubernetes.io/last-applied-configuration" not in got["metadata"]["annotations"]
        assert "status" not in got["spec"] and "managedBy" not in got["spec"]
        manager_uid = self.manager().get(*PR, name, self.ns)["metadata"]["uid"]
        assert got["metadata"]["annotations"]["mkpolicy.io/origin-uid"] == manager_uid
        return copy

    def status_written(self, name: str, workload: str, cluster: str, step: int) -> None:
        """Tekton writes ``step`` on the worker; the manager ends with the policy's sync of it."""
        worker = self.worker(cluster)
        worker.patch(*PR, name, {"status": tekton_status(step)}, namespace=self.ns, subresource="status")
        remote = worker.get(*PR, name, self.ns)

        def synced() -> bool:
            manager_obj = self.manager().get(*PR, name, self.ns)
            patch = self.adapter.sync(manager_obj, remote, self.ctx(workload, cluster))
            return "status" in manager_obj and (patch is None or apply_merge_patch(manager_obj, patch) == manager_obj)

        eventually(synced, f"status step {step} written back from {cluster}")
        status = self.manager().get(*PR, name, self.ns)["status"]
        assert "pipelineSpec" not in status and "provenance" not in status

    def finish(self, workload: str, cluster: str) -> None:
        """The job ends on the worker: its Workload ``Finished`` (what the worker's integration writes)."""
        now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        finished = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                    "lastTransitionTime": now}  # fmt: skip
        self.worker(cluster).patch(*WL, workload, [{"op": "add", "path": "/status/conditions/-", "value": finished}],
                                   namespace=self.ns, patch_type="json", subresource="status")  # fmt: skip

    def release_quota(self, workload: str) -> None:
        """The integration's answer to an eviction on the manager: the job stopped, the Workload's quota
        released (jobframework ``reconciler.go``, "handle eviction": ``SetRequeuedCondition``,
        ``UnsetQuotaReservationWithCondition(wl, "Pending", ...)``, the Admitted condition synced)."""
        wl = self.manager().get(*WL, workload, self.ns)
        evicted = condition(wl, "Evicted")
        now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        generation = wl["metadata"]["generation"]
        changed = {
            "QuotaReserved": {"status": "False", "reason": "Pending", "message": evicted["message"]},
            "Admitted": {"status": "False", "reason": "NoReservationUnsatisfiedChecks",
                         "message": "The workload has no reservation and not all checks ready"},
            "Requeued": {"status": "False", "reason": evicted["reason"], "message": evicted["message"]},
        }  # fmt: skip
        conditions = [c for c in wl["status"]["conditions"] if c["type"] not in changed]
        for kind, fields in changed.items():
            conditions.append({"type": kind, **fields, "observedGeneration": generation, "lastTransitionTime": now})
        patch = {"status": {"admission": None, "conditions": conditions}}
        self.manager().patch(*WL, workload, patch, namespace=self.ns, subresource="status")

    def nothing_left(self, name: str, workload: str, cluster: str) -> None:
        """No copy and no remote Workload on ``cluster``."""
        eventually(lambda: not exists(self.mk.workers[cluster], self.ns, PR, name), f"no copy of {name} on {cluster}")
        eventually(lambda: not exists(self.mk.workers[cluster], self.ns, WL, workload),
                   f"no remote workload {workload} on {cluster}")  # fmt: skip

    def admitted_on(self, workload: str, cluster: str) -> None:
        """The manager's Workload admitted, its MultiKueue check Ready, ``clusterName`` the worker."""

        def admitted() -> bool:
            wl = self.manager().get(*WL, workload, self.ns)
            checks = (wl.get("status") or {}).get("admissionChecks") or []
            return condition(wl, "Admitted").get("status") == "True" and any(c["state"] == "Ready" for c in checks)

        eventually(admitted, f"{workload} admitted")
        assert self.manager().get(*WL, workload, self.ns)["status"].get("clusterName") == cluster


def tekton_status(step: int) -> dict[str, Any]:
    """What Tekton writes on the worker (with fields the policy leaves there)."""
    done = step >= 2
    return {
        "startTime": "2026-11-21T10:00:00Z",
        "conditions": [{"type": "Succeeded", "status": "True" if done else "Unknown",
                        "reason": "Succeeded" if done else "Running", "lastTransitionTime": "2026-11-21T10:00:00Z"}],
        "pipelineSpec": {"tasks": [{"name": "build", "taskRef": {"name": "build"}}]},
        "provenance": {"featureFlags": {"enableAPIFields": "beta"}},
        **({"completionTime": "2026-11-21T10:05:00Z"} if done else {}),
    }  # fmt: skip


@pytest.fixture
def scenario(real_multikueue: RealMultiKueue, real_namespace: str, tmp_path: Path) -> Scenario:
    return Scenario(real_multikueue, real_namespace, tmp_path)


def test_dispatch_status_and_finish(scenario: Scenario) -> None:
    """Dispatch to the worker with quota, status write-back through the policy, finish and clean-up."""
    s = scenario
    sidecar = s.mk.sidecar
    assert sidecar is not None
    created = {"cluster": "worker1", "policy": "tekton-pipelinerun", "verb": "create", "code": "201"}
    before = sidecar.metric("mkpolicy_sidecar_requests_total", **created)
    wl = s.submit("build")
    s.copy_created("build", wl, "worker1")
    # Kueue's creation went through the sidecar (its Secrets never held the workers' own kubeconfigs);
    # the sidecar counts an answer once relayed, which may be after the worker stored the copy
    eventually(lambda: sidecar.metric("mkpolicy_sidecar_requests_total", **created) == before + 1,
               "the sidecar counted one creation on worker1")  # fmt: skip
    s.admitted_on(wl, "worker1")
    # worker2 never admits (no quota): MultiKueue removes its remote Workload; no copy there
    s.nothing_left("build", wl, "worker2")

    s.status_written("build", wl, "worker1", 1)
    s.status_written("build", wl, "worker1", 2)
    s.finish(wl, "worker1")
    eventually(lambda: condition(s.manager().get(*WL, wl, s.ns), "Finished").get("status") == "True",
               "the manager's Workload finished")  # fmt: skip
    s.nothing_left("build", wl, "worker1")
    assert condition(s.manager().get(*PR, "build", s.ns), "Succeeded")["status"] == "True"


def test_eviction_and_redispatch(scenario: Scenario) -> None:
    """The manager's Workload deactivated: Kueue evicts it and removes the worker's copies; reactivated
    with quota on worker2 only, it is dispatched again, there, transformed for worker2."""
    s = scenario
    wl = s.submit("build")
    s.copy_created("build", wl, "worker1")
    s.admitted_on(wl, "worker1")
    try:
        s.mk.set_quota("worker1", "0")
        s.mk.set_quota("worker2", "8")
        s.manager().patch(*WL, wl, {"spec": {"active": False}}, namespace=s.ns)
        eventually(lambda: condition(s.manager().get(*WL, wl, s.ns), "Evicted").get("status") == "True",
                   "the manager's Workload evicted")  # fmt: skip
        s.release_quota(wl)
        s.nothing_left("build", wl, "worker1")

        s.manager().patch(*WL, wl, {"spec": {"active": True}}, namespace=s.ns)
        s.copy_created("build", wl, "worker2")
        s.admitted_on(wl, "worker2")
        s.status_written("build", wl, "worker2", 2)
        s.finish(wl, "worker2")
        eventually(lambda: condition(s.manager().get(*WL, wl, s.ns), "Finished").get("status") == "True",
                   "the manager's Workload finished")  # fmt: skip
        s.nothing_left("build", wl, "worker2")
        assert not exists(s.mk.workers["worker1"], s.ns, PR, "build")
    finally:
        s.mk.set_quota("worker1", "8")
        s.mk.set_quota("worker2", "0")


HOLD = """\
  matchConditions:
    - name: not_held
      expression: '!has(object.metadata.labels) || object.metadata.labels[?"hold"].orValue("") != "true"'
"""


def test_refused_creation_is_an_event(scenario: Scenario) -> None:
    """The policy refuses a job (a match condition, hot-reloaded): Kueue's creation through the sidecar
    is refused, the manager's PipelineRun gets an Event saying why, nothing reaches the worker. Once
    the policy lets it through, Kueue's retry creates the copy, transformed."""
    s = scenario
    sidecar = s.mk.sidecar
    assert sidecar is not None
    policy_file = s.mk.policies / TEKTON.name  # type: ignore[operator]
    original = policy_file.read_text()
    reloads = sidecar.metric("mkpolicy_sidecar_policy_reloads_total", result="ok")
    try:
        policy_file.write_text(original.replace("  failurePolicy: Fail\n", "  failurePolicy: Fail\n" + HOLD))
        eventually(lambda: sidecar.metric("mkpolicy_sidecar_policy_reloads_total", result="ok") > reloads,
                   "the sidecar reloaded the policy")  # fmt: skip
        wl = s.submit("held", hold="true")

        def refused() -> list[dict[str, Any]]:
            return [e for e in s.manager().list("v1", "Event", namespace=s.ns)
                    if e["reason"] == "NotManaged" and e["involvedObject"]["name"] == "held"]  # fmt: skip

        [event] = eventually(refused, "a NotManaged event on the PipelineRun")
        assert event["involvedObject"]["kind"] == "PipelineRun" and "not_held" in event["message"]
        assert not exists(s.mk.workers["worker1"], s.ns, PR, "held")
        assert sidecar.metric("mkpolicy_sidecar_refusals_total", cluster="worker1", reason="NotManaged") >= 1
    finally:
        reloads = sidecar.metric("mkpolicy_sidecar_policy_reloads_total", result="ok")
        policy_file.write_text(original)
        eventually(lambda: sidecar.metric("mkpolicy_sidecar_policy_reloads_total", result="ok") > reloads,
                   "the sidecar reloaded the shipped policy")  # fmt: skip
    s.copy_created("held", wl, "worker1")
    s.finish(wl, "worker1")
    s.nothing_left("held", wl, "worker1")


def test_worker_api_server_stopped_and_restarted(scenario: Scenario) -> None:
    """worker1's kube-apiserver goes away while a job runs there: Kueue marks the cluster inactive
    (through the sidecar, which answers for the lost worker), reconnects once it is back (same
    address, same etcd data), and status write-back and finish work again."""
    s = scenario
    wl = s.submit("build")
    s.copy_created("build", wl, "worker1")
    s.admitted_on(wl, "worker1")
    worker1 = s.mk.workers["worker1"]

    def active() -> str:
        return str(condition(s.manager().get(KUEUE_API, "MultiKueueCluster", "worker1"), "Active").get("status"))

    worker1.stop()
    try:
        eventually(lambda: active() == "False", "MultiKueueCluster worker1 inactive")
    finally:
        worker1.start()
    eventually(lambda: active() == "True", "MultiKueueCluster worker1 active again", timeout=240)
    s.status_written("build", wl, "worker1", 2)
    s.finish(wl, "worker1")
    eventually(lambda: condition(s.manager().get(*WL, wl, s.ns), "Finished").get("status") == "True",
               "the manager's Workload finished")  # fmt: skip
    s.nothing_left("build", wl, "worker1")


def test_sidecar_restart(scenario: Scenario) -> None:
    """The sidecar restarts while a job runs (same ports, same state folder, as a restarted container):
    Kueue's connections through it end, Kueue reconnects, and status write-back and finish go on."""
    s = scenario
    wl = s.submit("build")
    s.copy_created("build", wl, "worker1")
    s.admitted_on(wl, "worker1")
    s.mk.restart_sidecar()
    s.status_written("build", wl, "worker1", 2)
    s.finish(wl, "worker1")
    eventually(lambda: condition(s.manager().get(*WL, wl, s.ns), "Finished").get("status") == "True",
               "the manager's Workload finished")  # fmt: skip
    s.nothing_left("build", wl, "worker1")
    for worker in ("worker1", "worker2"):
        cluster = s.manager().get(KUEUE_API, "MultiKueueCluster", worker)
        assert condition(cluster, "Active").get("status") == "True", cluster


def test_deleted_job_leaves_no_copy(scenario: Scenario) -> None:
    """The user deletes the job on the manager; the integration lets its Workload go (finalizer
    removed, Workload deleted; no controller-manager runs to collect it by owner). MultiKueue
    removes the worker's copy and remote Workload (at once from its cache of deleted Workloads,
    else by its garbage collector, ``gcInterval`` 30 s here)."""
    s = scenario
    wl = s.submit("build")
    s.copy_created("build", wl, "worker1")
    s.admitted_on(wl, "worker1")
    s.manager().delete(*PR, "build", s.ns)
    s.manager().patch(*WL, wl, {"metadata": {"finalizers": None}}, namespace=s.ns)
    s.manager().delete(*WL, wl, s.ns)
    s.nothing_left("build", wl, "worker1")


def test_real_kueue_sends_only_what_the_wire_contract_allows(real_multikueue: RealMultiKueue) -> None:
    """Last in this module: everything real Kueue sent through the sidecar in the scenarios
    above (both workers, connections, dispatch, status, eviction, deletion, restarts) passed
    the wire contract. The sidecar's log spans its restarts: no request refused with 403 in
    it; and no WireContract refusal counted since the last restart."""
    sidecar = real_multikueue.sidecar
    assert sidecar is not None
    lines = [json.loads(line) for line in sidecar.process.log.read_text().splitlines() if line.startswith("{")]
    assert [line for line in lines if line.get("msg") == "request refused" and line.get("code") == 403] == []
    for worker in real_multikueue.workers:
        assert sidecar.metric("mkpolicy_sidecar_refusals_total", cluster=worker, reason="WireContract") == 0
    assert sidecar.metric("mkpolicy_sidecar_requests_total") > 0  # it did carry Kueue's traffic
