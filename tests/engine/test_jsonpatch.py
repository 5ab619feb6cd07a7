"""JSON Patch with Kubernetes' semantics (evanphx/json-patch v4 as vendored by Kubernetes).

Each row documents one behaviour; rows marked K8S differ from textbook RFC 6902, rows
marked DEVIATION differ from Kubernetes on purpose (see mkpolicy/engine/jsonpatch.py).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

import mkpolicy
from mkpolicy.engine.jsonpatch import apply_json_patch
from mkpolicy.errors import PatchError
from mkpolicy.jsonvalues import json_equal

DOC: dict[str, Any] = {"a": {"b": 1, "l": [1, 2, 3]}, "s": "x", "k/~": True}

OK = [
    # K8S: replace of a missing member adds it (RFC: error).
    (
        "replace-missing-adds",
        [{"op": "replace", "path": "/a/c", "value": 2}],
        {"a": {"b": 1, "l": [1, 2, 3], "c": 2}, "s": "x", "k/~": True},
    ),
    (
        "replace-existing",
        [{"op": "replace", "path": "/a/b", "value": 5}],
        {"a": {"b": 5, "l": [1, 2, 3]}, "s": "x", "k/~": True},
    ),
    (
        "add-append-dash",
        [{"op": "add", "path": "/a/l/-", "value": 4}],
        {"a": {"b": 1, "l": [1, 2, 3, 4]}, "s": "x", "k/~": True},
    ),
    (
        "add-at-length-appends",
        [{"op": "add", "path": "/a/l/3", "value": 4}],
        {"a": {"b": 1, "l": [1, 2, 3, 4]}, "s": "x", "k/~": True},
    ),
    (
        "add-inserts",
        [{"op": "add", "path": "/a/l/0", "value": 0}],
        {"a": {"b": 1, "l": [0, 1, 2, 3]}, "s": "x", "k/~": True},
    ),
    # K8S: negative indices count from the end (v4's SupportNegativeIndices).
    (
        "add-negative-index",
        [{"op": "add", "path": "/a/l/-4", "value": 0}],
        {"a": {"b": 1, "l": [0, 1, 2, 3]}, "s": "x", "k/~": True},
    ),
    (
        "remove-negative-index",
        [{"op": "remove", "path": "/a/l/-1"}],
        {"a": {"b": 1, "l": [1, 2]}, "s": "x", "k/~": True},
    ),
    # K8S (json-patch v4.13.0 partialArray.set; a real MutatingAdmissionPolicy agrees): replace -1 is the last.
    (
        "replace-negative-index",
        [{"op": "replace", "path": "/a/l/-1", "value": 0}],
        {"a": {"b": 1, "l": [1, 2, 0]}, "s": "x", "k/~": True},
    ),
    # K8S: add without value stores null.
    (
        "add-without-value-is-null",
        [{"op": "add", "path": "/n"}],
        {"a": {"b": 1, "l": [1, 2, 3]}, "s": "x", "k/~": True, "n": None},
    ),
    (
        "add-overwrites-member",
        [{"op": "add", "path": "/s", "value": "y"}],
        {"a": {"b": 1, "l": [1, 2, 3]}, "s": "y", "k/~": True},
    ),
    ("escaped-pointer", [{"op": "remove", "path": "/k~1~0"}], {"a": {"b": 1, "l": [1, 2, 3]}, "s": "x"}),
    ("move", [{"op": "move", "from": "/a/b", "path": "/m"}], {"a": {"l": [1, 2, 3]}, "s": "x", "k/~": True, "m": 1}),
    (
        "copy",
        [{"op": "copy", "from": "/a/l", "path": "/c"}],
        {"a": {"b": 1, "l": [1, 2, 3]}, "s": "x", "k/~": True, "c": [1, 2, 3]},
    ),
    # K8S: a failing test is not an error: the whole patch is discarded, earlier ops too.
    (
        "failed-test-discards-patch",
        [{"op": "add", "path": "/q", "value": 1}, {"op": "test", "path": "/a/b", "value": 2}],
        DOC,
    ),
    ("test-absent-member-differs-discards", [{"op": "test", "path": "/a/zz", "value": 1}], DOC),
    # K8S (json-patch v4.13.0 Patch.test as Kubernetes feeds it, value sent as JSON text; a
    # real MutatingAdmissionPolicy agrees, tests/peers/test_map_oracle.py): a null value never
    # passes, not even on an absent member; a test without value passes on an absent one only.
    (
        "test-absent-member-is-null",
        [{"op": "test", "path": "/a/zz", "value": None}, {"op": "add", "path": "/q", "value": 1}],
        DOC,
    ),
    (
        "test-without-value-absent-member",
        [{"op": "test", "path": "/a/zz"}, {"op": "add", "path": "/q", "value": 1}],
        {"a": {"b": 1, "l": [1, 2, 3]}, "s": "x", "k/~": True, "q": 1},
    ),
    ("test-without-value-present-member", [{"op": "test", "path": "/s"}, {"op": "add", "path": "/q", "value": 1}], DOC),
    (
        "test-negative-index-counts-from-the-end",
        [{"op": "test", "path": "/a/l/-1", "value": 3}, {"op": "add", "path": "/q", "value": 1}],
        {"a": {"b": 1, "l": [1, 2, 3]}, "s": "x", "k/~": True, "q": 1},
    ),
    # JSON equality: 1 == 1.0, but true != 1.
    (
        "test-number-equality",
        [{"op": "test", "path": "/a/b", "value": 1.0}, {"op": "add", "path": "/q", "value": 1}],
        {"a": {"b": 1, "l": [1, 2, 3]}, "s": "x", "k/~": True, "q": 1},
    ),
    (
        "test-bool-is-not-number",
        [{"op": "test", "path": "/a/b", "value": True}, {"op": "add", "path": "/q", "value": 1}],
        DOC,
    ),
]

ERRORS = [
    # Same as RFC 6902.
    ("add-missing-parent", [{"op": "add", "path": "/x/y", "value": 1}], "missing path: '/x/y' (no member 'x')"),
    ("append-to-missing-array", [{"op": "add", "path": "/x/-", "value": 1}], "missing path"),
    ("remove-absent", [{"op": "remove", "path": "/a/zz"}], "cannot remove '/a/zz': the member does not exist"),
    ("add-beyond-length", [{"op": "add", "path": "/a/l/4", "value": 1}], "array index 4 out of range for add"),
    ("remove-beyond-length", [{"op": "remove", "path": "/a/l/3"}], "array index 3 out of range for remove"),
    ("replace-beyond-length", [{"op": "replace", "path": "/a/l/3", "value": 0}], "out of range for replace"),
    ("add-inside-scalar", [{"op": "add", "path": "/s/x", "value": 1}], "the parent is not an object or array"),
    ("unknown-op", [{"op": "frob", "path": "/a"}], "unknown op 'frob'"),
    ("move-missing-from", [{"op": "move", "from": "/nope", "path": "/m"}], "operation 1 (move /m)"),
    ("move-into-child", [{"op": "move", "from": "/a", "path": "/a/x"}], "Cannot move values into their own children"),
    # DEVIATION: v4 treats "a/b" as "/b"; mkpolicy rejects it.
    ("pointer-without-slash", [{"op": "add", "path": "a/b", "value": 1}], "expected a JSON pointer starting with '/'"),
    # DEVIATION: the root cannot be patched (v4 errors or panics).
    ("root-path", [{"op": "replace", "path": "", "value": {}}], "the document root cannot be patched"),
    (
        "replace-negative-index-beyond-length",
        [{"op": "replace", "path": "/a/l/-4", "value": 0}],
        "out of range for replace",
    ),
    ("path-not-a-string", [{"op": "add", "path": 3, "value": 0}], "'path' must be a string"),
    # K8S (json-patch v4.12.0 findObject): a test under a missing, null or scalar parent is an
    # error (ErrMissing), not a failed test: Kubernetes fails the mutation.
    ("test-missing-parent", [{"op": "test", "path": "/nope/x", "value": 1}], "is missing path: /nope/x"),
    ("test-scalar-parent", [{"op": "test", "path": "/s/x", "value": 1}], "is missing path: /s/x"),
    # K8S (partialArray.get): an index out of range is an error.
    ("test-index-out-of-range", [{"op": "test", "path": "/a/l/3", "value": 1}], "Unable to access invalid index: 3"),
]


@pytest.mark.parametrize(("ops", "expected"), [r[1:] for r in OK], ids=[r[0] for r in OK])
def test_kubernetes_json_patch(ops: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    doc = copy.deepcopy(DOC)
    assert apply_json_patch(doc, ops) == expected
    assert doc == DOC, "the input document must never be modified"


@pytest.mark.parametrize(("ops", "message"), [r[1:] for r in ERRORS], ids=[r[0] for r in ERRORS])
def test_kubernetes_json_patch_errors(ops: list[dict[str, Any]], message: str) -> None:
    doc = copy.deepcopy(DOC)
    with pytest.raises(PatchError, match="operation 1") as info:
        apply_json_patch(doc, ops)
    assert message in str(info.value)
    assert doc == DOC


def test_a_test_under_a_null_parent_is_an_error() -> None:
    # json-patch v4.12.0 findObject: a null member is a nil node, like a missing one.
    with pytest.raises(PatchError, match="is missing path: /n/x"):
        apply_json_patch({"n": None}, [{"op": "test", "path": "/n/x", "value": None}])


def test_copy_on_write_shares_untouched_subtrees() -> None:
    doc = {"a": {"deep": {"x": 1}}, "b": {"y": 2}}
    out = apply_json_patch(doc, [{"op": "add", "path": "/a/z", "value": 3}])
    assert out["b"] is doc["b"] and out["a"]["deep"] is doc["a"]["deep"]
    assert out["a"] is not doc["a"] and "z" not in doc["a"]


def test_list_index_shift_never_leaks_into_the_input() -> None:
    doc = {"l": [{"n": 0}, {"n": 1}]}
    out = apply_json_patch(
        doc, [{"op": "add", "path": "/l/0", "value": {"n": -1}}, {"op": "replace", "path": "/l/1/n", "value": 9}]
    )
    assert out == {"l": [{"n": -1}, {"n": 9}, {"n": 1}]}
    assert doc == {"l": [{"n": 0}, {"n": 1}]}


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, True),
        (True, 1, False),
        ({"a": [1]}, {"a": [1.0]}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ("1", 1, False),
        (None, None, True),
    ],
)
def test_json_equal(a: Any, b: Any, equal: bool) -> None:
    assert json_equal(a, b) is equal


@pytest.mark.parametrize(
    ("key", "escaped"),
    [("a/b", "a~1b"), ("a~b", "a~0b"), ("~/", "~0~1"), ("a~1b", "a~01b"), ("plain", "plain")],
)
def test_escape_key_escapes_tilde_and_slash_in_one_pass(key: str, escaped: str) -> None:
    assert mkpolicy.cel.evaluate("jsonpatch.escapeKey(k)", {"k": key}) == escaped
    # And the escaped key addresses the member through a real patch.
    out = mkpolicy.mutate(
        {"m": {key: 1}},
        [
            {
                "patchType": "JSONPatch",
                "expression": "[JSONPatch{op: 'replace', path: '/m/' + jsonpatch.escapeKey(k), value: 2}]".replace(
                    "k)", repr(key) + ")"
                ),
            }
        ],
    )
    assert out == {"m": {key: 2}}


# The engine applies JSONPatch results made only of well-formed add/remove/replace
# operations in one pass (mkpolicy/engine/mutation.py); everything else takes the general
# path. Both must give the same objects and the same errors.
FAST_PATH_CASES = [
    "[JSONPatch{op: 'add', path: '/spec/a', value: 1}]",
    "[JSONPatch{op: 'add', path: '/spec/a'}]",
    "[JSONPatch{op: 'replace', path: '/spec/l/0', value: {'k': [dyn(1), dyn(2.5), dyn(true), null]}}, "
    "JSONPatch{op: 'remove', path: '/spec/x'}]",
    "[JSONPatch{op: 'add', path: '/spec/l/-', value: duration('90s')}, JSONPatch{op: 'add', path: '/top', value: 1u}]",
    "[JSONPatch{op: 'add', path: '/spec/l/0', value: 0}, JSONPatch{op: 'remove', path: '/spec/l/-1'}]",
    "[JSONPatch{op: 'add', path: '/spec/a', value: 1}, JSONPatch{op: 'test', path: '/spec/x', value: 2}]",
    "[JSONPatch{op: 'add', path: '/spec/a', value: 1}, JSONPatch{op: 'test', path: '/spec/x', value: 1}]",
    "[JSONPatch{op: 'add', path: '/spec/a', value: 1}, JSONPatch{op: 'move', from: '/spec/x', path: '/spec/m'}]",
    "[JSONPatch{op: 'add', from: '/spec/x', path: '/spec/b', value: 1}]",
    "[JSONPatch{op: 'add', path: '/spec/k~1~0', value: 'escaped'}]",
    "[]",
    # Errors.
    "[JSONPatch{op: 'add', path: '/spec/a', value: optional.none()}]",
    "[JSONPatch{op: 'add', path: '/spec/a', value: {1: 2}}]",
    "[JSONPatch{op: 'add', path: '/spec/a', value: 1}, JSONPatch{op: 'add', path: dyn(3)}]",
    "[JSONPatch{op: 'frob', path: '/spec/a'}]",
    "[JSONPatch{op: 'add', path: 'spec/a', value: 1}]",
    "[JSONPatch{op: 'add', path: '/spec/a~2', value: 1}]",
    "[JSONPatch{op: 'remove', path: '/spec/nope'}]",
    "[JSONPatch{op: 'add', path: '/spec/a', value: 1}, JSONPatch{op: 'add', path: '/nope/a', value: 1}]",
    "[JSONPatch{op: 'add', path: '/spec/l/9', value: 1}]",
    "[JSONPatch{op: 'replace', path: '/spec/l/-1', value: 1}]",
    "[JSONPatch{op: 'add', path: '/spec/x/y', value: 1}]",
    "[JSONPatch{op: 'add', path: '/spec/a', value: 1}, dyn(1)]",
    "[JSONPatch{op: 'remove', path: '/spec/x'}, JSONPatch{path: '/spec/y', op: 'remove', value: 0.0 / 0.0}]",
]


def _mutate(expression: str) -> tuple[str, Any]:
    obj = {"spec": {"x": 1, "l": [1, 2], "k/~": 0}}
    before = copy.deepcopy(obj)
    try:
        result: tuple[str, Any] = ("ok", mkpolicy.mutate(obj, [{"patchType": "JSONPatch", "expression": expression}]))
    except PatchError as exc:
        result = ("error", exc.message)
    assert obj == before
    return result


@pytest.mark.parametrize("expression", FAST_PATH_CASES)
def test_the_one_pass_path_agrees_with_the_general_path(expression: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _mutate(expression)
    monkeypatch.setattr("mkpolicy.engine.mutation._steps", lambda value: None)
    assert fast == _mutate(expression)


def test_an_op_that_is_not_a_string_is_an_unknown_op() -> None:
    with pytest.raises(PatchError, match=r"operation 1: unknown op \['add'\]"):
        apply_json_patch({"a": 1}, [{"op": ["add"], "path": "/a", "value": 2}])


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("[JSONPatch{op: 1, path: '/spec/a'}]", "field 'JSONPatch.op' expects 'string', found 'int'"),
        ("[JSONPatch{op: 'add', path: ['/spec/a']}]", "field 'JSONPatch.path' expects 'string', found 'list(string)'"),
        ("[JSONPatch{op: 'add', path: '/spec/a', frm: '/x'}]", "'JSONPatch' has no field 'frm'"),
        ("[JSONPatch{op: 'add', path: '/spec/a', value: [1, 'a']}]", "Kubernetes requires list and map literals"),
    ],
    ids=["op-int", "path-list", "unknown-field", "mixed-literal"],
)
def test_jsonpatch_construction_is_type_checked_at_compile_time(expression: str, message: str) -> None:
    # Kubernetes compiles MAP expressions with cel-go's checker: JSONPatch's fields are typed
    # (k8s.io/apiserver/pkg/cel/mutation/jsonpatch.go, JSONPatchType.Field: op, path and from
    # are strings, value is dyn) and literals must be homogeneous (environment/base.go), so
    # such an expression is a compile error, not a failure of every evaluation.
    with pytest.raises(mkpolicy.CelError) as info:
        mkpolicy.mutate({"spec": {}}, [{"patchType": "JSONPatch", "expression": expression}])
    assert message in info.value.message
    assert not isinstance(info.value, mkpolicy.cel.CelEvalError)
