"""The Workload Kueue's job reconciler builds for a job, as a plain ``kueue.x-k8s.io/v1beta2`` object.

Follows Kueue v0.19.2, ``pkg/controller/jobframework``:

- ``workload_names.go``: ``GetWorkloadNameForOwnerWithGVK`` — ``lower(kind)-name`` truncated to
  253 - 6 characters (63 - 6 with the ``ShortWorkloadNames`` gate), ``-``, then the first 5 hex
  digits of ``sha1(kind \\n group \\n name \\n uid)``;
- ``reconciler.go`` ``ConstructWorkload``: ``NewWorkload`` (``utils.go``: namespace, the
  ``kueue.x-k8s.io/resource-in-use`` finalizer, labels in ``labelKeysToCopy``, the
  ``provreq.kueue.x-k8s.io/`` annotations, ``queueName`` from the queue-name label,
  ``maximumExecutionTimeSeconds`` from the max-exec-time label), the
  ``kueue.x-k8s.io/job-uid`` label when the uid is a valid label value, and the controller
  owner reference (``SetControllerReference``: controller and blockOwnerDeletion true);
- ``JobPodSets``/``SanitizePodSets``: duplicate env vars removed, the last one kept, in
  first-seen order;
- ``prepareWorkload``: priority (``ExtractPriority``), ``minCount`` cleared unless the
  ``PartialAdmission`` gate is on, ``active`` left unset for a new Workload;
- ``ExtractPriority`` (``pkg/util/priority/priority.go``): the WorkloadPriorityClass named by
  the ``kueue.x-k8s.io/priority-class`` label, else ``JobWithPriorityClass``, else the first
  podSet template's ``priorityClassName``; an empty name is the lowest-valued global-default
  PriorityClass, or priority 0 without a ref.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mkpolicy.jsonvalues import copy_json

WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PROV_REQ_PREFIX = "provreq.kueue.x-k8s.io/"
RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"
_HASH_LENGTH = 5
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class PriorityNotFound(LookupError):
    """A PriorityClass or WorkloadPriorityClass the job names does not exist (NotFound: retried)."""


def workload_name(name: str, uid: str, kind: str, group: str, *, short: bool = False, extra: str = "") -> str:
    """``GenerateWorkloadNameWithExtra`` (``GetWorkloadNameForOwnerWithGVK`` when ``extra`` is empty)."""
    prefix_length = (63 if short else 253) - 1 - _HASH_LENGTH
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(f"{kind}\n{group}\n{name}\n{uid}".encode())
    if extra:
        digest.update(f"\n{extra}".encode())
    return f"{(kind.lower() + '-' + name)[:prefix_length]}-{digest.hexdigest()[:_HASH_LENGTH]}"


def is_label_value(value: str) -> bool:
    """``validation.IsValidLabelValue``: at most 63 characters, alphanumerics at both ends."""
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))


def max_execution_time(labels: Mapping[str, str]) -> int | None:
    """``MaximumExecutionTimeSecondsForObject``: a positive int32 in the label, else None."""
    text = labels.get(MAX_EXEC_TIME_LABEL)
    if text is None or not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if 0 < value <= 2**31 - 1 else None


def sanitize_pod_sets(pod_sets: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``SanitizePodSets``: in every container and init container, one env var per name
    (the last given), in the order the names first appear."""
    out: list[dict[str, Any]] = copy_json(list(pod_sets))
    for pod_set in out:
        spec = (pod_set.get("template") or {}).get("spec") or {}
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or []:
                env = container.get("env")
                if not isinstance(env, list):
                    continue
                groups: dict[Any, Any] = {}
                for var in env:
                    groups[var.get("name") if isinstance(var, dict) else None] = var
                container["env"] = list(groups.values())
    return out


