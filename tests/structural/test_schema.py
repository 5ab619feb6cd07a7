"""mkpolicy.structural: reading CRD/OpenAPI schema files and navigating them as Kubernetes does."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mkpolicy.errors import PolicyError
from mkpolicy.structural import Schema, is_absent, read_schema_document

SHARED_CRDS = Path(__file__).resolve().parents[3] / "shared" / "crds"

OPENAPI = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"x-kubernetes-int-or-string": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {}},
                "tasks": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    },
}


def crd(versions: list[tuple[str, bool]]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "spec": {
            "group": "example.com",
            "names": {"kind": "Thing"},
            "versions": [
                {"name": n, "storage": s, "schema": {"openAPIV3Schema": {"type": "object", "description": n}}}
                for n, s in versions
            ],
        },
    }


def describe(schema: Schema) -> dict[str, Any]:
    """What the engine and the checker ask of a schema node, in one comparable value."""
    return {
        "known": schema.known,
        "absent": is_absent(schema),
        "type": schema.type,
        "int_or_string": schema.int_or_string,
        "preserves_unknown": schema.preserves_unknown,
        "is_map": schema.is_map,
        "list_type": schema.list_type,
        "list_map_keys": schema.list_map_keys,
        "atomic_map": schema.atomic_map,
    }


ROOT = Schema.from_document(OPENAPI)
SPEC = ROOT.field("spec")
NAVIGATION = [
    ("spec", SPEC, {"type": "object"}),
    ("int-or-string", SPEC.field("replicas"), {"type": None, "int_or_string": True}),
    ("map", SPEC.field("labels"), {"type": "object", "is_map": True}),
    ("map-value", SPEC.field("labels").field("any-key"), {"type": "string"}),
    ("atomic-struct", SPEC.field("selector"), {"type": "object", "atomic_map": True}),
    ("list-map", SPEC.field("tasks"), {"type": "array", "list_type": "map", "list_map_keys": ["name"]}),
    ("list-item", SPEC.field("tasks").items().field("name"), {"type": "string"}),
    ("set", SPEC.field("tags"), {"type": "array", "list_type": "set"}),
    ("atomic-list", SPEC.field("args"), {"type": "array"}),
    ("unknown-fields", SPEC.field("free").field("anything"), {"known": False, "type": None, "preserves_unknown": True}),
    ("undeclared", SPEC.field("nope"), {"known": False, "absent": True, "type": None, "preserves_unknown": True}),
    ("metadata-is-objectmeta", ROOT.field("metadata").field("labels"), {"type": "object", "is_map": True}),
    ("owner-references", ROOT.field("metadata").field("ownerReferences"),
     {"type": "array", "list_type": "map", "list_map_keys": ["uid"]}),
    ("kind", ROOT.field("kind"), {"type": "string"}),
    ("deduced", Schema.deduced().field("x").items(), {"known": False, "type": None, "preserves_unknown": True}),
]  # fmt: skip
# What describe() reports for a node that declares nothing, written out so the
# expectation does not come from the code under test.
DEFAULTS: dict[str, Any] = {
    "known": True,
    "absent": False,
    "type": None,
    "int_or_string": False,
    "preserves_unknown": False,
    "is_map": False,
    "list_type": "atomic",
    "list_map_keys": [],
    "atomic_map": False,
}


@pytest.mark.parametrize(("schema", "expected"), [c[1:] for c in NAVIGATION], ids=[c[0] for c in NAVIGATION])
def test_navigation(schema: Schema, expected: dict[str, Any]) -> None:
    assert describe(schema) == {**DEFAULTS, **expected}


def test_has_field() -> None:
    assert SPEC.has_field("tasks") and not SPEC.has_field("nope")
    assert SPEC.field("labels").has_field("whatever")  # additionalProperties
    assert SPEC.field("free").has_field("whatever")  # preserve-unknown-fields
    assert Schema.deduced().has_field("whatever")


@pytest.mark.parametrize(
    ("document", "version", "expected"),
    [
        (crd([("v1", False), ("v2", True)]), None, "v2"),  # the storage version by default
        (crd([("v1", False), ("v2", True)]), "v1", "v1"),
        ({"openAPIV3Schema": {"type": "object", "description": "bare"}}, None, "bare"),
        ({"type": "object", "description": "plain"}, None, "plain"),
    ],
    ids=["storage-version", "named-version", "openAPIV3Schema", "plain-schema"],
)
def test_from_document(document: dict[str, Any], version: str | None, expected: str) -> None:
    schema = Schema.from_document(document, version)
    assert schema.node is not None and schema.node["description"] == expected


@pytest.mark.parametrize(
    ("document", "version", "message"),
    [
        ([1], None, "expected a CustomResourceDefinition or an OpenAPI v3 schema object; found list"),
        (crd([("v1", True)]), "v9", "the CustomResourceDefinition serves no version 'v9' (it serves: v1)"),
        ({"description": "no type"}, None,
         "expected a CustomResourceDefinition or an OpenAPI v3 schema (with 'type' or 'properties')"),
    ],
    ids=["not-a-mapping", "unknown-version", "not-a-schema"],
)  # fmt: skip
def test_from_document_errors(document: Any, version: str | None, message: str) -> None:
    with pytest.raises(PolicyError, match=f"^{re.escape(f's.yaml: {message}')}$"):
        Schema.from_document(document, version, "s.yaml")


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("s.json", json.dumps(OPENAPI), OPENAPI),
        ("s.yaml", "type: object\nproperties: {a: {type: string}}\n", {"type": "object", "properties": {"a": {"type": "string"}}}),
        # a YAML stream: the first CRD wins over what comes before it
        ("s.yaml", "kind: Other\n---\n" + json.dumps(crd([("v1", True)])), crd([("v1", True)])),
        ("s.yaml", "", None),
    ],
    ids=["json", "yaml", "first-crd", "empty"],
)  # fmt: skip
def test_read_schema_document(tmp_path: Path, name: str, content: str, expected: Any) -> None:
    (tmp_path / name).write_text(content)
    assert read_schema_document(str(tmp_path / name)) == expected


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.yaml", None, "missing.yaml: cannot read schema file: No such file or directory"),
        ("bad.json", "{", "bad.json: cannot parse schema file: Expecting property name"),
        ("bad.yaml", "a: [", "bad.yaml:2:1: cannot parse schema file: malformed YAML"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "deep.json: cannot parse schema file: maximum recursion depth"),
        ("bin.yaml", b"\x00\x01", "bin.yaml: cannot read schema file: expected a YAML text file, found binary data"),
    ],
    ids=["missing", "bad-json", "bad-yaml", "deep-json", "binary"],
)
def test_read_schema_document_errors(tmp_path: Path, name: str, content: str | bytes | None, message: str) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(PolicyError) as info:
        read_schema_document(str(path))
    assert str(info.value).startswith(f"{tmp_path}/{message}"), str(info.value)


@pytest.mark.skipif(not SHARED_CRDS.is_dir(), reason="../shared/crds is not beside the clone")
@pytest.mark.parametrize("crd_file", ["tekton.dev_pipelineruns.yaml", "jobset.x-k8s.io_jobsets.yaml"])
def test_real_crds_load(crd_file: str) -> None:
    schema = Schema.load(str(SHARED_CRDS / crd_file))
    assert schema.type == "object" and schema.field("spec").known and schema.field("status").known
