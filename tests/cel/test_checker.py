"""The type checker: expressions typed against OpenAPI schemas (mkpolicy.cel.typecheck)."""

from __future__ import annotations

from typing import Any

import pytest

from mkpolicy.cel import CelTypeError, compile, typecheck
from mkpolicy.cel.checker import check
from mkpolicy.structural import Schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer"},
                "suspend": {"type": "boolean"},
                "ratio": {"type": "number"},
                "name": {"type": "string", "maxLength": 63},
                "port": {"x-kubernetes-int-or-string": True},
                "tasks": {
                    "type": "array",
                    "maxItems": 10,
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "image": {"type": "string"}},
                    },
                },
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "mixed": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"known": {"type": "integer"}},
                },
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}
VARS = ["object", "managerObject", "workerObject", "params"]


def errors(expression: str) -> list[tuple[int | None, str]]:
    schema = Schema.from_document(SCHEMA)
    program = compile(expression, VARS)
    found = typecheck(program, {"object": schema, "managerObject": schema, "workerObject": schema})
    assert all(isinstance(e, CelTypeError) for e in found)
    return [(e.offset, e.message) for e in found]


@pytest.mark.parametrize(
    "expression",
    [
        "object.spec.replicas + 1 > 2",
        "object.spec.suspend && !managerObject.spec.suspend",
        "object.spec.ratio * 2.0 < 1.0",
        "object.spec.ratio < 1",  # cross-type numeric comparison (Kubernetes enables it)
        "object.spec.name.startsWith('x') && size(object.spec.name) < 10",
        "object.spec.tasks.all(t, t.name != '' && t.image.contains(':'))",
        "object.spec.tasks.map(t, t.name).join(',')",
        "'%s has %d tasks'.format([object.spec.name, size(object.spec.tasks)])",
        "quantity(object.spec.name).isGreaterThan(quantity('1Gi'))",
        "ip(object.spec.name).family() == 4 && cidr('10.0.0.0/8').containsIP(object.spec.name)",
        "url(object.spec.name).getQuery()['a'][0].lowerAscii() == 'x'",
        "semver(object.spec.name, true).isLessThan(semver('2.0.0'))",
        "format.dns1123Label().validate(object.spec.name).orValue([]).size() == 0",
        "math.greatest(object.spec.replicas, 3, 1) < 10 && math.least([1.5, object.spec.ratio]) > 0.0",
        "object.spec.tasks.sortBy(t, t.name)[0].image.matches('^reg')",
        "object.spec.name.split('-').exists(p, p.find('[0-9]+') != '')",
        "object.spec.env['A'] + 'x'",
        "object.spec.env.exists(k, k.startsWith('KUEUE_'))",
        "object.spec.free.anything.goes == 1",
        "object.spec.mixed.other + 1 == 2",
        "object.spec.mixed.known + 1 == 2",
        "type(object.spec.port) == int ? object.spec.port > 80 : object.spec.port.endsWith('%')",
        "object.metadata.name + '-' + object.metadata.labels['app']",
        "object.apiVersion == 'v1' && object.kind == 'X'",
        "has(object.spec.replicas) && has(object.metadata.annotations)",
        "object.spec.?tasks[?0].?name.orValue('none')",
        "params.whatever.is.dyn",
        "workerObject.status.phase == 'Done'",
        "[JSONPatch{op: 'add', path: '/spec/replicas', value: 2}]",
        "Object{spec: Object.spec{replicas: 2, tasks: [Object.spec.tasks{name: 'a'}], env: {'A': 'b'}}}",
        "Object{metadata: Object.metadata{labels: {'a': 'b'}}}",
        "cel.bind(t, object.spec.tasks, t.size() > 0 && t[0].name == 'x')",
        "object.spec.tasks.transformMap(i, t, t.name).size() < 3",
        "object.spec == managerObject.spec && object.spec.tasks[0] != workerObject.spec.tasks[1]",
        "[object.spec, managerObject.spec].size() == 2",
        "{'tasks': dyn(object.spec.tasks), 'name': object.spec.name}",
    ],
)
def test_well_typed(expression: str) -> None:
    assert errors(expression) == []