@dataclass(frozen=True)
class PriorityClasses:
    """What ``ExtractPriority`` looks up: WorkloadPriorityClass values and PriorityClasses
    (``{name: {"value": int, "globalDefault": bool}}``)."""

    workload: Mapping[str, int] = field(default_factory=dict)
    pod: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def default(self) -> tuple[str, int] | None:
        """``getDefaultPriorityClass``: the global default with the lowest value."""
        found = [(int(pc.get("value", 0)), name) for name, pc in self.pod.items() if pc.get("globalDefault")]
        if not found:
            return None
        value, name = min(found)
        return name, value


def extract_priority(
    labels: Mapping[str, str],
    pod_sets: Sequence[Mapping[str, Any]],
    custom: str | None,
    classes: PriorityClasses,
) -> tuple[dict[str, str] | None, int]:
    """``ExtractPriority``: the Workload's ``priorityClassRef`` (None: unset) and ``priority``."""
    wpc = labels.get(PRIORITY_CLASS_LABEL, "")
    if wpc:
        if wpc not in classes.workload:
            raise PriorityNotFound(f'workloadpriorityclasses.kueue.x-k8s.io "{wpc}" not found')
        return {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": wpc}, classes.workload[wpc]
    name = custom
    if name is None:
        name = next(
            (
                str(ps["template"]["spec"]["priorityClassName"])
                for ps in pod_sets
                if ((ps.get("template") or {}).get("spec") or {}).get("priorityClassName")
            ),
            "",
        )
    if not name:
        default = classes.default()
        if default is None:
            return None, 0
        name, value = default
        return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}, value
    if name not in classes.pod:
        raise PriorityNotFound(f'priorityclasses.scheduling.k8s.io "{name}" not found')
    return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}, int(classes.pod[name].get("value", 0))


@dataclass(frozen=True)
class WorkloadOptions:
    """Kueue's configuration and feature gates that shape the Workload."""

    #: ``Configuration.integrations.labelKeysToCopy``.
    label_keys_to_copy: frozenset[str] = frozenset()
    #: ``ShortWorkloadNames`` (63-character names).
    short_names: bool = False
    #: ``PartialAdmission`` (keeps ``minCount``).
    partial_admission: bool = True


def construct_workload(
    obj: Mapping[str, Any],
    pod_sets: Sequence[dict[str, Any]],
    *,
    priority: tuple[dict[str, str] | None, int],
    options: WorkloadOptions = WorkloadOptions(),
) -> dict[str, Any]:
    """``ConstructWorkload`` + ``prepareWorkload`` for ``obj`` (a job with apiVersion, kind,
    metadata.name/namespace/uid) whose ``PodSets()`` are ``pod_sets``."""
    meta = obj.get("metadata") or {}
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    group = api_version.rpartition("/")[0]
    name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    wl_labels = {k: v for k, v in labels.items() if k in options.label_keys_to_copy}
    if is_label_value(uid):
        wl_labels[JOB_UID_LABEL] = uid
    wl_meta: dict[str, Any] = {
        "name": workload_name(name, uid, kind, group, short=options.short_names),
        "namespace": meta.get("namespace", ""),
        "labels": wl_labels,
        "finalizers": [RESOURCE_IN_USE],
        "ownerReferences": [owner_reference(obj)],
    }
    prov_req = {k: v for k, v in annotations.items() if k.startswith(PROV_REQ_PREFIX)}
    if prov_req:
        wl_meta["annotations"] = prov_req
    sets = sanitize_pod_sets(pod_sets)
    if not options.partial_admission:
        for pod_set in sets:
            pod_set.pop("minCount", None)
    spec: dict[str, Any] = {"podSets": sets}
    queue = labels.get(QUEUE_LABEL, "")
    if queue:
        spec["queueName"] = queue
    ref, value = priority
    if ref is not None:
        spec["priorityClassRef"] = ref
    spec["priority"] = value
    seconds = max_execution_time(labels)
    if seconds is not None:
        spec["maximumExecutionTimeSeconds"] = seconds
    return {"apiVersion": WORKLOAD_API_VERSION, "kind": "Workload", "metadata": wl_meta, "spec": spec}


def owner_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``SetControllerReference``'s owner reference to ``obj``."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }
