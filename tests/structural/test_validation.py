"""mkpolicy.structural.validation: objects against a CRD schema, with Kubernetes' field errors."""

from __future__ import annotations

from typing import Any

import pytest

from mkpolicy.structural.validation import validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "integer"}}},  # never checked
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "ratio": {"type": "number", "exclusiveMaximum": True, "maximum": 1},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "note": {"type": "string", "nullable": True, "maxLength": 5},
                "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2},
                "port": {"x-kubernetes-int-or-string": True},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 3, "items": {"type": "string"}},
                "tasks": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
                },
                "env": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 2},
                "either": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["all"]}]},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "when": {"type": "string", "format": "date-time"},
                "data": {"type": "string", "format": "byte"},
                "count": {"type": "integer", "format": "int32"},
                "day": {"type": "string", "format": "date"},
                "id": {"type": "string", "format": "uuid"},
                "ip4": {"type": "string", "format": "ipv4"},
                "ip6": {"type": "string", "format": "ipv6"},
                "net": {"type": "string", "format": "cidr"},
            },
        },
    },
}

CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("valid", {"size": 3, "mode": "fast", "note": None, "port": "http", "tags": ["a", "b"], "free": {"x": [1]},
               "tasks": [{"name": "a"}, {"name": "b"}], "env": {"A": "1"}, "either": "all", "when": "2024-05-06T07:08:09.5+02:00", "data": "aGk=", "count": 7,
               "day": "2024-02-29", "id": "123e4567-e89b-12d3-a456-426614174000", "ip4": "10.1.2.3", "ip6": "fe80::1",
               "net": "10.0.0.0/8"}, []),
    ("required", {}, ["spec.size: Required value"]),
    ("type", {"size": "3"}, ['spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"']),
    ("null-not-nullable", {"size": None}, ['spec.size: Invalid value: "null": spec.size in body must be of type integer: "null"']),
    ("bool-is-not-integer", {"size": True}, ['spec.size: Invalid value: "boolean": spec.size in body must be of type integer: "boolean"']),
    ("minimum", {"size": 0}, ["spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"]),
    ("exclusive-maximum", {"size": 1, "ratio": 1}, ["spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1"]),
    ("enum", {"size": 1, "mode": "turbo"}, ['spec.mode: Unsupported value: "turbo": supported values: "fast", "slow"']),
    ("max-length", {"size": 1, "note": "toolong"}, ["spec.note: Too long: may not be more than 5 bytes"]),
    ("pattern-and-min-length", {"size": 1, "name": "A"}, [
        "spec.name: Invalid value: \"A\": spec.name in body should be at least 2 chars long",
        "spec.name: Invalid value: \"A\": spec.name in body should match '^[a-z]+$'",
    ]),
    ("int-or-string", {"size": 1, "port": 1.5},
     ['spec.port: Invalid value: "number": spec.port in body must be of type integer or string: "number"']),
    ("set", {"size": 1, "tags": ["a", "a"]}, ['spec.tags[1]: Duplicate value: "a"']),
    ("max-items", {"size": 1, "tags": ["a", "b", "c", "d"]}, ["spec.tags: Too many: 4: must have at most 3 items"]),
    ("map-list", {"size": 1, "tasks": [{"name": "a"}, {"name": "a"}, {}]},
     ['spec.tasks[1]: Duplicate value: {"name":"a"}', "spec.tasks[2].name: Required value"]),
    ("map-values", {"size": 1, "env": {"A": 1}}, ['spec.env.A: Invalid value: "integer": spec.env.A in body must be of type string: "integer"']),
    ("max-properties", {"size": 1, "env": {"A": "", "B": "", "C": ""}}, ["spec.env: Too many: 3: must have at most 2 properties"]),
    ("date-time", {"size": 1, "when": "yesterday"},
     ['spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"']),
    ("date-time-out-of-range", {"size": 1, "when": "2024-02-30T00:00:00Z"},
     ['spec.when: Invalid value: "2024-02-30T00:00:00Z": spec.when in body must be of type date-time: "2024-02-30T00:00:00Z"']),
    ("byte", {"size": 1, "data": "not base64!"},
     ['spec.data: Invalid value: "not base64!": spec.data in body must be of type byte: "not base64!"']),
    ("date", {"size": 1, "day": "2024-13-01"},
     ['spec.day: Invalid value: "2024-13-01": spec.day in body must be of type date: "2024-13-01"']),
    ("date-not-date-time", {"size": 1, "day": "2024-05-06T07:08:09Z"},
     ['spec.day: Invalid value: "2024-05-06T07:08:09Z": spec.day in body must be of type date: "2024-05-06T07:08:09Z"']),
    ("uuid", {"size": 1, "id": "nope"}, ['spec.id: Invalid value: "nope": spec.id in body must be of type uuid: "nope"']),
    ("ipv4", {"size": 1, "ip4": "1.2.3"}, ['spec.ip4: Invalid value: "1.2.3": spec.ip4 in body must be of type ipv4: "1.2.3"']),
    ("ipv4-not-ipv6", {"size": 1, "ip4": "::1"}, ['spec.ip4: Invalid value: "::1": spec.ip4 in body must be of type ipv4: "::1"']),
    ("ipv6", {"size": 1, "ip6": "::g"}, ['spec.ip6: Invalid value: "::g": spec.ip6 in body must be of type ipv6: "::g"']),
    ("ipv6-not-ipv4", {"size": 1, "ip6": "10.1.2.3"},
     ['spec.ip6: Invalid value: "10.1.2.3": spec.ip6 in body must be of type ipv6: "10.1.2.3"']),
    ("cidr", {"size": 1, "net": "10.0.0.0/33"},
     ['spec.net: Invalid value: "10.0.0.0/33": spec.net in body must be of type cidr: "10.0.0.0/33"']),
    ("cidr-needs-prefix", {"size": 1, "net": "10.0.0.0"},
     ['spec.net: Invalid value: "10.0.0.0": spec.net in body must be of type cidr: "10.0.0.0"']),
    ("any-of", {"size": 1, "either": "some"}, ['spec.either: Invalid value: "some": spec.either in body must match at least one schema']),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate(spec: dict[str, Any], expected: list[str]) -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "not-an-integer"}, "spec": spec}
    assert [str(e) for e in validate(obj, SCHEMA)] == expected


def test_root_and_cause_types() -> None:
    errors = validate({"kind": "Thing"}, SCHEMA)
    assert [(str(e), e.cause_type) for e in errors] == [("spec: Required value", "FieldValueRequired")]
    errors = validate({"spec": {"size": 1, "mode": "x", "tags": ["a", "a"], "note": "123456"}}, SCHEMA)
    assert [e.cause_type for e in errors] == ["FieldValueNotSupported", "FieldValueTooLong", "FieldValueDuplicate"]
    assert [str(e) for e in validate([1], {"type": "object"})] == [
        'Invalid value: "array": body must be of type object: "array"'
    ]