@pytest.mark.parametrize(
    ("expression", "offset", "fragment"),
    [
        ("object.spec.replicaz > 1", 12, "undefined field 'replicaz'"),
        ("object.spec.tasks[0].nam == ''", 21, "undefined field 'nam'"),
        ("has(object.spec.nope)", 16, "undefined field 'nope'"),
        ("object.spec.?nope.hasValue()", 13, "undefined field 'nope'"),
        ("object.status.phase + 1", 20, "no matching overload for '_+_' applied to '(string, int)'"),
        ("object.spec.replicas == 'two'", 21, "'_==_' applied to '(int, string)'"),
        ("object.spec.suspend.startsWith('x')", 20, "'startsWith' applied to '(bool, string)'"),
        ("object.spec.replicas.foo", 21, "type 'int' does not support field selection"),
        ("object.spec.tasks.all(t, t.name)", 27, "predicate must be a bool"),
        ("object.spec.env.exists(k, k + 1 > 0)", 28, "'_+_' applied to '(string, int)'"),
        ("object.spec.ratio + 1", 18, "'_+_' applied to '(double, int)'"),
        ("Object{spec: Object.spec{replicas: 'x'}}", 35, "field 'Object.spec.replicas' expects 'int'"),
        ("Object{spec: Object.spec{replicaz: 1}}", 25, "undefined field 'replicaz'"),
        ("Object{spec: Object.spek{}}", 20, "unknown message type 'Object.spek'"),
        ("[JSONPatch{op: 1, path: '/x'}]", 15, "field 'JSONPatch.op' expects 'string'"),
        ("[1, 'a']", 4, "expected type 'int' but found 'string'"),
        ("{'n': object.spec.name, 'r': object.spec.replicas}", 41, "expected type 'string' but found 'int'"),
        ("{'a': 1, 'b': true}", 14, "expected type 'int' but found 'bool'"),
        ("object.metadata.nam", 16, "undefined field 'nam'"),
        ("quantity(object.spec.replicas)", 0, "'quantity' applied to '(int)'"),
        ("ip('1.2.3.4').family() == 'four'", 23, "'_==_' applied to '(int, string)'"),
        ("object.spec.tasks.join(',')", 18, "'join' applied to '(list(object.spec.tasks), string)'"),
        ("math.greatest('a', 'b')", 5, "'math.greatest' applied to '(string, string)'"),
    ],
)
def test_type_errors(expression: str, offset: int, fragment: str) -> None:
    found = errors(expression)
    assert found, f"no error for {expression}"
    assert found[0][0] == offset, found
    assert fragment in found[0][1], found


def test_variables_without_schema_are_dyn() -> None:
    program = compile("object.spec.anything + workload.x", ["object", "workload"])
    assert typecheck(program, {}) == []
    assert typecheck(program, {"object": None}) == []


def test_error_carries_line_and_column() -> None:
    program = compile("object.spec.replicas > 1 &&\n  object.spec.nope", ["object"])
    (err,) = typecheck(program, {"object": Schema.from_document(SCHEMA)})
    assert (err.location.line, err.location.column) == (2, 15)
    assert err.offset == 42


@pytest.mark.parametrize(
    ("expression", "deduced"),
    [
        ("1 + 2", "int"),
        ("[1, 2].map(x, double(x) * 2.0 > 1.0)", "list(bool)"),
        ("{'a': [1u]}", "map(string, list(uint))"),
        ("[]", "list(dyn)"),
        ("[[], [[]]]", "list(list(list(dyn)))"),
        ("optional.of(1)", "optional_type(int)"),
        ("[optional.none(), optional.of('x')]", "list(optional_type(string))"),
        ("type(1)", "type(int)"),
        ("[1].exists(x, x > 0)", "bool"),
        ("{'a': 1}.transformMap(k, v, v > 0)", "map(string, bool)"),
        ("duration('1s') + timestamp('2020-01-01T00:00:00Z')", "google.protobuf.Timestamp"),
        ("true ? 1 : dyn(2)", "dyn"),
    ],
)
def test_deduced_types(expression: str, deduced: str) -> None:
    program = compile(expression, [])
    result = check(program)
    assert result.errors == []
    assert str(result.type_of(program.ast)) == deduced
