"""Evaluations are bounded: hostile expressions on large objects stop with a
CelCostError, quickly, and never hang or exhaust memory.

Each case runs on both backends with Kubernetes' per-expression limit. The wall-clock
bound is generous (shared CI machines); without the budget these expressions would
run for minutes or hours, or allocate gigabytes.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from mkpolicy.cel import PER_CALL_LIMIT, CelCostError, Environment, Program, estimate_cost
from mkpolicy.cel.runtime import Budget
from mkpolicy.structural import Schema

#: Seconds a hostile evaluation may take before it is stopped (generous on purpose).
DEADLINE = 5.0

BIG: dict[str, Any] = {
    "items": list(range(20_000)),
    "names": [f"name-{i}" for i in range(20_000)],
    "text": "a" * 200_000 + "b",
    "nested": [[i, [i, [i]]] for i in range(2_000)],
}


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = [
    # quadratic and cubic loops over big lists
    ("object.items.all(a, object.items.exists(b, a == b + 1) || a == 0)", "nested loops"),
    ("object.items.map(a, object.items.map(b, a + b))", "nested map"),
    ("object.names.exists_one(a, object.names.exists(b, a + b == 'x'))", "nested exists_one"),
    ("object.items.transformMap(i, v, object.items.filter(w, w > v))", "transformMap"),
    # exponential construction: every doubling is charged by its size
    (
        "cel.bind(a, object.names, cel.bind(b, a + a, cel.bind(c, b + b, cel.bind(d, c + c, cel.bind(e, d + d, "
        "cel.bind(f, e + e, cel.bind(g, f + f, cel.bind(h, g + g, h + h))))))))",
        "list doubling",
    ),
    (
        "cel.bind(a, object.text, cel.bind(b, a + a, cel.bind(c, b + b, cel.bind(d, c + c, cel.bind(e, d + d, "
        "cel.bind(f, e + e, cel.bind(g, f + f, g + g)))))))",
        "string doubling",
    ),
    ("object.text.replace('', object.text).size()", "replace blow-up"),
    ("object.names.join(object.text).size()", "join blow-up"),
    ("lists.range(1000000).map(i, i * 2).size()", "big range"),
    ("object.items.map(i, lists.range(1000)).size()", "range per item"),
    # superlinear library functions are charged before they run
    ("object.names.distinct().size()", "distinct"),
    ("object.items.map(i, object.items.sort().size())", "sort per item"),
    ("sets.intersects(object.names, object.items)", "sets"),
    ("object.names.exists(n, object.text.matches(n + '(a+)+$'))", "regex per item"),
    ("'" + "%s" * 100 + "'.format(lists.range(100).map(i, object.text)).size()", "format blow-up"),
    ("object.text.matches(object.text)", "huge pattern"),
    ("object.items.map(i, object.text.split('a')).size()", "split per item"),
    ("object.items.all(i, object.names.indexOf('zz') == -1)", "indexOf per item"),
    ("object.items.map(i, i in object.items).size()", "in per item"),
    ("object.names.map(n, n.lowerAscii() + object.text).size()", "concat per item"),
]


@pytest.mark.parametrize("backend", ["codegen", "closures"])
@pytest.mark.parametrize(("expression", "what"), HOSTILE, ids=[w for _, w in HOSTILE])
def test_hostile_expressions_stop_within_the_budget(expression: str, what: str, backend: str) -> None:
    program = Program(expression, Environment.of(["object"]), backend=backend)
    budget = Budget(PER_CALL_LIMIT)
    start = time.monotonic()
    with pytest.raises(CelCostError) as info:
        program.evaluate({"object": BIG}, budget=budget)
    elapsed = time.monotonic() - start
    assert "cost limit exceeded" in info.value.message
    assert info.value.location.column is not None
    assert elapsed < DEADLINE, f"{what}: stopped only after {elapsed:.1f}s"
    # It stopped as soon as the budget was gone, not far beyond it.
    assert budget.remaining < 0


def test_pathological_regex_is_linear() -> None:
    # (a+)+$ backtracks exponentially in Perl-style engines; RE2 is linear.
    program = Program("object.text.matches('(a+)+$') || object.text.matches('^(a|aa)+$')", Environment.of(["object"]))
    start = time.monotonic()
    assert program.evaluate({"object": {"text": "a" * 5_000 + "!"}}) is False
    assert time.monotonic() - start < DEADLINE


def test_look_around_is_rejected_as_re2_does() -> None:
    with pytest.raises(Exception, match="invalid regular expression"):
        Program("'x'.matches('(?=x)')", Environment())


def test_deep_data_is_bounded() -> None:
    program = Program("object.a == object.b", Environment.of(["object"]))
    with pytest.raises(CelCostError, match="recursion is too deep"):
        program.evaluate({"object": {"a": _deep(5_000), "b": _deep(5_000)}})


def test_reasonable_expressions_fit_the_budget() -> None:
    program = Program(
        "object.names.filter(n, n.endsWith('7')).map(n, n.upperAscii()).size() > 0 && "
        "object.items.all(i, i >= 0) && object.text.startsWith('aaa')",
        Environment.of(["object"]),
    )
    budget = Budget(PER_CALL_LIMIT)
    assert program.evaluate({"object": BIG}, budget=budget) is True
    assert 0 < budget.used < PER_CALL_LIMIT


def test_budget_is_shared_between_evaluations() -> None:
    # Kubernetes also limits the total cost of all the expressions of one admission.
    program = Program("object.items.all(i, i >= 0)", Environment.of(["object"]))
    budget = Budget(150_000)
    program.evaluate({"object": BIG}, budget=budget)
    with pytest.raises(CelCostError):
        program.evaluate({"object": BIG}, budget=budget)


SCHEMA = Schema.from_document(
    {
        "type": "object",
        "properties": {
            "items": {"type": "array", "maxItems": 500, "items": {"type": "integer"}},
            "names": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 30}},
        },
    }
)


@pytest.mark.parametrize(
    "expression",
    [
        "object.items.all(i, i > 0)",
        "object.items.map(i, i * 2).size()",
        "object.names.exists(n, n.startsWith('x') || n.matches('^[a-z]+$'))",
        "object.names.filter(n, n.contains('a')).map(n, n + '!')",
        "object.items.exists(i, object.items.exists(j, i == j + 1))",
        "object.names.join(',').split(',').size()",
    ],
)
def test_actual_cost_never_exceeds_the_estimate(expression: str) -> None:
    program = Program(expression, Environment.of(["object"]))
    estimate = estimate_cost(program, {"object": SCHEMA})
    data = {"items": list(range(1, 501)), "names": [f"name{i:026d}" for i in range(100)]}
    for backend in ("codegen", "closures"):
        budget = Budget(10**12)
        Program(expression, Environment.of(["object"]), backend=backend).evaluate({"object": data}, budget=budget)
        assert budget.used <= estimate, f"{backend}: actual {budget.used} > estimate {estimate}"
