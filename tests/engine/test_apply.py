"""ApplyConfiguration: server-side-apply merges as MutatingAdmissionPolicy performs them."""

from __future__ import annotations

from typing import Any

import pytest

import mkpolicy
from mkpolicy.engine.apply import apply_configuration, merge_schema
from mkpolicy.errors import CelError, PatchError
from mkpolicy.structural import Schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer"},
                "selector": {
                    "type": "object",
                    "x-kubernetes-map-type": "atomic",
                    "properties": {"app": {"type": "string"}},
                },
                "env": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                    },
                },
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "limits": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
    },
}

OBJ: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "Thing",
    "metadata": {"name": "t", "labels": {"a": "1"}, "finalizers": ["f1"]},
    "spec": {
        "replicas": 1,
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "tags": ["x"],
        "args": ["--v"],
        "limits": {"cpu": "1"},
    },
}


def apply(expression: str, schema: dict[str, Any] | None = SCHEMA) -> dict[str, Any]:
    return mkpolicy.mutate(OBJ, [{"patchType": "ApplyConfiguration", "expression": expression}], schema=schema)


@pytest.mark.parametrize(
    ("expression", "expected_spec"),
    [
        pytest.param("Object{spec: Object.spec{replicas: 3}}", {**OBJ["spec"], "replicas": 3}, id="scalar"),
        pytest.param(
            "Object{spec: Object.spec{limits: {'memory': '1Gi'}}}",
            {**OBJ["spec"], "limits": {"cpu": "1", "memory": "1Gi"}},
            id="map-merges-key-by-key",
        ),
        pytest.param(
            "Object{spec: Object.spec{env: [Object.spec.env{name: 'B', value: 'two'}, "
            "Object.spec.env{name: 'C', value: '3'}]}}",
            {
                **OBJ["spec"],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
            },
            id="map-list-merges-by-key-keeping-order",
        ),
        pytest.param(
            "Object{spec: Object.spec{tags: ['y', 'x']}}", {**OBJ["spec"], "tags": ["y", "x"]}, id="set-list-union"
        ),
        pytest.param(
            "Object{spec: Object.spec{?replicas: optional.none()}}", OBJ["spec"], id="optional-none-leaves-alone"
        ),
        pytest.param(
            "Object{spec: Object.spec{?replicas: optional.of(7)}}",
            {**OBJ["spec"], "replicas": 7},
            id="optional-of-sets",
        ),
        pytest.param(
            "Object{spec: Object.spec{extra: {'k': {'deep': 1}}}}",
            {**OBJ["spec"], "extra": {"k": {"deep": 1}}},
            id="preserve-unknown-map",
        ),
        pytest.param(
            "Object{spec: Object.spec{replicas: null}}",
            {k: v for k, v in OBJ["spec"].items() if k != "replicas"},
            id="null-removes",
        ),
    ],
)
def test_merge(expression: str, expected_spec: dict[str, Any]) -> None:
    out = apply(expression)
    assert out["spec"] == expected_spec
    assert out["metadata"] == OBJ["metadata"] and OBJ["spec"]["env"][1]["value"] == "2"


def test_metadata_is_object_meta_whatever_the_schema_says() -> None:
    out = apply("Object{metadata: Object.metadata{labels: {'b': '2'}, finalizers: ['f2']}}")
    assert out["metadata"] == {"name": "t", "labels": {"a": "1", "b": "2"}, "finalizers": ["f1", "f2"]}


@pytest.mark.parametrize(
    ("expression", "schema", "message"),
    [
        pytest.param(
            "Object{spec: Object.spec{args: ['--x']}}", SCHEMA, ".spec.args is an atomic list", id="atomic-list"
        ),
        pytest.param(
            "Object{spec: Object.spec{selector: Object.spec.selector{app: 'x'}}}",
            SCHEMA,
            ".spec.selector is an atomic map or struct",
            id="atomic-struct",
        ),
        pytest.param(
            "Object{spec: Object.spec{extra: {'l': [1]}}}",
            SCHEMA,
            ".spec.extra.l is an atomic list",
            id="deduced-list-is-atomic",
        ),
        pytest.param(
            "Object{spec: Object.spec{tags: ['y']}}",
            None,
            ".spec.tags is an atomic list",
            id="no-schema-lists-are-atomic",
        ),
        pytest.param(
            "Object{spec: Object.spec{bogus: 1}}",
            SCHEMA,
            ".spec.bogus: field not declared in schema",
            id="undeclared-field",
        ),
        pytest.param(
            "Object{spec: Object.spec{env: [Object.spec.env{name: 'A'}, Object.spec.env{name: 'A'}]}}",
            SCHEMA,
            ".spec.env: element 1: duplicate entries for key {name='A'}",
            id="duplicate-map-key",
        ),
        pytest.param(
            "Object{spec: Object.metadata{replicas: 1}}",
            SCHEMA,
            "type mismatch: Object.metadata{...} is set where Object.spec{...} belongs",
            id="type-names",
        ),
    ],
)
def test_rejected_configurations(expression: str, schema: dict[str, Any] | None, message: str) -> None:
    with pytest.raises(PatchError) as info:
        apply(expression, schema)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("expression", "found"),
    [
        ("{'spec': {'replicas': 1}}", "found a map literal (write Object{...} instead of {...})"),
        ("object", "found the variable 'object' (not an Object{...})"),
        ("JSONPatch{op: 'add', path: '/x'}", "found a JSONPatch{...} value"),
    ],
)
def test_a_non_object_expression_is_a_compile_error(expression: str, found: str) -> None:
    with pytest.raises(CelError) as info:
        apply(expression)
    assert "an ApplyConfiguration expression must evaluate to an Object{...} value; " + found in str(info.value)
    assert info.value.location.line == 1  # positioned in the expression


