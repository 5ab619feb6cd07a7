"""CEL values to JSON (``to_json``): what Kubernetes writes into an object."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mkpolicy.cel.convert import to_json
from mkpolicy.cel.errors import EvalError
from mkpolicy.cel.values import Duration, ObjectValue, OptionalValue, Timestamp, Uint


def test_to_json_copies_containers_and_converts_leaves() -> None:
    status = {"conditions": [{"type": "Succeeded", "n": 1, "ok": True, "x": None, "f": 1.5}], "u": Uint(3)}
    out = to_json(status)
    assert out == {"conditions": [{"type": "Succeeded", "n": 1, "ok": True, "x": None, "f": 1.5}], "u": 3}
    assert out is not status and out["conditions"] is not status["conditions"]
    assert out["conditions"][0] is not status["conditions"][0]
    assert type(out["u"]) is int
    value = ObjectValue("Object.spec", {"d": Duration(1_500_000_000), "t": Timestamp(0), "b": b"hi", "l": (1, 2)})
    assert to_json(value) == {"d": "1.5s", "t": "1970-01-01T00:00:00Z", "b": "aGk=", "l": [1, 2]}
    assert type(to_json(value)) is dict


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": math.nan}, "value nan cannot be represented in JSON"),
        ({1: "a"}, "map key 1 of type int cannot be a JSON object key"),
        # The first problem in order, key or value.
        ({"a": math.inf, 1: "a"}, "value inf cannot be represented in JSON"),
        ({1: math.nan, "a": 1}, "map key 1 of type int cannot be a JSON object key"),
        ([1, "a", [OptionalValue(1)]], "a value of type optional_type cannot be converted to JSON"),
    ],
)
def test_to_json_errors(value: Any, message: str) -> None:
    with pytest.raises(EvalError) as info:
        to_json(value)
    assert info.value.message == message
