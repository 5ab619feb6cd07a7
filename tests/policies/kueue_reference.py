"""An independent model of Kueue's hand-written MultiKueue adapters, in plain Python.

Written from the Go source of kubernetes-sigs/kueue v0.19.2 (8eab6877; the adapter files
are identical at ff69552e), not from the policies: the parity tests run every policy and
this model on the same inputs and require the same results. Only the behaviour a policy is
responsible for is modelled (which object Kueue creates on the worker, and what the
manager's status becomes); the lifecycle (requeues, deletes, elastic spec pushes) is not.

Go's typed clients shape what Kueue writes, and the model keeps that:

* an empty ``labels``/``annotations`` map (and an emptied list with ``omitempty``) is not
  serialised;
* a missing ``status`` decodes to the Go zero value of the kind's status type, so a
  write-back from a worker without status writes that zero value; statuses are compared
  as typed values (a missing status equals the zero value);
* statuses read from the API are assumed canonical (as their typed controllers wrote
  them), so a present status is its own typed value.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
ORIGIN_UID_ANNOTATION = "kueue.x-k8s.io/multikueue-origin-uid"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
STOPPING_ANNOTATION = "kueue.x-k8s.io/stopping"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
RUNTIME_PATCH_MANAGER = "kueue.x-k8s.io/manager"
LABEL_VALUE_MAX = 63

#: No status at all (TrainJob's status is ``omitzero``: its zero value is not serialised).
ABSENT: Any = object()

_RAY_CLUSTER_ZERO = {"desiredCPU": "0", "desiredMemory": "0", "desiredGPU": "0", "desiredTPU": "0", "head": {}}


@dataclass(frozen=True)
class Kind:
    """What Kueue's adapter for one kind does."""

    api_version: str
    kind: str
    #: JSON-pointer tokens of managedBy, or None: every object is managed.
    managed_by: tuple[str, ...] | None
    #: Go zero value of the status type as JSON, or ABSENT (omitzero).
    zero_status: Any = field(default_factory=dict)
    #: "typed" (status := worker status), "job", "pod" or "none".
    sync: str = "typed"
    #: Kind-specific edits of the spec after the generic clone.
    spec_cleanup: Callable[[dict[str, Any]], None] | None = None
    #: Whether the prebuilt-workload identifier is written (LeaderWorkerSet: no).
    identifier: bool = True
    #: Whether the origin-uid annotation is written (LeaderWorkerSet, StatefulSet).
    origin_uid: bool = False


# -- kind-specific creation edits --------------------------------------------------------


def _job_cleanup(spec: dict[str, Any]) -> None:
    # remoteJob.Spec.Selector = nil; cleanLabels(&remoteJob.Spec.Template)
    spec.pop("selector", None)
    meta = spec.get("template", {}).get("metadata")
    if isinstance(meta, dict) and "labels" in meta:
        labels = {
            k: v
            for k, v in meta["labels"].items()
            if k not in ("job-name", "controller-uid", "batch.kubernetes.io/controller-uid")
        }
        if labels:
            meta["labels"] = labels
        else:
            del meta["labels"]  # omitempty


def _trainjob_cleanup(spec: dict[str, Any]) -> None:
    # slices.DeleteFunc(RuntimePatches, p.Manager == "kueue.x-k8s.io/manager"), omitempty
    if "runtimePatches" in spec:
        kept = [p for p in spec["runtimePatches"] if p.get("manager") != RUNTIME_PATCH_MANAGER]
        if kept:
            spec["runtimePatches"] = kept
        else:
            del spec["runtimePatches"]


SPEC_MANAGED_BY = ("spec", "managedBy")
RUN_POLICY_MANAGED_BY = ("spec", "runPolicy", "managedBy")

KINDS: dict[str, Kind] = {
    "job": Kind("batch/v1", "Job", SPEC_MANAGED_BY, sync="job", spec_cleanup=_job_cleanup),
    "jobset": Kind("jobset.x-k8s.io/v1alpha2", "JobSet", SPEC_MANAGED_BY, zero_status={"restarts": 0}),
    "rayjob": Kind(
        "ray.io/v1",
        "RayJob",
        SPEC_MANAGED_BY,
        zero_status={"rayJobInfo": {}, "rayClusterStatus": _RAY_CLUSTER_ZERO},
    ),
    "raycluster": Kind("ray.io/v1", "RayCluster", SPEC_MANAGED_BY, zero_status=_RAY_CLUSTER_ZERO),
    "rayservice": Kind(
        "ray.io/v1",
        "RayService",
        SPEC_MANAGED_BY,
        zero_status={
            "activeServiceStatus": {"rayClusterStatus": _RAY_CLUSTER_ZERO},
            "pendingServiceStatus": {"rayClusterStatus": _RAY_CLUSTER_ZERO},
        },
    ),
    "appwrapper": Kind("workload.codeflare.dev/v1beta2", "AppWrapper", SPEC_MANAGED_BY),
    "mpijob": Kind("kubeflow.org/v2beta1", "MPIJob", RUN_POLICY_MANAGED_BY),
    "pytorchjob": Kind("kubeflow.org/v1", "PyTorchJob", RUN_POLICY_MANAGED_BY),
    "tfjob": Kind("kubeflow.org/v1", "TFJob", RUN_POLICY_MANAGED_BY),
    "xgboostjob": Kind("kubeflow.org/v1", "XGBoostJob", RUN_POLICY_MANAGED_BY),
    "paddlejob": Kind("kubeflow.org/v1", "PaddleJob", RUN_POLICY_MANAGED_BY),
    "jaxjob": Kind("kubeflow.org/v1", "JAXJob", RUN_POLICY_MANAGED_BY),
    "trainjob": Kind(
        "trainer.kubeflow.org/v1alpha1",
        "TrainJob",
        SPEC_MANAGED_BY,
        zero_status=ABSENT,
        spec_cleanup=_trainjob_cleanup,
    ),
    "leaderworkerset": Kind(
        "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", None, sync="none", identifier=False, origin_uid=True
    ),
    "statefulset": Kind("apps/v1", "StatefulSet", None, sync="none", origin_uid=True),
    "pod": Kind("v1", "Pod", None, sync="pod"),
}


# -- managed? ------------------------------------------------------------------------------


def is_managed(kind: Kind, obj: dict[str, Any]) -> bool:
    """IsJobManagedByKueue: ptr.Deref(<managedBy>, "") == "kueue.x-k8s.io/multikueue"."""
    if kind.managed_by is None:
        return True
    cur: Any = obj
    for token in kind.managed_by:
        if not isinstance(cur, dict) or token not in cur:
            return False
        cur = cur[token]
    return cur == MULTIKUEUE


# -- creation ------------------------------------------------------------------------------


def create(kind: Kind, manager: dict[str, Any], workload_name: str, origin: str, annotations_gate: bool) -> dict:
    """The object SyncJob creates on the worker. ``annotations_gate``: WorkloadIdentifierAnnotations."""
    meta = manager.get("metadata", {})
    labels = dict(meta.get("labels") or {})  # api.CloneObjectMetaForCreation: maps.Clone
    annotations = dict(meta.get("annotations") or {})
    spec = copy.deepcopy(manager.get("spec", {}))
    if kind.spec_cleanup is not None:
        kind.spec_cleanup(spec)
    labels[ORIGIN_LABEL] = origin  # SetMultiKueueMeta / the LWS adapter's own labels
    if kind.identifier:  # SetPrebuiltWorkloadName
        if annotations_gate or len(workload_name) > LABEL_VALUE_MAX:
            annotations[PREBUILT] = workload_name
        else:
            labels[PREBUILT] = workload_name
    if kind.origin_uid:
        annotations[ORIGIN_UID_ANNOTATION] = meta.get("uid", "")
    if kind.managed_by is not None:  # <managedBy> = nil
        cur = spec
        for token in kind.managed_by[1:-1]:
            cur = cur.get(token, {})
        cur.pop(kind.managed_by[-1], None)
    out_meta: dict[str, Any] = {k: meta[k] for k in ("name", "namespace") if k in meta}
    if labels:
        out_meta["labels"] = labels
    if annotations:
        out_meta["annotations"] = annotations
    return {"apiVersion": manager["apiVersion"], "kind": manager["kind"], "metadata": out_meta, "spec": spec}


# -- status write-back -----------------------------------------------------------------------


def typed_status(kind: Kind, obj: dict[str, Any]) -> Any:
    """The status as Kueue's typed client decodes (and re-encodes) it."""
    if "status" in obj and obj["status"] is not None:
        status = obj["status"]
        return ABSENT if kind.zero_status is ABSENT and status == {} else status
    return copy.deepcopy(kind.zero_status) if kind.zero_status is not ABSENT else ABSENT


@dataclass
class SyncResult:
    """What Kueue does to the manager's status: nothing, or set it to ``status`` (typed)."""

    changed: bool
    status: Any = None


def _condition_true(conditions: list[dict[str, Any]], ctype: str) -> bool:
    # isJobStatusConditionTrue: the first condition of the type decides
    for c in conditions:
        if c.get("type") == ctype:
            return bool(c.get("status") == "True")
    return False


def _set_condition(conditions: list[dict[str, Any]], condition: dict[str, Any]) -> list[dict[str, Any]]:
    # setJobStatusCondition / setPodCondition: replace the first of the type, else append
    out = list(conditions)
    for i, c in enumerate(out):
        if c.get("type") == condition["type"]:
            out[i] = condition
            return out
    return [*out, condition]


def _job_suspended(job: dict[str, Any]) -> bool:
    # IsSuspended: spec.suspend && annotations[stopping] != "true"
    return bool(job.get("spec", {}).get("suspend")) and (
        (job.get("metadata", {}).get("annotations") or {}).get(STOPPING_ANNOTATION) != "true"
    )


def _job_status(manager: dict[str, Any], worker: dict[str, Any], now: dt.datetime) -> Any:
    local, remote = typed_status(KINDS["job"], manager), typed_status(KINDS["job"], worker)
    if not _job_suspended(manager) or _job_suspended(worker):
        return remote
    finished = any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in remote.get("conditions", [])
    )
    if finished:
        return remote
    if _condition_true(local.get("conditions", []), "Suspended"):
        return local
    stamp = now.astimezone(dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": "Suspended",
        "status": "True",
        "reason": "MultiKueueAdapter",
        "message": "Set by MultiKueue adapter",
        "lastTransitionTime": stamp,
        "lastProbeTime": stamp,
    }
    new = copy.deepcopy(local)
    new["conditions"] = _set_condition(local.get("conditions", []), condition)
    return new


def _pod_status(manager: dict[str, Any], worker: dict[str, Any]) -> Any:
    local, remote = typed_status(KINDS["pod"], manager), typed_status(KINDS["pod"], worker)
    local_scheduled = next((c for c in local.get("conditions", []) if c.get("type") == "PodScheduled"), None)
    remote_scheduled = next((c for c in remote.get("conditions", []) if c.get("type") == "PodScheduled"), None)
    new = copy.deepcopy(remote)
    gated = any(g.get("name") == ADMISSION_GATE for g in manager.get("spec", {}).get("schedulingGates", []))
    remote_is_scheduled = remote_scheduled is not None and remote_scheduled.get("status") == "True"
    if gated and local_scheduled is not None and not remote_is_scheduled:
        new["conditions"] = _set_condition(new.get("conditions", []), local_scheduled)
    return new


def sync(kind: Kind, manager: dict[str, Any], worker: dict[str, Any], now: dt.datetime) -> SyncResult:
    """What SyncJob writes to the manager's status when the worker's object exists."""
    if kind.sync == "none":
        return SyncResult(False)
    if kind.sync == "pod" and manager.get("metadata", {}).get("deletionTimestamp"):
        return SyncResult(False)
    if kind.sync == "job":
        new = _job_status(manager, worker, now)
    elif kind.sync == "pod":
        new = _pod_status(manager, worker)
    else:
        new = typed_status(kind, worker)
    if new == typed_status(kind, manager):
        return SyncResult(False)
    return SyncResult(True, new)


# -- helpers for the tests -------------------------------------------------------------------


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out
