"""One job kind's reconciler: Kueue v0.19.2's ``ReconcileGenericJob``
(``pkg/controller/jobframework/reconciler.go``) for the non-composable, non-elastic case, with a
policy's ``spec.integration`` as the ``GenericJob``; where v0.17.1's differs (``ControllerOptions.kueue``
says which Kueue runs), as v0.17.1 does it.

The steps, in Kueue's order (each names the Go it follows):

0. deletion (``loadJob``/``finalize``): the job gone or being deleted: the Workloads it owns
   lose their ``resource-in-use`` finalizer (and are finished as ``OwnerNotFound`` while not
   being deleted: ``FinalizeOrphanedWorkload``, ``FinishOrphanedWorkloads`` on by default);
   a namespace that does not exist or that ``managedJobsNamespaceSelector`` does not select:
   ignored (v0.19.2 always; v0.17.1 with ``ManagedJobsNamespaceSelectorAlwaysRespected``, on by
   default); no queue-name label: ignored unless ``manageJobsWithoutQueueName`` (then queued
   with an empty queue name, as Kueue does); a child of a kind this controller queues: left
   to its parent;
1. ``ensureOneWorkload``: a prebuilt Workload (worker side of MultiKueue) is adopted (controller
   owner reference, job-uid label) and finished ``OutOfSync`` when it does not match the job;
   otherwise the owned Workloads are matched (``EquivalentToWorkload``), a suspended job's
   unreserved Workload updated, a running job without a match stopped, the others deleted;
2. a finished Workload: its finalizer removed; one being deleted: the job stopped, then the
   finalizer removed;
3. a job suspended by its user (suspended without the ``suspended-by-kueue`` marker) is held
   (``JobWithOnHold``): its Workload's quota is released with ``QuotaReserved=False/OnHold``
   and it is not started until the user resumes it. Kueue before 0.19 has no ``OnHold`` (its
   scheduler would admit the Workload again): there the Workload is deleted instead, and a
   new one is made once the user resumes the job;
4. ``Finished()``: the Workload finished ``Succeeded``/``Failed``;
5. no Workload (``handleJobWithNoWorkload``): with a prebuilt name, stop and wait; while
   ``IsActive()``, wait; else construct (``ConstructWorkload``) and create it. A ``podSets`` error
   is a Warning Event on the job and no Workload;
6. evicted: ``stopJob`` (custom stop, or suspend + restore in one write), then, once
   ``IsActive()`` is false, the quota reservation cleared and ``Requeued`` set (True for
   ``Preempted`` and ``NodeFailures``);
7. suspended: admitted -> ``startJob`` (PodSetInfo from the admission: flavors looked up,
   podset label, admission-check podSetUpdates; a conflict finishes the Workload
   ``FailedToStart``); not admitted -> the Workload's queue name follows the job's label;
8. running without an admission -> ``stopJob``. A job is never resumed without an admission.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mkpolicy.controller import status as st
from mkpolicy.controller.equivalence import controller_of, equivalent, pod_sets_info
from mkpolicy.controller.events import EventRecorder
from mkpolicy.controller.informer import Informer
from mkpolicy.engine import Adapter
from mkpolicy.engine.integration import CompiledIntegration
from mkpolicy.engine.podsets import FlavorNotFound, PodSetConflict
from mkpolicy.engine.workload import (
    JOB_UID_LABEL,
    QUEUE_LABEL,
    RESOURCE_IN_USE,
    PriorityClasses,
    PriorityNotFound,
    WorkloadOptions,
    construct_workload,
    extract_priority,
    is_label_value,
    owner_reference,
)
from mkpolicy.errors import MkpolicyError
from mkpolicy.jsonlogs import fields
from mkpolicy.jsonvalues import copy_json
from mkpolicy.kube.client import ApiError, KubeClient, ResourceInfo
from mkpolicy.kube.kueueconfig import KueueConfig

log = logging.getLogger("mkpolicy.controller")

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2"
PREBUILT_KEY = "kueue.x-k8s.io/prebuilt-workload-name"


class Requeue(Exception):
    """Reconcile again after the backoff (a conflict, a deleted duplicate, a missing flavor)."""


@dataclass
class ControllerOptions:
    """Kueue's configuration the reconciler follows."""

    workload: WorkloadOptions = field(default_factory=WorkloadOptions)
    #: ``waitForPodsReady.enable``: maintain the Workloads' PodsReady condition.
    wait_for_pods_ready: bool = False
    #: Kinds (``apiVersion/kind``) whose children are left to their parent.
    parent_kinds: frozenset[str] = frozenset()
    #: Kueue's version, ``manageJobsWithoutQueueName``, ``managedJobsNamespaceSelector``, gates.
    kueue: KueueConfig = field(default_factory=KueueConfig)

    @classmethod
    def from_kueue(cls, config: KueueConfig) -> ControllerOptions:
        """The options Kueue's configuration ``config`` implies."""
        workload = WorkloadOptions(
            label_keys_to_copy=config.label_keys_to_copy,
            short_names=config.gate("ShortWorkloadNames"),
            partial_admission=config.gate("PartialAdmission"),
        )
        return cls(workload=workload, wait_for_pods_ready=config.wait_for_pods_ready, kueue=config)


