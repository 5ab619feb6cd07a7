"""Lint rules on small policies: what each rule reports, and what it must not report."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mkpolicy.check import check_paths
from mkpolicy.cli.main import main

HEADER = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata:
  name: p
spec:
  framework: Thing.v1.example.com
"""


def findings(tmp_path: Path, body: str, *, messages: bool = False) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(HEADER + textwrap.indent(textwrap.dedent(body), "  "))
    result = check_paths([str(path)])
    assert result.input_errors == []
    return [f"{f.line}:{f.column} {f.rule}" + (f" {f.message}" if messages else "") for f in result.findings]


def creation(expression: str, extra: str = "", patch_type: str = "JSONPatch") -> str:
    field = "jsonPatch" if patch_type == "JSONPatch" else "applyConfiguration"
    return (
        extra + f"creation:\n  patches:\n    - type: {patch_type}\n      {field}:\n        expression: '{expression}'\n"
    )


def sync(expression: str, extra: str = "", patch_type: str = "JSONPatch") -> str:
    field = "jsonPatch" if patch_type == "JSONPatch" else "applyConfiguration"
    return extra + f"sync:\n  patches:\n    - type: {patch_type}\n      {field}:\n        expression: '{expression}'\n"


PATCH_CASES = [
    (
        "computed annotation key",
        creation('[JSONPatch{op: "add", path: "/metadata/annotations/" + cluster, value: "x"}]'),
        [],
    ),
    ("remove another label", creation('[JSONPatch{op: "remove", path: "/metadata/labels/team"}]'), []),
    (
        "remove the origin label",
        creation('[JSONPatch{op: "remove", path: "/metadata/labels/kueue.x-k8s.io~1multikueue-origin"}]'),
        ["11:55 MKP501"],
    ),
    (
        "replace labels without the origin",
        creation('[JSONPatch{op: "replace", path: "/metadata/labels", value: {"a": "b"}}]'),
        ["11:56 MKP501"],
    ),
    (
        "replace labels keeping the origin",
        creation(
            '[JSONPatch{op: "replace", path: "/metadata/labels", value: {"kueue.x-k8s.io/multikueue-origin": origin}}]'
        ),
        [],
    ),
    (
        "add metadata with owner references",
        creation('[JSONPatch{op: "add", path: "/metadata", value: {"ownerReferences": []}}]'),
        ["11:52 MKP501"],
    ),
    (
        "move from the namespace",
        creation('[JSONPatch{op: "move", from: "/metadata/namespace", path: "/spec/ns"}]'),
        ["11:53 MKP501"],
    ),
    ("copy the name elsewhere", creation('[JSONPatch{op: "copy", from: "/metadata/name", path: "/spec/name"}]'), []),
    ("copy into status", creation('[JSONPatch{op: "copy", from: "/spec", path: "/status"}]'), ["11:68 MKP501"]),
    ("test reads only", creation('[JSONPatch{op: "test", path: "/metadata/name", value: "x"}]'), []),
    ("computed op is not judged", creation('[JSONPatch{op: cluster, path: "/metadata/name"}]'), []),
    ("kind", creation('[JSONPatch{op: "replace", path: "/kind", value: "Other"}]'), ["11:56 MKP501"]),
    (
        "prebuilt annotation with identifier none",
        creation(
            '[JSONPatch{op: "remove", path: "/metadata/annotations/kueue.x-k8s.io~1prebuilt-workload-name"}]',
            "creation:\n  workloadIdentifier: none\n",
        ).replace("creation:\n  patches", "  patches"),
        ["8:25 MKP406"],
    ),
    (
        "prebuilt annotation by context",
        creation('[JSONPatch{op: "remove", path: "/metadata/annotations/kueue.x-k8s.io~1prebuilt-workload-name"}]'),
        ["11:55 MKP501"],
    ),
    (
        "managedBy label must stay removed",
        "managedBy:\n  path: /metadata/labels/managed\n"
        + creation('[JSONPatch{op: "add", path: "/metadata/labels/managed", value: "x"}]'),
        ["8:11 MKP401", "13:52 MKP501"],
    ),
    (
        "managedBy null: spec.managedBy is free",
        "managedBy: null\n" + creation('[JSONPatch{op: "add", path: "/spec/managedBy", value: "x"}]'),
        ["7:14 MKP402"],
    ),
    ("sync writes status", sync('[JSONPatch{op: "add", path: "/status/phase", value: "x"}]'), []),
    ("sync computed status path", sync('[JSONPatch{op: "add", path: "/status" + cluster, value: "x"}]'), []),
    ("sync writes spec", sync('[JSONPatch{op: "remove", path: "/spec/x"}]'), ["11:55 MKP502"]),
    ("sync moves from spec", sync('[JSONPatch{op: "move", from: "/spec/x", path: "/status/x"}]'), ["11:53 MKP502"]),
    (
        "sync Object outside status",
        sync('Object{metadata: Object.metadata{labels: {"a": "b"}}}', patch_type="ApplyConfiguration"),
        ["11:66 MKP502"],
    ),
    (
        "sync without subresource may write labels",
        sync('[JSONPatch{op: "add", path: "/metadata/labels/x", value: "y"}]', "sync:\n  subresource: none\n").replace(
            "sync:\n  patches", "  patches"
        ),
        ["8:18 MKP405"],
    ),
    (
        "sync without subresource must keep metadata",
        sync('[JSONPatch{op: "remove", path: "/metadata"}]', "sync:\n  subresource: none\n").replace(
            "sync:\n  patches", "  patches"
        ),
        ["8:18 MKP405", "12:55 MKP502"],
    ),
    ("empty path", creation('[JSONPatch{op: "remove", path: ""}]'), ["11:55 MKP503"]),
    ("malformed from", creation('[JSONPatch{op: "copy", from: "spec", path: "/spec/b"}]'), ["11:53 MKP503"]),
    ("computed continuation of an escape", creation('[JSONPatch{op: "remove", path: "/spec/a~" + cluster}]'), []),
    ("no path", creation('[JSONPatch{op: "remove"}]'), ["11:25 MKP503"]),
    ("no op", creation('[JSONPatch{path: "/spec/x"}]'), ["11:25 MKP503"]),
]


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in PATCH_CASES], ids=[c[0] for c in PATCH_CASES])
def test_patch_rules(tmp_path: Path, body: str, expected: list[str]) -> None:
    assert findings(tmp_path, body) == expected


