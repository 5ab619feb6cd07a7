"""Conversions between CEL runtime values and plain Python / JSON values.

The public API (docs/architecture.md) exchanges ``datetime``/``timedelta`` for timestamps and
durations; inside, CEL keeps nanosecond precision. JSON conversion is what Kubernetes
does when a CEL value becomes part of an object (a JSONPatch value, an ApplyConfiguration).
"""

from __future__ import annotations

import base64
import datetime as _dt
import math
from collections.abc import Mapping
from typing import Any

from mkpolicy.cel.errors import EvalError
from mkpolicy.cel.runtime import type_name
from mkpolicy.cel.values import (
    BoolKey,
    CelType,
    Duration,
    ObjectValue,
    OptionalValue,
    Timestamp,
    Uint,
    format_duration,
    format_timestamp,
    key_value,
    map_key,
)


def to_cel(value: Any) -> Any:
    """Convert a plain Python value (public API) into a CEL runtime value."""
    t = type(value)
    if t in (str, int, float, bool, bytes, Uint) or value is None:
        return value
    if t is dict:
        return {map_key(k): to_cel(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [to_cel(v) for v in value]
    if isinstance(value, _dt.datetime):
        return Timestamp.from_datetime(value)
    if isinstance(value, _dt.timedelta):
        return Duration.from_timedelta(value)
    if isinstance(value, (Timestamp, Duration, CelType, OptionalValue, ObjectValue)):
        return value
    if isinstance(value, Mapping):
        return {map_key(k): to_cel(v) for k, v in value.items()}
    if isinstance(value, int):  # IntEnum and friends
        return int(value)
    raise TypeError(f"cannot use a value of Python type {t.__name__} in CEL")


def from_cel(value: Any) -> Any:
    """Convert a CEL runtime value into the public API's plain Python value.

    JSON-like values (the common case) are returned as they are, without a copy;
    only containers holding timestamps, durations, messages... are rebuilt.
    """
    t = type(value)
    if t is str or t is bool or t is int or value is None or t is float or t is Uint or t is bytes:
        return value
    if t is list:
        for i, item in enumerate(value):
            ti = type(item)
            if ti is str or ti is int or ti is bool or item is None or ti is float:
                continue
            converted = from_cel(item)
            if converted is not item:
                return value[:i] + [converted] + [from_cel(v) for v in value[i + 1 :]]
        return value
    if t is dict:
        if any(type(k) is BoolKey for k in value):
            return {key_value(k): from_cel(v) for k, v in value.items()}
        for v in value.values():
            tv = type(v)
            if tv is str or tv is int or tv is bool or v is None or tv is float:
                continue
            if from_cel(v) is not v:
                return {k: from_cel(v2) for k, v2 in value.items()}
        return value
    if t is ObjectValue:
        return {from_cel(k): from_cel(v) for k, v in value.items()}
    if t is Timestamp:
        return value.to_datetime()
    if t is Duration:
        return value.to_timedelta()
    if isinstance(value, Mapping):
        return {key_value(k): from_cel(v) for k, v in value.items()}
    return value


#: Types of the values that are JSON as they are (floats are checked: NaN is not).
_LEAVES = frozenset({str, int, bool, type(None)})


def to_json(value: Any) -> Any:
    """Convert a CEL value into a JSON-compatible value, as Kubernetes serialises it.

    Raises :class:`EvalError` for values JSON cannot hold (NaN, optionals, types).
    """
    t = type(value)
    if t is str or t is bool or t is int or value is None:
        return value
    if t is float:
        if math.isnan(value) or math.isinf(value):
            raise EvalError(f"value {value} cannot be represented in JSON")
        return value
    if t is Uint:
        return int(value)
    if t is dict or t is ObjectValue:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                k = key_value(k)
                raise EvalError(f"map key {k!r} of type {type_name(k)} cannot be a JSON object key")
            # Leaves inline: most of an object is strings, ints and booleans.
            out[k] = v if type(v) in _LEAVES else to_json(v)
        return out
    if t is list or t is tuple:
        return [v if type(v) in _LEAVES else to_json(v) for v in value]
    if t is bytes:
        return base64.b64encode(value).decode("ascii")
    if t is Timestamp:
        return format_timestamp(value)
    if t is Duration:
        return format_duration(value)
    if isinstance(value, Mapping):
        return to_json(dict(value))
    raise EvalError(f"a value of type {type_name(value)} cannot be converted to JSON")
