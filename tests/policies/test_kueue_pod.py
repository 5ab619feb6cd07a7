"""Pod: the manager keeps its PodScheduled=False/SchedulingGated condition while gated and
the worker Pod is not scheduled (pkg/controller/jobs/pod/pod_multikueue_adapter.go)."""

from __future__ import annotations

from typing import Any

import kueue_reference as ref
from kueue_cases import EXAMPLES, NOW, adapter, context, read

POD = EXAMPLES / "pod"


def _sync(manager: dict[str, Any], worker: dict[str, Any]) -> dict[str, Any] | None:
    patch = adapter("pod").sync(manager, worker, context())
    kueue = ref.sync(ref.KINDS["pod"], manager, worker, NOW)
    assert (patch is not None) is kueue.changed
    if patch is not None:
        assert ref.typed_status(ref.KINDS["pod"], ref.apply_merge_patch(manager, patch)) == kueue.status
    return patch


def test_unschedulable_worker_does_not_leak_to_the_gated_manager() -> None:
    manager, worker = read(POD / "manager.yaml"), read(POD / "worker-unschedulable.yaml")
    assert worker["status"]["conditions"][0]["reason"] == "Unschedulable"
    assert _sync(manager, worker) is None  # the worker's status with the manager's PodScheduled is the manager's


def test_scheduled_worker_replaces_the_gated_condition() -> None:
    manager, worker = read(POD / "manager.yaml"), read(POD / "worker.yaml")
    patch = _sync(manager, worker)
    assert patch is not None
    assert ref.apply_merge_patch(manager, patch)["status"] == worker["status"]


def test_ungated_manager_takes_the_workers_condition() -> None:
    manager, worker = read(POD / "manager.yaml"), read(POD / "worker-unschedulable.yaml")
    del manager["spec"]["schedulingGates"]
    patch = _sync(manager, worker)
    assert patch is not None
    assert ref.apply_merge_patch(manager, patch)["status"] == worker["status"]


def test_kept_condition_is_appended_when_the_worker_has_none() -> None:
    manager, worker = read(POD / "manager.yaml"), read(POD / "worker-unschedulable.yaml")
    worker["status"]["conditions"] = [{"type": "Initialized", "status": "True"}]
    patch = _sync(manager, worker)
    assert patch is not None
    assert patch["status"]["conditions"] == [
        {"type": "Initialized", "status": "True"},
        *manager["status"]["conditions"],
    ]


def test_only_the_first_of_two_pod_scheduled_conditions_is_replaced() -> None:
    manager, worker = read(POD / "manager.yaml"), read(POD / "worker-unschedulable.yaml")
    second = {"type": "PodScheduled", "status": "False", "reason": "Other"}
    worker["status"]["conditions"].append(second)
    patch = _sync(manager, worker)
    assert patch == {"status": {"conditions": [manager["status"]["conditions"][0], second]}}


def test_terminating_manager_gets_nothing() -> None:
    assert _sync(read(POD / "manager-terminating.yaml"), read(POD / "worker.yaml")) is None
