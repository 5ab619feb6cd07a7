"""The generated-code evaluator agrees with the closure evaluator (the reference).

Same values, same errors at the same positions, same cost charged; plus what is
specific to code generation: fallback for deep nesting, constant folding that keeps
run-time error semantics, programs that need no budget.
"""

from __future__ import annotations

from typing import Any

import pytest

from mkpolicy.cel import CelCostError, CelEvalError, Environment, Program
from mkpolicy.cel.runtime import Budget, LazyMap

OBJECT: dict[str, Any] = {
    "metadata": {"name": "run-1", "labels": {"app": "x", "kueue.x-k8s.io/queue-name": "q"}, "annotations": {}},
    "spec": {
        "tasks": [{"name": f"t{i}", "params": [{"name": "p", "value": str(i)}], "retries": i % 3} for i in range(12)],
        "timeouts": {"pipeline": "1h"},
    },
    "status": {"conditions": [{"type": "Succeeded", "status": "True"}]},
}

CORPUS = [
    "object.metadata.name",
    "object.metadata.labels['kueue.x-k8s.io/queue-name']",
    "has(object.spec.timeouts) && !has(object.spec.nope)",
    "object.spec.?nope.?x.orValue('d') + object.spec.?timeouts.?pipeline.orValue('')",
    "object.spec.tasks.map(t, t.name)",
    "object.spec.tasks.map(t, t.retries > 0, {'n': t.name, 'r': t.retries * 2})",
    "object.spec.tasks.filter(t, t.retries == 1).size()",
    "object.spec.tasks.all(t, t.params.exists(p, p.value == string(int(p.value))))",
    "object.spec.tasks.exists_one(t, t.name == 't3')",
    "object.spec.tasks.transformList(i, t, i * 10 + t.retries)",
    "object.spec.tasks.transformMap(i, t, t.name)",
    "object.metadata.labels.transformMapEntry(k, v, {v: k})",
    "object.spec.tasks.sortBy(t, -t.retries).map(t, t.name)[0]",
    "cel.bind(n, object.spec.tasks.size(), n * n + n)",
    "[1, 2, 3].map(x, [x, x * x]).flatten().sum()",
    "{'a': 1, ?'b': optional.none(), ?'c': object.spec.?timeouts}",
    "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a/b'), value: object.metadata.name}]",
    "Object{metadata: Object.metadata{labels: {'x': 'y'}}, spec: Object.spec{timeouts: null}}",
    "object.spec.tasks.map(t, t.name).join(',').split(',').size()",
    "'%s/%d'.format([object.metadata.name, size(object.spec.tasks)])",
    "object.metadata.name.matches('^run-[0-9]+$') && object.metadata.name.find('[0-9]+') == '1'",
    "duration('1h') + timestamp('2024-01-01T00:00:00Z') < timestamp('2024-01-01T02:00:00Z')",
    "1 + 2u > 2.5 || dyn(1) == 1.0",
    "variables.count + 1",
    "variables.names.size() > 3 ? 'many' : 'few'",
    "[1, 2, 3].exists(x, x > 2) ? object.status.conditions[0].status : 'no'",
    "quantity('1Gi').add(quantity('512Mi')).asInteger()",
    "ip('10.0.0.1').isGlobalUnicast() && cidr('10.0.0.0/8').containsIP('10.1.2.3')",
    "math.greatest(object.spec.tasks.map(t, t.retries))",
    "object.spec.tasks.map(t, t.name in ['t1', 't2']).filter(b, b).size()",
    # Optional entries, elements and fields (inlined for x.?f on maps, dyn() included).
    "{?'a': dyn(object.spec.?timeouts), ?'b': object.spec.?nope, 'c': 1, ?'d': optional.of(2)}",
    "{?'a': object.?spec.?timeouts.?pipeline, ?'b': dyn(dyn(object.metadata.?labels))}",
    "[?object.spec.?timeouts, ?optional.none(), 1, ?object.status.?conditions]",
    "Object{?spec: object.?spec, ?status: object.?nope, metadata: Object.metadata{?labels: object.metadata.?labels}}",
    "{?'a': {'x': 1}.?x, ?'b': variables.?count}",
    "dyn(object.metadata.name) + dyn('-') + string(dyn(1))",
    # 'in' on maps.
    "'app' in object.metadata.labels && !('nope' in object.metadata.labels) && 1 in {1: 2}",
    "'count' in variables && !('nope' in variables)",
]


def _bindings() -> dict[str, Any]:
    names = [t["name"] for t in OBJECT["spec"]["tasks"]]
    variables = LazyMap(["count", "names"], lambda name: len(names) if name == "count" else names)
    return {"object": OBJECT, "variables": variables}


def _run(expression: str, backend: str) -> tuple[str, Any, int]:
    program = Program(expression, Environment.of(["object", "variables"]), backend=backend)
    budget = Budget(1_000_000)
    try:
        value = program.evaluate(_bindings(), budget=budget)
    except CelEvalError as exc:
        return ("error", (exc.message, exc.offset), budget.used)
    return ("value", value, budget.used)


