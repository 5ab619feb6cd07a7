"""Non-structural CRD schemas are refused as kube-apiserver refuses them (apiextensions-apiserver
``pkg/apiserver/schema/validation.go``, ``complete.go``, ``convert.go`` and the OpenAPI checks of
``pkg/apis/apiextensions/validation/validation.go``)."""

from __future__ import annotations

import copy
import glob
from pathlib import Path
from typing import Any

import pytest

from mkpolicy.testing.apiserver import ApiError, ApiServer, bundled_crds, load_crds
from mkpolicy.testing.apiserver.crd import crd_problems

from .conftest import simple_crd

ROOT = "spec.versions[0].schema.openAPIV3Schema"
SHARED_CRDS = Path(__file__).resolve().parents[2].parent / "shared" / "crds"

pytestmark = pytest.mark.loopback_only("asserts the loopback server's exact Status causes")


def crd_with(schema: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
    crd = simple_crd(status=status)
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema
    return crd


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


CASES = [
    ("untyped field", obj(spec={"properties": {"a": {"type": "string"}}}),
     [f"{ROOT}.properties[spec].type: Required value: must not be empty for specified object fields"]),
    ("untyped items", obj(spec={"type": "array", "items": {}}),
     [f"{ROOT}.properties[spec].items.type: Required value: must not be empty for specified array items"]),
    ("array without items", obj(spec={"type": "array"}),
     [f"{ROOT}.properties[spec].items: Required value: must be specified"]),
    ("root not object", {"type": "string"},
     [f'{ROOT}.type: Invalid value: "string": must be object at the root']),
    ("additionalProperties at the root", {"type": "object", "additionalProperties": {"type": "string"}},
     [f"{ROOT}.additionalProperties: Forbidden: must not be used at the root"]),
    ("type in anyOf", obj(spec={"type": "object", "anyOf": [{"type": "object"}]}),
     [f"{ROOT}.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural"]),
    # complete.go checks the root's value validations (and what they nest), as here.
    ("field only in a value validation",
     {**obj(spec={"type": "object"}), "oneOf": [{"properties": {"spec": {"properties": {"x": {}}}}}]},
     [f"{ROOT}.properties[spec].properties[x]: Required value: because it is defined in "
      f"{ROOT}.oneOf[0].properties[spec].properties[x]"]),
    ("metadata restricted beyond name", obj(metadata={"type": "object", "properties": {"labels": {"type": "object"}}}),
     [f"{ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, "
      "but metadata is implicitly specified"]),
    ("metadata in a nested context", obj(spec={"type": "object", "allOf": [{"properties": {"metadata": {}}}]}),
     [f"{ROOT}.properties[spec].allOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"]),
    ("kind not a string", obj(kind={"type": "integer"}),
     [f'{ROOT}.properties[kind].type: Invalid value: "integer": must be string']),
    ("$ref", obj(spec={"$ref": "#/definitions/x"}), [f"{ROOT}.properties[spec].$ref: Forbidden: $ref is not supported"]),
    ("uniqueItems", obj(spec={"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
     [f"{ROOT}.properties[spec].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime "
      "complexity becomes quadratic"]),
    ("properties and additionalProperties",
     obj(spec={"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
     [f"{ROOT}.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual "
      "exclusive"]),
    ("preserve-unknown-fields false", obj(spec={"type": "object", "x-kubernetes-preserve-unknown-fields": False}),
     [f"{ROOT}.properties[spec].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"]),
    ("items as an array", obj(spec={"type": "array", "items": [{"type": "string"}]}),
     [f"{ROOT}.properties[spec].items: Forbidden: items must be a schema object and not an array"]),
    ("unknown type", obj(spec={"type": "map"}),
     [f'{ROOT}.properties[spec].type: Unsupported value: "map": supported values: "array", "boolean", "integer", '
      '"number", "object", "string"']),
    ("bad pattern", obj(spec={"type": "string", "pattern": "a(b"}),
     [f'{ROOT}.properties[spec].pattern: Invalid value: "a(b": must be a valid regular expression, but isn\'t: '
      "missing ): a(b"]),
    ("nullable root", {"type": "object", "nullable": True}, [f"{ROOT}.nullable: Forbidden: nullable cannot be true at the root"]),
    ("default in metadata", obj(metadata={"type": "object", "default": {}}),
     [f"{ROOT}.properties[metadata].default: Forbidden: must not be set in top-level metadata"]),
    ("embedded resource not an object", obj(spec={"type": "string", "x-kubernetes-embedded-resource": True}),
     [f"{ROOT}.properties[spec].properties: Required value: must not be empty if x-kubernetes-embedded-resource is "
      "true without x-kubernetes-preserve-unknown-fields",
      f'{ROOT}.properties[spec].type: Invalid value: "string": must be object if x-kubernetes-embedded-resource is true']),
]  # fmt: skip


@pytest.mark.parametrize(("name", "schema", "expected"), CASES, ids=[c[0] for c in CASES])
def test_non_structural_schemas_are_refused(
    apiserver: ApiServer, name: str, schema: dict[str, Any], expected: list[str]
) -> None:
    with pytest.raises(ApiError) as err:
        apiserver.register_crd(crd_with(schema))
    assert err.value.code == 422 and err.value.reason == "Invalid"
    assert [f"{c['field']}: {c['message']}" for c in err.value.status()["details"]["causes"]] == expected
    assert apiserver.resource_types() == apiserver.resource_types()  # nothing was served
    assert "widgets.example.com" not in {f"{rt.plural}.{rt.group}" for rt in apiserver.resource_types()}


@pytest.mark.parametrize(
    "schema",
    [
        obj(spec={"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
        obj(spec={"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
        obj(spec={"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}]}),
        obj(metadata={"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}),
        obj(
            spec={
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "x-kubernetes-preserve-unknown-fields": True,
            }
        ),
        obj(spec={"type": "string", "pattern": "^(?i)[a-z]+$"}),  # Go (RE2) syntax, not Python's
    ],
)
def test_structural_schemas_are_served(apiserver: ApiServer, schema: dict[str, Any]) -> None:
    apiserver.register_crd(crd_with(schema))


def test_status_subresource_restricts_the_root(apiserver: ApiServer) -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object"}}, "anyOf": [{"required": ["spec"]}]}
    with pytest.raises(ApiError, match="are allowed at the root of the schema if the status subresource is enabled"):
        apiserver.register_crd(crd_with(copy.deepcopy(schema), status=True))
    apiserver.register_crd(crd_with(schema))


def test_unsupported_keyword_is_reported_once(apiserver: ApiServer) -> None:
    """convert.go's refusal overlaps the OpenAPI check: only the latter is reported."""
    with pytest.raises(ApiError) as err:
        apiserver.register_crd(crd_with(obj(spec={"type": "object", "patternProperties": {"^a": {"type": "string"}}})))
    assert [c["message"] for c in err.value.status()["details"]["causes"]] == [
        "Forbidden: patternProperties is not supported"
    ]


def test_bundled_and_shared_crds_are_structural() -> None:
    """Every CRD the project ships or reads (Kueue, Tekton, JobSet, Kubeflow, Argo) is accepted."""
    crds = bundled_crds()
    for path in sorted(glob.glob(str(SHARED_CRDS / "*.yaml"))):
        crds.extend(load_crds(path))
    assert crds
    assert {crd["metadata"]["name"]: [c.line() for c in crd_problems(crd)] for crd in crds if crd_problems(crd)} == {}
