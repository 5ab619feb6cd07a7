"""Timestamps and durations: parsing, formatting and the ``get*`` accessors."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.runtime import check_duration, check_timestamp
from mkpolicy.cel.values import Duration, Timestamp

_NS = 1_000_000_000
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)

_TS_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


def parse_timestamp(text: str) -> Timestamp:
    """Parse an RFC 3339 timestamp with up to nanosecond precision."""
    m = _TS_RE.match(text)
    if m is None:
        raise EvalError(f"timestamp parse error: cannot parse {text!r} as RFC 3339")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    frac = (m.group(7) or "").ljust(9, "0")
    try:
        base = _dt.datetime(year, month, day, hour, minute, second, tzinfo=_dt.UTC)
    except ValueError as exc:
        raise EvalError(f"timestamp parse error: {exc}") from None
    offset = 0
    if m.group(9):
        offset = (int(m.group(10)) * 60 + int(m.group(11))) * 60
        if m.group(9) == "-":
            offset = -offset
    delta = base - _EPOCH
    seconds = delta.days * 86400 + delta.seconds - offset
    return check_timestamp(seconds * _NS + int(frac))


_DURATION_UNITS = {
    "h": 3600 * _NS,
    "m": 60 * _NS,
    "s": _NS,
    "ms": 1_000_000,
    "us": 1000,
    "µs": 1000,
    "μs": 1000,
    "ns": 1,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> Duration:
    """Parse a Go duration string such as ``1h30m``, ``-1.5s`` or ``100ms``."""
    s = text
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return Duration(0)
    if not s:
        raise EvalError(f"invalid duration {text!r}")
    total = 0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None:
            raise EvalError(f"invalid duration {text!r}")
        number, unit = m.group(1), m.group(2)
        scale = _DURATION_UNITS[unit]
        whole, _, frac = number.partition(".")
        total += int(whole or "0") * scale
        if frac:
            total += int(frac) * scale // 10 ** len(frac)
        pos = m.end()
    return check_duration(sign * total)


def _zone(name: str) -> _dt.tzinfo:
    m = re.fullmatch(r"([+-]?)(\d{1,2}):(\d{2})", name)
    if m:
        minutes = int(m.group(2)) * 60 + int(m.group(3))
        if m.group(1) == "-":
            minutes = -minutes
        return _dt.timezone(_dt.timedelta(minutes=minutes))
    if name.upper() == "UTC":
        return _dt.UTC
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:
        raise EvalError(f"unknown time zone {name!r}") from None


def _local(ts: Any, tz: Any, function_name: str) -> _dt.datetime:
    if type(ts) is not Timestamp or (tz is not None and type(tz) is not str):
        raise no_overload(function_name, ts, *(() if tz is None else (tz,)))
    seconds = ts.nanos_since_epoch // _NS
    moment = _EPOCH + _dt.timedelta(seconds=seconds)
    return moment.astimezone(_zone(tz)) if tz is not None else moment


def _timestamp_getter(name: str, compute: Any) -> None:
    def getter(value: Any, tz: Any = None) -> int:
        if type(value) is Duration and tz is None and name in _DURATION_GETTERS:
            return int(_DURATION_GETTERS[name](value.nanos))
        return int(compute(_local(value, tz, name), value))

    sigs = ["(timestamp) -> int", "(timestamp, string) -> int"]
    if name in _DURATION_GETTERS:
        sigs.append("(duration) -> int")
    function(name, signatures=sigs, receiver=True)(getter)


_DURATION_GETTERS: dict[str, Any] = {
    "getHours": lambda ns: int(ns / (3600 * _NS)),
    "getMinutes": lambda ns: int(ns / (60 * _NS)),
    "getSeconds": lambda ns: int(ns / _NS),
    "getMilliseconds": lambda ns: int((abs(ns) % _NS) // 1_000_000) * (-1 if ns < 0 else 1),
}

_timestamp_getter("getFullYear", lambda d, ts: d.year)
_timestamp_getter("getMonth", lambda d, ts: d.month - 1)
_timestamp_getter("getDayOfYear", lambda d, ts: d.timetuple().tm_yday - 1)
_timestamp_getter("getDayOfMonth", lambda d, ts: d.day - 1)
_timestamp_getter("getDate", lambda d, ts: d.day)
_timestamp_getter("getDayOfWeek", lambda d, ts: (d.weekday() + 1) % 7)
_timestamp_getter("getHours", lambda d, ts: d.hour)
_timestamp_getter("getMinutes", lambda d, ts: d.minute)
_timestamp_getter("getSeconds", lambda d, ts: d.second)
_timestamp_getter("getMilliseconds", lambda d, ts: ts.nanos // 1_000_000)
