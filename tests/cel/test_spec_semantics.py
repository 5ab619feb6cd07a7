"""CEL semantics cel-spec fixes and Python would get wrong, on both evaluator backends."""

from __future__ import annotations

from typing import Any

import pytest

from mkpolicy.cel import Environment, Program
from mkpolicy.cel.convert import from_cel, to_cel
from mkpolicy.errors import CelError

CASES = [
    # cel-spec (string_ext.textproto, format "map support (all key types)"): true and 1 are
    # different map keys in CEL; Python's True == 1 must not merge them.
    ('"%s".format([{1: "value1", uint(2): "value2", true: double("NaN")}])', "{1: value1, 2: value2, true: NaN}"),
    ("{true: 'a', 1: 'b'}.size()", 2),
    ("{true: 'a', 1: 'b'}[true] + {true: 'a', 1: 'b'}[1]", "ab"),
    ("{1: 'b'}[?true].hasValue() || true in {1: 'b'} || 1 in {true: 'a'}", False),
    ("{true: 'a', 1: 'b'}.all(k, k == true || k == 1) && {true: 'a'}.exists(k, type(k) == bool)", True),
    ("{true: 'a'}.transformMap(k, v, v + '!') == {true: 'a!'}", True),
    ("{true: 1} == {1: 1}", False),
    # cel-spec (parse.textproto): \\? is an escaped ? in string and bytes literals, also
    # triple-quoted ones; cel-go reads b''' \\? ''' as b' ? '.
    ("b''' \\? \" ' ` '''", b" ? \" ' ` "),
    ("b'\\?' == b'?' && '\\?' == '?'", True),
]


@pytest.mark.parametrize("backend", ["codegen", "closures"])
@pytest.mark.parametrize(("expression", "expected"), CASES)
def test_cel_spec_semantics(backend: str, expression: str, expected: Any) -> None:
    assert Program(expression, Environment(), backend=backend).evaluate({}) == expected


def test_bool_keys_cross_the_api() -> None:
    program = Program("m[true] + string(m.size())", Environment(variables=frozenset({"m"})))
    assert program.evaluate({"m": to_cel({True: "yes", "k": "v"})}) == "yes2"
    assert from_cel(Program("{true: 1}", Environment()).evaluate({})) == {True: 1}


def test_repeated_bool_key_is_an_error() -> None:
    with pytest.raises(CelError, match="repeated key"):
        Program("{true: 1, true: 2}", Environment()).evaluate({})
