"""Workload construction as Kueue v0.19.2 builds it: a behaviour table ported from Kueue's own
tests (each case names the Go test it follows)."""

from __future__ import annotations

from typing import Any

import pytest

from mkpolicy.engine.workload import (
    PriorityClasses,
    PriorityNotFound,
    WorkloadOptions,
    construct_workload,
    extract_priority,
    max_execution_time,
    sanitize_pod_sets,
    workload_name,
)

LONG = (
    "marketing-campaign-autumn-2024-region-north-america-department-digital-strategy-sub-department-social-media-"
    "engagement-tracker-and-analytics-dashboard-v2-final-revision-by-engineering-team-lead-senior-architect-"
    "validation-checked-approved-by-legal-and-ops-dept"
)


# pkg/controller/jobframework/workload_names_test.go TestGenerateWorkloadNameWithExtra, and
# reconciler_test.go TestReconcileGenericJob ("job-test-job-ce737").
@pytest.mark.parametrize(
    ("name", "uid", "extra", "short", "want"),
    [
        ("name", "uid", "", False, "job-name-ef3a1"),
        ("name", "uid", "1", False, "job-name-2514c"),
        ("test-job", "test-job", "", False, "job-test-job-ce737"),
        (
            LONG,
            "uid",
            "",
            False,
            ("job-" + LONG)[:247] + "-218b8",
        ),
        (LONG, "uid", "", True, "job-marketing-campaign-autumn-2024-region-north-america-d-218b8"),
    ],
)
def test_workload_name(name: str, uid: str, extra: str, short: bool, want: str) -> None:
    got = workload_name(name, uid, "Job", "batch", short=short, extra=extra)
    assert got == want
    assert len(got) <= (63 if short else 253)


def test_workload_name_depends_on_kind_group_and_uid() -> None:
    base = workload_name("a", "u", "BatchRun", "batch.example.com")
    assert base.startswith("batchrun-a-")
    assert (
        len(
            {
                base,
                workload_name("a", "v", "BatchRun", "batch.example.com"),
                workload_name("a", "u", "BatchRun", "other.example.com"),
            }
        )
        == 3
    )


# utils_test.go TestSanitizePodSets.
def test_sanitize_keeps_the_last_env_var_of_each_name() -> None:
    def container(name: str, *values: tuple[str, str]) -> dict[str, Any]:
        return {"name": name, "env": [{"name": n, "value": v} for n, v in values]}

    pod_sets: list[dict[str, Any]] = [
        {
            "name": "test",
            "count": 1,
            "template": {
                "spec": {
                    "containers": [container("c1", ("ENV1", "value1"), ("ENV1", "value2"), ("B", "x"))],
                    "initContainers": [container("init1", ("ENV2", "value3"), ("ENV2", "value4"))],
                }
            },
        }
    ]
    spec = sanitize_pod_sets(pod_sets)[0]["template"]["spec"]
    assert spec["containers"][0]["env"] == [{"name": "ENV1", "value": "value2"}, {"name": "B", "value": "x"}]
    assert spec["initContainers"][0]["env"] == [{"name": "ENV2", "value": "value4"}]
    assert pod_sets[0]["template"]["spec"]["containers"][0]["env"][0]["value"] == "value1"  # input kept
    assert sanitize_pod_sets([]) == []


POD_SET = {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}


def job(**labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "uid": "test-job",
            "labels": labels,
            "annotations": {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0", "other": "x"},
        },
    }


# reconciler_test.go TestReconcileGenericJob "handle job with no workload": baseWl.
def test_construct_workload_like_kueue() -> None:
    wl = construct_workload(job(**{"kueue.x-k8s.io/queue-name": "test-lq", "team": "a"}), [POD_SET], priority=(None, 0))
    assert wl == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-test-job-ce737",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/job-uid": "test-job"},
            "annotations": {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "0"},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "test-job",
                    "uid": "test-job",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"podSets": [POD_SET], "queueName": "test-lq", "priority": 0},
    }


def test_label_keys_to_copy_and_uid_that_is_no_label_value() -> None:
    obj = job(team="a", other="b")
    obj["metadata"]["uid"] = "x" * 64
    wl = construct_workload(
        obj, [POD_SET], priority=(None, 0), options=WorkloadOptions(label_keys_to_copy=frozenset({"team"}))
    )
    assert wl["metadata"]["labels"] == {"team": "a"}  # no job-uid: 64 characters is no label value


def test_min_count_is_kept_only_with_partial_admission() -> None:
    partial = {**POD_SET, "count": 4, "minCount": 2}
    assert construct_workload(job(), [partial], priority=(None, 0))["spec"]["podSets"][0]["minCount"] == 2
    off = WorkloadOptions(partial_admission=False)
    assert "minCount" not in construct_workload(job(), [partial], priority=(None, 0), options=off)["spec"]["podSets"][0]


# utils.go MaximumExecutionTimeSecondsForObject (job_controller_test.go "max exec time" cases).
@pytest.mark.parametrize(
    ("value", "want"), [("10", 10), ("0", None), ("-5", None), ("abc", None), ("2147483648", None), (None, None)]
)
def test_max_execution_time(value: str | None, want: int | None) -> None:
    labels = {} if value is None else {"kueue.x-k8s.io/max-exec-time-seconds": value}
    assert max_execution_time(labels) == want
    wl = construct_workload(job(**labels), [POD_SET], priority=(None, 0))
    assert wl["spec"].get("maximumExecutionTimeSeconds") == want


CLASSES = PriorityClasses(
    workload={"wpc-high": 1000},
    pod={
        "low": {"value": 10},
        "default-a": {"value": 50, "globalDefault": True},
        "default-b": {"value": 20, "globalDefault": True},
    },
)


def with_pc(name: str) -> dict[str, Any]:
    return {**POD_SET, "template": {"spec": {"priorityClassName": name, "containers": [{"name": "c"}]}}}


# reconciler.go ExtractPriority and pkg/util/priority/priority.go (workload_priority_test.go).
@pytest.mark.parametrize(
    ("labels", "pod_sets", "custom", "want"),
    [
        (
            {"kueue.x-k8s.io/priority-class": "wpc-high"},
            [with_pc("low")],
            "low",
            ({"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "wpc-high"}, 1000),
        ),
        (
            {},
            [with_pc("default-a")],
            "low",
            ({"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "low"}, 10),
        ),
        (
            {},
            [POD_SET, with_pc("low")],
            None,
            ({"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "low"}, 10),
        ),
        ({}, [POD_SET], None, ({"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "default-b"}, 20)),
    ],
)
def test_extract_priority(
    labels: dict[str, str], pod_sets: list[dict[str, Any]], custom: str | None, want: tuple[dict[str, str] | None, int]
) -> None:
    assert extract_priority(labels, pod_sets, custom, CLASSES) == want


def test_no_default_priority_class_is_priority_zero_without_a_ref() -> None:
    assert extract_priority({}, [POD_SET], None, PriorityClasses()) == (None, 0)


@pytest.mark.parametrize(
    ("labels", "custom", "message"),
    [
        ({"kueue.x-k8s.io/priority-class": "nope"}, None, 'workloadpriorityclasses.kueue.x-k8s.io "nope" not found'),
        ({}, "nope", 'priorityclasses.scheduling.k8s.io "nope" not found'),
    ],
)
def test_a_missing_priority_class_is_not_found(labels: dict[str, str], custom: str | None, message: str) -> None:
    with pytest.raises(PriorityNotFound, match=message):
        extract_priority(labels, [POD_SET], custom, CLASSES)
