"""The shipped Tekton and Argo policies on realistic objects: whole-object snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from syrupy.assertion import SnapshotAssertion

import mkpolicy

ROOT = Path(__file__).resolve().parents[2]
CTX = mkpolicy.Context(workload_name="pipelinerun-build-and-test-7c1f2", cluster="worker1")


def example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "examples" / name).read_text())
    return data


def adapter(name: str) -> mkpolicy.Adapter:
    (policy,) = mkpolicy.load(str(ROOT / "policies" / f"{name}.yaml"))
    return mkpolicy.compile(policy)


@pytest.mark.parametrize(
    ("policy", "manager", "worker"),
    [
        ("tekton-pipelinerun", "tekton/pipelinerun.yaml", "tekton/pipelinerun-worker.yaml"),
        ("argo-workflow", "argo/workflow.yaml", "argo/workflow-worker.yaml"),
    ],
    ids=["tekton", "argo"],
)
def test_create_and_sync(snapshot_json: SnapshotAssertion, policy: str, manager: str, worker: str) -> None:
    a = adapter(policy)
    assert a.create(example(manager), CTX) == snapshot_json(name="create")
    assert a.sync(example(manager), example(worker), CTX) == snapshot_json(name="sync")


def test_tekton_drops_what_must_not_travel() -> None:
    worker = adapter("tekton-pipelinerun").create(example("tekton/pipelinerun.yaml"), CTX)
    assert "status" not in worker["spec"], "a pending PipelineRun would never start on the worker"
    assert "kubectl.kubernetes.io/last-applied-configuration" not in worker["metadata"]["annotations"]
    assert worker["metadata"]["annotations"]["mkpolicy.io/origin-uid"] == "6f1c2a8e-3b7d-4c55-9e1a-2d4b8c7e9f01"


def test_tekton_keeps_a_non_pending_spec_status() -> None:
    manager = example("tekton/pipelinerun.yaml")
    manager["spec"]["status"] = "Cancelled"
    del manager["metadata"]["annotations"]
    worker = adapter("tekton-pipelinerun").create(manager, CTX)
    assert worker["spec"]["status"] == "Cancelled"
    assert worker["metadata"]["annotations"] == {
        "kueue.x-k8s.io/prebuilt-workload-name": CTX.workload_name,
        "mkpolicy.io/origin-uid": "6f1c2a8e-3b7d-4c55-9e1a-2d4b8c7e9f01",
    }


def test_tekton_status_leaves_the_resolved_pipeline_behind() -> None:
    patch = adapter("tekton-pipelinerun").sync(
        example("tekton/pipelinerun.yaml"), example("tekton/pipelinerun-worker.yaml"), CTX
    )
    assert patch is not None
    assert set(patch["status"]) == {"conditions", "startTime", "childReferences"}


def test_argo_worker_copy_loses_the_manager_only_instance_id_and_the_marker() -> None:
    a = adapter("argo-workflow")
    manager = example("argo/workflow.yaml")
    worker = a.create(manager, CTX)
    assert "managedBy" not in worker["spec"]
    assert worker["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "data-queue",
        "kueue.x-k8s.io/multikueue-origin": "multikueue",
    }
    del manager["spec"]["managedBy"]  # the label alone marks nothing: the admission policy mirrors it
    managed, reason = a.is_managed(manager)
    assert not managed and reason.startswith("Expecting .spec.managedBy")
