"""Custom resources validated against their CRD schema and its CEL rules, as kube-apiserver does.

Against the bundled Kueue Workload CRD (v1beta1): a type error, a rule on the spec, and the
transition rule MultiKueue depends on (``status.clusterName`` is immutable once set).
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Raw

pytestmark = pytest.mark.loopback_only(
    "the bundled Workload v1beta1 CRD; a real cluster's Kueue version and webhooks answer in their own words"
)

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads"


def workload(name: str, **spec: Any) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": pod}], "queueName": "q", **spec},
    }


def message(reply: Any) -> str:
    assert reply.status == 422, reply.data[:500]
    status = reply.json
    assert status["reason"] == "Invalid"
    return str(status["message"])


def test_types_and_rules_on_create(raw: Raw, namespace: str) -> None:
    path = WORKLOADS.format(ns=namespace)
    text = message(raw.request("POST", path, workload("typed", queueName=5)))
    assert 'spec.queueName: Invalid value: "integer": spec.queueName in body must be of type string' in text
    text = message(raw.request("POST", path, workload("ruled", priorityClassName="high")))
    assert 'spec: Invalid value: "object": priority should not be nil when priorityClassName is set' in text
    # the refused creates stored nothing
    for name in ("typed", "ruled"):
        reply = raw.request("GET", f"{path}/{name}")
        assert reply.status == 404, reply.data[:500]
        assert reply.json["reason"] == "NotFound"
    assert raw.request("POST", path, workload("fine", priorityClassName="high", priority=5)).status == 201
    assert raw.request("GET", f"{path}/fine").status == 200  # the same GET finds a stored workload


def test_transition_rule_on_a_status_update(raw: Raw, namespace: str) -> None:
    path = WORKLOADS.format(ns=namespace)
    assert raw.request("POST", path, workload("wl")).status == 201
    status = f"{path}/wl/status"
    merge = {"content_type": "application/merge-patch+json"}
    assert raw.request("PATCH", status, {"status": {"clusterName": "worker1"}}, **merge).status == 200
    text = message(raw.request("PATCH", status, {"status": {"clusterName": "worker2"}}, **merge))
    assert 'status: Invalid value: "object": clusterName is immutable once set' in text
    # the refused patch changed nothing
    reply = raw.request("GET", status)
    assert reply.status == 200, reply.data[:500]
    assert reply.json["status"]["clusterName"] == "worker1"
    # setting it again to the same value is no change
    assert raw.request("PATCH", status, {"status": {"clusterName": "worker1"}}, **merge).status == 200
