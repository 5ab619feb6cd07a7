"""Discovery documents, the dynamic client, and CRDs registered over HTTP."""

from __future__ import annotations

import kubernetes
import pytest
from kubernetes.client import ApiException

from mkpolicy.testing.apiserver import ApiServer

from .conftest import Clients, Raw, simple_crd

pytestmark = pytest.mark.loopback_only(
    "the loopback server's own discovery documents; registers CRDs and cluster-scoped objects"
)


def test_core_and_group_documents(raw: Raw, apiserver: ApiServer) -> None:
    api = raw.request("GET", "/api").json
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    assert api["serverAddressByClientCIDRs"][0]["serverAddress"] == f"127.0.0.1:{apiserver.port}"
    core = raw.request("GET", "/api/v1").json
    by_name = {r["name"]: r for r in core["resources"]}
    assert set(by_name) == {"configmaps", "events", "namespaces", "namespaces/status", "secrets"}
    assert by_name["configmaps"]["shortNames"] == ["cm"] and by_name["configmaps"]["namespaced"] is True
    assert by_name["namespaces"]["namespaced"] is False
    assert by_name["namespaces/status"]["verbs"] == ["get", "patch", "update"]
    groups = {g["name"]: g for g in raw.request("GET", "/apis").json["groups"]}
    assert {"batch", "coordination.k8s.io", "apiextensions.k8s.io", "kueue.x-k8s.io", "tekton.dev"} <= set(groups)
    assert groups["kueue.x-k8s.io"]["preferredVersion"]["version"] == "v1beta2"
    assert [v["version"] for v in groups["tekton.dev"]["versions"]] == ["v1", "v1beta1"]
    kueue = raw.request("GET", "/apis/kueue.x-k8s.io").json
    assert kueue["kind"] == "APIGroup" and kueue["name"] == "kueue.x-k8s.io"
    resources = raw.request("GET", "/apis/kueue.x-k8s.io/v1beta2").json["resources"]
    names = {r["name"] for r in resources}
    assert {"workloads", "workloads/status", "multikueueclusters", "multikueueconfigs"} <= names
    version = raw.request("GET", "/version").json
    assert version["major"] == "1" and version["gitVersion"].startswith("v1.")


def test_typed_discovery_apis(k8s: Clients) -> None:
    groups = kubernetes.client.ApisApi(k8s.api).get_api_versions()
    assert any(g.name == "batch" for g in groups.groups)
    resources = kubernetes.client.BatchV1Api(k8s.api).get_api_resources()
    assert [r.name for r in resources.resources] == ["jobs", "jobs/status"]
    assert kubernetes.client.VersionApi(k8s.api).get_code().major == "1"


def test_dynamic_client_crud(k8s: Clients) -> None:
    dyn = k8s.dynamic()
    clusters = dyn.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="MultiKueueCluster")
    assert clusters.namespaced is False
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": "worker1"},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "worker1-secret"}}},
    }
    created = clusters.create(body=body)
    assert created.metadata.generation == 1
    assert created.spec.clusterSource.kubeConfig.location == "worker1-secret"
    status = clusters.status.patch(
        body={"status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": "ok",
                                         "lastTransitionTime": "2025-01-01T00:00:00Z"}]}},
        name="worker1", content_type="application/merge-patch+json",
    )  # fmt: skip
    assert status.status.conditions[0].type == "Active"
    assert [c.metadata.name for c in clusters.get().items] == ["worker1"]
    clusters.delete(name="worker1")
    assert clusters.get().items == []
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    cms.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, namespace="default")
    assert cms.get(name="c", namespace="default").metadata.name == "c"


def test_crd_created_over_http_is_served(k8s: Clients, raw: Raw) -> None:
    ext = kubernetes.client.ApiextensionsV1Api(k8s.api)
    created = ext.create_custom_resource_definition(simple_crd(scope="Cluster"))
    conditions = {c.type: c.status for c in created.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert created.status.accepted_names.list_kind == "WidgetList"
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    k8s.custom.create_cluster_custom_object("example.com", "v1", "widgets", body)
    assert k8s.custom.get_cluster_custom_object("example.com", "v1", "widgets", "w")["spec"] == {"size": 1}
    resources = raw.request("GET", "/apis/example.com/v1").json["resources"]
    assert [r["name"] for r in resources] == ["widgets", "widgets/status"]
    assert resources[0]["shortNames"] == ["wd"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c["metadata"].update(name="wrong.example.com"), "metadata.name"),
        (lambda c: c["spec"].update(scope="Galaxy"), "spec.scope"),
        (lambda c: c["spec"]["versions"][0].update(storage=False), "spec.versions"),
        (lambda c: c["spec"].update(group="nodots"), "spec.group"),
        (lambda c: c["spec"]["versions"][0].pop("schema"), "spec.versions[0].schema.openAPIV3Schema"),
        (lambda c: c["spec"].pop("names"), "spec.names.plural"),
        (lambda c: c["spec"].update(versions=[]), "spec.versions"),
        (lambda c: c.pop("spec"), "spec"),
    ],
    ids=["name", "scope", "no-storage", "group", "schema", "no-names", "no-versions", "no-spec"],
)
def test_invalid_crds_are_422(raw: Raw, change, field: str) -> None:
    crd = simple_crd()
    change(crd)
    reply = raw.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert reply.status == 422, reply.json
    assert reply.json["reason"] == "Invalid"
    assert field in [c["field"] for c in reply.json["details"]["causes"]]


def test_crd_cannot_shadow_a_builtin(k8s: Clients) -> None:
    crd = simple_crd(group="coordination.k8s.io", kind="Lease", plural="leases")
    with pytest.raises(ApiException) as exc:
        kubernetes.client.ApiextensionsV1Api(k8s.api).create_custom_resource_definition(crd)
    assert exc.value.status == 422
    assert "leases.coordination.k8s.io is a built-in resource of this server" in exc.value.body
