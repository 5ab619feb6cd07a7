"""LIST: selectors, pagination with consistent snapshots, resource versions."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiException

from mkpolicy.testing.apiserver import ApiServer

from .conftest import Clients, Raw, simple_crd

pytestmark = pytest.mark.loopback_only(
    "lists ConfigMaps expecting only its own (a real namespace also holds kube-root-ca.crt), creates namespaces and CRDs, compacts"
)

LABELS = {
    "a": {"app": "web", "tier": "front", "env": "prod"},
    "b": {"app": "web", "tier": "back"},
    "c": {"app": "db", "tier": "back", "env": "dev"},
    "d": {"release": "7"},
    "e": {},
}


@pytest.fixture
def labelled(k8s: Clients) -> Clients:
    for name, labels in LABELS.items():
        k8s.core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": labels}})
    return k8s


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", "ab"),
        ("app==web", "ab"),
        ("app!=web", "cde"),
        ("app=web,tier=back", "b"),
        ("app in (web,db)", "abc"),
        ("app in (db)", "c"),
        ("tier notin (front)", "bcde"),
        ("env", "ac"),
        ("!env", "bde"),
        ("app,!env", "b"),
        ("release>5", "d"),
        ("release<5", ""),
        ("app in (web, db), tier notin (back)", "a"),
        ("", "abcde"),
    ],
)
def test_label_selectors(labelled: Clients, selector: str, expected: str) -> None:
    items = labelled.core.list_namespaced_config_map("default", label_selector=selector).items
    assert "".join(i.metadata.name for i in items) == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=b", "b"),
        ("metadata.name!=b", "acde"),
        ("metadata.name==c,metadata.namespace=default", "c"),
        ("metadata.namespace=other", ""),
    ],
)
def test_field_selectors(labelled: Clients, selector: str, expected: str) -> None:
    items = labelled.core.list_namespaced_config_map("default", field_selector=selector).items
    assert "".join(i.metadata.name for i in items) == expected


def test_crd_selectable_fields(apiserver: ApiServer, k8s: Clients) -> None:
    apiserver.register_crd(simple_crd(selectable=("spec.color",)))
    for name, color in (("x", "red"), ("y", "blue")):
        body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"color": color}}
        k8s.custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", body)
    found = k8s.custom.list_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", field_selector="spec.color=blue"
    )
    assert [i["metadata"]["name"] for i in found["items"]] == ["y"]


def test_list_across_namespaces_and_typed_items(k8s: Clients, raw: Raw) -> None:
    k8s.core.create_namespace({"metadata": {"name": "other"}})
    k8s.core.create_namespaced_config_map("other", {"metadata": {"name": "z"}})
    k8s.core.create_namespaced_config_map("default", {"metadata": {"name": "z"}})
    everywhere = k8s.core.list_config_map_for_all_namespaces()
    assert [(i.metadata.namespace, i.metadata.name) for i in everywhere.items] == [("default", "z"), ("other", "z")]
    body = raw.request("GET", "/api/v1/configmaps").json
    assert body["kind"] == "ConfigMapList" and body["apiVersion"] == "v1"
    assert "kind" not in body["items"][0]  # built-in list items carry no kind, as kube-apiserver writes them


def test_list_resource_version_is_the_latest(k8s: Clients, apiserver: ApiServer) -> None:
    k8s.core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    listed = k8s.core.list_namespaced_config_map("default")
    assert int(listed.metadata.resource_version) == apiserver.resource_version


def test_pagination_is_a_consistent_snapshot(k8s: Clients) -> None:
    for i in range(7):
        k8s.core.create_namespaced_config_map("default", {"metadata": {"name": f"cm{i}", "labels": {"n": str(i)}}})
    page = k8s.core.list_namespaced_config_map("default", limit=3)
    assert [i.metadata.name for i in page.items] == ["cm0", "cm1", "cm2"]
    assert page.metadata.remaining_item_count == 4
    # Changes after the first page do not show in the later pages.
    k8s.core.delete_namespaced_config_map("cm4", "default")
    k8s.core.create_namespaced_config_map("default", {"metadata": {"name": "cm3a"}})
    k8s.core.patch_namespaced_config_map("cm5", "default", {"data": {"changed": "yes"}})
    seen = [i.metadata.name for i in page.items]
    while page.metadata._continue:
        page = k8s.core.list_namespaced_config_map("default", limit=3, _continue=page.metadata._continue)
        seen.extend(i.metadata.name for i in page.items)
    assert seen == [f"cm{i}" for i in range(7)]
    fresh = [i.metadata.name for i in k8s.core.list_namespaced_config_map("default").items]
    assert fresh == ["cm0", "cm1", "cm2", "cm3", "cm3a", "cm5", "cm6"]


def test_pagination_with_selector_has_no_remaining_count(k8s: Clients) -> None:
    for i in range(5):
        k8s.core.create_namespaced_config_map(
            "default", {"metadata": {"name": f"cm{i}", "labels": {"even": str(i % 2 == 0)}}}
        )
    page = k8s.core.list_namespaced_config_map("default", limit=2, label_selector="even=True")
    assert [i.metadata.name for i in page.items] == ["cm0", "cm2"]
    assert page.metadata.remaining_item_count is None
    rest = k8s.core.list_namespaced_config_map("default", limit=2, label_selector="even=True",
                                                _continue=page.metadata._continue)  # fmt: skip
    assert [i.metadata.name for i in rest.items] == ["cm4"]


def test_continue_token_expires_after_compaction(k8s: Clients, apiserver: ApiServer) -> None:
    for i in range(4):
        k8s.core.create_namespaced_config_map("default", {"metadata": {"name": f"cm{i}"}})
    page = k8s.core.list_namespaced_config_map("default", limit=2)
    k8s.core.create_namespaced_config_map("default", {"metadata": {"name": "later"}})
    apiserver.compact()
    with pytest.raises(ApiException) as exc:
        k8s.core.list_namespaced_config_map("default", limit=2, _continue=page.metadata._continue)
    assert exc.value.status == 410 and '"reason":"Expired"' in exc.value.body


def test_exact_resource_version_lists_the_past(k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map("default", {"metadata": {"name": "a"}, "data": {"v": "1"}})
    then = k8s.core.list_namespaced_config_map("default").metadata.resource_version
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
    k8s.core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    past = k8s.core.list_namespaced_config_map("default", resource_version=then, resource_version_match="Exact")
    assert [(i.metadata.name, i.data) for i in past.items] == [("a", {"v": "1"})]
    assert past.metadata.resource_version == then
    now = k8s.core.list_namespaced_config_map("default", resource_version=then, resource_version_match="NotOlderThan")
    assert [i.metadata.name for i in now.items] == ["a", "b"]


def test_bad_list_parameters(raw: Raw) -> None:
    cases = {
        "?limit=-1": 400,
        "?labelSelector=a%20in%20(": 400,
        "?fieldSelector=spec.x%3Dy": 400,
        "?continue=garbage": 400,
        "?resourceVersionMatch=Exact": 422,
        "?resourceVersion=1&resourceVersionMatch=Sometimes": 422,
        "?resourceVersion=99999999": 504,
    }
    for query, code in cases.items():
        reply = raw.request("GET", "/api/v1/namespaces/default/configmaps" + query)
        assert reply.status == code, (query, reply.json)
        assert reply.json["kind"] == "Status" and reply.json["code"] == code
