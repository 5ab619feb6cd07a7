"""Kubernetes' resource quantity library (``quantity('1.5Gi')`` and its methods).

Quantities are parsed as ``k8s.io/apimachinery``'s ``resource.ParseQuantity`` does
(a signed decimal number and one suffix: binary ``Ki``...``Ei``, decimal ``n``, ``u``,
``m``, ``k``, ``M``...``E`` or an exponent ``e3``/``E-2``) and kept as exact
fractions; precision below 10^-9 is rounded up (away from zero), as Kubernetes does.
Two quantities are equal when their amounts are (``quantity('1k') == quantity('1000')``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.runtime import check_int
from mkpolicy.cel.values import INT64_MAX, INT64_MIN, OpaqueValue, register_type

QUANTITY_TYPE = register_type("kubernetes.Quantity")

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(.*)")
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
_NANO = 10**9
#: Largest exponent accepted (resource.Quantity caps its scale similarly).
MAX_EXPONENT = 1000


class Quantity(OpaqueValue):
    """A ``kubernetes.Quantity``: an exact amount."""

    __slots__ = ("amount",)
    cel_type_name = "kubernetes.Quantity"

    def __init__(self, amount: Fraction) -> None:
        self.amount = amount

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and other.amount == self.amount

    def __hash__(self) -> int:
        return hash(("quantity", self.amount))

    def __repr__(self) -> str:
        return f"quantity({str(self.amount)!r})"


def parse_quantity(text: str) -> Quantity:
    """Parse a Kubernetes quantity string; raise EvalError when it is not one."""
    m = _QUANTITY.fullmatch(text)
    if m is None:
        raise EvalError(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    sign, number, suffix = m.groups()
    if suffix in _BINARY:
        scale: Fraction = Fraction(_BINARY[suffix])
    elif suffix in _DECIMAL:
        scale = _DECIMAL[suffix]
    else:
        e = _EXPONENT.fullmatch(suffix)
        if e is None or abs(int(e.group(1))) > MAX_EXPONENT:
            raise EvalError(f"unable to parse quantity's suffix: {text!r}")
        scale = Fraction(10) ** int(e.group(1))
    amount = Fraction(number) * scale
    if sign == "-":
        amount = -amount
    # Round up to nano precision (away from zero), as resource.Quantity does.
    nanos = amount * _NANO
    if nanos.denominator != 1:
        magnitude = math.ceil(abs(nanos))
        amount = Fraction(magnitude if amount > 0 else -magnitude, _NANO)
    return Quantity(amount)


def _cost(result: Any, value: Any) -> int:
    return max(1, math.ceil(len(value) * 0.1)) if type(value) is str else 1


@function("quantity", signatures=["(string) -> kubernetes.Quantity"], cost=_cost)
def to_quantity(value: Any) -> Quantity:
    if type(value) is not str:
        raise no_overload("quantity", value)
    return parse_quantity(value)


@function("isQuantity", signatures=["(string) -> bool"], cost=_cost)
def is_quantity(value: Any) -> bool:
    if type(value) is not str:
        raise no_overload("isQuantity", value)
    try:
        parse_quantity(value)
    except EvalError:
        return False
    return True


def _q(name: str, value: Any, *rest: Any) -> Quantity:
    if type(value) is not Quantity:
        raise no_overload(name, value, *rest)
    return value


@function("sign", signatures=["(kubernetes.Quantity) -> int"], receiver=True)
def sign(value: Any) -> int:
    amount = _q("sign", value).amount
    return (amount > 0) - (amount < 0)


def _as_int(amount: Fraction) -> int | None:
    if amount.denominator != 1 or not INT64_MIN <= amount.numerator <= INT64_MAX:
        return None
    return amount.numerator


@function("isInteger", signatures=["(kubernetes.Quantity) -> bool"], receiver=True)
def is_integer(value: Any) -> bool:
    return _as_int(_q("isInteger", value).amount) is not None


@function("asInteger", signatures=["(kubernetes.Quantity) -> int"], receiver=True)
def as_integer(value: Any) -> int:
    found = _as_int(_q("asInteger", value).amount)
    if found is None:
        raise EvalError(f"cannot convert value to integer: {value!r}")
    return found


@function("asApproximateFloat", signatures=["(kubernetes.Quantity) -> double"], receiver=True)
def as_approximate_float(value: Any) -> float:
    amount = _q("asApproximateFloat", value).amount
    try:
        return float(amount)
    except OverflowError:
        return math.inf if amount > 0 else -math.inf


def _other(name: str, value: Any, other: Any) -> Fraction:
    _q(name, value, other)
    if type(other) is Quantity:
        return other.amount
    if type(other) is int:
        return Fraction(other)
    raise no_overload(name, value, other)


@function(
    "add",
    signatures=[
        "(kubernetes.Quantity, kubernetes.Quantity) -> kubernetes.Quantity",
        "(kubernetes.Quantity, int) -> kubernetes.Quantity",
    ],
    receiver=True,
)
def add(value: Any, other: Any) -> Quantity:
    return Quantity(value.amount + _other("add", value, other))


@function(
    "sub",
    signatures=[
        "(kubernetes.Quantity, kubernetes.Quantity) -> kubernetes.Quantity",
        "(kubernetes.Quantity, int) -> kubernetes.Quantity",
    ],
    receiver=True,
)
def sub(value: Any, other: Any) -> Quantity:
    return Quantity(value.amount - _other("sub", value, other))


def _compare(name: str, value: Any, other: Any) -> int:
    a = _q(name, value, other).amount
    if type(other) is not Quantity:
        raise no_overload(name, value, other)
    b = other.amount
    return (a > b) - (a < b)


@function("isGreaterThan", signatures=["(kubernetes.Quantity, kubernetes.Quantity) -> bool"], receiver=True)
def is_greater_than(value: Any, other: Any) -> bool:
    if type(value) is not Quantity:
        from mkpolicy.cel.library.semver import semver_compare

        return semver_compare("isGreaterThan", value, other) == 1
    return _compare("isGreaterThan", value, other) == 1


@function("isLessThan", signatures=["(kubernetes.Quantity, kubernetes.Quantity) -> bool"], receiver=True)
def is_less_than(value: Any, other: Any) -> bool:
    if type(value) is not Quantity:
        from mkpolicy.cel.library.semver import semver_compare

        return semver_compare("isLessThan", value, other) == -1
    return _compare("isLessThan", value, other) == -1


@function("compareTo", signatures=["(kubernetes.Quantity, kubernetes.Quantity) -> int"], receiver=True)
def compare_to(value: Any, other: Any) -> int:
    if type(value) is not Quantity:
        from mkpolicy.cel.library.semver import semver_compare

        return check_int(semver_compare("compareTo", value, other))
    return _compare("compareTo", value, other)
