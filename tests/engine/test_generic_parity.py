"""A policy without patches behaves byte for byte like Kueue's generic adapter (docs/architecture.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import mkpolicy
from mkpolicy.policy import loads

PLAIN = loads(
    """
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: plain}
spec: {framework: PipelineRun.v1.tekton.dev}
""",
    "plain.yaml",
)[0]
ADAPTER = mkpolicy.compile(PLAIN)
MANAGED = "kueue.x-k8s.io/multikueue"
ORIGIN = "kueue.x-k8s.io/multikueue-origin"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
LONG_NAME = "w" * 64


def manager(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": "pr", "namespace": "ns", **meta},
        "spec": {"managedBy": MANAGED, "pipelineRef": {"name": "p"}},
    }


def canonical(obj: Any) -> bytes:
    """What Kubernetes' JSON encoding of an unstructured object gives: sorted keys, compact."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


FULL_META = {
    "uid": "u-1",
    "resourceVersion": "42",
    "generation": 3,
    "creationTimestamp": "2026-11-21T00:00:00Z",
    "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "o-1"}],
    "finalizers": ["f"],
    "managedFields": [{"manager": "kubectl"}],
    "generateName": "pr-",
    "labels": {"team": "a"},
    "annotations": {"note": "n"},
}

CREATE_CASES = [
    pytest.param(
        manager(),
        "annotation",
        "wl-1",
        {"labels": {ORIGIN: "multikueue"}, "annotations": {PREBUILT: "wl-1"}},
        id="no-labels-annotation-mode",
    ),
    pytest.param(
        manager(labels={"team": "a"}),
        "annotation",
        "wl-1",
        {"labels": {"team": "a", ORIGIN: "multikueue"}, "annotations": {PREBUILT: "wl-1"}},
        id="existing-labels-kept",
    ),
    pytest.param(
        manager(labels={"team": "a"}),
        "label",
        "wl-1",
        {"labels": {"team": "a", ORIGIN: "multikueue", PREBUILT: "wl-1"}},
        id="label-mode",
    ),
    pytest.param(
        manager(),
        "label",
        LONG_NAME,
        {"labels": {ORIGIN: "multikueue"}, "annotations": {PREBUILT: LONG_NAME}},
        id="label-mode-long-name-uses-annotation",
    ),
    pytest.param(
        manager(**FULL_META),
        "annotation",
        "wl-1",
        {"labels": {"team": "a", ORIGIN: "multikueue"}, "annotations": {"note": "n", PREBUILT: "wl-1"}},
        id="server-fields-dropped",
    ),
]


@pytest.mark.parametrize(("obj", "identifier", "workload", "expected_meta"), CREATE_CASES)
def test_create_matches_the_generic_adapter(
    obj: dict[str, Any], identifier: str, workload: str, expected_meta: dict[str, Any]
) -> None:
    obj["status"] = {"conditions": [{"type": "Succeeded", "status": "Unknown"}]}
    ctx = mkpolicy.Context(workload_name=workload, origin="multikueue", identifier=identifier)  # type: ignore[arg-type]
    worker = ADAPTER.create(obj, ctx)
    expected = {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": "pr", "namespace": "ns", **expected_meta},
        "spec": {"pipelineRef": {"name": "p"}},
    }
    assert canonical(worker) == canonical(expected)
    assert obj["spec"]["managedBy"] == MANAGED, "the manager's object is not modified"


SYNC_CASES = [
    pytest.param({"phase": "Running"}, {"phase": "Running"}, None, id="unchanged-is-no-op"),
    pytest.param(None, None, None, id="worker-without-status"),
    pytest.param({"phase": "Running"}, None, None, id="worker-without-status-keeps-manager"),
    pytest.param(None, {"phase": "Running"}, {"status": {"phase": "Running"}}, id="first-status"),
    pytest.param(
        {"phase": "Running", "start": "t0"},
        {"phase": "Done", "end": "t1"},
        {"status": {"phase": "Done", "start": None, "end": "t1"}},
        id="merge-patch-diff",
    ),
    pytest.param(
        {"conditions": [{"type": "A"}]},
        {"conditions": [{"type": "A"}, {"type": "B"}]},
        {"status": {"conditions": [{"type": "A"}, {"type": "B"}]}},
        id="lists-sent-whole",
    ),
    pytest.param(
        {"nested": {"a": 1, "b": 2}}, {"nested": {"a": 1}}, {"status": {"nested": {"b": None}}}, id="nested-removal"
    ),
]


@pytest.mark.parametrize(("manager_status", "worker_status", "expected"), SYNC_CASES)
def test_sync_matches_the_generic_adapter(
    manager_status: dict[str, Any] | None, worker_status: dict[str, Any] | None, expected: dict[str, Any] | None
) -> None:
    mgr = manager(uid="u-1")
    if manager_status is not None:
        mgr["status"] = manager_status
    worker = ADAPTER.create(mgr, mkpolicy.Context(workload_name="wl"))
    if worker_status is not None:
        worker["status"] = worker_status
    patch = ADAPTER.sync(mgr, worker, mkpolicy.Context(workload_name="wl"))
    assert patch == expected
    if patch is not None:
        assert canonical(patch) == canonical(expected)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"pipelineRef": {"name": "p"}}, 'Expecting .spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""'),
        (
            {"managedBy": "someone-else"},
            'Expecting .spec.managedBy to be "kueue.x-k8s.io/multikueue" not "someone-else"',
        ),
        ({"managedBy": 3}, "expected .spec.managedBy to be a string; found int 3"),
    ],
)
def test_not_managed(spec: dict[str, Any], reason: str) -> None:
    obj = manager()
    obj["spec"] = spec
    assert ADAPTER.is_managed(obj) == (False, reason)
    with pytest.raises(mkpolicy.NotManagedError) as info:
        ADAPTER.create(obj, mkpolicy.Context(workload_name="wl"))
    assert info.value.reason == reason
    with pytest.raises(mkpolicy.NotManagedError):
        ADAPTER.sync(obj, obj, mkpolicy.Context(workload_name="wl"))


def test_wrong_kind_is_not_managed() -> None:
    obj = manager()
    obj["kind"] = "TaskRun"
    managed, reason = ADAPTER.is_managed(obj)
    assert not managed and "the policy is for PipelineRun.v1.tekton.dev" in reason