def test_constant_match_conditions_say_what_they_do(tmp_path: Path) -> None:
    body = """\
      params: {enabled: true}
      matchConditions:
        - name: never
          expression: "1 > 2"
        - name: notbool
          expression: '"yes"'
        - name: fails
          expression: "1 / 0 == 1"
        - name: switch
          expression: params.enabled
        - name: variable
          expression: variables.v
      variables:
        - name: v
          expression: object.spec.x == 1
    """
    # A policy with match conditions on the wire gets MKP407 first, at matchConditions.
    first, *rest = findings(tmp_path, body, messages=True)
    assert first.startswith("8:3 MKP407 matchConditions cannot keep an object from being dispatched")
    assert rest == [
        "10:20 MKP206 match condition 'never' reads neither the object nor the context: "
        "it is always false: the policy never manages any object",
        "12:20 MKP206 match condition 'notbool' reads neither the object nor the context: it always returns 'yes', not a bool",
        "14:20 MKP206 match condition 'fails' reads neither the object nor the context: it always fails (division by zero)",
    ]


def test_variable_usage(tmp_path: Path) -> None:
    body = """\
      variables:
        - name: a
          expression: variables.a
        - name: b
          expression: variables.c + 1
        - name: c
          expression: "1"
        - name: d
          expression: "2"
      creation:
        patches:
          - type: ApplyConfiguration
            applyConfiguration:
              expression: 'Object{spec: Object.spec{b: variables.b, e: variables.e}}'
    """
    assert findings(tmp_path, body, messages=True) == [
        "8:13 MKP207 variable 'a' is never used: no expression reads variables.a",
        "14:13 MKP207 variable 'd' is never used: no expression reads variables.d",
        "20:78 MKP208 creation patch #1 (ApplyConfiguration): variables.e is not declared in spec.variables "
        "(declared: a, b, c, d)",
    ]


def test_computed_variable_access_disables_unused_check(tmp_path: Path) -> None:
    body = """\
      variables:
        - name: a
          expression: "1"
        - name: pick
          expression: 'variables["a"] + variables[cluster]'
      matchConditions:
        - name: m
          expression: variables.pick > 0 && object.spec.x
    """
    assert findings(tmp_path, body) == ["12:3 MKP407"]


def test_worker_object_in_match_condition_and_params(tmp_path: Path) -> None:
    body = """\
      matchConditions:
        - name: m
          expression: has(workerObject.status) || params.x
      sync:
        patches:
          - type: JSONPatch
            jsonPatch:
              expression: '[JSONPatch{op: "add", path: "/status", value: workerObject.status}]'
    """
    assert findings(tmp_path, body) == ["7:3 MKP407", "9:23 MKP209", "9:47 MKP210"]