@pytest.mark.parametrize("expression", CORPUS)
def test_backends_agree(expression: str) -> None:
    generated = _run(expression, "codegen")
    closures = _run(expression, "closures")
    assert generated == closures
    assert generated[0] == "value", generated


ERRORS = [
    "object.spec.tasks.map(t, t.nope)",
    "object.spec.tasks.all(t, t.retries / (t.retries - 1) >= 0)",
    "object.spec.tasks[99]",
    "object.metadata.labels.nope || object.metadata.name == 1",
    "object.spec.tasks.exists(t, t.retries > 'x')",
    "object.spec.tasks.map(t, t.name).join(1)",
    "variables.nope",
    "[1, 2].filter(x, x)",
    "{'a': 1}.transformMapEntry(k, v, v)",
    "1 / 0 == 1",
    "[?object.metadata.name, object.nope]",
    "{?'a': 1}",
    "{?'a': dyn(object.metadata.name)}",
    "{?'a': object.metadata.name.?x}",
    "Object{?spec: object.spec}",
    "[?object.spec.?timeouts, ?object.metadata.nope.?x]",
    "1 in object.metadata.name",
]


@pytest.mark.parametrize("expression", ERRORS)
def test_backends_agree_on_errors(expression: str) -> None:
    generated = _run(expression, "codegen")
    closures = _run(expression, "closures")
    assert generated[0] == "error", generated
    assert generated[:2] == closures[:2]


def test_deep_nesting_falls_back_to_closures() -> None:
    # Python allows 20 nested blocks; deeper sub-expressions are compiled as closures,
    # with the comprehension variables in scope handed over.
    inner = " && ".join(f"(x > {i} || x == {i})" for i in range(40))
    nested = "[1, 2].all(x, " + "(" * 30 + inner + ")" * 30 + ")"
    program = Program(nested, Environment())
    assert program.evaluate({}) is False
    deep = "[[1, 2]].map(l, l.map(x, " + " + ".join(["(x > 0 ? x : 0)"] * 25) + "))"
    assert Program(deep, Environment()).evaluate({}) == [[25, 50]]
    assert Program(deep, Environment(), backend="closures").evaluate({}) == [[25, 50]]


def test_constant_folding_keeps_runtime_errors() -> None:
    folded = Program("'a' + 'b' + jsonpatch.escapeKey('c/d')", Environment())
    assert folded.evaluate({}) == "abc~1d"
    assert "return 'abc~1d'" in (folded._generated.__doc__ or "")
    # A constant sub-expression that fails is not folded: CEL absorbs the error here.
    assert Program("1 / 0 == 1 || true", Environment()).evaluate({}) is True
    with pytest.raises(CelEvalError) as info:
        Program("true && 1 / 0 == 1", Environment()).evaluate({})
    assert info.value.message == "division by zero" and info.value.offset == 10


def test_straight_line_programs_need_no_budget() -> None:
    program = Program("[JSONPatch{op: 'add', path: '/a', value: 1}]", Environment())
    assert program._needs_budget is False
    assert program.evaluate({})[0]["op"] == "add"
    # Their cost is known in advance: a limit below it fails at once.
    with pytest.raises(CelCostError):
        program.evaluate({}, cost_limit=program.fixed_cost - 1)
    budget = Budget(1000)
    program.evaluate({}, budget=budget)
    assert budget.used == program.fixed_cost == 50


def test_errors_of_lazy_variables_are_positioned() -> None:
    def compute(name: str) -> Any:
        from mkpolicy.cel.errors import EvalError

        raise EvalError(f"variable {name!r} failed")

    for backend in ("codegen", "closures"):
        program = Program("1 + variables.broken", Environment.of(["variables"]), backend=backend)
        with pytest.raises(CelEvalError) as info:
            program.evaluate({"variables": LazyMap(["broken"], compute)})
        assert info.value.message == "variable 'broken' failed"
        assert info.value.offset == 14


def test_message_literals_keep_their_type_names() -> None:
    # ObjectValue equality ignores the message name; its repr does not.
    for expression in [
        "Object{metadata: Object.metadata{labels: {'a': 'b'}}, ?spec: optional.of(Object.spec{})}",
        "[JSONPatch{op: 'add', path: '/a', value: 1}]",
    ]:
        generated = _run(expression, "codegen")
        closures = _run(expression, "closures")
        assert repr(generated) == repr(closures)
        assert "Object.metadata{" in repr(generated) or "JSONPatch{" in repr(generated)


def test_a_limit_below_the_fixed_cost_fails_at_once() -> None:
    for backend in ("codegen", "closures"):
        program = Program("[1, 2, 3].map(x, x * 2)", Environment(), backend=backend)
        with pytest.raises(CelCostError) as info:
            program.evaluate({}, cost_limit=program.fixed_cost - 1)
        assert info.value.message == f"operation cancelled: actual cost limit exceeded (limit {program.fixed_cost - 1})"
        assert program.evaluate({}, cost_limit=program.fixed_cost + 100) == [2, 4, 6]
