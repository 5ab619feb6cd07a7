"""Small helpers for JSON values (the only values the server stores)."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

JsonObject = dict[str, Any]

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, the form every response body uses."""
    return _ENCODER.encode(value).encode("utf-8")


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (much faster than ``copy.deepcopy`` for plain data)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: ``true`` is not ``1`` (Python says it is), ``1 == 1.0``."""
    # Python's == (fast, in C) differs only by equating booleans with 0 and 1, so it
    # settles every "different" case; the strict walk runs only on values it calls equal.
    return a == b and _strict_equal(a, b)


def _strict_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return False
        return all(_strict_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def now_rfc3339() -> str:
    """The current time as Kubernetes writes timestamps (UTC, whole seconds)."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def type_name(value: Any) -> str:
    """The JSON type of ``value``, for messages that say what was found."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
