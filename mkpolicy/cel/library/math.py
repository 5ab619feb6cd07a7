"""The math extension (cel-go ``ext.Math``): ``math.greatest``/``least``, rounding,
``abs``/``sign``, IEEE predicates and bit operations."""

from __future__ import annotations

import math
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.runtime import _num_compare, check_int
from mkpolicy.cel.values import INT64_MAX, UINT64_MAX, Uint

_NUMBERS = (int, Uint, float)
#: Most arguments math.greatest/least accept in one call.
MAX_ARGS = 32


def _extremum(name: str, args: tuple[Any, ...], sign: int) -> Any:
    values: Any = args
    if len(args) == 1 and type(args[0]) is list:
        values = args[0]
        if not values:
            raise EvalError(f"{name}(list) argument must not be empty")
    best: Any = None
    for v in values:
        if type(v) not in _NUMBERS:
            raise no_overload(name, *args)
        if best is None or _num_compare(v, best) == sign:
            best = v
    return best


_EXTREMUM_SIGS = [
    "(int) -> int",
    "(uint) -> uint",
    "(double) -> double",
    "(list(int)) -> int",
    "(list(uint)) -> uint",
    "(list(double)) -> double",
    "(list(int|uint|double)) -> dyn",
    "(int, int...) -> int",
    "(uint, uint...) -> uint",
    "(double, double...) -> double",
    "(int|uint|double, int|uint|double...) -> dyn",
]


@function("math.greatest", signatures=_EXTREMUM_SIGS, arities=range(1, MAX_ARGS + 1))
def greatest(*args: Any) -> Any:
    return _extremum("math.greatest", args, 1)


@function("math.least", signatures=_EXTREMUM_SIGS, arities=range(1, MAX_ARGS + 1))
def least(*args: Any) -> Any:
    return _extremum("math.least", args, -1)


def _double(name: str, value: Any) -> float:
    if type(value) is not float:
        raise no_overload(name, value)
    return value


@function("math.ceil", signatures=["(double) -> double"])
def ceil(value: Any) -> float:
    v = _double("math.ceil", value)
    return v if math.isnan(v) or math.isinf(v) else float(math.ceil(v))


@function("math.floor", signatures=["(double) -> double"])
def floor(value: Any) -> float:
    v = _double("math.floor", value)
    return v if math.isnan(v) or math.isinf(v) else float(math.floor(v))


@function("math.round", signatures=["(double) -> double"])
def round_(value: Any) -> float:
    """Half away from zero (Go's math.Round)."""
    v = _double("math.round", value)
    if math.isnan(v) or math.isinf(v):
        return v
    return math.copysign(math.floor(abs(v) + 0.5), v)


@function("math.trunc", signatures=["(double) -> double"])
def trunc(value: Any) -> float:
    v = _double("math.trunc", value)
    return v if math.isnan(v) or math.isinf(v) else float(math.trunc(v))


@function("math.sqrt", signatures=["(double) -> double", "(int) -> double", "(uint) -> double"])
def sqrt(value: Any) -> float:
    if type(value) not in _NUMBERS:
        raise no_overload("math.sqrt", value)
    v = float(value)
    return math.nan if v < 0 else math.sqrt(v)


@function("math.abs", signatures=["(int) -> int", "(uint) -> uint", "(double) -> double"])
def abs_(value: Any) -> Any:
    t = type(value)
    if t is int:
        return check_int(abs(value))
    if t is Uint:
        return value
    if t is float:
        return abs(value)
    raise no_overload("math.abs", value)


@function("math.sign", signatures=["(int) -> int", "(uint) -> uint", "(double) -> double"])
def sign(value: Any) -> Any:
    t = type(value)
    if t is int:
        return (value > 0) - (value < 0)
    if t is Uint:
        return Uint(1 if value > 0 else 0)
    if t is float:
        if math.isnan(value):
            return value
        return float((value > 0) - (value < 0))
    raise no_overload("math.sign", value)


@function("math.isNaN", signatures=["(double) -> bool"])
def is_nan(value: Any) -> bool:
    return math.isnan(_double("math.isNaN", value))


@function("math.isInf", signatures=["(double) -> bool"])
def is_inf(value: Any) -> bool:
    return math.isinf(_double("math.isInf", value))


@function("math.isFinite", signatures=["(double) -> bool"])
def is_finite(value: Any) -> bool:
    return math.isfinite(_double("math.isFinite", value))


def _bits(name: str, a: Any, b: Any) -> type:
    ta, tb = type(a), type(b)
    if ta is tb and (ta is int or ta is Uint):
        return ta
    raise no_overload(name, a, b)


def _wrap_int(value: int) -> int:
    value &= UINT64_MAX
    return value - (1 << 64) if value > INT64_MAX else value


@function("math.bitAnd", signatures=["(int, int) -> int", "(uint, uint) -> uint"])
def bit_and(a: Any, b: Any) -> Any:
    t = _bits("math.bitAnd", a, b)
    return Uint(a & b) if t is Uint else a & b


@function("math.bitOr", signatures=["(int, int) -> int", "(uint, uint) -> uint"])
def bit_or(a: Any, b: Any) -> Any:
    t = _bits("math.bitOr", a, b)
    return Uint(a | b) if t is Uint else a | b


@function("math.bitXor", signatures=["(int, int) -> int", "(uint, uint) -> uint"])
def bit_xor(a: Any, b: Any) -> Any:
    t = _bits("math.bitXor", a, b)
    return Uint(a ^ b) if t is Uint else a ^ b


@function("math.bitNot", signatures=["(int) -> int", "(uint) -> uint"])
def bit_not(a: Any) -> Any:
    t = type(a)
    if t is int:
        return ~a
    if t is Uint:
        return Uint(UINT64_MAX ^ a)
    raise no_overload("math.bitNot", a)


def _shift_args(name: str, value: Any, offset: Any) -> None:
    if type(value) not in (int, Uint) or type(offset) is not int:
        raise no_overload(name, value, offset)
    if offset < 0:
        raise EvalError(f"{name}() negative offset: {offset}")


@function("math.bitShiftLeft", signatures=["(int, int) -> int", "(uint, int) -> uint"])
def bit_shift_left(value: Any, offset: Any) -> Any:
    _shift_args("math.bitShiftLeft", value, offset)
    if offset >= 64:
        return Uint(0) if type(value) is Uint else 0
    if type(value) is Uint:
        return Uint((value << offset) & UINT64_MAX)
    return _wrap_int(value << offset)


@function("math.bitShiftRight", signatures=["(int, int) -> int", "(uint, int) -> uint"])
def bit_shift_right(value: Any, offset: Any) -> Any:
    """A logical shift, also for ints (cel-go shifts the unsigned bits)."""
    _shift_args("math.bitShiftRight", value, offset)
    if offset >= 64:
        return Uint(0) if type(value) is Uint else 0
    if type(value) is Uint:
        return Uint(value >> offset)
    return _wrap_int((value & UINT64_MAX) >> offset)
