"""TrainJob: the worker copy drops Kueue's own runtimePatches entries
(pkg/controller/jobs/trainjob/trainjob_multikueue_adapter.go), and the omitzero status."""

from __future__ import annotations

import copy
from typing import Any

import kueue_reference as ref
import pytest
from kueue_cases import EXAMPLES, WORKLOAD, adapter, context, read
from syrupy.assertion import SnapshotAssertion

TRAINJOB = EXAMPLES / "trainjob"
KUEUE = "kueue.x-k8s.io/manager"


def _patch(manager: str, time: str = "2026-05-04T18:00:00Z") -> dict[str, Any]:
    return {"manager": manager, "time": time, "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"m": "x"}}}}}


def _create(runtime_patches: Any) -> dict[str, Any]:
    manager = read(TRAINJOB / "manager.yaml")
    if runtime_patches is None:
        del manager["spec"]["runtimePatches"]
    else:
        manager["spec"]["runtimePatches"] = runtime_patches
    worker = adapter("trainjob").create(manager, context())
    expected = ref.create(ref.KINDS["trainjob"], manager, WORKLOAD, "multikueue", annotations_gate=True)
    assert worker == expected
    return worker


def test_example_keeps_the_users_patch_only(snapshot: SnapshotAssertion) -> None:
    manager = read(TRAINJOB / "manager.yaml")
    assert [p["manager"] for p in manager["spec"]["runtimePatches"]] == ["team.example.com/annotator", KUEUE]
    worker = adapter("trainjob").create(manager, context())
    assert worker["spec"]["runtimePatches"] == manager["spec"]["runtimePatches"][:1]
    assert worker == snapshot


@pytest.mark.parametrize(
    ("runtime_patches", "expected"),
    [
        ([_patch(KUEUE)], None),
        ([_patch(KUEUE), _patch(KUEUE, "2026-05-04T18:01:00Z")], None),
        ([_patch("a"), _patch(KUEUE), _patch("b")], [_patch("a"), _patch("b")]),
        ([_patch("b"), _patch("a")], [_patch("b"), _patch("a")]),
        ([], None),
        (None, None),
        ([{"time": "2026-05-04T18:00:00Z"}, _patch(KUEUE)], [{"time": "2026-05-04T18:00:00Z"}]),
        ([_patch("kueue.x-k8s.io/manager-2"), _patch(KUEUE.upper())], "unchanged"),
    ],
    ids=[
        "only-kueue-dropped-list-omitted",
        "two-kueue-entries-dropped",
        "kueue-entry-in-the-middle",
        "no-kueue-entry-order-kept",
        "empty-list-omitted",
        "absent-stays-absent",
        "entry-without-manager-kept",
        "similar-managers-kept",
    ],
)
def test_runtime_patches(runtime_patches: Any, expected: Any) -> None:
    worker = _create(copy.deepcopy(runtime_patches))
    if expected == "unchanged":
        expected = runtime_patches
    assert worker["spec"].get("runtimePatches") == expected


def test_worker_without_status_removes_the_managers_status() -> None:
    # TrainJob.status is tagged omitzero: the zero status is not serialised, so Kueue's
    # merge patch deletes the manager's status.
    manager, worker = read(TRAINJOB / "manager.yaml"), read(TRAINJOB / "worker.yaml")
    manager["status"] = copy.deepcopy(worker["status"])
    del worker["status"]
    assert adapter("trainjob").sync(manager, worker, context()) == {"status": None}
    del manager["status"]
    assert adapter("trainjob").sync(manager, worker, context()) is None
