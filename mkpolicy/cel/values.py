"""CEL runtime values that plain Python has no type for.

CEL values are plain Python values wherever possible (``bool``, ``int``, ``float``,
``str``, ``bytes``, ``None``, ``list``, ``dict``) so that Kubernetes objects decoded
from JSON need no conversion. The classes here cover the rest: ``uint``, timestamps and
durations with nanosecond precision, optionals, type values and the message-like
values built by ``Object{...}`` and ``JSONPatch{...}``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any, ClassVar

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


class Uint(int):
    """A CEL ``uint`` (uint64). Arithmetic on it goes through the CEL runtime."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Uint({int(self)})"


class CelType:
    """A CEL type value, as returned by ``type(x)`` or named by ``int``, ``string``..."""

    __slots__ = ("name",)
    _registry: ClassVar[dict[str, CelType]] = {}

    def __init__(self, name: str) -> None:
        self.name = name

    @classmethod
    def named(cls, name: str) -> CelType:
        """Return the interned type value called ``name``."""
        found = cls._registry.get(name)
        if found is None:
            found = cls._registry[name] = cls(name)
        return found

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("CelType", self.name))

    def __repr__(self) -> str:
        return f"CelType({self.name!r})"

    def __str__(self) -> str:
        return self.name


INT_TYPE = CelType.named("int")
UINT_TYPE = CelType.named("uint")
DOUBLE_TYPE = CelType.named("double")
BOOL_TYPE = CelType.named("bool")
STRING_TYPE = CelType.named("string")
BYTES_TYPE = CelType.named("bytes")
LIST_TYPE = CelType.named("list")
MAP_TYPE = CelType.named("map")
NULL_TYPE = CelType.named("null_type")
TYPE_TYPE = CelType.named("type")
TIMESTAMP_TYPE = CelType.named("google.protobuf.Timestamp")
DURATION_TYPE = CelType.named("google.protobuf.Duration")
OPTIONAL_TYPE = CelType.named("optional_type")

#: Type identifiers that resolve to type values when no variable shadows them.
TYPE_IDENTIFIERS: dict[str, CelType] = {
    "int": INT_TYPE,
    "uint": UINT_TYPE,
    "double": DOUBLE_TYPE,
    "bool": BOOL_TYPE,
    "string": STRING_TYPE,
    "bytes": BYTES_TYPE,
    "list": LIST_TYPE,
    "map": MAP_TYPE,
    "null_type": NULL_TYPE,
    "type": TYPE_TYPE,
    "google.protobuf.Timestamp": TIMESTAMP_TYPE,
    "google.protobuf.Duration": DURATION_TYPE,
    "optional_type": OPTIONAL_TYPE,
}


class BoolKey:
    """A ``bool`` used as a map key.

    CEL keeps ``true`` and ``1`` apart (``{true: 'a', 1: 'b'}`` has two entries); Python's
    ``True == 1`` would merge them. Maps therefore store bool keys as :data:`TRUE_KEY` or
    :data:`FALSE_KEY`: :func:`map_key` wraps a key, :func:`key_value` unwraps it (iteration,
    formatting and conversion to Python see plain bools).
    """

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is BoolKey and other.value is self.value

    def __hash__(self) -> int:
        return hash((BoolKey, self.value))

    def __repr__(self) -> str:
        return "true" if self.value else "false"


TRUE_KEY = BoolKey(True)
FALSE_KEY = BoolKey(False)


def map_key(key: Any) -> Any:
    """``key`` as a map stores it (bools wrapped)."""
    if type(key) is bool:
        return TRUE_KEY if key else FALSE_KEY
    return key


def key_value(key: Any) -> Any:
    """A stored map key as a CEL value (bools unwrapped)."""
    return key.value if type(key) is BoolKey else key


def map_keys(value: Mapping[Any, Any]) -> list[Any]:
    """The keys of a map as CEL values, in order."""
    return [k.value if type(k) is BoolKey else k for k in value]


def map_items(value: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    """The ``(key, value)`` pairs of a map, keys as CEL values, in order."""
    return [(k.value if type(k) is BoolKey else k, v) for k, v in value.items()]


class OpaqueValue:
    """Base class of library values with their own CEL type (``net.IP``, ``kubernetes.Quantity``...).

    Subclasses set ``cel_type_name``, implement equality and, when ``string(x)``
    applies to them, :meth:`cel_string`.
    """

    __slots__ = ()
    cel_type_name = "opaque"

    def cel_string(self) -> str:
        """``string(x)``; raise TypeError when the type has no string conversion."""
        raise TypeError(self.cel_type_name)


def register_type(name: str) -> CelType:
    """Make the type identifier ``name`` (``net.IP``) resolve to its type value."""
    found = TYPE_IDENTIFIERS.get(name)
    if found is None:
        found = TYPE_IDENTIFIERS[name] = CelType.named(name)
    return found


class OptionalValue:
    """A CEL ``optional_type`` value: either empty or holding one value.

    ``has_value`` and ``value`` are plain attributes (the evaluator reads them on hot
    paths); treat the object as immutable.
    """

    __slots__ = ("has_value", "value")

    def __init__(self, value: Any = None, has_value: bool = True) -> None:
        #: The held value (only meaningful when :attr:`has_value`).
        self.value = value
        #: True when the optional holds a value.
        self.has_value = has_value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OptionalValue):
            return False
        if not self.has_value or not other.has_value:
            return self.has_value == other.has_value
        from mkpolicy.cel.runtime import cel_equal  # local: runtime imports this module

        return cel_equal(self.value, other.value)

    def __hash__(self) -> int:
        return hash(("optional", self.has_value))

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.has_value else "optional.none()"


