"""Content negotiation: PartialObjectMetadata (get, list, watch) and aggregated discovery.

What client-go sends: the metadata client's Accept (``k8s.io/client-go/metadata``, used by
Kueue's ownership check), and the discovery client's (``discovery_client.go``
``acceptDiscoveryFormats``, used by every controller-runtime client and kubectl), as the Kueue
model sends them (mkpolicy/testing/kueue/goclient.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mkpolicy.testing.apiserver import ApiServer
from mkpolicy.testing.apiserver.negotiate import parse_accept
from mkpolicy.testing.kueue.goclient import DISCOVERY_ACCEPT, METADATA_ACCEPT, METADATA_LIST_ACCEPT

from .conftest import Raw, pipelinerun

pytestmark = pytest.mark.loopback_only("asserts the loopback server's exact documents")


def _created(apiserver: ApiServer, name: str, **meta: Any) -> dict[str, Any]:
    obj = pipelinerun(name)
    obj["metadata"].update(meta)
    apiserver.create(obj)
    return apiserver.get("tekton.dev/v1", "PipelineRun", name, "default")


def test_partial_object_metadata_get(raw: Raw, apiserver: ApiServer) -> None:
    """The typed ObjectMeta in Go's field order, under meta.k8s.io/v1, and nothing else."""
    stored = _created(apiserver, "a", labels={"x": "1"}, annotations={"y": "2"}, finalizers=["f/g"])
    reply = raw.request(
        "GET", "/apis/tekton.dev/v1/namespaces/default/pipelineruns/a", headers={"Accept": METADATA_ACCEPT}
    )
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json"
    body = reply.json
    assert list(body) == ["kind", "apiVersion", "metadata"]
    assert body["kind"] == "PartialObjectMetadata" and body["apiVersion"] == "meta.k8s.io/v1"
    assert body["metadata"] == stored["metadata"]
    assert list(body["metadata"]) == [
        "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "labels", "annotations",
        "finalizers",
    ]  # fmt: skip
    # An unknown object is the same 404 as ever (Kueue reads it as "not found").
    missing = raw.request(
        "GET", "/apis/tekton.dev/v1/namespaces/default/pipelineruns/b", headers={"Accept": METADATA_ACCEPT}
    )
    assert missing.status == 404 and missing.json["reason"] == "NotFound"


def test_partial_object_metadata_list_and_watch(raw: Raw, apiserver: ApiServer) -> None:
    for name in ("a", "b"):
        _created(apiserver, name)
    path = "/apis/tekton.dev/v1/namespaces/default/pipelineruns"
    listed = raw.request("GET", path, headers={"Accept": METADATA_LIST_ACCEPT}).json
    assert listed["kind"] == "PartialObjectMetadataList" and listed["apiVersion"] == "meta.k8s.io/v1"
    assert listed["metadata"]["resourceVersion"] == str(apiserver.resource_version)
    assert [(i["kind"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("PartialObjectMetadata", "a"),
        ("PartialObjectMetadata", "b"),
    ]
    assert all(set(i) == {"kind", "apiVersion", "metadata"} for i in listed["items"])
    # A list asked "as=PartialObjectMetadata" (the object form) gets the next clause: the plain list.
    plain = raw.request("GET", path, headers={"Accept": METADATA_ACCEPT}).json
    assert plain["kind"] == "PipelineRunList" and "spec" in plain["items"][0]
    events = [
        json.loads(line)
        for line in raw.request("GET", f"{path}?watch=true&timeoutSeconds=1", headers={"Accept": METADATA_ACCEPT})
        .data.decode()
        .splitlines()
    ]
    assert [(e["type"], e["object"]["kind"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "PartialObjectMetadata", "a"),
        ("ADDED", "PartialObjectMetadata", "b"),
    ]


@pytest.mark.parametrize(
    ("accept", "status", "kind"),
    [
        ("application/json", 200, "PipelineRun"),
        ("*/*", 200, "PipelineRun"),
        ("application/json, */*", 200, "PipelineRun"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", 200, "PipelineRun"),
        ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1", 200, "PartialObjectMetadata"),
        ("application/json;q=0.5,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", 200,
         "PartialObjectMetadata"),
        ("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v7", 406, None),
        ("application/json;as=Widget;g=meta.k8s.io;v=v1", 406, None),
        ("application/vnd.kubernetes.protobuf", 406, None),
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", 406, None),
    ],
)  # fmt: skip
def test_accept_table(raw: Raw, apiserver: ApiServer, accept: str, status: int, kind: str | None) -> None:
    _created(apiserver, "a")
    reply = raw.request("GET", "/apis/tekton.dev/v1/namespaces/default/pipelineruns/a", headers={"Accept": accept})
    assert reply.status == status, reply.data
    if kind is not None:
        assert reply.json["kind"] == kind
    else:
        assert reply.json["reason"] == "NotAcceptable"


def test_parse_accept_orders_by_q_and_keeps_order() -> None:
    ranges = parse_accept("a/b;q=0.1, c/d, e/f;x=1, g/h;q=0")
    assert [(r.type, r.subtype, r.params) for r in ranges] == [
        ("c", "d", ()),
        ("e", "f", (("x", "1"),)),
        ("a", "b", ()),
    ]


def test_aggregated_discovery(raw: Raw, apiserver: ApiServer) -> None:
    """/api and /apis as apidiscovery.k8s.io/v2, with an ETag that a conditional GET honours."""
    core = raw.request("GET", "/api", headers={"Accept": DISCOVERY_ACCEPT})
    assert core.status == 200
    assert core.headers["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    doc = core.json
    assert doc["kind"] == "APIGroupDiscoveryList" and doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    assert [g["metadata"] for g in doc["items"]] == [{"creationTimestamp": None}]
    secrets = next(r for r in doc["items"][0]["versions"][0]["resources"] if r["resource"] == "secrets")
    assert secrets["responseKind"] == {"group": "", "version": "v1", "kind": "Secret"}
    assert secrets["scope"] == "Namespaced" and "watch" in secrets["verbs"]

    apis = raw.request("GET", "/apis", headers={"Accept": DISCOVERY_ACCEPT})
    groups = {g["metadata"]["name"]: g for g in apis.json["items"]}
    assert "tekton.dev" in groups and "kueue.x-k8s.io" in groups
    tekton = groups["tekton.dev"]["versions"][0]
    assert tekton["version"] == "v1" and tekton["freshness"] == "Current"
    runs = next(r for r in tekton["resources"] if r["resource"] == "pipelineruns")
    assert runs["subresources"] == [
        {"subresource": "status", "responseKind": {"group": "tekton.dev", "version": "v1", "kind": "PipelineRun"},
         "verbs": ["get", "patch", "update"]},
    ]  # fmt: skip
    again = raw.request("GET", "/apis", headers={"Accept": DISCOVERY_ACCEPT, "If-None-Match": apis.headers["ETag"]})
    assert again.status == 304 and again.data == b""

    # Without the aggregated media type: the unaggregated documents, as before.
    legacy = raw.request("GET", "/apis")
    assert legacy.json["kind"] == "APIGroupList"
    assert (
        raw.request("GET", "/apis/tekton.dev/v1", headers={"Accept": DISCOVERY_ACCEPT}).json["kind"]
        == "APIResourceList"
    )