def test_disable_annotation_is_per_policy(tmp_path: Path) -> None:
    text = (
        HEADER.replace("  name: p\n", "  name: p\n  annotations:\n    lint.mkpolicy.io/disable: 'mkp402 MKP404'\n")
        + "  managedBy: null\n  sync:\n    mode: none\n---\n"
        + HEADER.replace("name: p", "name: q").replace("Thing", "Other")
        + "  managedBy: null\n"
    )
    (tmp_path / "p.yaml").write_text(text)
    result = check_paths([str(tmp_path / "p.yaml")])
    assert [(f.policy, f.rule) for f in result.findings] == [("q", "MKP402")]
    assert result.suppressed == 2


CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  group: example.com
  names: {kind: Thing, plural: things}
  versions:
    - name: v2
      served: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                runPolicy:
                  type: object
                  properties: {managedBy: {type: string}}
                items: {type: array, items: {type: object, properties: {name: {type: string}}}}
"""


@pytest.mark.parametrize(
    ("version", "managed_by", "expected"),
    [
        (
            "v1",
            "/spec/runPolicy/managedBy",
            ["MKP107 spec.schema 'crd.yaml': the CustomResourceDefinition serves no version 'v1' (it serves: v2)"],
        ),
        ("v2", "/spec/runPolicy/managedBy", []),
        ("v2", "/spec/items/0/name", []),
        (
            "v2",
            "/spec/items/name",
            [
                "MKP301 managedBy.path '/spec/items/name': /spec/items is a list in the schema; expected a list index, found 'name'"
            ],
        ),
        (
            "v2",
            "/spec/managedBy",
            [
                "MKP301 managedBy.path '/spec/managedBy': the schema of Thing.v2.example.com has no field 'managedBy' "
                "under /spec (it has: items, runPolicy)"
            ],
        ),
    ],
)
def test_schema_and_managed_by(tmp_path: Path, version: str, managed_by: str, expected: list[str]) -> None:
    (tmp_path / "crd.yaml").write_text(CRD)
    (tmp_path / "p.yaml").write_text(
        HEADER.replace("Thing.v1", f"Thing.{version}") + f"  schema: crd.yaml\n  managedBy:\n    path: {managed_by}\n"
    )
    result = check_paths([str(tmp_path / "p.yaml")])
    assert [f"{f.rule} {f.message}" for f in result.findings if f.rule != "MKP401"] == expected


def test_has_on_required_fields(tmp_path: Path) -> None:
    schema = tmp_path / "schema.yaml"
    schema.write_text(
        "type: object\nrequired: [spec]\nproperties:\n  spec:\n    type: object\n    required: [a]\n"
        "    properties:\n      managedBy: {type: string}\n      a: {type: object, properties: {b: {type: string}}}\n"
    )
    body = """\
      schema: schema.yaml
      matchConditions:
        - name: m
          expression: has(object.spec) && has(object.spec.a) && has(object.spec.a.b) && has(object.metadata)
    """
    assert findings(tmp_path, body) == ["8:3 MKP407", "10:30 MKP211", "10:55 MKP211", "10:96 MKP211"]


def test_no_schema_means_no_schema_findings(tmp_path: Path) -> None:
    body = """\
      matchConditions:
        - name: m
          expression: has(object.spec.anything) && object.spec.anything.size() > 1
    """
    assert findings(tmp_path, body) == ["7:3 MKP407"]  # a match condition: not about the schema


def test_document_problems_are_sorted_by_kind_not_wording(tmp_path: Path) -> None:
    """The rule comes from what the loader found, whatever the message happens to quote."""
    path = tmp_path / "p.yaml"
    path.write_text(
        HEADER.replace("Thing.v1.example.com", '"duplicate name"')
        + "  unknownField: 1\n  variables:\n    - {name: a, expression: '1'}\n    - {name: a, expression: '2'}\n"
    )
    rules = [f"{f.line}:{f.column} {f.rule}" for f in check_paths([str(path)]).findings]
    assert rules == ["6:14 MKP102", "7:3 MKP103", "9:5 MKP105"]


SCHEMA = """\
type: object
properties:
  spec:
    type: object
    properties:
      managedBy: {type: string}
      count: {type: integer}
      size: {x-kubernetes-int-or-string: true}
      args: {type: array, items: {type: string}}
      tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
      extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
  status:
    type: object
    properties:
      phase: {type: string}