OPTIONAL_NONE = OptionalValue(None, has_value=False)


class ObjectValue(dict[str, Any]):
    """A message-like value built by ``Name{field: value, ...}``.

    Kubernetes uses ``Object{...}`` (and nested ``Object.spec{...}``) for
    ApplyConfiguration and ``JSONPatch{...}`` for JSON patches. The value behaves as a
    map of the fields that were set; ``type_name`` remembers the message name.
    """

    __slots__ = ("type_name",)

    def __init__(self, type_name: str, fields: dict[str, Any] | None = None) -> None:
        if fields:
            super().__init__(fields)
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"{self.type_name}{dict.__repr__(self)}"


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
# CEL timestamps span 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z.
TIMESTAMP_MIN_SECONDS = -62135596800
TIMESTAMP_MAX_SECONDS = 253402300799
_NS = 1_000_000_000


class Timestamp:
    """A point in time with nanosecond precision (seconds since the epoch, UTC)."""

    __slots__ = ("nanos_since_epoch",)

    def __init__(self, nanos_since_epoch: int) -> None:
        self.nanos_since_epoch = nanos_since_epoch

    @classmethod
    def from_datetime(cls, value: _dt.datetime) -> Timestamp:
        """Convert an aware (or naive, taken as UTC) datetime."""
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        delta = value - _EPOCH
        return cls((delta.days * 86400 + delta.seconds) * _NS + delta.microseconds * 1000)

    def to_datetime(self) -> _dt.datetime:
        """Return an aware UTC datetime (nanoseconds are truncated to microseconds)."""
        return _EPOCH + _dt.timedelta(microseconds=self.nanos_since_epoch // 1000)

    @property
    def seconds(self) -> int:
        """Whole seconds since the epoch (floored)."""
        return self.nanos_since_epoch // _NS

    @property
    def nanos(self) -> int:
        """Nanoseconds within the second."""
        return self.nanos_since_epoch % _NS

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Timestamp) and other.nanos_since_epoch == self.nanos_since_epoch

    def __lt__(self, other: Timestamp) -> bool:
        return self.nanos_since_epoch < other.nanos_since_epoch

    def __hash__(self) -> int:
        return hash(("ts", self.nanos_since_epoch))

    def __repr__(self) -> str:
        return f"timestamp({format_timestamp(self)!r})"


class Duration:
    """A signed span of time with nanosecond precision."""

    __slots__ = ("nanos",)

    def __init__(self, nanos: int) -> None:
        self.nanos = nanos

    @classmethod
    def from_timedelta(cls, value: _dt.timedelta) -> Duration:
        """Convert a timedelta."""
        return cls(((value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds) * 1000)

    def to_timedelta(self) -> _dt.timedelta:
        """Return a timedelta (nanoseconds are truncated to microseconds)."""
        return _dt.timedelta(microseconds=int(self.nanos / 1000))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other.nanos == self.nanos

    def __lt__(self, other: Duration) -> bool:
        return self.nanos < other.nanos

    def __hash__(self) -> int:
        return hash(("dur", self.nanos))

    def __repr__(self) -> str:
        return f"duration({format_duration(self)!r})"


def format_timestamp(ts: Timestamp) -> str:
    """RFC 3339 in UTC with 0, 3, 6 or 9 fraction digits, as protobuf's JSON does."""
    seconds, nanos = divmod(ts.nanos_since_epoch, _NS)
    base = (_EPOCH + _dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    if len(base) < 19:  # years below 1000 are not zero-padded by every libc
        year, rest = base.split("-", 1)
        base = f"{int(year):04d}-{rest}"
    if nanos == 0:
        frac = ""
    elif nanos % 1_000_000 == 0:
        frac = f".{nanos // 1_000_000:03d}"
    elif nanos % 1000 == 0:
        frac = f".{nanos // 1000:06d}"
    else:
        frac = f".{nanos:09d}"
    return f"{base}{frac}Z"


def format_duration(d: Duration) -> str:
    """Protobuf JSON form: signed decimal seconds with an ``s`` suffix (``-1.5s``)."""
    sign = "-" if d.nanos < 0 else ""
    seconds, nanos = divmod(abs(d.nanos), _NS)
    if nanos == 0:
        return f"{sign}{seconds}s"
    frac = f"{nanos:09d}".rstrip("0")
    return f"{sign}{seconds}.{frac}s"
