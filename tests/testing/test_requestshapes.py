"""The comparer of request shapes (mkpolicy.testing.requestshapes): it finds a changed request."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mkpolicy.testing.requestshapes import compare, phases, shape_of

NAMES = {"team-x": "{ns}", "pipelinerun-run-1a2b3": "{workload}", "run": "{job}"}
WLS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-x/workloads"
POST: dict[str, Any] = {
    "t": 2.0, "cluster": "worker1", "method": "POST", "path": WLS, "query": {},
    "accept": "application/json, */*", "contentType": "application/json",
    "body": {"metadata": {"name": "string", "labels": {"kueue.x-k8s.io/multikueue-origin": "string"}},
             "spec": {"podSets": [{"count": "number"}]}, "status": {}},
    "code": 201,
}  # fmt: skip
WATCH: dict[str, Any] = {
    "t": 1.0, "cluster": "worker1", "method": "GET", "path": "/apis/tekton.dev/v1/pipelineruns",
    "query": {"watch": ["true"], "resourceVersion": ["4711"], "labelSelector": ["o=team-x"]},
    "accept": "application/json", "contentType": None, "body": None, "code": None,
}  # fmt: skip
GET: dict[str, Any] = {
    "t": 3.0, "cluster": "worker1", "method": "GET", "path": f"{WLS}/pipelinerun-run-1a2b3", "query": {},
    "accept": "application/json, */*", "contentType": None, "body": None, "code": 404,
}  # fmt: skip
MARKS = [("connect", 0.0), ("dispatch", 1.5)]


def run(*entries: dict[str, Any]) -> dict[str, set[Any]]:
    return phases(entries, MARKS, NAMES)


def changed(entry: dict[str, Any], **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(entry)
    out.update(fields)
    return out


def test_shapes_hide_what_differs_per_run() -> None:
    shape = shape_of(WATCH, NAMES)
    assert shape.query == "labelSelector=o={ns}&resourceVersion={resourceVersion}&watch=true"
    assert shape.code == "stream" and shape.body == "null"
    assert shape_of(GET, NAMES).path == "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{workload}"
    # the same requests of another run (other names, another resourceVersion) have the same shapes
    other = {"team-y": "{ns}", "pipelinerun-run-9z8y7": "{workload}", "run": "{job}"}
    again = changed(GET, path=f"{WLS.replace('team-x', 'team-y')}/pipelinerun-run-9z8y7")
    assert shape_of(again, other) == shape_of(GET, NAMES)
    assert shape_of(changed(WATCH, query={**WATCH["query"], "resourceVersion": ["1"]}), NAMES) == shape
    # a request's phase is the last one started before it
    assert {p: len(s) for p, s in run(WATCH, POST, GET).items()} == {"connect": 1, "dispatch": 2}


def test_the_same_requests_compare_equal_in_any_order_and_number() -> None:
    assert compare(run(WATCH, POST, GET), run(GET, GET, changed(POST, t=2.5), WATCH)) == []


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # a request changed: its Accept
        (changed(GET, accept="application/json"), [
            "dispatch: only model: worker1 GET /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{workload} "
            "accept=application/json -> 404",
            "dispatch: only real: worker1 GET /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{workload} "
            "accept=application/json, */* -> 404",
        ]),
        # its status code
        (changed(GET, code=200), [
            "dispatch: only model: worker1 GET /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{workload} "
            "accept=application/json, */* -> 200",
            "dispatch: only real: worker1 GET /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{workload} "
            "accept=application/json, */* -> 404",
        ]),
        # its body: a key missing, a key added, a type changed
        (changed(POST, body={"metadata": {"name": "string", "labels": {"kueue.x-k8s.io/multikueue-origin": "string"},
                                          "creationTimestamp": "null"},
                             "spec": {"podSets": [{"count": "string"}]}}), [
            "dispatch: worker1 POST /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads: body: only real: status",
            "dispatch: worker1 POST /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads: body: "
            "only model: metadata.creationTimestamp",
            "dispatch: worker1 POST /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads: body: "
            'spec.podSets[].count: model "string" / real "number"',
        ]),
        # a watch's query
        (changed(WATCH, query={"watch": ["true"]}), [
            "connect: only model: worker1 GET /apis/tekton.dev/v1/pipelineruns?watch=true accept=application/json "
            "-> stream",
            "connect: only real: worker1 GET /apis/tekton.dev/v1/pipelineruns?labelSelector=o={ns}&"
            "resourceVersion={resourceVersion}&watch=true accept=application/json -> stream",
        ]),
        # in another phase
        (changed(GET, t=1.0), [
            "connect: only model: worker1 GET /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{workload} "
            "accept=application/json, */* -> 404",
            "dispatch: only real: worker1 GET /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{workload} "
            "accept=application/json, */* -> 404",
        ]),
    ],
    ids=["accept", "code", "body", "query", "phase"],
)  # fmt: skip
def test_a_changed_request_is_a_difference(model: dict[str, Any], expected: list[str]) -> None:
    """The model's run is the real one with one request changed: exactly that change is reported."""
    real = (WATCH, POST, GET)
    mine = [model if (e["method"], e["path"]) == (model["method"], model["path"]) else e for e in real]
    assert [d.line() for d in compare(run(*mine), run(*real))] == expected


def test_a_missing_request_is_a_difference() -> None:
    assert [d.line() for d in compare(run(WATCH, POST), run(WATCH, POST, GET))] == [
        "dispatch: only real: worker1 GET /apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{workload} "
        "accept=application/json, */* -> 404"
    ]