"""

WRITE_CASES = [
    # Declared paths, computed keys, int-or-string and unknown territory: nothing to say.
    (
        "declared",
        creation(
            '[JSONPatch{op: "replace", path: "/spec/count", value: 2}, JSONPatch{op: "add", path: "/spec/size", '
            'value: "1Gi"}, JSONPatch{op: "add", path: "/spec/extra/anything", value: [1]}, '
            'JSONPatch{op: "remove", path: "/spec/args/0"}, JSONPatch{op: "add", path: "/spec/" + cluster, value: 1}]'
        ),
        [],
    ),
    ("remove-undeclared", creation('[JSONPatch{op: "remove", path: "/spec/cuont"}]'), ["12:55 MKP504"]),
    ("test-under-a-scalar", creation('[JSONPatch{op: "test", path: "/spec/count/x", value: 1}]'), ["12:53 MKP504"]),
    (
        "copy-from-undeclared",
        creation('[JSONPatch{op: "copy", from: "/spec/nope", path: "/spec/count"}]'),
        ["12:53 MKP504"],
    ),
    ("add-undeclared", creation('[JSONPatch{op: "add", path: "/spec/cuont", value: 1}]'), ["12:52 MKP505"]),
    (
        "add-under-undeclared",
        creation('[JSONPatch{op: "add", path: "/spec/nope/" + cluster, value: 1}]'),
        ["12:66 MKP505"],
    ),
    ("value-type", creation('[JSONPatch{op: "add", path: "/spec/count", value: "2"}]'), ["12:74 MKP506"]),
    (
        "value-type-in-a-map",
        creation('[JSONPatch{op: "add", path: "/spec", value: {"count": true}}]'),
        ["12:78 MKP506"],
    ),
    ("list-for-a-scalar", creation('[JSONPatch{op: "add", path: "/spec/count", value: [1]}]'), ["12:74 MKP506"]),
    # Sync with the status subresource: outside /status is MKP502's, inside is checked.
    ("sync-status", sync('[JSONPatch{op: "add", path: "/status/phse", value: "x"}]'), ["12:52 MKP505"]),
    # ApplyConfiguration: set lists merge, atomic lists may not be set.
    ("apply-set-list", sync('Object{status: Object.status{phase: "x"}}', patch_type="ApplyConfiguration"), []),
    (
        "apply-atomic-list",
        creation('Object{spec: Object.spec{args: ["x"], tags: ["y"]}}', patch_type="ApplyConfiguration"),
        ["12:55 MKP508"],
    ),
]


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in WRITE_CASES], ids=[c[0] for c in WRITE_CASES])
def test_writes_against_the_schema(tmp_path: Path, body: str, expected: list[str]) -> None:
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    assert findings(tmp_path, "schema: schema.yaml\n" + body) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # metadata is ObjectMeta with or without a schema: label and annotation values are strings.
        (creation('[JSONPatch{op: "add", path: "/metadata/labels/team", value: 1}]'), ["11:84 MKP507"]),
        (
            creation('Object{metadata: Object.metadata{annotations: {"a": "b"}}}', patch_type="ApplyConfiguration"),
            [],
        ),
        (creation('[JSONPatch{op: "remove", path: "/metadata/labelz/team"}]'), ["11:55 MKP504"]),
        # Without a schema every list outside metadata is atomic: an ApplyConfiguration cannot set it.
        (creation('Object{spec: Object.spec{args: ["x"]}}', patch_type="ApplyConfiguration"), ["11:55 MKP508"]),
        (
            creation('Object{metadata: Object.metadata{finalizers: ["x"]}}', patch_type="ApplyConfiguration"),
            [],
        ),
        # Outside metadata nothing is known: no finding.
        (creation('[JSONPatch{op: "remove", path: "/spec/whatever"}]'), []),
    ],
    ids=["label-int", "annotation-string", "metadata-typo", "list-without-schema", "finalizers-set", "unknown"],
)
def test_writes_without_a_schema(tmp_path: Path, body: str, expected: list[str]) -> None:
    assert findings(tmp_path, body) == expected


def test_a_schema_too_big_for_a_configmap(tmp_path: Path) -> None:
    fields = {f"f{i}": {"type": "string", "description": "x" * 100} for i in range(11000)}
    big = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"managedBy": {}, **fields}}}}
    (tmp_path / "big.json").write_text(json.dumps(big))
    lines = findings(tmp_path, "schema: big.json\n", messages=True)
    assert lines == [
        "7:11 MKP109 spec.schema 'big.json' is 1,627,985 bytes: with the policy, more than a ConfigMap holds "
        "(1,048,576 bytes of data, kube-apiserver's limit even applied server-side), so the policies ConfigMap "
        "cannot carry it; 'mkpolicy trim-schema big.json --framework "
        "Thing.v1.example.com -o FILE' writes the same schema without descriptions and other versions (validation, "
        "types and merges unchanged)"
    ]
    # What the message suggests works, and the result fits.
    assert (
        main(
            [
                "trim-schema",
                str(tmp_path / "big.json"),
                "--framework",
                "Thing.v1.example.com",
                "-o",
                str(tmp_path / "big.json"),
            ]
        )
        == 0
    )
    assert findings(tmp_path, "schema: big.json\n") == []
