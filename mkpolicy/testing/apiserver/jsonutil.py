"""Small helpers for JSON values (the only values the server stores)."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from mkpolicy.jsonvalues import copy_json as copy_json
from mkpolicy.jsonvalues import json_equal as json_equal

JsonObject = dict[str, Any]

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, the form every response body uses."""
    return _ENCODER.encode(value).encode("utf-8")


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
