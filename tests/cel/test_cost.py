"""Static cost estimates (mkpolicy.cel.estimate_cost), in Kubernetes cost units."""

from __future__ import annotations

from typing import Any

import pytest

from mkpolicy.cel import PER_CALL_LIMIT, compile, estimate_cost
from mkpolicy.structural import Schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 63},
                "tasks": {
                    "type": "array",
                    "maxItems": 10,
                    "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
                },
                "unbounded": {"type": "array", "items": {"type": "string"}},
            },
        }
    },
}


def cost(expression: str, schema: dict[str, Any] | None = None) -> int:
    program = compile(expression, ["object"])
    schemas = {"object": Schema.from_document(schema)} if schema is not None else None
    return estimate_cost(program, schemas)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1", 0),
        ("'abc'", 0),
        ("object", 1),
        ("object.spec", 2),
        ("object.spec.name == 'x'", 4),  # 3 for the selects, 1 for ==
        ("[1, 2, 3]", 10),
        ("{'a': 1}", 30),
        ("1 + 2", 1),
        ("true ? object.spec : 1", 2),
        ("has(object.spec.name)", 2),  # presence tests cost nothing themselves (Kubernetes)
        ("[1, 2, 3].all(x, x > 0)", 10 + 1 + 3 * (3 + 2)),
        ("[1, 2, 3].map(x, x)", 10 + 11 + 3 * (12 + 1)),
        ("[1, 2].filter(x, x > 1)", 10 + 11 + 2 * (13 + 2)),
        ("JSONPatch{op: 'add'}", 40),
    ],
)
def test_fixed_costs(expression: str, expected: int) -> None:
    assert cost(expression) == expected


def test_schema_bounds_comprehensions() -> None:
    bounded = cost("object.spec.tasks.all(t, t.name.startsWith('a'))", SCHEMA)
    # 3 selects + 1 (all's result) + 10 iterations * (3 + select 2 + startsWith 1)
    assert bounded == 3 + 1 + 10 * (3 + 2 + 1)
    assert bounded < PER_CALL_LIMIT


def test_unbounded_lists_exceed_the_limit() -> None:
    # Without maxItems, a list may hold as many items as fit into a 3 MiB request,
    # as Kubernetes assumes: a nested loop over it is far over the per-call limit.
    expression = "object.spec.unbounded.all(a, object.spec.unbounded.all(b, a == b))"
    assert cost(expression, SCHEMA) > PER_CALL_LIMIT
    assert cost(expression) > PER_CALL_LIMIT


def test_string_functions_scale_with_max_length() -> None:
    short = cost("object.spec.name.matches('^[a-z]+$')", SCHEMA)
    long = cost("object.spec.name.matches('^[a-z]+$')")
    assert short < 100 < long


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # namespaced functions: the namespace is not evaluated
        ("jsonpatch.escapeKey('a/b')", 1),
        ("sets.contains([1, 2], [3])", 10 + 10 + 1 + 2 * 1),
        ("lists.range(3)", 3),
        ("math.greatest([1, 2, 3])", 10 + 3),
    ],
)
def test_namespaced_functions(expression: str, expected: int) -> None:
    assert cost(expression) == expected


def test_policy_style_patch_is_bounded() -> None:
    # String building from a variable: sizes stay finite (a request's worth).
    expression = "[JSONPatch{op: 'remove', path: '/metadata/annotations/' + jsonpatch.escapeKey(object.kind)}]"
    assert 0 < cost(expression) < 2**64 - 1


def test_sizes_flow_through_comprehensions() -> None:
    # filter keeps the element size, map takes its transform's: the path stays bounded.
    expression = "object.spec.tasks.filter(t, t.name != '').map(t, '/tasks/' + jsonpatch.escapeKey(t.name))"
    bounded = cost(expression, SCHEMA)
    # 10 tasks at most, names of at most 20 characters.
    assert bounded < 1_000
