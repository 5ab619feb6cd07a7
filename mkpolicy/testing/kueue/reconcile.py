"""Kueue's MultiKueue workload reconciler (``wlReconciler``), for jobs of external frameworks.

``pkg/controller/admissionchecks/multikueue/workload.go`` (v0.19.2; main sends the same
requests), with the AllAtOnce dispatcher, and without what external-framework jobs never
meet (elastic workloads, multi-workload adapters, orchestrated preemption, topology,
priority updates). ``Reconcile`` then ``reconcileGroup``, step by step:

0. The manager's Workload (or, once deleted, its last state); its MultiKueue admission
   check (an AdmissionCheck whose controller is ``kueue.x-k8s.io/multikueue``); the
   adapter of its owner (the controller owner reference's GVK); for a live workload,
   ``IsJobManagedByKueue``. Then, on every *connected* worker of the check's
   MultiKueueConfig, a GET of the remote Workload.
1. Deleted: remove the remote objects on every connected worker.
2. Finished, or no quota reserved: remove the remote objects everywhere.
3. A remote Workload finished: ownership check and ``SyncJob`` on that worker, then the
   manager's Workload is finished with the remote's reason and message. Finished
   ``OutOfSync`` (the worker's jobframework found the job unlike its prebuilt Workload)
   is a sync failure from v0.17.8/v0.18.4/v0.19.0: the check goes to Retry while it is
   Ready (an Event on the Workload in Kueue), nothing is finished.
4. A remote Workload evicted: when the manager's is evicted too, ownership check and
   ``SyncJob``; when the check is Ready, set it to Retry.
5. A remote Workload whose spec differs from the manager's: remove its objects.
6. An admitted remote: remove every other worker's objects; ownership check and
   ``SyncJob`` on it; the check Ready with ``clusterName``. None admitted while Ready:
   wait ``workerLostTimeout`` for an unreachable worker, else Retry.
8. Nominate every connected worker (AllAtOnce) and create the Workload where missing.

Removing a worker's objects (``RemoveRemoteObjects``): the job through
``DeleteRemoteObjectIfOwned`` — even where Kueue never created one, so every removal
sends an ownership GET to every worker — then the remote Workload's finalizer (PUT) and
the remote Workload (DELETE).

Manager-side writes of the Workload's status are merge patches here; Kueue uses
server-side apply (``workloadpatching``), which the loopback API server does not
implement. Both carry the ``resourceVersion`` read (a stale write is refused and the
reconcile runs again). They never reach a worker.

While the manager's Workload is evicted and still holds its quota (before the
integration releases it), step 8 dispatches it again: eviction resets the check to
Pending and ``clusterName`` (``ShouldSkipClusterNomination`` in v0.19 skips only a check
not Pending or a Workload with a cluster; v0.17 has no such skip).
"""

from __future__ import annotations

import copy
import datetime
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mkpolicy.testing.kueue.adapter import MULTIKUEUE_CONTROLLER, ORIGIN_LABEL, GenericAdapter, NotOwned
from mkpolicy.testing.kueue.goclient import WORKLOAD, ApiStatusError, Gvk
from mkpolicy.testing.kueue.remote import RemoteClient
from mkpolicy.testing.kueue.versions import KueueVersion

if TYPE_CHECKING:
    from mkpolicy.testing.kueue.model import Kueue

log = logging.getLogger("mkpolicy.testing.kueue")

RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"
#: ``WorkloadFinishedReasonOutOfSync``: the worker's jobframework found the job unlike its prebuilt Workload.
OUT_OF_SYNC = "OutOfSync"
ADMISSION_CHECK = Gvk("kueue.x-k8s.io", "v1beta2", "AdmissionCheck")
MULTIKUEUE_CONFIG = Gvk("kueue.x-k8s.io", "v1beta2", "MultiKueueConfig")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The status condition of type ``kind``."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def is_true(obj: dict[str, Any] | None, kind: str) -> bool:
    """``apimeta.IsStatusConditionTrue``."""
    cond = condition(obj, kind) if obj is not None else None
    return cond is not None and cond.get("status") == "True"


