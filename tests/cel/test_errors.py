"""Bad input: every failure is a typed error positioned in the expression.

Syntax errors, unknown names and functions, wrong argument counts and types, division
by zero, overflow, missing fields without has(), budget overrun. Evaluation errors are
checked on both backends, which must agree on the message and the position.
"""

from __future__ import annotations

from typing import Any

import pytest

from mkpolicy.cel import (
    CelCompileError,
    CelCostError,
    CelError,
    CelEvalError,
    CelSyntaxError,
    Environment,
    Program,
    compile,
    evaluate,
)
from mkpolicy.cel.errors import CelExpressionError
from mkpolicy.errors import Location

VARS = ["object", "x"]
OBJECT = {"metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {"items": [1, 2, 3], "count": 2}}


@pytest.mark.parametrize(
    ("expression", "line", "column", "fragment"),
    [
        ("1 +", 1, 4, "unexpected end of expression"),
        ("object.spec.(", 1, 13, "syntax error: unexpected '('"),
        ("object.spec\n  .items.map(x,\n  x +)", 3, 6, "unexpected ')'"),
        ("'unterminated", 1, 1, "syntax error"),
        ("if", 1, 1, "reserved identifier 'if'"),
        ("9223372036854775808", 1, 1, "integer literal is out of range"),
        ("'\\q'", 1, 1, "invalid escape sequence"),
        ("b'\\u00e9'", 1, 1, "not allowed in bytes literals"),
        ("has(object)", 1, 5, "invalid argument to has() macro"),
        ("[1].map(x.y, 1)", 1, 11, "the variable must be a simple name"),
        ("[" * 150 + "1" + "]" * 150, 1, 101, "nests deeper than 100 levels"),
    ],
)
def test_syntax_errors(expression: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(CelSyntaxError) as info:
        compile(expression, VARS)
    err = info.value
    assert fragment in err.message
    assert (err.location.line, err.location.column) == (line, column), err.message


def test_expression_length_is_bounded() -> None:
    with pytest.raises(CelSyntaxError, match="at most 100000 are accepted"):
        compile("1 + " * 30_000 + "1", VARS)


@pytest.mark.parametrize(
    ("expression", "column", "fragment"),
    [
        ("objct.spec", 1, "undeclared reference to 'objct'"),
        ("object.spec.map(i, j)", 20, "undeclared reference to 'j'"),
        ("nosuch(1)", 1, "undeclared reference to function 'nosuch'"),
        ("object.spec.frobnicate()", 13, "undeclared reference to function 'frobnicate'"),
        ("size(1, 2)", 1, "expected 1 argument(s), got 2"),
        ("'abc'.startsWith()", 7, "expected 1 argument(s), got 0"),
        ("x.isIP()", 3, "'isIP' is not a method"),
        ("family(x)", 1, "'family' must be called on a value"),
        ("Foo{a: 1}", 1, "unknown message type 'Foo'"),
        ("[JSONPatch{op: 'add', pth: '/a'}]", 23, "'JSONPatch' has no field 'pth'"),
        ("Object{spec: 1, spec: 2}", 17, "field 'spec' is set twice"),
        ("object.metadata.name.matches('[')", 30, "invalid regular expression '['"),
        ("duration('5 minutes')", 10, "invalid duration"),
        ("timestamp('2024-13-01T00:00:00Z')", 11, "timestamp parse error"),
    ],
)
def test_compile_errors(expression: str, column: int, fragment: str) -> None:
    with pytest.raises(CelCompileError) as info:
        compile(expression, VARS)
    err = info.value
    assert fragment in err.message
    assert (err.location.line, err.location.column) == (1, column), err.message


EVAL_ERRORS = [
    ("1 / 0", 3, "division by zero"),
    ("x % 0", 3, "modulus by zero"),
    ("9223372036854775807 + x", 21, "overflow"),
    ("-9223372036854775808 - x", 22, "overflow"),
    ("0u - 1u", 4, "overflow"),
    ("(x + 1) * 4611686018427387904", 9, "overflow"),
    ("-(-9223372036854775807 - x)", 1, "overflow"),
    ("object.spec.missing", 13, "no such key: missing"),
    ("object.metadata.labels.b", 24, "no such key: b"),
    ("object.metadata.labels['zz']", 23, "no such key: 'zz'"),
    ("object.spec.items[5]", 18, "index out of bounds: 5"),
    ("object.spec.count + 'a'", 19, "no such overload: _+_(int, string)"),
    ("object.spec.count.startsWith('a')", 19, "no such overload: startsWith(int, string)"),
    ("object.spec.count.foo", 19, "does not support field selection"),
    ("int('12x')", 1, "cannot convert string '12x' to int"),
    ("int(1e100)", 1, "range error"),
    ("timestamp(x * 999999999999)", 1, "timestamp out of range"),
    # The innermost node that fails gives the position.
    ("object.spec.items.all(i, i > 'a')", 28, "no such overload: _>_(int, string)"),
    ("object.spec.items.map(i, i / (i - 1))", 28, "division by zero"),
    ("object.spec.count ? 1 : 2", 19, "no such overload: _?_:_(int)"),
    ("object.spec.count && true", 19, "no such overload: _&&_(int)"),
    # Operands are evaluated left to right: the item of `in` before its container.
    ("object.spec.nope in object.spec.nada", 13, "no such key: nope"),
    ("unbound + 1", 1, "undeclared reference to 'unbound' (no value bound)"),
]


@pytest.mark.parametrize("backend", ["codegen", "closures"])
@pytest.mark.parametrize(("expression", "column", "fragment"), EVAL_ERRORS, ids=[e for e, _, _ in EVAL_ERRORS])
def test_evaluation_errors(expression: str, column: int, fragment: str, backend: str) -> None:
    program = Program(expression, Environment.of([*VARS, "unbound"]), backend=backend)
    with pytest.raises(CelEvalError) as info:
        program.evaluate({"object": OBJECT, "x": 1})
    err = info.value
    assert not isinstance(err, CelCostError)
    assert fragment in err.message
    assert (err.location.line, err.location.column) == (1, column), err.message


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        # Errors are absorbed by && / || when the other side decides, as in CEL.
        ("object.spec.missing || true", True),
        ("false && object.spec.missing", False),
        ("object.spec.missing && false", False),
        ("object.spec.items.exists(i, i / 0 == 1 || i == 2)", True),
        ("[1, 0].all(i, 1 / i > 5)", False),
        ("has(object.spec.missing) ? object.spec.missing : 'default'", "default"),
        ("object.spec.?missing.orValue('default')", "default"),
    ],
)
def test_errors_absorbed(expression: str, value: Any) -> None:
    for backend in ("codegen", "closures"):
        assert Program(expression, Environment.of(VARS), backend=backend).evaluate({"object": OBJECT}) == value


