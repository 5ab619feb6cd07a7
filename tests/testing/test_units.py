"""The server's building blocks, without HTTP: routing, selectors, patches, schemas, storage."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.testing.apiserver.errors import ApiError
from mkpolicy.testing.apiserver.patch import strategic_merge_patch
from mkpolicy.testing.apiserver.resources import version_priority
from mkpolicy.testing.apiserver.routing import parse_request
from mkpolicy.testing.apiserver.schema import normalize
from mkpolicy.testing.apiserver.selectors import parse_field_selector, parse_label_selector
from mkpolicy.testing.apiserver.storage import Store


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces", "", ("list", "", "v1", "", "namespaces", "", "")),
        ("GET", "/api/v1/namespaces/ns1", "", ("get", "", "v1", "", "namespaces", "ns1", "")),
        ("PUT", "/api/v1/namespaces/ns1/status", "", ("update", "", "v1", "", "namespaces", "ns1", "status")),
        ("GET", "/api/v1/namespaces/ns1/configmaps", "watch=true",
         ("watch", "", "v1", "ns1", "configmaps", "", "")),
        ("GET", "/api/v1/watch/namespaces/ns1/configmaps", "", ("watch", "", "v1", "ns1", "configmaps", "", "")),
        ("POST", "/apis/batch/v1/namespaces/a/jobs", "", ("create", "batch", "v1", "a", "jobs", "", "")),
        ("PATCH", "/apis/tekton.dev/v1/namespaces/a/pipelineruns/p/status", "",
         ("patch", "tekton.dev", "v1", "a", "pipelineruns", "p", "status")),
        ("DELETE", "/api/v1/namespaces/a/configmaps", "", ("deletecollection", "", "v1", "a", "configmaps", "", "")),
        ("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads", "",
         ("list", "kueue.x-k8s.io", "v1beta2", "", "workloads", "", "")),
        # decoded before it is split, as kube-apiserver does: %2F separates segments
        ("GET", "/api/v1/namespaces/a/configmaps/with%2Fslash", "",
         ("get", "", "v1", "a", "configmaps", "with", "slash")),
        # any ?watch value but 0/false is a watch (apimachinery's Convert_Slice_string_To_bool)
        ("GET", "/api/v1/namespaces/a/configmaps", "watch", ("watch", "", "v1", "a", "configmaps", "", "")),
        ("GET", "/api/v1/namespaces/a/configmaps", "watch=yes", ("watch", "", "v1", "a", "configmaps", "", "")),
        ("GET", "/api/v1/namespaces/a/configmaps", "watch=FALSE", ("list", "", "v1", "a", "configmaps", "", "")),
        ("GET", "/api/v1/namespaces/a/configmaps", "watch=1;x=2", ("list", "", "v1", "a", "configmaps", "", "")),
    ],
)  # fmt: skip
def test_routing(method: str, path: str, query: str, expected: tuple[str, ...]) -> None:
    info = parse_request(method, path, query)
    assert (info.verb, info.group, info.version, info.namespace, info.resource, info.name, info.subresource) == expected


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [("GET", "/", 404), ("GET", "/apis/g/v/a/b/c/d", 404), ("PUT", "/api/v1/configmaps", 405), ("POST", "/api", 405)],
)
def test_routing_errors(method: str, path: str, code: int) -> None:
    with pytest.raises(ApiError) as exc:
        parse_request(method, path, "")
    assert exc.value.code == code


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("a in (b", "the end of the selector"),
        ("a in b", "'b'"),
        ("a=b c", "'c'"),
        ("=b", "'='"),
        ("a>b", "'b'"),
        ("bad key=v", "'key'"),
        ("k=bad value", "'value'"),
        ("k=" + "v" * 64, "must be no more than 63 characters"),
        ("Bad/Key=v", "prefix part"),
        ("a in ()", "none"),
    ],
)
def test_label_selector_errors(text: str, found: str) -> None:
    with pytest.raises(ApiError) as exc:
        parse_label_selector(text)
    assert exc.value.code == 400
    assert found in exc.value.message and "labelSelector" in exc.value.message


def test_label_selector_matches() -> None:
    sel = parse_label_selector("app in (a, b), !legacy, tier!=db, rank>2")
    assert sel.matches({"app": "a", "rank": "3"})
    assert not sel.matches({"app": "a", "rank": "3", "legacy": ""})
    assert not sel.matches({"app": "c", "rank": "3"})
    assert not sel.matches({"app": "a", "rank": "x"})
    assert not sel.matches({"app": "b", "tier": "db", "rank": "9"})
    assert parse_label_selector("").matches(None)


def test_field_selector_escapes_and_errors() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b", ["metadata.name"])
    assert sel.matches({"metadata": {"name": "a,b"}})
    with pytest.raises(ApiError, match=re.escape('"spec.x" is not a known field selector: only "metadata.name"')):
        parse_field_selector("spec.x=1", ["metadata.name"])
    with pytest.raises(ApiError, match="expected 'field=value'"):
        parse_field_selector("metadata.name", ["metadata.name"])


def test_merge_patch_rfc7386_examples() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    patch = {"a": "z", "c": {"f": None}, "l": [3], "n": {"x": None, "y": 1}}
    assert apply_merge_patch(target, patch) == {"a": "z", "c": {"d": "e"}, "l": [3], "n": {"y": 1}}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}  # untouched


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": ["b", "a"]}},
         {"metadata": {"finalizers": ["a", "b"]}}),
        ({"spec": {"tolerations": [{"key": "a"}]}}, {"spec": {"tolerations": [{"key": "b"}]}},
         {"spec": {"tolerations": [{"key": "b"}]}}),
        ({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}},
         {"status": {"conditions": [{"type": "A", "status": "True"}]}},
         {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]}}),
        ({"spec": {"containers": [{"name": "a", "image": "x"}]}},
         {"spec": {"containers": [{"name": "b", "image": "y"}, {"$patch": "replace"}]}},
         {"spec": {"containers": [{"name": "b", "image": "y"}]}}),
        ({"data": {"a": "1", "b": "2"}}, {"data": {"$patch": "replace", "c": "3"}}, {"data": {"c": "3"}}),
        ({"data": {"a": "1"}, "x": 1}, {"data": {"$patch": "delete"}}, {"x": 1}),
        ({"spec": {"args": ["a", "b", "c"]}}, {"spec": {"$deleteFromPrimitiveList/args": ["b"]}},
         {"spec": {"args": ["a", "c"]}}),
        ({"spec": {"a": 1, "b": 2}}, {"spec": {"$retainKeys": ["a"], "a": 3}}, {"spec": {"a": 3}}),
        ({"spec": {"env": [{"name": "A"}]}}, {"spec": {"$setElementOrder/env": [{"name": "A"}]}},
         {"spec": {"env": [{"name": "A"}]}}),
    ],
    ids=["finalizers-set", "atomic-list", "conditions-by-type", "list-replace", "map-replace", "map-delete",
         "delete-from-primitive-list", "retain-keys", "set-element-order"],
)  # fmt: skip
def test_strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]) -> None:
    assert strategic_merge_patch(target, patch) == expected


def test_strategic_merge_patch_needs_merge_keys() -> None:
    with pytest.raises(ApiError, match="merge key 'name'"):
        strategic_merge_patch({"spec": {"containers": []}}, {"spec": {"containers": [{"image": "x"}]}})


SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "nullable": True},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "properties": {"spec": {"type": "object"}}},
                "opts": {"type": "object", "default": {}, "properties": {"level": {"type": "integer", "default": 3}}},
                "gone": {"type": "string"},
            },
        },
    },
}  # fmt: skip


def test_schema_pruning_and_defaults() -> None:
    obj = {
        "apiVersion": "x/v1",
        "kind": "X",
        "metadata": {"name": "n", "bogus": 1},
        "spec": {
            "mode": None,
            "gone": None,
            "tags": [{"k": "a", "extra": 1}],
            "labels": {"a": "b"},
            "free": {"anything": {"goes": True}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1}, "spec": {},
                         "other": 1},
            "unknown": 1,
        },
        "top": 1,
    }  # fmt: skip
    unknown = normalize(obj, SCHEMA)
    assert sorted(unknown) == sorted(
        ["metadata.bogus", "spec.tags[0].extra", "spec.template.metadata.junk", "spec.template.other", "spec.unknown",
         "top"]
    )  # fmt: skip
    assert obj["spec"] == {
        "mode": None,  # nullable: kept
        "tags": [{"k": "a"}],
        "labels": {"a": "b"},
        "free": {"anything": {"goes": True}},
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
        "replicas": 1,
        "opts": {"level": 3},  # a defaulted object gets its own defaults
    }
    assert obj["metadata"] == {"name": "n"}


def test_storage_state_at_undoes_newer_events() -> None:
    store = Store(history_limit=10)
    key = ("", "cms")

    def obj(name: str, value: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "d", "uid": name}, "data": value}

    a = store.add(key, obj("a", "1"))
    then = store.rv
    a2 = store.replace(key, a, obj("a", "2"))
    store.add(key, obj("b", "1"))
    store.remove(key, a2)
    coll = store.collection(key)
    assert {k: s.obj["data"] for k, s in coll.state_at(then).items()} == {("d", "a"): "1"}
    assert list(coll.objects) == [("d", "b")]
    assert [e.type for e in coll.events_after(then)] == ["MODIFIED", "ADDED", "DELETED"]
    store.compact()
    with pytest.raises(ApiError) as exc:
        coll.state_at(then)
    assert exc.value.code == 410


def test_version_priority() -> None:
    names = ["v1alpha1", "v2", "foo", "v1beta2", "v1", "v10beta1", "v1beta1"]
    assert sorted(names, key=version_priority) == ["v2", "v1", "v10beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"]


def test_true_replacing_1_is_a_change_not_a_noop(apiserver_factory) -> None:
    from .conftest import simple_crd

    srv = apiserver_factory("eq", bundled=False, crds=[simple_crd()])
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}}
    first = srv.create({**body, "spec": {"flag": 1}})
    second = srv.patch("example.com/v1", "Widget", "w", {"spec": {"flag": True}}, namespace="default")
    assert second["spec"]["flag"] is True
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    third = srv.patch("example.com/v1", "Widget", "w", {"spec": {"flag": True}}, namespace="default")
    assert third["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]
