"""Optional values (cel-go's optional library, enabled by Kubernetes)."""

from __future__ import annotations

from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.values import OPTIONAL_NONE, CelType, Duration, ObjectValue, OptionalValue, Timestamp


@function("optional.of", signatures=["(A) -> optional_type(A)"])
def optional_of(value: Any) -> OptionalValue:
    return OptionalValue(value)


@function("optional.none", signatures=["() -> optional_type(A)"])
def optional_none() -> OptionalValue:
    return OPTIONAL_NONE


def is_zero_value(value: Any) -> bool:
    """True for CEL zero values: null, false, 0, 0u, 0.0, "", b"", [], {}, zero durations."""
    t = type(value)
    if value is None:
        return True
    if t is bool:
        return not value
    if t in (int, float, str, bytes, list, dict, tuple, ObjectValue) or isinstance(value, int):
        return not bool(value)
    if t is Duration:
        return bool(value.nanos == 0)
    if t is Timestamp:
        # cel-go common/types/timestamp.go: IsZeroValue is Go's time.IsZero(), the instant
        # 0001-01-01T00:00:00Z (not the Unix epoch, whatever its comment says).
        return bool(value.nanos_since_epoch == _GO_ZERO_TIME)
    if t is CelType or t is OptionalValue:
        return False
    return False


#: Go's zero time.Time, 0001-01-01T00:00:00Z, in nanoseconds since the Unix epoch.
_GO_ZERO_TIME = -62135596800 * 1_000_000_000


@function("optional.ofNonZeroValue", signatures=["(A) -> optional_type(A)"])
def optional_of_non_zero(value: Any) -> OptionalValue:
    return OPTIONAL_NONE if is_zero_value(value) else OptionalValue(value)


def _optional(function_name: str, value: Any) -> OptionalValue:
    if type(value) is not OptionalValue:
        raise no_overload(function_name, value)
    return value


@function("hasValue", signatures=["(optional_type(A)) -> bool"], receiver=True)
def has_value(opt: Any) -> bool:
    return _optional("hasValue", opt).has_value


@function("value", signatures=["(optional_type(A)) -> A"], receiver=True)
def value(opt: Any) -> Any:
    o = _optional("value", opt)
    if not o.has_value:
        raise EvalError("optional.none() dereference")
    return o.value


@function("orValue", signatures=["(optional_type(A), A) -> A"], receiver=True)
def or_value(opt: Any, default: Any) -> Any:
    o = _optional("orValue", opt)
    return o.value if o.has_value else default


@function("or", signatures=["(optional_type(A), optional_type(A)) -> optional_type(A)"], receiver=True)
def or_(opt: Any, other: Any) -> Any:
    o = _optional("or", opt)
    if o.has_value:
        return o
    return _optional("or", other)
