"""The shipped Kueue parity policies, their example objects, and variants of them.

Variants are derived from the examples by small edits (no status, no annotations, a Job
being stopped, a TrainJob without Kueue's runtime patch...), so that every branch of
every Kueue adapter is exercised by the parity tests.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import mkpolicy
from mkpolicy.engine import Adapter

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies" / "kueue"
EXAMPLES = ROOT / "examples" / "kueue"

#: Every kind Kueue adapts by hand (pkg/controller/jobs/*, MultiKueueAdapter set in RegisterIntegration).
KINDS = (
    "appwrapper",
    "job",
    "jobset",
    "jaxjob",
    "leaderworkerset",
    "mpijob",
    "paddlejob",
    "pod",
    "pytorchjob",
    "raycluster",
    "rayjob",
    "rayservice",
    "statefulset",
    "tfjob",
    "trainjob",
    "xgboostjob",
)

NOW = dt.datetime(2026, 5, 4, 10, 0, 30, tzinfo=dt.UTC)
WORKLOAD = "wl-0a1b2"
LONG_WORKLOAD = "w" * 64  # longer than a label value may be


def read(path: Path) -> dict[str, Any]:
    with path.open() as f:
        doc = yaml.safe_load(f)
    assert isinstance(doc, dict)
    return doc


@functools.cache
def adapter(kind: str) -> Adapter:
    (policy,) = mkpolicy.load(str(POLICIES / f"{kind}.yaml"))
    return mkpolicy.compile(policy)


def example_files(kind: str, role: str) -> list[Path]:
    """``manager*.yaml`` or ``worker*.yaml`` of a kind, sorted."""
    return sorted((EXAMPLES / kind).glob(f"{role}*.yaml"))


def context(identifier: str = "annotation", workload_name: str = WORKLOAD) -> mkpolicy.Context:
    return mkpolicy.Context(
        workload_name=workload_name,
        origin="multikueue",
        cluster="worker1",
        identifier=identifier,  # type: ignore[arg-type]
        now=NOW,
    )


# -- variants ----------------------------------------------------------------------------------

Edit = Callable[[dict[str, Any]], None]


def _drop(*path: str) -> Edit:
    def edit(obj: dict[str, Any]) -> None:
        cur: Any = obj
        for token in path[:-1]:
            cur = cur.get(token, {})
        cur.pop(path[-1], None)

    return edit


def _set(value: Any, *path: str) -> Edit:
    def edit(obj: dict[str, Any]) -> None:
        cur: Any = obj
        for token in path[:-1]:
            cur = cur.setdefault(token, {})
        cur[path[-1]] = copy.deepcopy(value)

    return edit


def _zero_status(kind: str) -> Edit:
    from kueue_reference import ABSENT
    from kueue_reference import KINDS as MODELS

    zero = MODELS[kind].zero_status
    return _drop("status") if zero is ABSENT else _set(zero, "status")


_COMMON_MANAGER: dict[str, Edit] = {
    "as-is": lambda o: None,
    "no-status": _drop("status"),
    "no-annotations": _drop("metadata", "annotations"),
    "empty-annotations": _set({}, "metadata", "annotations"),
    "no-labels": _drop("metadata", "labels"),
    "no-uid": _drop("metadata", "uid"),
}

_SUSPENDED = {
    "type": "Suspended",
    "status": "True",
    "reason": "X",
    "message": "m",
    "lastTransitionTime": "2026-05-04T10:00:00Z",
}
_NOT_SUSPENDED = {**_SUSPENDED, "status": "False"}
_FAILED = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "m"}
_GATED_SCHEDULED = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "SchedulingGated",
    "message": "Scheduling is blocked due to non-empty scheduling gates",
    "lastProbeTime": None,
    "lastTransitionTime": "2026-05-04T21:00:00Z",
}

_KIND_MANAGER: dict[str, dict[str, Edit]] = {
    "job": {
        "unsuspended": _set(False, "spec", "suspend"),
        "stopping": _set({"kueue.x-k8s.io/stopping": "true"}, "metadata", "annotations"),
        "suspended-condition-true": _set({"conditions": [_SUSPENDED]}, "status"),
        "suspended-condition-false": _set({"active": 1, "conditions": [_FAILED, _NOT_SUSPENDED]}, "status"),
        "two-suspended-conditions": _set({"conditions": [_NOT_SUSPENDED, {**_NOT_SUSPENDED, "reason": "Y"}]}, "status"),
        "only-controller-template-labels": _set(
            {"controller-uid": "u", "job-name": "j", "batch.kubernetes.io/controller-uid": "u"},
            "spec",
            "template",
            "metadata",
            "labels",
        ),
        "empty-template-labels": _set({}, "spec", "template", "metadata", "labels"),
        "no-template-metadata": _drop("spec", "template", "metadata"),
        "no-selector": _drop("spec", "selector"),
        "odd-label-key": _set({"a/b~c": "x", "job-name": "j"}, "spec", "template", "metadata", "labels"),
    },
    "trainjob": {
        "only-kueue-runtime-patch": lambda o: o["spec"].update(
            runtimePatches=[p for p in o["spec"]["runtimePatches"] if p["manager"] == "kueue.x-k8s.io/manager"]
        ),
        "no-kueue-runtime-patch": lambda o: o["spec"].update(
            runtimePatches=[p for p in o["spec"]["runtimePatches"] if p["manager"] != "kueue.x-k8s.io/manager"]
        ),
        "empty-runtime-patches": _set([], "spec", "runtimePatches"),
        "no-runtime-patches": _drop("spec", "runtimePatches"),
        "kueue-runtime-patch-twice": lambda o: o["spec"]["runtimePatches"].append(
            copy.deepcopy(o["spec"]["runtimePatches"][1])
        ),
    },
    "pod": {
        "ungated": _drop("spec", "schedulingGates"),
        "other-gate": _set([{"name": "example.com/gate"}], "spec", "schedulingGates"),
        "terminating": _set("2026-05-04T21:05:00Z", "metadata", "deletionTimestamp"),
        "no-pod-scheduled": _set({"phase": "Pending", "qosClass": "Burstable"}, "status"),
    },
    "mpijob": {"run-policy-only-managed-by": _set({"managedBy": "kueue.x-k8s.io/multikueue"}, "spec", "runPolicy")},
    "pytorchjob": {"run-policy-only-managed-by": _set({"managedBy": "kueue.x-k8s.io/multikueue"}, "spec", "runPolicy")},
}

_KIND_WORKER: dict[str, dict[str, Edit]] = {
    "job": {
        "stopping": _set(
            {"kueue.x-k8s.io/stopping": "true", "kueue.x-k8s.io/prebuilt-workload-name": "x"}, "metadata", "annotations"
        ),
        "failed": lambda o: o.setdefault("status", {}).update(conditions=[_FAILED]),
        "complete-false": lambda o: o.setdefault("status", {}).update(
            conditions=[{"type": "Complete", "status": "False", "reason": "r", "message": "m"}]
        ),
    },
    "pod": {
        "pod-scheduled-first-of-two": lambda o: o["status"]["conditions"].append(
            {"type": "PodScheduled", "status": "False", "reason": "Other"}
        ),
    },
}


@dataclass(frozen=True)
class Variant:
    name: str
    obj: dict[str, Any]


def manager_variants(kind: str) -> Iterator[Variant]:
    edits = {**_COMMON_MANAGER, **_KIND_MANAGER.get(kind, {})}
    for path in example_files(kind, "manager"):
        base = read(path)
        for name, edit in edits.items():
            obj = copy.deepcopy(base)
            edit(obj)
            yield Variant(f"{path.stem}:{name}", obj)


def worker_variants(kind: str) -> Iterator[Variant]:
    edits: dict[str, Edit] = {
        "as-is": lambda o: None,
        "no-status": _drop("status"),
        "zero-status": _zero_status(kind),
        **_KIND_WORKER.get(kind, {}),
    }
    for path in example_files(kind, "worker"):
        base = read(path)
        for name, edit in edits.items():
            obj = copy.deepcopy(base)
            edit(obj)
            yield Variant(f"{path.stem}:{name}", obj)


__all__ = [
    "KINDS",
    "LONG_WORKLOAD",
    "NOW",
    "WORKLOAD",
    "Variant",
    "adapter",
    "context",
    "example_files",
    "manager_variants",
    "read",
    "worker_variants",
]
