"""Whether a job still matches its Workload (``EquivalentToWorkload``, ``reconciler.go``, and
``ComparePodSetSlices``, ``pkg/util/equality/podset.go``, Kueue v0.19.2), and the admission's
PodSetInfo read from a Workload's status (``getPodSetsInfoFromStatus``).

Go compares typed structs decoded from JSON: a field absent and a field holding its zero value
decode alike, and the API server defaults the Workload's pod templates (a container port's
``protocol: TCP``). :func:`normalize` gives JSON that sameness before comparing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mkpolicy.controller.status import has_quota_reservation, is_admitted
from mkpolicy.engine.podsets import FlavorNotFound, PodSetConflict, info_from_assignment, info_from_update, merge_info
from mkpolicy.engine.workload import max_execution_time

#: Kueue's podset label (``constants.PodSetLabel``).
POD_SET_LABEL = "kueue.x-k8s.io/podset"
#: On a worker, pods of a MultiKueue Workload are labelled so (``MultiKueueWorkerWorkloadPodLabel``).
WORKER_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
_DEFAULTS = {"protocol": "TCP"}
#: The PodSpec fields ``comparePodTemplate`` compares (tolerations first: they may be ignored).
_COMPARED = ("tolerations", "initContainers", "containers")


def normalize(value: Any) -> Any:
    """``value`` without zero values (``""``, false, 0, empty lists and maps) and API defaults."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = normalize(item)
            if (
                item is None
                or item is False
                or item == ""
                or item == []
                or item == {}
                or (type(item) is int and item == 0)
            ):
                continue
            if _DEFAULTS.get(key) == item:
                continue
            out[key] = item
        return out
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def _is_zero(value: Any) -> bool:
    """A value Go decodes as its field's zero value (or a nil pointer)."""
    if value is None or value is False:
        return True
    if type(value) is int:
        return value == 0
    return value in ("", [], {})


def _spec(pod_set: Mapping[str, Any]) -> Mapping[str, Any]:
    return (pod_set.get("template") or {}).get("spec") or {}


def compare_pod_sets(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], ignore_tolerations: bool) -> bool:
    """``ComparePodSetSlices``: count, minCount, tolerations (unless ignored), init containers, containers."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if int(x.get("count", 1)) != int(y.get("count", 1)) or x.get("minCount", -1) != y.get("minCount", -1):
            return False
        sx, sy = _spec(x), _spec(y)
        keys = (
            ("initContainers", "containers") if ignore_tolerations else ("tolerations", "initContainers", "containers")
        )
        if any(normalize(sx.get(k) or []) != normalize(sy.get(k) or []) for k in keys):
            return False
    return True


def pod_sets_info(
    wl: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]], *, worker_pod_label: bool = True
) -> list[dict[str, Any]]:
    """``getPodSetsInfoFromStatus``: per podSet assignment, the flavors' node labels and tolerations,
    the podset label, the MultiKueue worker pod label on a worker (Kueue 0.18 and later:
    ``worker_pod_label``), then each admission check's
    podSetUpdates merged (:class:`~mkpolicy.engine.podsets.PodSetConflict` on a conflict, naming
    the check). A flavor that does not exist is :class:`~mkpolicy.engine.podsets.FlavorNotFound`."""
    status = wl.get("status") or {}
    admission = status.get("admission") or {}
    pod_sets = (wl.get("spec") or {}).get("podSets") or []
    labels = (wl.get("metadata") or {}).get("labels") or {}
    out = []
    for i, assignment in enumerate(admission.get("podSetAssignments") or []):
        info = info_from_assignment(assignment, pod_sets[i] if i < len(pod_sets) else {}, flavors)
        info["labels"][POD_SET_LABEL] = str(assignment.get("name"))
        if worker_pod_label and ORIGIN_LABEL in labels:
            info["labels"][WORKER_POD_LABEL] = "true"
        for check in status.get("admissionChecks") or []:
            for update in check.get("podSetUpdates") or []:
                if update.get("name") == info["name"]:
                    try:
                        merge_info(info, info_from_update(update))
                    except PodSetConflict as exc:
                        raise PodSetConflict(f'in admission check "{check.get("name")}": {exc}') from None
                    break
        out.append(info)
    return out


def expected_running_pod_sets(
    wl: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]] | None:
    """``expectedRunningPodSets``: the Workload's podSets as the job runs them once admitted
    (templates merged with the admission's info; counts of partially admitted podSets), or None."""
    if not has_quota_reservation(wl):
        return None
    try:
        infos = {info["name"]: info for info in pod_sets_info(wl, flavors)}
    except (FlavorNotFound, PodSetConflict):
        return None
    running = []
    for pod_set in (wl.get("spec") or {}).get("podSets") or []:
        info = infos.get(pod_set.get("name"))
        if info is None:
            return None
        spec = dict(_spec(pod_set))
        merged = {"tolerations": list(spec.get("tolerations") or [])}
        try:
            merge_info(merged, info)
        except ValueError:
            return None
        copy = {
            **pod_set,
            "template": {**(pod_set.get("template") or {}), "spec": {**spec, "tolerations": merged["tolerations"]}},
        }
        if pod_set.get("minCount") is not None:
            copy["count"] = info["count"]
        running.append(copy)
    return running


def equivalent(
    job: Mapping[str, Any],
    job_pod_sets: Sequence[Mapping[str, Any]],
    suspended: bool,
    wl: Mapping[str, Any],
    flavors: Mapping[str, Mapping[str, Any]],
) -> bool:
    """``EquivalentToWorkload`` (with ``FinishOrphanedWorkloads``, on by default: the owner's uid too)."""
    owner = controller_of(wl)
    meta = job.get("metadata") or {}
    if owner is None or owner.get("name") != meta.get("name") or owner.get("uid") != meta.get("uid"):
        return False
    labels = meta.get("labels") or {}
    if (wl.get("spec") or {}).get("maximumExecutionTimeSeconds") != max_execution_time(labels):
        return False
    ignore = is_admitted(wl)
    running = expected_running_pod_sets(wl, flavors)
    stored = (wl.get("spec") or {}).get("podSets") or []
    if running is not None:
        if compare_pod_sets(job_pod_sets, running, ignore):
            return True
        return suspended and compare_pod_sets(job_pod_sets, stored, ignore)
    return compare_pod_sets(job_pod_sets, stored, ignore)


def owner_key(obj: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """The index of Workloads by controller owner (Kueue's ``OwnerReferenceIndexFieldMatcher``,
    ``jobframework/indexer.go``): (namespace, owner's API group, kind, name), or None."""
    owner = controller_of(obj)
    if owner is None:
        return None
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    group = str(owner.get("apiVersion", "")).rpartition("/")[0]
    return (namespace, group, str(owner.get("kind", "")), str(owner.get("name", "")))


def controller_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """``metav1.GetControllerOf``: the owner reference with ``controller: true``."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None
