"""The shared JSON toolkit (mkpolicy/jsonvalues.py)."""

from __future__ import annotations

from collections import OrderedDict

from mkpolicy.jsonvalues import copy_json, create_merge_patch


def test_copy_json_is_deep_and_keeps_leaves() -> None:
    value = {"a": [1, {"b": [True, None, 1.5, "s"]}], "c": {}, "d": []}
    out = copy_json(value)
    assert out == value
    assert out is not value and out["a"] is not value["a"] and out["a"][1]["b"] is not value["a"][1]["b"]
    assert out["c"] is not value["c"] and out["d"] is not value["d"]
    assert copy_json("s") == "s" and copy_json(None) is None


def test_copy_json_turns_dict_and_list_subclasses_into_plain_values() -> None:
    class Tags(list[str]):
        pass

    out = copy_json(OrderedDict(a=Tags(["x"]), b={"c": OrderedDict(d=1)}))
    assert out == {"a": ["x"], "b": {"c": {"d": 1}}}
    assert type(out) is dict and type(out["a"]) is list and type(out["b"]["c"]) is dict


def test_create_merge_patch() -> None:
    shared = {"x": 1}
    old = {"a": 1, "b": {"c": 1, "d": 2}, "s": shared, "gone": 1}
    new = {"a": 1, "b": {"c": 1, "d": 3}, "s": shared, "n": [1]}
    assert create_merge_patch(old, new) == {"gone": None, "b": {"d": 3}, "n": [1]}
    assert create_merge_patch({"a": True}, {"a": 1}) == {"a": 1}
    assert create_merge_patch({"a": 1}, {"a": 1.0}) == {}
