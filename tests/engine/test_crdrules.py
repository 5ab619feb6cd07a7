"""CRD validation rules (x-kubernetes-validations): self, oldSelf, messages, reasons, field paths."""

from __future__ import annotations

from typing import Any

import pytest

from mkpolicy.engine import schema_errors
from mkpolicy.engine.crdrules import rule_errors


def rules(*items: dict[str, Any]) -> list[dict[str, Any]]:
    return list(items)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-validations": rules(
        {"rule": "self.metadata.name.startsWith('ok-')", "message": "name must start with ok-"},
        {"rule": "!has(self.metadata.labels)", "message": "root rules see only name and generateName"},
    ),
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": rules(
                {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' > max'"},
                {"rule": "!has(self.secret)", "reason": "FieldValueForbidden", "fieldPath": ".secret",
                 "message": "secrets do not belong here"},
                {"rule": "self.size(", "message": "never used: the rule does not compile"},
            ),
            "properties": {
                "min": {"type": "integer"},
                "max": {"type": "integer"},
                "secret": {"type": "string"},
                "mode": {"type": "string", "x-kubernetes-validations": rules({"rule": "self == oldSelf",
                                                                              "message": "mode is immutable"})},
                "count": {"type": "integer", "x-kubernetes-validations": rules(
                    {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": True,
                     "message": "count may only grow"})},
                "tasks": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"},
                        "image": {"type": "string", "x-kubernetes-validations": rules(
                            {"rule": "self == oldSelf", "message": "a task's image is immutable"})},
                    }},
                },
                "env": {"type": "object", "additionalProperties": {
                    "type": "string", "x-kubernetes-validations": rules({"rule": "self != ''", "message": "empty"})}},
                "ratio": {"type": "number", "x-kubernetes-validations": rules({"rule": "self.missing > 0"})},
                "flag": {"type": "string", "x-kubernetes-validations": rules({"rule": "self"})},
            },
        },
    },
}  # fmt: skip

COMPILE_ERROR = 'spec: Invalid value: "object": failed rule: self.size(:'


def thing(name: str = "ok-1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "x/v1", "kind": "Thing", "metadata": {"name": name, "labels": {"a": "b"}}, "spec": spec}


CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, list[str]]] = [
    ("valid", thing(min=1, max=2), None, []),
    ("root-rule", thing("bad", min=1, max=2), None, ['Invalid value: "object": name must start with ok-']),
    ("message-expression", thing(min=3, max=2), None, ['spec: Invalid value: "object": min 3 > max']),
    ("reason-and-field-path", thing(min=1, max=2, secret="s"), None, ["spec.secret: Forbidden: secrets do not belong here"]),
    ("transition-skipped-on-create", thing(min=1, max=2, mode="a"), None, []),
    ("transition-on-update", thing(min=1, max=2, mode="b"), thing(min=1, max=2, mode="a"),
     ['spec.mode: Invalid value: "string": mode is immutable']),
    ("optional-old-self-on-create", thing(min=1, max=2, count=1), None, []),
    ("optional-old-self-on-update", thing(min=1, max=2, count=1), thing(min=1, max=2, count=2),
     ['spec.count: Invalid value: "integer": count may only grow']),
    ("map-list-items-matched-by-key", thing(min=1, max=2, tasks=[{"name": "b", "image": "x"}, {"name": "a", "image": "2"}]),
     thing(min=1, max=2, tasks=[{"name": "a", "image": "1"}, {"name": "c", "image": "x"}]),
     ['spec.tasks[1].image: Invalid value: "string": a task\'s image is immutable']),
    ("map-values", thing(min=1, max=2, env={"A": "", "B": "b"}), None, ['spec.env.A: Invalid value: "string": empty']),
    ("evaluation-error", thing(min=1, max=2, ratio=0.5), None,
     ["spec.ratio: Invalid value: \"number\": failed rule: self.missing > 0: type 'double' does not support field selection"]),
    ("not-a-bool", thing(min=1, max=2, flag="x"), None, ["spec.flag: Invalid value: \"string\": rule 'self' did not evaluate to a bool"]),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "old", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_errors(obj: dict[str, Any], old: dict[str, Any] | None, expected: list[str]) -> None:
    errors = [str(e) for e in rule_errors(obj, SCHEMA, old)]
    failed_to_compile = [e for e in errors if e.startswith(COMPILE_ERROR)]
    assert len(failed_to_compile) == 1  # reported on every object the rule applies to
    assert [e for e in errors if e not in failed_to_compile] == expected


def test_rules_run_once_the_schema_itself_passes() -> None:
    errors = [str(e) for e in schema_errors(thing("bad", min="1", max=2), SCHEMA)]
    assert errors == ['spec.min: Invalid value: "string": spec.min in body must be of type integer: "string"']
