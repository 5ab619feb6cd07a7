"""CEL runtime semantics over plain Python values.

Equality, ordering, arithmetic with int64/uint64 overflow checks, indexing, field
selection and the cost budget. Everything raises :class:`EvalError` on failure; the
compiler attaches positions. ``bool`` is a subclass of ``int`` in Python, so every
dispatch here uses ``type(x)`` rather than ``isinstance``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.values import (
    BOOL_TYPE,
    BYTES_TYPE,
    DOUBLE_TYPE,
    DURATION_TYPE,
    FALSE_KEY,
    INT64_MAX,
    INT64_MIN,
    INT_TYPE,
    LIST_TYPE,
    MAP_TYPE,
    NULL_TYPE,
    OPTIONAL_NONE,
    OPTIONAL_TYPE,
    STRING_TYPE,
    TIMESTAMP_MAX_SECONDS,
    TIMESTAMP_MIN_SECONDS,
    TIMESTAMP_TYPE,
    TRUE_KEY,
    TYPE_TYPE,
    UINT64_MAX,
    UINT_TYPE,
    CelType,
    Duration,
    ObjectValue,
    OpaqueValue,
    OptionalValue,
    Timestamp,
    Uint,
)

_NS = 1_000_000_000


class LazyMap(Mapping[str, Any]):
    """A read-only map whose entries are computed on first access (policy variables)."""

    __slots__ = ("_cache", "_compute", "_names")

    def __init__(self, names: list[str], compute: Callable[[str], Any], cache: dict[str, Any] | None = None) -> None:
        """``cache`` holds entries known in advance (it is used, not copied)."""
        self._names = names
        self._compute = compute
        self._cache: dict[str, Any] = {} if cache is None else cache

    def __getitem__(self, key: str) -> Any:
        try:
            return self._cache[key]
        except KeyError:
            pass
        if key not in self._names:
            raise KeyError(key)
        value = self._cache[key] = self._compute(key)
        return value

    def __iter__(self) -> Any:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class Budget:
    """The remaining cost an evaluation may spend; exceeding it is a CelCostError."""

    __slots__ = ("limit", "remaining")

    def __init__(self, limit: int, spent: int = 0) -> None:
        """A budget of ``limit``, of which ``spent`` is already used (it may exceed
        the limit: the next :meth:`charge` then fails)."""
        self.limit = limit
        self.remaining = limit - spent

    def charge(self, amount: int, pos: int | None = None) -> None:
        """Spend ``amount``; raise a cost error (at ``pos``) when the budget is exhausted."""
        self.remaining -= amount
        if self.remaining < 0:
            raise EvalError(f"operation cancelled: actual cost limit exceeded (limit {self.limit})", pos, cost=True)

    def charge_call(self, cost: int, pos: int | None = None) -> None:
        """Charge a function call whose cel-go cost is ``cost``: the evaluator already
        charged 1 for the call (its fixed cost), so this spends ``cost - 1``."""
        if cost > 1:
            self.charge(cost - 1, pos)

    @property
    def used(self) -> int:
        """Cost spent so far."""
        return self.limit - self.remaining


# -- types ---------------------------------------------------------------------------

_TYPE_OF: dict[type, CelType] = {
    bool: BOOL_TYPE,
    int: INT_TYPE,
    Uint: UINT_TYPE,
    float: DOUBLE_TYPE,
    str: STRING_TYPE,
    bytes: BYTES_TYPE,
    type(None): NULL_TYPE,
    list: LIST_TYPE,
    tuple: LIST_TYPE,
    dict: MAP_TYPE,
    Timestamp: TIMESTAMP_TYPE,
    Duration: DURATION_TYPE,
    CelType: TYPE_TYPE,
    OptionalValue: OPTIONAL_TYPE,
    LazyMap: MAP_TYPE,
}


def type_of(value: Any) -> CelType:
    """The CEL type value of ``value``."""
    t = type(value)
    found = _TYPE_OF.get(t)
    if found is not None:
        return found
    if t is ObjectValue:
        return CelType.named(value.type_name)
    if isinstance(value, OpaqueValue):
        return CelType.named(value.cel_type_name)
    if isinstance(value, Mapping):
        return MAP_TYPE
    raise EvalError(f"unsupported value of Python type {t.__name__}")


def type_name(value: Any) -> str:
    """The CEL type name of ``value`` for error messages."""
    try:
        return type_of(value).name
    except EvalError:
        return type(value).__name__


# -- equality and ordering ------------------------------------------------------------

_NUMERIC = (int, Uint, float)


def _num_compare(a: Any, b: Any) -> int:
    """Compare two numbers as cel-go does: ints against doubles go through the double."""
    if type(a) is float or type(b) is float:
        x = float(a)
        y = float(b)
        if x < y:
            return -1
        if x > y:
            return 1
        if x == y:
            return 0
        return 2  # NaN
    return -1 if a < b else (1 if a > b else 0)


def cel_equal(a: Any, b: Any) -> bool:
    """CEL equality: numbers compare across int/uint/double, other kinds never match."""
    ta = type(a)
    tb = type(b)
    if ta is tb:
        if ta is list:
            return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
        if ta is dict:
            return _maps_equal(a, b)
        if ta is ObjectValue:
            return bool(a.type_name == b.type_name and _maps_equal(a, b))
        return bool(a == b)
    if ta in _NUMERIC and tb in _NUMERIC:
        return _num_compare(a, b) == 0
    if ta is OptionalValue and tb is OptionalValue:
        return bool(a == b)
    if (ta is list or ta is tuple) and (tb is list or tb is tuple):
        return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping) and ta is not ObjectValue and tb is not ObjectValue:
        return _maps_equal(a, b)
    return False


def _maps_equal(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> bool:
    if len(a) != len(b):
        return False
    for key, value in a.items():
        try:
            other = b[key]
        except (KeyError, TypeError):
            return False
        if not cel_equal(value, other):
            return False
    return True


_ORDERED = {bool, str, bytes, Timestamp, Duration}


def compare(a: Any, b: Any, function: str) -> int:
    """Three-way comparison for ``<``, ``<=``, ``>``, ``>=``; NaN compares as unordered."""
    ta = type(a)
    tb = type(b)
    if ta in _NUMERIC and tb in _NUMERIC:
        return _num_compare(a, b)
    if ta is tb and ta in _ORDERED:
        if a < b:
            return -1
        if b < a:
            return 1
        return 0
    raise no_overload(function, a, b)


# -- arithmetic -------------------------------------------------------------------------


def check_int(value: int) -> int:
    """Raise the CEL overflow error when ``value`` is outside int64."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise EvalError("return error for overflow")