@dataclass
class Group:
    """``wlGroup``: a workload and its copies on the connected workers."""

    local: dict[str, Any]
    namespace: str
    check: str
    adapter: GenericAdapter
    job_name: str
    remotes: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    clients: dict[str, RemoteClient] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)

    def best_match(self, kind: str) -> tuple[dict[str, Any] | None, str]:
        """``bestMatchByCondition``: the earliest remote with ``kind`` True."""
        best: dict[str, Any] | None = None
        where = ""
        for cluster in sorted(self.remotes):
            wl = self.remotes[cluster]
            cond = condition(wl, kind) if wl is not None else None
            if (
                cond
                and cond.get("status") == "True"
                and (best is None or str(cond.get("lastTransitionTime")) < str(best.get("lastTransitionTime")))
            ):
                best, where = cond, cluster
        return best, where


class Reconciler:
    """The reconcile of one workload key at a time."""

    def __init__(self, model: Kueue) -> None:
        self.model = model
        #: ``deletedWlCache``: the last state of workloads seen deleted.
        self.deleted: dict[tuple[str, str], dict[str, Any]] = {}

    async def reconcile(self, key: tuple[str, str]) -> float | None:
        """One ``Reconcile``; returns ``RequeueAfter`` in Kueue seconds (None for none)."""
        namespace, name = key
        model = self.model
        try:
            local: dict[str, Any] | None = await model.manager.get(WORKLOAD, namespace, name, "typed")
        except ApiStatusError as exc:
            if not exc.not_found:
                raise
            local = None
        deleted = local is None
        if local is None:
            local = self.deleted.get(key)
            if local is None:
                return None
        else:
            deleted = bool((local.get("metadata") or {}).get("deletionTimestamp"))
        check = await self._multikueue_check(local)
        if check is None or check.get("state") == "Rejected":
            if deleted:
                self.deleted.pop(key, None)
            return None
        owner = next(
            (r for r in (local.get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")), None
        )
        owner = owner or next(iter((local.get("metadata") or {}).get("ownerReferences") or []), None)
        adapter = model.adapter_for(str(owner.get("apiVersion")), str(owner.get("kind"))) if owner else None
        if adapter is None or owner is None:
            what = (
                f' for owner kind "{Gvk.of(str(owner.get("apiVersion")), str(owner.get("kind"))).key}"' if owner else ""
            )
            await self._set_check(local, check, "Rejected", f"No multikueue adapter found{what}")
            return None
        job = str(owner.get("name"))
        if not deleted:
            managed, why = await adapter.is_managed(model.manager, namespace, job)
            if not managed:
                await self._set_check(local, check, "Rejected", f"The owner is not managed by Kueue: {why}")
                return None
        group = await self._read_group(local, namespace, check, adapter, job)
        if deleted:
            for cluster in list(group.remotes):
                if await self._remove(group, cluster):
                    model.record(namespace, name, "removed", cluster, "workload deleted")
            self.deleted.pop(key, None)
            return None
        return await self._reconcile_group(group, check)

    # -- reading -------------------------------------------------------------------------

    async def _multikueue_check(self, local: dict[str, Any]) -> dict[str, Any] | None:
        """``GetMultiKueueAdmissionCheck``: the first check handled by MultiKueue."""
        for state in (local.get("status") or {}).get("admissionChecks") or []:
            try:
                ac = await self.model.manager.get(ADMISSION_CHECK, None, str(state.get("name")), "typed")
            except ApiStatusError as exc:
                if exc.not_found:
                    continue
                raise
            if (ac.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
                return dict(state)
        return None

    async def _clusters_of(self, check: str) -> list[str]:
        """``ConfigForAdmissionCheck``: the MultiKueueConfig's clusters."""
        ac = await self.model.manager.get(ADMISSION_CHECK, None, check, "typed")
        params = (ac.get("spec") or {}).get("parameters") or {}
        config = await self.model.manager.get(MULTIKUEUE_CONFIG, None, str(params.get("name")), "typed")
        return [str(c) for c in (config.get("spec") or {}).get("clusters") or []]

    async def _read_group(
        self, local: dict[str, Any], namespace: str, check: dict[str, Any], adapter: GenericAdapter, job: str
    ) -> Group:
        group = Group(local, namespace, str(check.get("name")), adapter, job)
        for cluster in await self._clusters_of(group.check):
            remote = self.model.remotes.get(cluster)
            if remote is None or not remote.connected or remote.client is None:
                group.unavailable.append(cluster)
                continue
            group.clients[cluster] = remote
            try:
                group.remotes[cluster] = await remote.client.get(
                    WORKLOAD, namespace, str(local["metadata"]["name"]), "typed"
                )
            except ApiStatusError as exc:
                if not exc.not_found:
                    raise
                group.remotes[cluster] = None
        return group

    # -- reconcileGroup ---------------------------------------------------------------------

    async def _reconcile_group(self, group: Group, check: dict[str, Any]) -> float | None:
        model = self.model
        local = group.local
        name = str(local["metadata"]["name"])
        record = model.record
        # 2. finished or no quota: remove every remote
        if is_true(local, "Finished") or not is_true(local, "QuotaReserved"):
            failures: list[Exception] = []
            for cluster in list(group.remotes):
                try:
                    if await self._remove(group, cluster):
                        record(group.namespace, name, "removed", cluster, "finished or no quota reserved")
                except (ApiStatusError, NotOwned) as exc:
                    failures.append(exc)
            if failures:
                raise failures[0]
            return model.settings.worker_lost_timeout if group.unavailable else None
        # 3. a remote finished
        finished, where = group.best_match("Finished")
        if finished is not None and finished.get("reason") == OUT_OF_SYNC and model.settings.version.out_of_sync_retry:
            if check.get("state") == "Ready":
                await self._set_check(
                    local, check, "Retry",
                    f'Remote workload on worker cluster "{where}" is out of sync with its user job, resetting for '
                    "re-dispatch",
                )  # fmt: skip
            return None
        if finished is not None:
            await self._sync(group, where, "finished")
            await model.patch_workload_status(
                local, {"conditions": _set_condition(local, "Finished", "True", str(finished.get("reason") or ""),
                                                     str(finished.get("message") or ""))},
            )  # fmt: skip
            record(group.namespace, name, "finished", where, str(finished.get("reason") or ""))
            return None
        # 4. a remote evicted
        evicted, where = group.best_match("Evicted")
        if evicted is not None:
            if is_true(local, "Evicted"):
                await self._sync(group, where, "evicted")
                return None
            if check.get("state") == "Ready":
                cluster_name = str((local.get("status") or {}).get("clusterName") or where)
                await self._set_check(
                    local, check, "Retry",
                    f'Workload evicted on worker cluster: "{cluster_name}", resetting for re-admission. '
                    f'Previously: "{check.get("state")}"',
                    previously=False,
                )  # fmt: skip
                return None
        # 5. out of sync
        for cluster, remote_wl in list(group.remotes.items()):
            if remote_wl is not None and _spec_differs(local.get("spec"), remote_wl.get("spec")):
                await self._remove(group, cluster)
                record(group.namespace, name, "removed", cluster, "remote workload out of sync")
        # 6. the admitting remote
        admitted, where = group.best_match("Admitted")
        if admitted is None and check.get("state") == "Ready":
            admitting = str((local.get("status") or {}).get("clusterName") or "")
            if admitting and admitting in group.unavailable:
                lost = model.lost_since(admitting)
                remaining = model.settings.worker_lost_timeout - lost
                if remaining > 0:
                    return remaining
                await self._set_check(local, check, "Retry", "Admitting remote lost")
                return None
            await self._set_check(local, check, "Retry", "Admitting remote no longer exists")
            return None
        if admitted is not None:
            for cluster, remote_wl in list(group.remotes.items()):
                if remote_wl is not None and cluster != where:
                    await self._remove(group, cluster)
                    record(group.namespace, name, "removed", cluster, "not the admitting worker")
            evicted_local = condition(local, "Evicted")
            if is_true(local, "QuotaReserved") and evicted_local and evicted_local.get("status") == "True":
                # workload.SetDeactivationTarget on the remote Workload (Kueue applies it with
                # server-side apply; a merge patch of the conditions here).
                client = group.clients[where].client
                remote_wl = group.remotes[where]
                assert client is not None and remote_wl is not None
                conditions = _set_condition(
                    remote_wl, "DeactivationTarget", "True", "EvictedOnManagerCluster",
                    f"Evicted on manager: {evicted_local.get('message', '')}",
                )  # fmt: skip
                await client.patch_status(
                    WORKLOAD, group.namespace, name, {"status": {"conditions": conditions}}, "typed"
                )
                return None
            await self._sync(group, where, "admitted")
            status = local.get("status") or {}
            if check.get("state") not in ("Retry", "Rejected"):
                patch: dict[str, Any] = {
                    "admissionChecks": _set_check_state(local, check["name"], "Ready",
                                                        f'The workload was admitted on "{where}"', now_rfc3339()),
                    "nominatedClusterNames": None,
                }  # fmt: skip
                if not status.get("clusterName"):
                    patch["clusterName"] = where
                await model.patch_workload_status(local, patch)
                if check.get("state") != "Ready":
                    record(group.namespace, name, "ready", where, f"admitted on {where}")
            return model.settings.worker_lost_timeout
        # 8. nominate and dispatch
        if check.get("state") != "Pending" or (local.get("status") or {}).get("clusterName"):
            return None
        nominated = sorted(group.remotes)
        if sorted((local.get("status") or {}).get("nominatedClusterNames") or []) != nominated:
            await model.patch_workload_status(local, {"nominatedClusterNames": nominated})
        failed: list[Exception] = []
        for cluster, remote_wl in group.remotes.items():
            if remote_wl is None:
                client = group.clients[cluster].client
                assert client is not None
                clone = _clone_workload(local, model.settings.origin, model.settings.version)
                try:
                    await client.create(WORKLOAD, group.namespace, clone, "typed")
                    record(group.namespace, name, "dispatched", cluster, "remote workload created")
                except ApiStatusError as exc:
                    record(group.namespace, name, "error", cluster, f"creating the remote workload: {exc}")
                    failed.append(exc)
        if failed:
            raise failed[0]
        return None

    async def _sync(self, group: Group, cluster: str, why: str) -> None:
        """The ownership check (from v0.17.6/v0.18.2/v0.19.0), then ``SyncJob``; any error aborts."""
        model = self.model
        client = group.clients[cluster].client
        assert client is not None
        name = str(group.local["metadata"]["name"])
        try:
            if model.settings.version.ownership_check:
                await group.adapter.validate_ownership(client, group.namespace, group.job_name)
            result, patch = await group.adapter.sync_job(model.manager, client, group.namespace, group.job_name, name)
        except (ApiStatusError, NotOwned) as exc:
            model.record(group.namespace, name, "error", cluster, f"sync ({why}): {exc}")
            raise
        model.record(group.namespace, name, result, cluster, patch)

    async def _remove(self, group: Group, cluster: str) -> bool:
        """``RemoveRemoteObjects``: the job (if owned), the remote Workload's finalizer, the
        remote Workload; True when something was deleted."""
        remote = group.clients[cluster]
        client = remote.client
        assert client is not None
        deleted = await group.adapter.delete_remote_if_owned(client, group.namespace, group.job_name)
        wl = group.remotes.get(cluster)
        if wl is None:
            return deleted
        finalizers = list((wl.get("metadata") or {}).get("finalizers") or [])
        if RESOURCE_IN_USE in finalizers:
            updated = copy.deepcopy(wl)
            updated["metadata"]["finalizers"] = [f for f in finalizers if f != RESOURCE_IN_USE] or None
            if updated["metadata"]["finalizers"] is None:
                del updated["metadata"]["finalizers"]
            await client.update(WORKLOAD, updated, "typed")
        try:
            await client.delete(WORKLOAD, group.namespace, str(wl["metadata"]["name"]), "typed")
        except ApiStatusError as exc:
            if not exc.not_found:
                raise
        group.remotes[cluster] = None
        return True

    async def _set_check(
        self, local: dict[str, Any], check: dict[str, Any], state: str, message: str, *, previously: bool = True
    ) -> None:
        """``updateACS``: the MultiKueue check's state and message."""
        if previously:
            message = f'{message}, Previously: "{check.get("state")}"'
        await self.model.patch_workload_status(
            local, {"admissionChecks": _set_check_state(local, check["name"], state, message, now_rfc3339())}
        )
        self.model.record(
            str(local["metadata"].get("namespace")), str(local["metadata"]["name"]), state.lower(), "", message
        )


def _spec_differs(local: Any, remote: Any) -> bool:
    """``isRemoteSpecOutOfSync``: preemption gates aside, the specs differ."""

    def strip(spec: Any) -> dict[str, Any]:
        return {k: v for k, v in _typed_spec(spec).items() if k != "preemptionGates"}

    return strip(local) != strip(remote)


def _typed_spec(spec: Any) -> dict[str, Any]:
    """A Workload spec as Go holds it (the typed struct): each pod set's ``template.metadata`` is
    there, ``{}`` when absent (``corev1.PodTemplateSpec.ObjectMeta``, a struct ``omitempty`` keeps)."""
    out = copy.deepcopy(spec) if isinstance(spec, dict) else {}
    for pod_set in out.get("podSets") or []:
        if isinstance(pod_set, dict) and isinstance(pod_set.get("template"), dict):
            pod_set["template"].setdefault("metadata", {})
    return out


def _set_check_state(local: dict[str, Any], check: str, state: str, message: str, now: str) -> list[dict[str, Any]]:
    checks = [dict(c) for c in (local.get("status") or {}).get("admissionChecks") or []]
    for c in checks:
        if c.get("name") == check:
            if c.get("state") != state:
                c["lastTransitionTime"] = now
            c["state"], c["message"] = state, message
    return checks


def now_rfc3339() -> str:
    """Now, as Kubernetes writes ``metav1.Time`` (UTC, seconds)."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: list[dict[str, Any]],
    kind: str,
    status: str,
    reason: str,
    message: str = "",
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """``apimeta.SetStatusCondition`` (apimachinery ``pkg/api/meta/conditions.go``), on a copy:
    the condition of type ``kind`` updated where it stands, its ``lastTransitionTime`` kept
    unless its status changes; a new one appended."""
    out = [dict(c) for c in conditions]
    new: dict[str, Any] = {"type": kind, "status": status, "reason": reason, "message": message}
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    for cond in out:
        if cond.get("type") == kind:
            if cond.get("status") != status:
                cond["lastTransitionTime"] = now_rfc3339()
            cond.update(new)
            return out
    out.append({**new, "lastTransitionTime": now_rfc3339()})
    return out


def _set_condition(obj: dict[str, Any], kind: str, status: str, reason: str, message: str) -> list[dict[str, Any]]:
    """``obj``'s conditions with ``kind`` set (observed at ``obj``'s generation)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    generation = (obj.get("metadata") or {}).get("generation", 0)
    return set_condition(conditions, kind, status, reason or "Unknown", message, generation)


def _clone_workload(local: dict[str, Any], origin: str, version: KueueVersion) -> dict[str, Any]:
    """``cloneForCreate`` (``workload.go``): name, namespace, labels (origin added, job-uid removed),
    annotations, spec; as Go encodes the typed Workload: a zero ``creationTimestamp`` as ``null``
    before Kueue 0.17 (:attr:`KueueVersion.omits_zero_timestamp`), the empty structs that
    ``omitempty`` keeps — ``status: {}`` (``WorkloadStatus``) and each pod set's
    ``template.metadata: {}`` (``corev1.PodTemplateSpec.ObjectMeta``)."""
    meta = local.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != "kueue.x-k8s.io/job-uid"}
    labels[ORIGIN_LABEL] = origin
    kept: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace"), "labels": labels}
    if not version.omits_zero_timestamp:
        kept["creationTimestamp"] = None
    if meta.get("annotations"):
        kept["annotations"] = copy.deepcopy(meta["annotations"])
    return {"apiVersion": WORKLOAD.api_version, "kind": "Workload", "metadata": kept,
            "spec": _typed_spec(local.get("spec")), "status": {}}  # fmt: skip
