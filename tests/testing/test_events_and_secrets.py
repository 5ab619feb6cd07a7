"""Events (core/v1 and events.k8s.io/v1, one store) and watched Secrets.

What the sidecar records when it refuses a creation (Events on the manager's object), and
what Kueue watches to follow a MultiKueueCluster's kubeconfig (Secrets).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mkpolicy.testing.apiserver import ApiError, ApiServer

from .conftest import Clients, Raw

pytestmark = pytest.mark.loopback_only("asserts the loopback server's Event conversion and Status bodies")

REGARDING = {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "name": "run", "namespace": "default"}


def new_event(name: str, **extra: Any) -> dict[str, Any]:
    """An Event as client-go's events recorder (events.k8s.io/v1) writes it."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": "2026-11-21T10:00:00.000000Z",
        "reportingController": "mkpolicy.io/sidecar",
        "reportingInstance": "mkpolicy-sidecar-0",
        "action": "Create",
        "reason": "CreationRefused",
        "note": "policy tekton-pipelinerun refused the creation",
        "type": "Warning",
        "regarding": REGARDING,
        **extra,
    }


def test_one_event_two_apis(raw: Raw, apiserver: ApiServer, k8s: Clients) -> None:
    """An events.k8s.io/v1 Event is a core/v1 Event with other field names, and back."""
    created = raw.request("POST", "/apis/events.k8s.io/v1/namespaces/default/events", new_event("refused"))
    assert created.status == 201, created.data
    core = k8s.core.list_namespaced_event("default").items
    assert [(e.metadata.name, e.message, e.reporting_component, e.involved_object.kind) for e in core] == [
        ("refused", "policy tekton-pipelinerun refused the creation", "mkpolicy.io/sidecar", "PipelineRun")
    ]
    legacy = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "legacy", "namespace": "default"},
              "involvedObject": REGARDING, "reason": "Synced", "message": "status written", "type": "Normal",
              "source": {"component": "mkpolicy"}, "count": 1}  # fmt: skip
    assert raw.request("POST", "/api/v1/namespaces/default/events", legacy).status == 201
    listed = raw.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events").json
    assert listed["kind"] == "EventList" and listed["apiVersion"] == "events.k8s.io/v1"
    second = next(e for e in listed["items"] if e["metadata"]["name"] == "legacy")
    assert "apiVersion" not in second  # a built-in list: items are untyped
    assert second["note"] == "status written" and second["regarding"] == REGARDING
    assert second["deprecatedSource"] == {"component": "mkpolicy"} and second["deprecatedCount"] == 1
    by_field = raw.request(
        "GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Drun,type%3DWarning"
    )
    assert [e["metadata"]["name"] for e in by_field.json["items"]] == ["refused"]
    watched = raw.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events?watch=1&timeoutSeconds=1")
    assert [json.loads(line)["object"]["apiVersion"] for line in watched.data.decode().splitlines()] == [
        "events.k8s.io/v1", "events.k8s.io/v1",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("api_version", "change", "message"),
    [
        ("events.k8s.io/v1", {"eventTime": None}, "eventTime: Required value"),
        ("events.k8s.io/v1", {"type": "Bad"}, 'type: Invalid value: "": has invalid value: Bad'),
        ("events.k8s.io/v1", {"deprecatedCount": 2}, 'count: Invalid value: "": needs to be unset'),
        ("events.k8s.io/v1", {"reportingController": ""}, "reportingController: Required value"),
        ("events.k8s.io/v1", {"note": "x" * 1025}, 'message: Invalid value: "": can have at most 1024 characters'),
        ("events.k8s.io/v1", {"series": {"count": 1}}, 'series.count: Invalid value: "": should be at least 2'),
        ("v1", {"involvedObject": {**REGARDING, "namespace": "other"}},
         'involvedObject.namespace: Invalid value: "other": does not match event.namespace'),
    ],
)  # fmt: skip
def test_event_validation(apiserver: ApiServer, api_version: str, change: dict[str, Any], message: str) -> None:
    """kube-apiserver's Event checks (pkg/apis/core/validation/events.go)."""
    event = new_event("bad")
    if api_version == "v1":
        event = {"apiVersion": "v1", "kind": "Event", "metadata": event["metadata"], "reason": "R", "message": "m",
                 "involvedObject": REGARDING}  # fmt: skip
    event.update(change)
    with pytest.raises(ApiError) as err:
        apiserver.create(event)
    assert err.value.code == 422
    assert message in str(err.value)


def test_event_update_through_events_api_keeps_the_fields(apiserver: ApiServer) -> None:
    apiserver.create(new_event("e"))
    stored = apiserver.get("events.k8s.io/v1", "Event", "e", "default")
    series = {"count": 2, "lastObservedTime": "2026-11-21T10:01:00.000000Z"}
    updated = apiserver.update({**stored, "series": series})
    assert updated["series"] == series and updated["note"] == stored["note"]
    with pytest.raises(ApiError, match='message: Invalid value: "rewritten": field is immutable'):
        apiserver.update({**updated, "note": "rewritten"})


def test_secrets_can_be_watched(raw: Raw, apiserver: ApiServer) -> None:
    """A watch on Secrets sees a rotation (what Kueue's informer does for MultiKueueCluster Secrets)."""
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "worker1", "namespace": "default"},
              "data": {"kubeconfig": "YQ=="}}  # fmt: skip
    apiserver.create(secret)
    apiserver.patch("v1", "Secret", "worker1", {"data": {"kubeconfig": "Yg=="}}, namespace="default")
    lines = raw.request("GET", "/api/v1/namespaces/default/secrets?watch=1&timeoutSeconds=1").data.decode().splitlines()
    assert [(e["type"], e["object"]["data"]) for e in map(json.loads, lines)] == [("ADDED", {"kubeconfig": "Yg=="})]
    rv = apiserver.get("v1", "Secret", "worker1", "default")["metadata"]["resourceVersion"]
    apiserver.patch("v1", "Secret", "worker1", {"data": {"kubeconfig": "Yw=="}}, namespace="default")
    lines = (
        raw.request("GET", f"/api/v1/namespaces/default/secrets?watch=1&timeoutSeconds=1&resourceVersion={rv}")
        .data.decode()
        .splitlines()
    )
    assert [(e["type"], e["object"]["data"]) for e in map(json.loads, lines)] == [("MODIFIED", {"kubeconfig": "Yw=="})]