def test_cost_error_is_typed_and_positioned() -> None:
    program = compile("object.spec.items.map(i, object.spec.items.map(j, i * j))", VARS)
    with pytest.raises(CelCostError) as info:
        program.evaluate({"object": {"spec": {"items": list(range(2000))}}})
    err = info.value
    assert isinstance(err, CelEvalError) and isinstance(err, CelError)
    assert "cost limit exceeded" in err.message
    assert err.location.line == 1 and err.location.column is not None


def test_relocation_into_a_policy_file() -> None:
    program = compile("object.spec\n  .missing", VARS)
    with pytest.raises(CelExpressionError) as info:
        program.evaluate({"object": OBJECT})
    moved = info.value.relocated(Location("policy.yaml", 12, 9))
    assert isinstance(moved, CelEvalError)
    assert str(moved).startswith("policy.yaml:12:9")
    assert moved.offset == info.value.offset == 15


def test_values_nesting_too_deeply_are_a_typed_error() -> None:
    deep: Any = 1
    for _ in range(5_000):
        deep = {"a": deep}
    with pytest.raises(CelEvalError, match="a variable's value nests too deeply to convert"):
        evaluate("x.a", {"x": deep})
    shallow: Any = 1
    for _ in range(50):
        shallow = {"a": shallow}
    assert evaluate("x.a.a", {"x": shallow}) == shallow["a"]["a"]