def prebuilt_name(job: Mapping[str, Any], kueue: KueueConfig | None = None) -> str:
    """``PrebuiltWorkloadNameFor``: from 0.18 with ``WorkloadIdentifierAnnotations`` (on by default) the
    annotation, else the label (``utils.go``, v0.19.2); before 0.18 the label only (``PrebuiltWorkloadFor``,
    ``interface.go``, v0.17.1)."""
    meta = job.get("metadata") or {}
    label = str((meta.get("labels") or {}).get(PREBUILT_KEY) or "")
    if kueue is not None and not kueue.at_least(0, 18):
        return label
    return str((meta.get("annotations") or {}).get(PREBUILT_KEY) or "") or label


class JobReconciler:
    """Reconciles the jobs of one policy."""

    def __init__(
        self,
        adapter: Adapter,
        jobs: Informer,
        workloads: Informer,
        flavors: Informer,
        namespaces: Informer,
        client: KubeClient,
        recorder: EventRecorder,
        options: ControllerOptions,
    ) -> None:
        assert adapter.integration is not None
        self.adapter = adapter
        self.integration: CompiledIntegration = adapter.integration
        self.jobs = jobs
        self.workloads = workloads
        self.flavors = flavors
        self.namespaces = namespaces
        self.kueue = options.kueue
        self.selector = options.kueue.namespace_selector()
        self.client = client
        self.recorder = recorder
        self.options = options
        self.api_version, self.kind = adapter.gvk.api_version, adapter.gvk.kind

    # -- reads ---------------------------------------------------------------------------------
    def owned_workloads(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The Workloads whose controller is the job ``namespace/name`` of this kind."""
        group = self.api_version.rpartition("/")[0]
        out = self.workloads.indexed((namespace, group, self.kind, name))
        return sorted(out, key=lambda w: str(w["metadata"].get("creationTimestamp", "")))

    def flavor_map(self) -> dict[str, dict[str, Any]]:
        """ResourceFlavors by name."""
        return {str(f["metadata"]["name"]): f for f in self.flavors.items()}

    # -- writes --------------------------------------------------------------------------------
    def _job_path(self, job: Mapping[str, Any]) -> str:
        info: ResourceInfo = self.jobs.info
        meta = job["metadata"]
        return info.path(meta.get("namespace") if info.namespaced else None, meta["name"])

    @staticmethod
    def _wl_path(wl: Mapping[str, Any], subresource: str | None = None) -> str:
        meta = wl["metadata"]
        path = f"{WORKLOADS}/namespaces/{meta['namespace']}/workloads/{meta['name']}"
        return path + (f"/{subresource}" if subresource else "")

    async def _write(self, path: str, obj: dict[str, Any], informer: Informer) -> dict[str, Any]:
        try:
            written = await self.client.replace(path, obj)
        except ApiError as exc:
            if exc.status in (404, 409):
                raise Requeue(f"{exc.status} writing {path}: {exc.message}") from None
            raise
        informer.observe(written)
        return written

    async def update_job(self, job: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """Write the job (the integration's result) if it changed."""
        if new == job:
            return job
        return await self._write(self._job_path(job), new, self.jobs)

    async def update_workload(self, wl: dict[str, Any]) -> dict[str, Any]:
        """PUT the Workload (metadata and spec)."""
        return await self._write(self._wl_path(wl), wl, self.workloads)

    async def update_workload_status(self, wl: Mapping[str, Any], new_status: dict[str, Any]) -> dict[str, Any]:
        """PUT the Workload's status subresource."""
        body = {**copy_json(dict(wl)), "status": new_status}
        return await self._write(self._wl_path(wl, "status"), body, self.workloads)

    async def remove_finalizer(self, wl: dict[str, Any]) -> None:
        """``workload.RemoveFinalizer``."""
        finalizers = list(wl["metadata"].get("finalizers") or [])
        if RESOURCE_IN_USE not in finalizers:
            return
        body = copy_json(wl)
        body["metadata"]["finalizers"] = [f for f in finalizers if f != RESOURCE_IN_USE]
        await self.update_workload(body)

    async def finish(self, wl: Mapping[str, Any], reason: str, message: str) -> None:
        """``workloadfinish.Finish``."""
        if st.is_finished(wl):
            return
        await self.update_workload_status(wl, st.finished_status(wl, reason, message, st.now_rfc3339()))

    # -- the reconcile -------------------------------------------------------------------------
    async def reconcile(self, namespace: str, name: str) -> None:
        """Reconcile the job ``namespace/name`` once; raises :class:`Requeue` (or an API error) to retry."""
        job = self.jobs.get(namespace, name)
        if job is None or (job.get("metadata") or {}).get("deletionTimestamp"):
            await self._finalize_workloads(namespace, name, job)
            return
        if not self.managed(job):
            return
        owner = controller_of(job)
        if owner is not None and f"{owner.get('apiVersion')}/{owner.get('kind')}" in self.options.parent_kinds:
            return  # a child: its parent's Workload covers it
        await self._reconcile(job)

    def managed(self, job: Mapping[str, Any]) -> bool:
        """Whether Kueue would reconcile ``job`` (``ReconcileGenericJob``'s gates, ``reconciler.go``):
        ``managedJobsNamespaceSelector`` selects its namespace (v0.17.1: with the
        ``ManagedJobsNamespaceSelectorAlwaysRespected`` gate), and it has a queue name or
        ``manageJobsWithoutQueueName`` is on (and the selector selects its namespace)."""
        meta = job.get("metadata") or {}
        namespace = self.namespaces.get("", str(meta.get("namespace") or ""))
        if namespace is None:
            # Kueue skips the job ("Namespace not found"); but a job's namespace exists until the job
            # is gone, so here the Namespace watch is only behind: look again after the backoff.
            raise Requeue(f"namespace {meta.get('namespace')} not in the cache yet")
        selected = self.selector.matches((namespace.get("metadata") or {}).get("labels"))
        if self.kueue.gate("ManagedJobsNamespaceSelectorAlwaysRespected") and not selected:
            return False  # "Namespace not opted in for Kueue management"
        if (meta.get("labels") or {}).get(QUEUE_LABEL):
            return True
        return self.kueue.manage_jobs_without_queue_name and selected

    async def _finalize_workloads(self, namespace: str, name: str, job: Mapping[str, Any] | None) -> None:
        uid = job["metadata"].get("uid") if job is not None else None
        for wl in self.owned_workloads(namespace, name):
            if uid is not None and (controller_of(wl) or {}).get("uid") != uid:
                continue
            if not wl["metadata"].get("deletionTimestamp"):
                await self.finish(wl, "OwnerNotFound", "The workload's owner no longer exists")
                wl = self.workloads.get(namespace, wl["metadata"]["name"]) or wl
            await self.remove_finalizer(wl)

    async def _reconcile(self, job: dict[str, Any]) -> None:
        integ = self.integration
        flavors = self.flavor_map()
        wl = await self._ensure_one_workload(job, flavors)
        job = self.jobs.get(job["metadata"].get("namespace", ""), job["metadata"]["name"]) or job

        if wl is not None and st.is_finished(wl):
            if RESOURCE_IN_USE in (wl["metadata"].get("finalizers") or []):
                await self._declared_finished(job, wl)
                await self.remove_finalizer(wl)
            return
        if wl is not None and wl["metadata"].get("deletionTimestamp"):
            await self._stop(job, wl, "Workload is deleted")
            await self.remove_finalizer(wl)
            return

        suspended = integ.is_suspended(job)
        user_held = suspended and not integ.suspended_by_kueue(job)
        if user_held and wl is not None:
            await self._hold(job, wl)
            return

        done = integ.finished(job)
        if done.finished:
            if wl is not None and not st.is_finished(wl):
                await self.finish(wl, "Succeeded" if done.success else "Failed", done.message)
                await self._declared_finished(job, wl)
            return

        if wl is None:
            await self._no_workload(job, user_held)
            return

        if st.is_on_hold(wl) and not user_held:
            await self._release_hold(wl)
            return

        if self.options.wait_for_pods_ready and "podsReady" in integ.values and await self._pods_ready(job, wl):
            return

        evicted = st.find(wl, st.EVICTED)
        if evicted is not None and evicted.get("status") == "True":
            job = await self._stop(job, wl, str(evicted.get("message") or ""))
            if st.has_quota_reservation(wl) and not integ.active(job):
                await self._clear_reservation(wl, evicted)
            return

        if suspended:
            if st.is_admitted(wl):
                await self._start(job, wl, flavors)
                return
            queue = (job["metadata"].get("labels") or {}).get(QUEUE_LABEL, "")
            if (wl.get("spec") or {}).get("queueName", "") != queue:  # QueueNameChange
                body = copy_json(wl)
                body["spec"]["queueName"] = queue
                await self.update_workload(body)
            return

        if not st.is_admitted(wl):
            await self._stop(job, wl, "Not admitted by cluster queue")

    async def _declared_finished(self, job: Mapping[str, Any], wl: Mapping[str, Any]) -> None:
        await self.recorder.record(job, "Normal", "FinishedWorkload", f"Workload '{_key(wl)}' is declared finished")

    # -- steps ---------------------------------------------------------------------------------
    def _pod_sets(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self.integration.pod_sets(job)

    async def _ensure_one_workload(self, job: dict[str, Any], flavors: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = job["metadata"]
        namespace = str(meta.get("namespace") or "")
        prebuilt = prebuilt_name(job, self.kueue)
        if prebuilt:
            wl = self.workloads.get(namespace, prebuilt)
            if wl is None:
                return None
            owner = controller_of(wl)
            if owner is not None and owner.get("uid") != meta.get("uid"):
                log.info("prebuilt workload controlled by another object", extra=fields(workload=prebuilt))
                return None
            if owner is None:
                body = copy_json(wl)
                body["metadata"].setdefault("ownerReferences", []).append(owner_reference(job))
                uid = str(meta.get("uid") or "")
                if is_label_value(uid):
                    body["metadata"].setdefault("labels", {})[JOB_UID_LABEL] = uid
                wl = await self.update_workload(body)
            pod_sets = await self._pod_sets_or_event(job)
            if pod_sets is None:
                return None
            if not equivalent(job, pod_sets, self.integration.is_suspended(job), wl, flavors):
                await self.finish(wl, "OutOfSync", "The prebuilt workload is out of sync with its user job")
                return None
            return wl

        owned = self.owned_workloads(namespace, str(meta["name"]))
        suspended = self.integration.is_suspended(job)
        if not owned:
            if not suspended and not self.integration.finished(job).finished:
                await self._stop(job, None, "Missing Workload; unable to restore pod templates")
            return None
        pod_sets = await self._pod_sets_or_event(job)
        if pod_sets is None:
            return None
        match = None
        to_delete = []
        for wl in owned:
            if match is None and equivalent(job, pod_sets, suspended, wl, flavors):
                match = wl
            else:
                to_delete.append(wl)
        to_update = None
        if match is None and to_delete and suspended and not st.has_quota_reservation(to_delete[0]):
            to_update, to_delete = to_delete[0], to_delete[1:]
        if match is None and not suspended and not self.integration.finished(job).finished:
            other = to_delete[0] if len(to_delete) == 1 else None
            message = (
                "Missing Workload; unable to restore pod templates"
                if other is None
                else "No matching Workload; restoring pod templates according to existent Workload"
            )
            job = await self._stop(job, other, message)
        deleted = 0
        for wl in to_delete:  # workload.Delete: the finalizer first, then the object unless being deleted
            try:
                await self.remove_finalizer(wl)
                if wl["metadata"].get("deletionTimestamp"):
                    continue
                await self.client.delete(self._wl_path(wl))
            except Requeue:
                continue  # gone meanwhile
            except ApiError as exc:
                if exc.status != 404:
                    raise
                continue
            deleted += 1
            await self.recorder.record(job, "Normal", "DeletedWorkload", f"Deleted not matching Workload: {_key(wl)}")
        if deleted:
            raise Requeue(f"deleted {deleted} workloads")
        if to_update is not None:
            new = self._construct(job, pod_sets, await self._priority_classes(job, pod_sets))
            body = copy_json(to_update)
            active = (to_update.get("spec") or {}).get("active")
            body["spec"] = new["spec"]
            if active is not None:
                body["spec"]["active"] = active
            written = await self.update_workload(body)
            await self.recorder.record(
                job, "Normal", "UpdatedWorkload", f"Updated not matching Workload for suspended job: {_key(written)}"
            )
            return written
        return match

    async def _pod_sets_or_event(self, job: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """``PodSets()``; an error is a Warning Event on the job (and None)."""
        try:
            return self._pod_sets(job)
        except MkpolicyError as exc:
            await self.recorder.record(job, "Warning", "InvalidPodSets", str(exc))
            return None

    def _construct(
        self, job: Mapping[str, Any], pod_sets: list[dict[str, Any]], classes: PriorityClasses
    ) -> dict[str, Any]:
        labels = (job.get("metadata") or {}).get("labels") or {}
        priority = extract_priority(labels, pod_sets, self.integration.priority_class(job), classes)
        return construct_workload(job, pod_sets, priority=priority, options=self.options.workload)

    async def _no_workload(self, job: dict[str, Any], user_held: bool) -> None:
        integ = self.integration
        if prebuilt_name(job, self.kueue):
            if not integ.is_suspended(job):
                await self._stop(job, None, "missing workload")
            return
        if user_held:
            return  # the user's own suspension: queued once the user resumes it
        if integ.active(job):
            return  # "Job is suspended but still has active pods, waiting"
        pod_sets = await self._pod_sets_or_event(job)
        if pod_sets is None:
            return
        try:
            wl = self._construct(job, pod_sets, await self._priority_classes(job, pod_sets))
        except PriorityNotFound as exc:
            await self.recorder.record(job, "Warning", "PriorityClassNotFound", str(exc))
            raise Requeue(str(exc)) from None
        path = f"{WORKLOADS}/namespaces/{wl['metadata']['namespace']}/workloads"
        try:
            created = await self.client.create(path, wl)
        except ApiError as exc:
            if exc.status == 409:
                raise Requeue(f"workload {wl['metadata']['name']} already exists") from None
            if exc.status in (400, 422):
                await self.recorder.record(job, "Warning", "InvalidPodSets", f"the Workload is refused: {exc.message}")
                return
            raise
        self.workloads.observe(created)
        await self.recorder.record(job, "Normal", "CreatedWorkload", f"Created Workload: {_key(created)}")

    async def _priority_classes(self, job: Mapping[str, Any], pod_sets: list[dict[str, Any]]) -> PriorityClasses:
        """The PriorityClass or WorkloadPriorityClass the job names, read from the API server."""
        labels = (job.get("metadata") or {}).get("labels") or {}
        workload_classes: dict[str, int] = {}
        pod_classes: dict[str, dict[str, Any]] = {}
        wpc = labels.get("kueue.x-k8s.io/priority-class")
        if wpc:
            found = await self._get_or_none(f"/apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses/{wpc}")
            if found is not None:
                workload_classes[wpc] = int(found.get("value") or 0)
            return PriorityClasses(workload_classes, pod_classes)
        name = self.integration.priority_class(job)
        if name is None:
            name = next(
                (
                    ps["template"]["spec"]["priorityClassName"]
                    for ps in pod_sets
                    if (ps.get("template") or {}).get("spec", {}).get("priorityClassName")
                ),
                "",
            )
        if name:
            found = await self._get_or_none(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
            if found is not None:
                pod_classes[name] = {"value": found.get("value", 0)}
            return PriorityClasses(workload_classes, pod_classes)
        try:
            listed = await self.client.get("/apis/scheduling.k8s.io/v1/priorityclasses")
        except ApiError as exc:
            if exc.status != 404:
                raise
            listed = {}
        for item in listed.get("items") or []:
            pod_classes[str(item["metadata"]["name"])] = {
                "value": item.get("value", 0),
                "globalDefault": item.get("globalDefault", False),
            }
        return PriorityClasses(workload_classes, pod_classes)

    async def _get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.client.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def _stop(self, job: dict[str, Any], wl: Mapping[str, Any] | None, message: str) -> dict[str, Any]:
        """``stopJob``: the custom stop, or (unless already suspended) suspend + restore, one write."""
        integ = self.integration
        pod_sets = ((wl or {}).get("spec") or {}).get("podSets") if wl is not None else None
        if not integ.custom_stop and integ.is_suspended(job):
            return job
        new = integ.stop(job, pod_sets)
        if new == job:
            return job
        written = await self.update_job(job, new)
        await self.recorder.record(job, "Normal", "Stopped", message)
        return written

    async def _start(self, job: dict[str, Any], wl: dict[str, Any], flavors: Mapping[str, Any]) -> None:
        """``startJob``: inject the admission and resume, one write; a permanent error finishes the Workload."""
        try:
            infos = pod_sets_info(wl, flavors, worker_pod_label=self.kueue.at_least(0, 18))
            new = self.integration.start(job, infos, wl)
        except FlavorNotFound as exc:
            raise Requeue(str(exc)) from None
        except PodSetConflict as exc:
            await self.finish(wl, "FailedToStart", str(exc))
            return
        await self.update_job(job, new)
        queue = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        await self.recorder.record(job, "Normal", "Started", f"Admitted by clusterQueue {queue}")

    async def _clear_reservation(self, wl: Mapping[str, Any], evicted: Mapping[str, Any]) -> None:
        """After an eviction, once the job is inactive: Requeued, QuotaReserved False, no admission."""
        now = _dt.datetime.now(_dt.UTC)
        reason = str(evicted.get("reason") or "")
        message = str(evicted.get("message") or "")
        new = st.unset_quota_reservation(wl, "Pending", message, now)
        generation = int(wl["metadata"].get("generation") or 0)
        st.requeued(new, reason, message, reason in ("Preempted", "NodeFailures"), generation, st.now_rfc3339(now))
        await self.update_workload_status(wl, new)

    async def _hold(self, job: Mapping[str, Any], wl: dict[str, Any]) -> None:
        """``JobWithOnHold``: release the quota of a job its user suspended, and keep it unqueued.
        Before 0.19 Kueue's scheduler does not know ``OnHold`` and would admit the Workload again:
        the Workload is deleted (its finalizer first), to be made anew once the user resumes the job."""
        if st.is_on_hold(wl) or st.is_finished(wl):
            return
        if not self.kueue.at_least(0, 19):
            await self.remove_finalizer(wl)
            try:
                await self.client.delete(self._wl_path(wl))
            except ApiError as exc:
                if exc.status != 404:
                    raise
            await self.recorder.record(
                job, "Normal", "DeletedWorkload", f"Deleted the Workload of a job its user suspended: {_key(wl)}"
            )
            return
        now = _dt.datetime.now(_dt.UTC)
        await self.update_workload_status(wl, st.unset_quota_reservation(wl, st.ON_HOLD, "Job is on hold", now))

    async def _release_hold(self, wl: Mapping[str, Any]) -> None:
        now = _dt.datetime.now(_dt.UTC)
        new = st.unset_quota_reservation(wl, "Pending", "Job is no longer on hold", now)
        await self.update_workload_status(wl, new)

    async def _pods_ready(self, job: Mapping[str, Any], wl: Mapping[str, Any]) -> bool:
        """``generatePodsReadyCondition`` (without the recovery states): True once admitted and ready."""
        if st.is_admitted(wl):
            ready = bool(self.integration.pods_ready(job))
            condition = {
                "type": "PodsReady",
                "status": "True" if ready else "False",
                "reason": "Started" if ready else "WaitForStart",
                "message": "All pods reached readiness and the workload is running"
                if ready
                else "Not all pods are ready or succeeded",
            }
        else:
            condition = {
                "type": "PodsReady",
                "status": "False",
                "reason": "WaitForStart",
                "message": "Not all pods are ready or succeeded",
            }
        current = st.find(wl, "PodsReady")
        if (
            current is not None
            and current.get("status") == condition["status"]
            and current.get("reason") == condition["reason"]
        ):
            return False
        new = copy_json(dict(wl.get("status") or {}))
        st.set_condition(
            new, {**condition, "observedGeneration": int(wl["metadata"].get("generation") or 0)}, st.now_rfc3339()
        )
        await self.update_workload_status(wl, new)
        return True


def _key(wl: Mapping[str, Any]) -> str:
    meta = wl.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


__all__ = ["ControllerOptions", "JobReconciler", "Requeue", "prebuilt_name"]
