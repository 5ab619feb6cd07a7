"""Standard CEL functions: size, type conversions, string predicates, regex match."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.library.time import parse_duration, parse_timestamp
from mkpolicy.cel.runtime import check_int, check_uint, type_of
from mkpolicy.cel.values import (
    INT64_MIN,
    CelType,
    Duration,
    OpaqueValue,
    Timestamp,
    Uint,
    format_duration,
    format_timestamp,
)


def _size(value: Any) -> int:
    t = type(value)
    if t is str or t is bytes or t is list or t is dict or t is tuple:
        return len(value)
    if isinstance(value, Mapping):
        return len(value)
    raise no_overload("size", value)


_SIZE_SIGS = ["(string) -> int", "(bytes) -> int", "(list(A)) -> int", "(map(A, B)) -> int"]
function("size", signatures=_SIZE_SIGS)(_size)
function("size", signatures=_SIZE_SIGS, receiver=True)(_size)


@function(
    "int",
    signatures=["(int) -> int", "(uint) -> int", "(double) -> int", "(string) -> int", "(timestamp) -> int"],
)
def to_int(value: Any) -> int:
    t = type(value)
    if t is int:
        return value  # type: ignore[no-any-return]
    if t is Uint:
        return check_int(int(value))
    if t is float:
        if math.isnan(value) or not (INT64_MIN < value < 2.0**63):
            raise EvalError("range error: double value out of int range")
        # cel-go rejects -2**63 too (the double cannot tell it from values below it).
        return int(value)
    if t is str:
        try:
            return check_int(int(value, 10))
        except ValueError:
            raise EvalError(f"cannot convert string {value!r} to int") from None
    if t is Timestamp:
        return value.seconds  # type: ignore[no-any-return]
    raise no_overload("int", value)


@function("uint", signatures=["(uint) -> uint", "(int) -> uint", "(double) -> uint", "(string) -> uint"])
def to_uint(value: Any) -> Uint:
    t = type(value)
    if t is Uint:
        return value  # type: ignore[no-any-return]
    if t is int:
        if value < 0:
            raise EvalError("range error: int value out of uint range")
        return Uint(value)
    if t is float:
        if math.isnan(value) or not (0 <= value < 2.0**64):
            raise EvalError("range error: double value out of uint range")
        return Uint(int(value))
    if t is str:
        try:
            return check_uint(int(value.rstrip("uU"), 10))
        except ValueError:
            raise EvalError(f"cannot convert string {value!r} to uint") from None
    raise no_overload("uint", value)


@function("double", signatures=["(double) -> double", "(int) -> double", "(uint) -> double", "(string) -> double"])
def to_double(value: Any) -> float:
    t = type(value)
    if t is float:
        return value  # type: ignore[no-any-return]
    if t is int or t is Uint:
        return float(value)
    if t is str:
        try:
            return float(value)
        except ValueError:
            raise EvalError(f"cannot convert string {value!r} to double") from None
    raise no_overload("double", value)


def format_double(value: float) -> str:
    """Format a double the way cel-go's ``string(double)`` does (Go's %g, shortest)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(value)
    if "e" in text or "E" in text:
        mantissa, exp = text.split("e")
        if mantissa.endswith(".0"):
            mantissa = mantissa[:-2]
        sign = "-" if exp.startswith("-") else "+"
        digits = exp.lstrip("+-").rjust(2, "0")
        return f"{mantissa}e{sign}{digits}"
    if text.endswith(".0"):
        text = text[:-2]
    # Go switches to exponent form at 1e21.
    if abs(value) >= 1e21:
        return format_double(float(f"{value:e}"))
    return text


@function(
    "string",
    signatures=[
        "(string) -> string",
        "(bool) -> string",
        "(int) -> string",
        "(uint) -> string",
        "(double) -> string",
        "(bytes) -> string",
        "(timestamp) -> string",
        "(duration) -> string",
        "(net.IP) -> string",
        "(net.CIDR) -> string",
        "(kubernetes.Semver) -> string",
    ],
)
def to_string(value: Any) -> str:
    t = type(value)
    if t is str:
        return value  # type: ignore[no-any-return]
    if t is bool:
        return "true" if value else "false"
    if t is int or t is Uint:
        return str(int(value))
    if t is float:
        return format_double(value)
    if t is bytes:
        try:
            return value.decode("utf-8")  # type: ignore[no-any-return]
        except UnicodeDecodeError:
            raise EvalError("invalid UTF-8 in bytes, cannot convert to string") from None
    if t is Timestamp:
        return format_timestamp(value)
    if t is Duration:
        return format_duration(value)
    if t is CelType:
        return value.name  # type: ignore[no-any-return]
    if isinstance(value, OpaqueValue):
        try:
            return value.cel_string()
        except TypeError:
            pass
    raise no_overload("string", value)


@function("bytes", signatures=["(bytes) -> bytes", "(string) -> bytes"])
def to_bytes(value: Any) -> bytes:
    t = type(value)
    if t is bytes:
        return value  # type: ignore[no-any-return]
    if t is str:
        return value.encode("utf-8")  # type: ignore[no-any-return]
    raise no_overload("bytes", value)


_TRUE = {"1", "t", "T", "true", "TRUE", "True"}
_FALSE = {"0", "f", "F", "false", "FALSE", "False"}


@function("bool", signatures=["(bool) -> bool", "(string) -> bool"])
def to_bool(value: Any) -> bool:
    t = type(value)
    if t is bool:
        return value  # type: ignore[no-any-return]
    if t is str:
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise EvalError(f"cannot convert string {value!r} to bool")
    raise no_overload("bool", value)


@function("dyn", signatures=["(A) -> dyn"])
def to_dyn(value: Any) -> Any:
    return value


@function("type", signatures=["(A) -> type(A)"])
def to_type(value: Any) -> CelType:
    return type_of(value)


@function("timestamp", signatures=["(timestamp) -> timestamp", "(string) -> timestamp", "(int) -> timestamp"])
def to_timestamp(value: Any) -> Timestamp:
    t = type(value)
    if t is Timestamp:
        return value  # type: ignore[no-any-return]
    if t is str:
        return parse_timestamp(value)
    if t is int:
        from mkpolicy.cel.runtime import check_timestamp

        return check_timestamp(value * 1_000_000_000)
    raise no_overload("timestamp", value)


@function("duration", signatures=["(duration) -> duration", "(string) -> duration", "(int) -> duration"])
def to_duration(value: Any) -> Duration:
    t = type(value)
    if t is Duration:
        return value  # type: ignore[no-any-return]
    if t is str:
        return parse_duration(value)
    if t is int:
        from mkpolicy.cel.runtime import check_duration

        return check_duration(value * 1_000_000_000)
    raise no_overload("duration", value)


def _string_args(function_name: str, s: Any, arg: Any) -> None:
    if type(s) is not str or type(arg) is not str:
        raise no_overload(function_name, s, arg)


@function("contains", signatures=["(string, string) -> bool"], receiver=True)
def contains(s: Any, sub: Any) -> bool:
    _string_args("contains", s, sub)
    return bool(sub in s)


@function("startsWith", signatures=["(string, string) -> bool"], receiver=True)
def starts_with(s: Any, prefix: Any) -> bool:
    _string_args("startsWith", s, prefix)
    return s.startswith(prefix)  # type: ignore[no-any-return]


@function("endsWith", signatures=["(string, string) -> bool"], receiver=True)
def ends_with(s: Any, suffix: Any) -> bool:
    _string_args("endsWith", s, suffix)
    return s.endswith(suffix)  # type: ignore[no-any-return]