def check_uint(value: int) -> Uint:
    """Raise the CEL overflow error when ``value`` is outside uint64."""
    if 0 <= value <= UINT64_MAX:
        return Uint(value)
    raise EvalError("return error for overflow")


def check_timestamp(nanos: int) -> Timestamp:
    """Raise when a timestamp leaves CEL's range (years 1 to 9999)."""
    if TIMESTAMP_MIN_SECONDS * _NS <= nanos < (TIMESTAMP_MAX_SECONDS + 1) * _NS:
        return Timestamp(nanos)
    raise EvalError("timestamp out of range")


def check_duration(nanos: int) -> Duration:
    """Raise when a duration leaves CEL's range (int64 nanoseconds, as in cel-go)."""
    if INT64_MIN < nanos <= INT64_MAX:
        return Duration(nanos)
    raise EvalError("duration out of range")


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("division by zero")
    q = abs(a) // abs(b)
    return check_int(q if (a < 0) == (b < 0) else -q)


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("modulus by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _uint_div(a: Uint, b: Uint) -> Uint:
    if b == 0:
        raise EvalError("division by zero")
    return Uint(int(a) // int(b))


def _uint_mod(a: Uint, b: Uint) -> Uint:
    if b == 0:
        raise EvalError("modulus by zero")
    return Uint(int(a) % int(b))


def _float_div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a != a or a == 0:
            return float("nan")
        neg = (a < 0) != (str(b).startswith("-"))
        return float("-inf") if neg else float("inf")


Binary = Callable[[Any, Any], Any]

ADD: dict[tuple[type, type], Binary] = {
    (int, int): lambda a, b: check_int(a + b),
    (Uint, Uint): lambda a, b: check_uint(int(a) + int(b)),
    (float, float): lambda a, b: a + b,
    (str, str): lambda a, b: a + b,
    (bytes, bytes): lambda a, b: a + b,
    (list, list): lambda a, b: a + b,
    (Timestamp, Duration): lambda a, b: check_timestamp(a.nanos_since_epoch + b.nanos),
    (Duration, Timestamp): lambda a, b: check_timestamp(a.nanos + b.nanos_since_epoch),
    (Duration, Duration): lambda a, b: check_duration(a.nanos + b.nanos),
}
SUB: dict[tuple[type, type], Binary] = {
    (int, int): lambda a, b: check_int(a - b),
    (Uint, Uint): lambda a, b: check_uint(int(a) - int(b)),
    (float, float): lambda a, b: a - b,
    (Timestamp, Duration): lambda a, b: check_timestamp(a.nanos_since_epoch - b.nanos),
    (Timestamp, Timestamp): lambda a, b: check_duration(a.nanos_since_epoch - b.nanos_since_epoch),
    (Duration, Duration): lambda a, b: check_duration(a.nanos - b.nanos),
}
MUL: dict[tuple[type, type], Binary] = {
    (int, int): lambda a, b: check_int(a * b),
    (Uint, Uint): lambda a, b: check_uint(int(a) * int(b)),
    (float, float): lambda a, b: a * b,
}
DIV: dict[tuple[type, type], Binary] = {
    (int, int): _int_div,
    (Uint, Uint): _uint_div,
    (float, float): _float_div,
}
MOD: dict[tuple[type, type], Binary] = {
    (int, int): _int_mod,
    (Uint, Uint): _uint_mod,
}

ARITHMETIC: dict[str, dict[tuple[type, type], Binary]] = {
    "_+_": ADD,
    "_-_": SUB,
    "_*_": MUL,
    "_/_": DIV,
    "_%_": MOD,
}


def negate(value: Any) -> Any:
    """Unary minus."""
    t = type(value)
    if t is int:
        return check_int(-value)
    if t is float:
        return -value
    if t is Duration:
        return check_duration(-value.nanos)
    raise no_overload("-_", value)


def logical_not(value: Any) -> bool:
    """Unary ``!``."""
    if type(value) is bool:
        return not value
    raise no_overload("!_", value)


# -- access ----------------------------------------------------------------------------


def select(value: Any, field: str) -> Any:
    """``value.field`` on a map or message; on an optional it is ``value.?field``."""
    t = type(value)
    if t is dict or t is ObjectValue:
        try:
            return value[field]
        except KeyError:
            raise EvalError(f"no such key: {field}") from None
    if t is OptionalValue:
        return optional_select(value, field)
    if isinstance(value, Mapping):
        try:
            return value[field]
        except KeyError:
            raise EvalError(f"no such key: {field}") from None
    raise EvalError(f"type '{type_name(value)}' does not support field selection")


def has_field(value: Any, field: str) -> bool:
    """``has(value.field)``; on an optional, false when it is empty."""
    if isinstance(value, Mapping):
        return field in value
    if type(value) is OptionalValue:
        return value.has_value and has_field(value.value, field)
    raise EvalError(f"invalid type for field selection: '{type_name(value)}' in has()")


def _list_position(container: list[Any], key: Any) -> int:
    t = type(key)
    if t is int or t is Uint:
        i = int(key)
    elif t is float:
        if not key.is_integer():
            raise EvalError(f"unsupported index value {key!r}: not an integer")
        i = int(key)
    else:
        raise EvalError(f"no such overload: _[_](list, {type_name(key)})")
    if i < 0 or i >= len(container):
        raise EvalError(f"index out of bounds: {i}, list size {len(container)}")
    return i


def _map_key(key: Any) -> Any:
    # Bool keys are looked up as maps store them, as BoolKey (mkpolicy.cel.values.map_key):
    # Python's True == 1 cannot make a lookup of one find the other.
    t = type(key)
    if t is str or t is int or t is Uint:
        return key
    if t is bool:
        return TRUE_KEY if key else FALSE_KEY
    if t is float:
        if key.is_integer():
            return int(key)
        return key
    raise EvalError(f"unsupported map key type: {type_name(key)}")


def index(container: Any, key: Any) -> Any:
    """``container[key]`` on a list or map; on an optional it is ``container[?key]``."""
    t = type(container)
    if t is OptionalValue:
        return optional_index(container, key)
    if t is list or t is tuple:
        return container[_list_position(container, key)]
    if t is dict or (isinstance(container, Mapping) and t is not ObjectValue):
        k = _map_key(key)
        try:
            return container[k]
        except KeyError:
            raise EvalError(f"no such key: {_show_key(key)}") from None
    raise EvalError(f"no such overload: _[_]({type_name(container)}, {type_name(key)})")


def _show_key(key: Any) -> str:
    return repr(key) if type(key) is str else str(key)


def optional_index(container: Any, key: Any) -> OptionalValue:
    """``container[?key]``."""
    if type(container) is OptionalValue:
        if not container.has_value:
            return OPTIONAL_NONE
        container = container.value
    t = type(container)
    if t is list or t is tuple:
        try:
            return OptionalValue(container[_list_position(container, key)])
        except EvalError as exc:
            if exc.message.startswith("index out of bounds"):
                return OPTIONAL_NONE
            raise
    if isinstance(container, Mapping) and t is not ObjectValue:
        k = _map_key(key)
        try:
            return OptionalValue(container[k])
        except KeyError:
            return OPTIONAL_NONE
    raise EvalError(f"no such overload: _[?_]({type_name(container)}, {type_name(key)})")


def optional_select(value: Any, field: str) -> OptionalValue:
    """``value.?field``."""
    if type(value) is OptionalValue:
        if not value.has_value:
            return OPTIONAL_NONE
        value = value.value
    if isinstance(value, Mapping):
        try:
            return OptionalValue(value[field])
        except KeyError:
            return OPTIONAL_NONE
    raise EvalError(f"type '{type_name(value)}' does not support field selection")


def contains(container: Any, item: Any) -> bool:
    """``item in container``."""
    t = type(container)
    if t is list or t is tuple:
        ti = type(item)
        if ti is str or ti is int:
            for x in container:
                if type(x) is ti and x == item:
                    return True
            if ti is str:
                return False
        return any(cel_equal(item, x) for x in container)
    if isinstance(container, Mapping) and t is not ObjectValue:
        try:
            container[_map_key(item)]
            return True
        except (KeyError, EvalError):
            return False
    raise no_overload("@in", item, container)
