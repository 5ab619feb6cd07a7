"""Request bodies of policy kinds: JSON, or CBOR held to what kube-apiserver accepts."""

from __future__ import annotations

import datetime as dt

import cbor2
import pytest

from mkpolicy.sidecar.bodies import decode
from mkpolicy.sidecar.status import StatusError

SELF_DESCRIBED = b"\xd9\xd9\xf7"


def test_kubernetes_cbor_decodes_as_json() -> None:
    """Kubernetes writes strings as byte strings, []byte as base64-tagged byte strings (tag 22)."""
    body = SELF_DESCRIBED + cbor2.dumps(
        {
            b"apiVersion": b"tekton.dev/v1",
            b"metadata": {b"name": b"run-1", b"labels": {b"a": b"b"}},
            b"spec": {b"n": 3, b"f": 1.5, b"ok": True, b"none": None, b"list": [b"x", 2]},
            b"data": cbor2.CBORTag(22, b"\x00\x01"),
            b"url": cbor2.CBORTag(21, b"\xff\xfe"),
            b"hex": cbor2.CBORTag(23, b"\xab"),
            b"when": dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.UTC),
            b"other": cbor2.CBORTag(4000, b"content"),
        }
    )
    assert decode(body, "application/cbor") == {
        "apiVersion": "tekton.dev/v1",
        "metadata": {"name": "run-1", "labels": {"a": "b"}},
        "spec": {"n": 3, "f": 1.5, "ok": True, "none": None, "list": ["x", 2]},
        "data": "AAE=",
        "url": "__4",
        "hex": "ab",
        "when": "2026-11-21T10:00:00Z",
        "other": "content",
    }
    assert decode(b'{"a": 1}', "application/json; charset=utf-8") == {"a": 1}
    assert decode(b'{"a": 1}', None) == {"a": 1}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (cbor2.dumps(float("nan")), "NaN or an infinite number"),
        (cbor2.dumps({"a": float("inf")}), "NaN or an infinite number (JSON has none) at .a"),
        (cbor2.dumps(2**64), "an integer outside the int64 range"),
        (cbor2.dumps({1: 2}), "a map key that is not a string"),
        (b"\xa2\x41a\x01\x61a\x02", "the key 'a' twice"),  # b"a" and "a": the same key to Kubernetes
        (b"\xa2\x61a\x01\x61a\x02", "Duplicate map key"),
        (cbor2.dumps(cbor2.CBORSimpleValue(99)), "a simple value other than true, false or null"),
        (cbor2.dumps(cbor2.undefined), "a simple value other than true, false or null"),
        (b"\x81" * 1000 + b"\x01", "nesting depth"),
        (b"\xff", "not valid CBOR"),
        (cbor2.dumps({"a": 1})[:-1], "not valid CBOR"),
    ],
    ids=["nan", "inf", "int64", "int-key", "same-key", "duplicate", "simple", "undefined", "deep", "break", "short"],
)
def test_what_kube_apiserver_refuses_is_refused(raw: bytes, message: str) -> None:
    with pytest.raises(StatusError) as info:
        decode(raw, "application/cbor")
    assert info.value.code == 400 and message in info.value.message


@pytest.mark.parametrize(
    ("raw", "ctype", "code", "message"),
    [
        (b"{", "application/json", 400, "the body is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "application/json", 400, "nests too deeply"),
        (
            b"x",
            "application/yaml",
            415,
            "expected an application/json or application/cbor body; found application/yaml",
        ),
    ],
)
def test_other_bodies(raw: bytes, ctype: str, code: int, message: str) -> None:
    with pytest.raises(StatusError) as info:
        decode(raw, ctype)
    assert (info.value.code, message in info.value.message) == (code, True), info.value.message


def test_the_number_of_values_is_bounded_before_decoding() -> None:
    """A 3 MiB body of tiny values (millions of objects once decoded) is refused from a count of its
    heads (CBOR) or its commas and brackets (JSON), before anything is built."""
    import json as _json

    from mkpolicy.sidecar.bodies import MAX_VALUES, cbor_values

    many = [0] * (3 * 1024 * 1024)
    for raw, kind in ((cbor2.dumps(many), "application/cbor"), (_json.dumps(many).encode(), "application/json")):
        with pytest.raises(StatusError) as info:
            decode(raw, kind)
        assert info.value.code == 413 and f"at most {MAX_VALUES}" in info.value.message
    # a real object is far below the bound; every item counts (map keys too)
    obj = {"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"list": [1, 2.5, None, True, b"raw"]}}
    assert cbor_values(cbor2.dumps(obj), MAX_VALUES) == 18
    tagged = cbor2.dumps(cbor2.CBORTag(55799, obj))
    assert cbor_values(tagged, MAX_VALUES) == 19
    # indefinite-length array and string: 0x9f [0x01, 0x7f "ab" "c" 0xff] 0xff
    assert cbor_values(bytes([0x9F, 0x01, 0x7F, 0x62]) + b"ab" + bytes([0x61]) + b"c" + bytes([0xFF, 0xFF]), 10) == 5
    for cut in (cbor2.dumps(obj)[:-3], bytes([0x9F, 0x01])):
        with pytest.raises(StatusError) as info:
            cbor_values(cut, MAX_VALUES)
        assert info.value.code == 400
