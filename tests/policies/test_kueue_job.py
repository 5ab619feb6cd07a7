"""batch/v1 Job: the worker copy's cleanup and the status-deferral rule of Kueue's adapter
(pkg/controller/jobs/job/job_multikueue_adapter.go, determineStatusUpdate)."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import kueue_reference as ref
import pytest
from kueue_cases import EXAMPLES, NOW, adapter, context, read
from syrupy.assertion import SnapshotAssertion

import mkpolicy

JOB = EXAMPLES / "job"
STAMP = "2026-05-04T10:00:30Z"  # NOW, as metav1.Time serialises it

#: What Kueue's adapter writes on a deferred sync (job_multikueue_adapter.go).
SUSPENDED_BY_MULTIKUEUE = {
    "type": "Suspended",
    "status": "True",
    "reason": "MultiKueueAdapter",
    "message": "Set by MultiKueue adapter",
    "lastTransitionTime": STAMP,
    "lastProbeTime": STAMP,
}


def _sync(manager: dict[str, Any], worker: dict[str, Any]) -> dict[str, Any] | None:
    return adapter("job").sync(manager, worker, context())


def test_worker_copy_drops_selector_and_job_controller_labels() -> None:
    manager = read(JOB / "manager.yaml")
    worker = adapter("job").create(manager, context())
    assert "selector" not in worker["spec"]
    assert worker["spec"]["template"]["metadata"]["labels"] == {
        "app": "sample",
        "batch.kubernetes.io/job-name": "sample-job",  # kept: cleanLabels skips it
    }
    assert "managedBy" not in worker["spec"]
    assert worker["spec"]["suspend"] is True  # suspend is never changed


def test_deferred_while_manager_suspended_and_worker_running(snapshot: SnapshotAssertion) -> None:
    manager, worker = read(JOB / "manager.yaml"), read(JOB / "worker-running.yaml")
    assert manager["spec"]["suspend"] is True and worker["spec"]["suspend"] is False
    patch = _sync(manager, worker)
    # no status copy (no startTime, no active...): only the Suspended condition
    assert patch == {"status": {"conditions": [SUSPENDED_BY_MULTIKUEUE]}}
    after = ref.apply_merge_patch(manager, patch)
    assert after == snapshot
    # the next sync finds Suspended=True and writes nothing
    assert _sync(after, worker) is None


def test_deferred_sync_replaces_a_false_suspended_condition_in_place() -> None:
    manager = read(JOB / "manager.yaml")
    other = {"type": "FailureTarget", "status": "False", "reason": "r", "message": "m"}
    manager["status"] = {"active": 0, "conditions": [{**SUSPENDED_BY_MULTIKUEUE, "status": "False"}, other]}
    patch = _sync(manager, read(JOB / "worker-running.yaml"))
    assert patch == {"status": {"conditions": [SUSPENDED_BY_MULTIKUEUE, other]}}


def test_deferred_sync_appends_the_condition_to_existing_ones() -> None:
    manager = read(JOB / "manager.yaml")
    other = {"type": "FailureTarget", "status": "False", "reason": "r", "message": "m"}
    manager["status"] = {"conditions": [other]}
    patch = _sync(manager, read(JOB / "worker-running.yaml"))
    assert patch == {"status": {"conditions": [other, SUSPENDED_BY_MULTIKUEUE]}}


def test_deferred_sync_creates_the_status_when_the_manager_has_none() -> None:
    manager = read(JOB / "manager.yaml")
    del manager["status"]
    patch = _sync(manager, read(JOB / "worker-running.yaml"))
    assert patch == {"status": {"conditions": [SUSPENDED_BY_MULTIKUEUE]}}


def test_deferred_condition_uses_the_wall_clock_without_a_context_time() -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    patch = adapter("job").sync(
        read(JOB / "manager.yaml"), read(JOB / "worker-running.yaml"), mkpolicy.Context(workload_name="wl")
    )
    assert patch is not None
    (condition,) = patch["status"]["conditions"]
    stamp = dt.datetime.fromisoformat(condition["lastTransitionTime"])
    assert before <= stamp <= dt.datetime.now(dt.UTC)
    assert condition["lastProbeTime"] == condition["lastTransitionTime"]
    assert condition["lastTransitionTime"].endswith("Z") and "." not in condition["lastTransitionTime"]


@pytest.mark.parametrize(
    ("manager_edit", "worker_file", "why"),
    [
        (lambda m: m["spec"].update(suspend=False), "worker-running.yaml", "manager unsuspended"),
        (lambda m: None, "worker-suspended.yaml", "both suspended (eviction on the worker)"),
        (lambda m: None, "worker-complete.yaml", "worker finished"),
        (
            lambda m: m["metadata"]["annotations"].update({"kueue.x-k8s.io/stopping": "true"}),
            "worker-running.yaml",
            "manager suspended but being stopped: not 'suspended' for Kueue",
        ),
    ],
    ids=["manager-unsuspended", "both-suspended", "worker-finished", "manager-stopping"],
)
def test_status_is_copied_when_not_deferred(manager_edit: Any, worker_file: str, why: str) -> None:
    manager = read(JOB / "manager.yaml")
    manager_edit(manager)
    worker = read(JOB / worker_file)
    patch = _sync(manager, worker)
    assert patch is not None, why
    assert ref.apply_merge_patch(manager, patch)["status"] == worker["status"], why


def test_failed_worker_is_finished_too() -> None:
    worker = read(JOB / "worker-running.yaml")
    worker["status"]["conditions"] = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
    patch = _sync(read(JOB / "manager.yaml"), worker)
    assert patch is not None
    assert patch["status"]["conditions"] == worker["status"]["conditions"]
    assert patch["status"]["active"] == 2


def test_unsuspended_manager_gets_the_status_once() -> None:
    manager, worker = read(JOB / "manager-running.yaml"), read(JOB / "worker-running.yaml")
    patch = _sync(manager, worker)
    assert patch is not None
    after = ref.apply_merge_patch(manager, patch)
    assert after["status"] == worker["status"]
    assert _sync(after, worker) is None


def test_worker_without_status_resets_the_manager_status() -> None:
    # Kueue's typed client reads a missing status as the zero JobStatus ({}) and writes it
    manager, worker = read(JOB / "manager-running.yaml"), read(JOB / "worker-running.yaml")
    del worker["status"]
    patch = _sync(manager, worker)
    assert patch == {"status": {"conditions": None}}
    assert ref.apply_merge_patch(manager, patch)["status"] == {}


def test_only_the_first_of_two_suspended_conditions_is_replaced() -> None:
    # setJobStatusCondition replaces the first condition of the type (never two in practice)
    manager = read(JOB / "manager.yaml")
    false = {**SUSPENDED_BY_MULTIKUEUE, "status": "False", "reason": "A"}
    manager["status"] = {"conditions": [false, {**false, "reason": "B"}]}
    worker = read(JOB / "worker-running.yaml")
    patch = _sync(manager, worker)
    assert patch == {"status": {"conditions": [SUSPENDED_BY_MULTIKUEUE, {**false, "reason": "B"}]}}
    kueue = ref.sync(ref.KINDS["job"], manager, worker, NOW)
    assert kueue.status == patch["status"]


def test_inputs_are_not_modified() -> None:
    manager, worker = read(JOB / "manager.yaml"), read(JOB / "worker-running.yaml")
    before = copy.deepcopy((manager, worker))
    _sync(manager, worker)
    adapter("job").create(manager, context())
    assert (manager, worker) == before
