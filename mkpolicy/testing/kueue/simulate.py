"""What the rest of Kueue does around MultiKueue, played by the test.

The model (:class:`~.model.Kueue`) is Kueue's MultiKueue controllers. Around them Kueue
runs other controllers that no loopback cluster runs; tests play their part explicitly,
with the state changes those controllers make:

- :class:`ManagerKueue` — on the manager: MultiKueue's configuration objects (Secret,
  MultiKueueCluster, MultiKueueConfig, AdmissionCheck); the Workload the jobframework
  creates for a job (``GetWorkloadNameForOwnerWithGVK``, owned by the job, the
  ``resource-in-use`` finalizer); the scheduler reserving quota; eviction in Kueue's two
  steps — the Workload evicted with its quota kept (``pkg/workload/evict/evict.go``
  ``prepareForEviction``: Evicted, cluster nomination reset, checks back to Pending;
  written by ``pkg/controller/core/workload_controller.go`` for a deactivated Workload),
  then, once the job has stopped, the quota released by the integration
  (``pkg/controller/jobframework/reconciler.go``, "handle eviction":
  ``UnsetQuotaReservationWithCondition``). In between, MultiKueue still sees a Workload
  that holds quota with its check Pending and no cluster, and dispatches it again
  (``workload.go`` step 8); a test plays the two steps apart to see that window.
  Re-admission is the scheduler's.
- :class:`WorkerKueue` — on a worker: Kueue admitting the remote Workload (the finalizer,
  ``admission``, QuotaReserved and Admitted), adopting it once the job is there (the
  job's controller owner reference, as the jobframework reconciler does for a prebuilt
  workload), evicting it, finishing it.

They write straight to the cluster's API (``ApiServer``'s direct access, or a real
cluster's), never through the sidecar and never through the model's wire.
"""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Any

from mkpolicy.testing.kueue.adapter import MULTIKUEUE_CONTROLLER, PREBUILT_WORKLOAD_ANNOTATION, PREBUILT_WORKLOAD_LABEL
from mkpolicy.testing.kueue.goclient import WORKLOAD
from mkpolicy.testing.kueue.reconcile import RESOURCE_IN_USE, now_rfc3339, set_condition

if TYPE_CHECKING:
    from mkpolicy.testing.targets import ClusterTarget

WORKLOAD_API = WORKLOAD.api_version
#: The eviction reason and message of a deactivated Workload (``pkg/controller/core/workload_controller.go``).
DEACTIVATED = ("Deactivated", "The workload is deactivated")


def workload_name(kind: str, name: str, uid: str, group: str) -> str:
    """``GetWorkloadNameForOwnerWithGVK``: ``<kind>-<name>-<5 hex of a sha1>`` (prefix at most 247)."""
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()
    return f"{(kind.lower() + '-' + name)[:247]}-{digest[:5]}"


def _admission(workload: dict[str, Any], queue: str) -> dict[str, Any]:
    return {
        "clusterQueue": queue,
        "podSetAssignments": [
            {"name": ps["name"], "count": ps.get("count", 1), "flavors": {}} for ps in workload["spec"]["podSets"]
        ],
    }


class ManagerKueue:
    """Kueue's core on the manager, driven by the test."""

    def __init__(
        self,
        cluster: ClusterTarget,
        *,
        namespace: str = "kueue-system",
        check: str = "multikueue",
        cluster_queue: str = "cq",
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.check = check
        self.cluster_queue = cluster_queue

    def configure(self, workers: dict[str, bytes]) -> None:
        """MultiKueue's objects: a kubeconfig Secret and a MultiKueueCluster per worker, the
        MultiKueueConfig naming them, the AdmissionCheck using it."""
        for name, kubeconfig in workers.items():
            data = {"kubeconfig": base64.b64encode(kubeconfig).decode()}
            meta = {"name": f"{name}-secret", "namespace": self.namespace}
            self.cluster.create({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": data})
            source = {"kubeConfig": {"locationType": "Secret", "location": f"{name}-secret"}}
            self.cluster.create(
                {
                    "apiVersion": WORKLOAD_API,
                    "kind": "MultiKueueCluster",
                    "metadata": {"name": name},
                    "spec": {"clusterSource": source},
                }
            )
        self.cluster.create(
            {
                "apiVersion": WORKLOAD_API,
                "kind": "MultiKueueConfig",
                "metadata": {"name": self.check},
                "spec": {"clusters": list(workers)},
            }
        )
        parameters = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": self.check}
        self.cluster.create(
            {
                "apiVersion": WORKLOAD_API,
                "kind": "AdmissionCheck",
                "metadata": {"name": self.check},
                "spec": {"controllerName": MULTIKUEUE_CONTROLLER, "parameters": parameters},
            }
        )

    def rotate_secret(self, worker: str, kubeconfig: bytes) -> None:
        """Re-apply a worker's kubeconfig Secret (what GitOps or a rotation does)."""
        data = {"kubeconfig": base64.b64encode(kubeconfig).decode()}
        self.cluster.patch("v1", "Secret", f"{worker}-secret", {"data": data}, namespace=self.namespace)

    def submit(self, job: dict[str, Any], *, queue: str = "user-queue") -> str:
        """The jobframework's Workload for ``job`` (already on the manager), with quota reserved
        by the scheduler and the MultiKueue check Pending; returns its name."""
        meta = job["metadata"]
        group = str(job["apiVersion"]).rpartition("/")[0]
        name = workload_name(job["kind"], meta["name"], meta["uid"], group)
        owner = {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        self.cluster.create(
            {
                "apiVersion": WORKLOAD_API,
                "kind": "Workload",
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "finalizers": [RESOURCE_IN_USE],
                    "ownerReferences": [owner],
                },
                "spec": {
                    "queueName": queue,
                    "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
                },
            }
        )
        self.admit(name, meta["namespace"])
        return name

    def queue(self, name: str, namespace: str) -> None:
        """Kueue's workload controller adds the ClusterQueue's admission checks to a new Workload,
        Pending, before the scheduler reserves quota (``workload_controller.go``
        ``reconcileSyncAdmissionChecks``): MultiKueue may reconcile it then, without quota."""
        wl = self.cluster.get(WORKLOAD_API, "Workload", name, namespace)
        checks = [c for c in (wl.get("status") or {}).get("admissionChecks") or [] if c.get("name") != self.check]
        checks.append({"name": self.check, "state": "Pending", "message": "", "lastTransitionTime": now_rfc3339()})
        self.cluster.patch(
            WORKLOAD_API, "Workload", name, {"status": {"admissionChecks": checks}}, namespace=namespace,
            subresource="status",
        )  # fmt: skip

    def admit(self, name: str, namespace: str) -> None:
        """The scheduler reserves quota; every admission check Pending."""
        wl = self.cluster.get(WORKLOAD_API, "Workload", name, namespace)
        status = wl.get("status") or {}
        message = f"Quota reserved in ClusterQueue {self.cluster_queue}"
        conditions = set_condition(status.get("conditions") or [], "QuotaReserved", "True", "QuotaReserved", message)
        if any(c.get("type") == "Evicted" for c in conditions):
            conditions = set_condition(conditions, "Evicted", "False", "QuotaReserved", "Previously: evicted")
        checks = [c for c in status.get("admissionChecks") or [] if c.get("name") != self.check]
        checks.append({"name": self.check, "state": "Pending", "message": "", "lastTransitionTime": now_rfc3339()})
        new = {"conditions": conditions, "admission": _admission(wl, self.cluster_queue), "admissionChecks": checks}
        self.cluster.patch(WORKLOAD_API, "Workload", name, {"status": new}, namespace=namespace, subresource="status")

    def evict(
        self, name: str, namespace: str, reason: str = "Preempted", message: str = "Preempted by the test"
    ) -> None:
        """Kueue evicts the Workload and keeps its quota (``pkg/workload/evict/evict.go``
        ``prepareForEviction``): Evicted True, ``clusterName`` and ``nominatedClusterNames``
        reset, every check not Pending back to Pending ("Reset to Pending after eviction.
        Previously: <state>"). The quota goes only when the integration has stopped the job:
        :meth:`release_quota`."""
        wl = self.cluster.get(WORKLOAD_API, "Workload", name, namespace)
        status = wl.get("status") or {}
        generation = (wl.get("metadata") or {}).get("generation")
        conditions = set_condition(status.get("conditions") or [], "Evicted", "True", reason, message, generation)
        checks = [
            c
            if c.get("state") == "Pending"
            else {
                **c,
                "state": "Pending",
                "message": f"Reset to Pending after eviction. Previously: {c.get('state')}",
                "lastTransitionTime": now_rfc3339(),
            }
            for c in status.get("admissionChecks") or []
        ]
        new = {"conditions": conditions, "clusterName": None, "nominatedClusterNames": None, "admissionChecks": checks}
        self.cluster.patch(WORKLOAD_API, "Workload", name, {"status": new}, namespace=namespace, subresource="status")

    def release_quota(self, name: str, namespace: str) -> None:
        """The integration's part of an eviction, once the job has stopped
        (``pkg/controller/jobframework/reconciler.go``, "handle eviction"):
        ``SetRequeuedCondition`` (True only for a preemption or node failure) and
        ``UnsetQuotaReservationWithCondition`` (``pkg/workload/workload.go``): QuotaReserved
        False (``Pending``, the eviction's message), no ``admission``, Admitted False."""
        wl = self.cluster.get(WORKLOAD_API, "Workload", name, namespace)
        status = wl.get("status") or {}
        evicted = next((c for c in status.get("conditions") or [] if c.get("type") == "Evicted"), None) or {}
        reason, message = str(evicted.get("reason") or "Pending"), str(evicted.get("message") or "")
        generation = (wl.get("metadata") or {}).get("generation")
        requeued = "True" if reason in ("Preempted", "NodeFailures") else "False"
        conditions = set_condition(status.get("conditions") or [], "Requeued", requeued, reason, message, generation)
        conditions = set_condition(conditions, "QuotaReserved", "False", "Pending", message, generation)
        conditions = set_condition(
            conditions, "Admitted", "False", "NoReservationUnsatisfiedChecks",
            "The workload has no reservation and not all checks ready", generation,
        )  # fmt: skip
        new = {"conditions": conditions, "admission": None}
        self.cluster.patch(WORKLOAD_API, "Workload", name, {"status": new}, namespace=namespace, subresource="status")

    def deactivate(self, name: str, namespace: str) -> None:
        """A user sets ``spec.active: false``. Kueue's workload controller then evicts the
        Workload (``workload_controller.go``): :meth:`evict` with :data:`DEACTIVATED`, a write
        of its own (MultiKueue may reconcile the spec change before it), the quota kept
        until :meth:`release_quota`."""
        self.cluster.patch(WORKLOAD_API, "Workload", name, {"spec": {"active": False}}, namespace=namespace)

    def activate(self, name: str, namespace: str) -> None:
        """A user sets ``spec.active: true`` again (the scheduler's re-admission: :meth:`admit`)."""
        self.cluster.patch(WORKLOAD_API, "Workload", name, {"spec": {"active": True}}, namespace=namespace)

    def check_state(self, name: str, namespace: str) -> str:
        """The MultiKueue check's state on the manager's Workload."""
        wl = self.cluster.get(WORKLOAD_API, "Workload", name, namespace)
        states = [
            str(c.get("state"))
            for c in (wl.get("status") or {}).get("admissionChecks") or []
            if c.get("name") == self.check
        ]
        return states[0] if states else ""

    def delete(self, name: str, namespace: str) -> None:
        """The workload goes (its finalizer released, as Kueue's workload controller does when finished)."""
        self.cluster.patch(WORKLOAD_API, "Workload", name, {"metadata": {"finalizers": None}}, namespace=namespace)
        self.cluster.delete(WORKLOAD_API, "Workload", name, namespace)


class WorkerKueue:
    """Kueue's core on one worker, driven by the test."""

    def __init__(self, cluster: ClusterTarget, *, cluster_queue: str = "cq") -> None:
        self.cluster = cluster
        self.cluster_queue = cluster_queue

    def admit(self, name: str, namespace: str, *, finalizer: bool = True) -> None:
        """The worker's Kueue admits the remote Workload (finalizer, admission, QuotaReserved, Admitted).

        ``finalizer=False``: without the ``resource-in-use`` finalizer, as real Kueue leaves a
        remote Workload no jobframework took (only the jobframework's ``NewWorkload`` adds it,
        ``pkg/controller/jobframework/utils.go``; MultiKueue's ``cloneForCreate`` copies none):
        then MultiKueue has no finalizer to release (no PUT) when it removes it."""
        wl = self.cluster.get(WORKLOAD_API, "Workload", name, namespace)
        if finalizer:
            finalizers = {"metadata": {"finalizers": [RESOURCE_IN_USE]}}
            self.cluster.patch(WORKLOAD_API, "Workload", name, finalizers, namespace=namespace)
        conditions = (wl.get("status") or {}).get("conditions") or []
        conditions = set_condition(conditions, "QuotaReserved", "True", "QuotaReserved")
        conditions = set_condition(conditions, "Admitted", "True", "Admitted", "The workload is admitted")
        new = {"conditions": conditions, "admission": _admission(wl, self.cluster_queue)}
        self.cluster.patch(WORKLOAD_API, "Workload", name, {"status": new}, namespace=namespace, subresource="status")

    def adopt(self, name: str, namespace: str, job_api_version: str, job_kind: str) -> None:
        """The jobframework takes the prebuilt Workload ``name`` for the job naming it (its controller owner)."""
        job = job_naming(self.cluster, name, namespace, job_api_version, job_kind)
        ref = {
            "apiVersion": job_api_version,
            "kind": job_kind,
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        self.cluster.patch(
            WORKLOAD_API, "Workload", name, {"metadata": {"ownerReferences": [ref]}}, namespace=namespace
        )

    def _condition(self, name: str, namespace: str, kind: str, reason: str, message: str) -> None:
        wl = self.cluster.get(WORKLOAD_API, "Workload", name, namespace)
        conditions = set_condition((wl.get("status") or {}).get("conditions") or [], kind, "True", reason, message)
        self.cluster.patch(
            WORKLOAD_API,
            "Workload",
            name,
            {"status": {"conditions": conditions}},
            namespace=namespace,
            subresource="status",
        )

    def evict(
        self, name: str, namespace: str, reason: str = "Preempted", message: str = "Preempted on the worker"
    ) -> None:
        """The worker's Kueue evicts the remote Workload."""
        self._condition(name, namespace, "Evicted", reason, message)

    def finish(self, name: str, namespace: str, reason: str = "Succeeded", message: str = "Job finished") -> None:
        """The worker's Kueue finishes the remote Workload (its job ended)."""
        self._condition(name, namespace, "Finished", reason, message)


def job_naming(cluster: ClusterTarget, workload: str, namespace: str, api_version: str, kind: str) -> dict[str, Any]:
    """The job on ``cluster`` whose prebuilt-workload identifier names ``workload``."""
    for job in cluster.list(api_version, kind, namespace):
        meta = job.get("metadata") or {}
        names = (
            (meta.get("labels") or {}).get(PREBUILT_WORKLOAD_LABEL),
            (meta.get("annotations") or {}).get(PREBUILT_WORKLOAD_ANNOTATION),
        )
        if workload in names:
            return job
    raise LookupError(f"no {kind} in {namespace} names workload {workload}")
