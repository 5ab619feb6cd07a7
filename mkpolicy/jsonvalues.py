"""Plain JSON values: copying, equality, and JSON merge patches (RFC 7386).

Every layer handles Kubernetes objects as decoded JSON (dicts, lists, scalars); these
are the operations they share.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: The range of Go's int64: Kubernetes decodes a JSON integer into it, else into a float64.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _int(text: str) -> int | float:
    # apimachinery/pkg/util/json/json.go convertNumber: int64 if it fits, else float64, else an error
    if len(text) <= 19 or (len(text) == 20 and text[0] == "-"):
        value = int(text)
        if INT64_MIN <= value <= INT64_MAX:
            return value
    return _float(text)


def _float(text: str) -> float:
    value = float(text)  # (a number past float64's range reads as infinity)
    if not math.isfinite(value):
        shown = text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
        raise ValueError(f"the number {shown} is out of range: Kubernetes reads JSON numbers as int64 or float64")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads_kube(data: str | bytes) -> Any:
    """Decode JSON as Kubernetes' Go decoding reads it into objects (apimachinery's ``util/json``).

    Integers within int64 stay integers, others become float64; a number past float64's
    range, and ``NaN``/``Infinity`` (not JSON), are a ValueError, as is malformed JSON.
    RecursionError when it nests too deeply.
    """
    return json.loads(data, parse_int=_int, parse_float=_float, parse_constant=_constant)


def dumps_kube(value: Any) -> bytes:
    """``value`` as compact JSON; ValueError for NaN or an infinity (JSON has none: never written as ``Infinity``)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


#: Types of the JSON leaves, which need no copy.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (much faster than ``copy.deepcopy`` for plain data)."""
    t = type(value)
    # Leaves are tested inline: most of an object is strings, numbers and booleans.
    if t is dict:
        return {k: v if type(v) in _SCALARS else copy_json(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _SCALARS else copy_json(v) for v in value]
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: ``true`` is not ``1`` (Python says it is), ``1 == 1.0``."""
    # Python's == (fast, in C) differs only by equating booleans with 0 and 1, so it
    # settles every "different" case; the strict walk runs only on values it calls equal.
    return bool(a == b) and _strict_equal(a, b)


def _strict_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_strict_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return True


def create_merge_patch(original: dict[str, Any], modified: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that turns ``original`` into ``modified`` (empty when equal).

    As evanphx/json-patch's ``CreateMergePatch`` (what controller-runtime's ``MergeFrom``
    sends): objects are diffed key by key, removed keys become ``null``, anything else
    that differs (scalars, lists, type changes) is sent whole.
    """
    patch: dict[str, Any] = {key: None for key in original if key not in modified}
    for key, new in modified.items():
        if key not in original:
            patch[key] = new
            continue
        old = original[key]
        if old is new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            sub = create_merge_patch(old, new)
            if sub:
                patch[key] = sub
        elif not json_equal(old, new):
            patch[key] = new
    return patch


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with the merge ``patch`` applied (RFC 7386); neither is modified."""
    if not isinstance(patch, dict):
        return copy_json(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out