# Associative lists merge as structured-merge-diff v6 merges them (typed/merge.go,
# mergingWalker.visitListItems; these rows are cases of its typed/merge_test.go): live items
# keep their place, applied items that are live take the applied order, and live items that
# repeat a key collapse into the applied item at the first one's place.
_LISTS = Schema(
    {
        "type": "object",
        "properties": {
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "list": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["key", "id"],
                "items": {
                    "type": "object",
                    "properties": {"key": {"type": "string"}, "id": {"type": "integer"}, "nv": {"type": "integer"}},
                },
            },
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
                "items": {
                    "type": "object",
                    "properties": {
                        "port": {"type": "integer"},
                        "name": {"type": "string"},
                        "protocol": {"type": "string", "default": "TCP"},
                    },
                },
            },
        },
    },
    root=True,
)


@pytest.mark.parametrize(
    ("live", "applied", "merged"),
    [
        ({"set": ["a", "b"]}, {"set": ["b", "a"]}, {"set": ["b", "a"]}),
        (
            {"set": ["a", "b", "c", "g", "f"]},
            {"set": ["c", "d", "e", "f"]},
            {"set": ["a", "b", "c", "g", "d", "e", "f"]},
        ),
        ({"set": ["a", "b", "c", "d"]}, {"set": ["d", "e", "f", "a"]}, {"set": ["b", "c", "d", "e", "f", "a"]}),
        ({"set": ["a", "b", "b"]}, {"set": ["b"]}, {"set": ["a", "b"]}),
        ({"set": ["a", "b", "b"]}, {"set": ["a"]}, {"set": ["a", "b", "b"]}),
        ({"set": ["a", "a", "b", "b"]}, {"set": ["b", "c", "d"]}, {"set": ["a", "a", "b", "c", "d"]}),
        (
            {"list": [{"key": "a", "id": 1}, {"key": "b", "id": 2}, {"key": "c", "id": 3}]},
            {"list": [{"key": "c", "id": 3}, {"key": "a", "id": 1}]},
            {"list": [{"key": "b", "id": 2}, {"key": "c", "id": 3}, {"key": "a", "id": 1}]},
        ),
        # Live duplicates of a key: collapsed into the applied item (not merged with either).
        (
            {"list": [{"key": "a", "id": 1, "nv": 1}, {"key": "b", "id": 2}, {"key": "a", "id": 1, "nv": 2}]},
            {"list": [{"key": "a", "id": 1}]},
            {"list": [{"key": "a", "id": 1}, {"key": "b", "id": 2}]},
        ),
        (
            {"list": [{"key": "a", "id": 1, "nv": 1}, {"key": "a", "id": 1, "nv": 2}]},
            {"list": []},
            {"list": [{"key": "a", "id": 1, "nv": 1}, {"key": "a", "id": 1, "nv": 2}]},
        ),
        # A key field left out takes its schema default (protocol: TCP); one without a
        # default is left out of the key, which then names another item.
        (
            {"ports": [{"port": 80, "protocol": "TCP"}]},
            {"ports": [{"port": 80, "name": "http"}]},
            {"ports": [{"port": 80, "name": "http", "protocol": "TCP"}]},
        ),
        (
            {"list": [{"key": "a", "id": 1}]},
            {"list": [{"key": "a", "nv": 5}]},
            {"list": [{"key": "a", "id": 1}, {"key": "a", "nv": 5}]},
        ),
    ],
)
def test_associative_lists_merge_as_structured_merge_diff(
    live: dict[str, Any], applied: dict[str, Any], merged: dict[str, Any]
) -> None:
    assert apply_configuration(live, applied, _LISTS) == merged


@pytest.mark.parametrize(
    ("applied", "message"),
    [
        ({"list": [{"nv": 1}]}, "element 0: associative list with keys has an element that omits all key fields"),
        ({"list": [{"key": "a", "id": 1}, {"key": "a", "id": 1}]}, "element 1: duplicate entries for key"),
        ({"set": [None]}, "associative list without keys has an element that's an explicit null"),
    ],
)
def test_associative_list_items_structured_merge_diff_refuses(applied: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply_configuration({}, applied, _LISTS)


def test_input_is_never_modified() -> None:
    before = repr(OBJ)
    apply("Object{metadata: Object.metadata{labels: {'z': 'z'}}, spec: Object.spec{tags: ['q']}}")
    assert repr(OBJ) == before


def test_a_schema_view_answers_once_and_merges_alike() -> None:
    # Adapters keep one MergeSchema for their kind; it must merge exactly as the schema.
    structural = Schema.from_document(SCHEMA)
    view = merge_schema(structural)
    assert view.field("spec") is view.field("spec")
    assert view.field("spec").field("env").items() is view.field("spec").field("env").items()
    assert view.field("metadata").field("finalizers").list_type == "set"
    assert view.field("spec").field("bogus").absent and not view.field("spec").field("replicas").absent
    patch = {"metadata": {"labels": {"b": "2"}}, "spec": {"env": [{"name": "B", "value": "two"}], "tags": ["y"]}}
    for _ in range(2):
        assert apply_configuration(OBJ, patch, view) == apply_configuration(OBJ, patch, structural)
    with pytest.raises(PatchError, match=r"\.spec\.bogus: field not declared in schema"):
        apply_configuration(OBJ, {"spec": {"bogus": 1}}, view)
    assert apply_configuration(OBJ, {"spec": {"x": {"y": 1}}}, None)["spec"]["x"] == {"y": 1}
