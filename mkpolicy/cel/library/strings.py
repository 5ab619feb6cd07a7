"""The strings extension (cel-go ``ext.Strings``, which Kubernetes enables).

``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``replace``,
``split``, ``substring``, ``trim``, ``join``, ``reverse``, ``strings.quote`` and
``format``. Indexes count Unicode code points, as in cel-go; the behaviour of Go's
``strings`` functions (``SplitN``, ``Replace``, ``TrimSpace``) is reproduced. Functions
that Kubernetes also defines on lists (``indexOf``, ``lastIndexOf``, ``reverse``)
dispatch on the receiver here and in :mod:`mkpolicy.cel.library.lists`.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.runtime import cel_equal, type_name
from mkpolicy.cel.values import CelType, Duration, Timestamp, Uint, format_timestamp, map_items

_CHARGE_FACTOR = 0.1


def _traversal(value: Any) -> int:
    """ceil(0.1 * len(value)) for strings and bytes, else 1."""
    t = type(value)
    return (len(value) + 9) // 10 if t is str or t is bytes else 1


def _cost_target(result: Any, target: Any, *args: Any) -> int:
    """Kubernetes: one traversal of the receiver (0.1 per character)."""
    return (len(target) + 9) // 10 or 1 if type(target) is str else 1


def _cost_target_twice(result: Any, target: Any, *args: Any) -> int:
    """Kubernetes: traversal plus construction of the result (0.2 per character)."""
    return (len(target) + 4) // 5 or 1 if type(target) is str else 1


@function("charAt", signatures=["(string, int) -> string"], receiver=True, cost=_cost_target)
def char_at(s: Any, i: Any) -> str:
    if type(s) is not str or type(i) is not int:
        raise no_overload("charAt", s, i)
    if i < 0 or i > len(s):
        raise EvalError(f"index out of range: {i}")
    return s[i] if i < len(s) else ""


def _string_index_of(s: str, sub: str, offset: int | None) -> int:
    start = 0 if offset is None else offset
    if start < 0 or (offset is not None and start > len(s)):
        raise EvalError(f"index out of range: {start}")
    if sub == "":
        return start
    return s.find(sub, start)


def _string_last_index_of(s: str, sub: str, offset: int | None) -> int:
    if offset is None:
        if sub == "":
            return len(s)
        return s.rfind(sub)
    if offset < 0 or offset > len(s):
        raise EvalError(f"index out of range: {offset}")
    if sub == "":
        return offset
    # The match may start at ``offset`` at the latest.
    return s.rfind(sub, 0, offset + len(sub))


def _list_index_of(items: list[Any], item: Any, reverse: bool) -> int:
    indexes = range(len(items) - 1, -1, -1) if reverse else range(len(items))
    for i in indexes:
        if cel_equal(items[i], item):
            return i
    return -1


def _index_cost(result: Any, target: Any, *args: Any) -> int:
    if type(target) is list:
        return max(1, len(target))
    return max(1, _traversal(target))


@function(
    "indexOf",
    signatures=["(string, string) -> int", "(string, string, int) -> int", "(list(A), A) -> int"],
    receiver=True,
    cost=_index_cost,
)
def index_of(s: Any, sub: Any, offset: Any = None) -> int:
    if type(s) is list and offset is None:
        return _list_index_of(s, sub, reverse=False)
    if type(s) is not str or type(sub) is not str or (offset is not None and type(offset) is not int):
        raise no_overload("indexOf", s, sub, *(() if offset is None else (offset,)))
    return _string_index_of(s, sub, offset)


@function(
    "lastIndexOf",
    signatures=["(string, string) -> int", "(string, string, int) -> int", "(list(A), A) -> int"],
    receiver=True,
    cost=_index_cost,
)
def last_index_of(s: Any, sub: Any, offset: Any = None) -> int:
    if type(s) is list and offset is None:
        return _list_index_of(s, sub, reverse=True)
    if type(s) is not str or type(sub) is not str or (offset is not None and type(offset) is not int):
        raise no_overload("lastIndexOf", s, sub, *(() if offset is None else (offset,)))
    return _string_last_index_of(s, sub, offset)


_LOWER = {i: i + 32 for i in range(ord("A"), ord("Z") + 1)}
_UPPER = {i + 32: i for i in range(ord("A"), ord("Z") + 1)}


@function("lowerAscii", signatures=["(string) -> string"], receiver=True, cost=_cost_target)
def lower_ascii(s: Any) -> str:
    if type(s) is not str:
        raise no_overload("lowerAscii", s)
    return s.lower() if s.isascii() else s.translate(_LOWER)


@function("upperAscii", signatures=["(string) -> string"], receiver=True, cost=_cost_target)
def upper_ascii(s: Any) -> str:
    if type(s) is not str:
        raise no_overload("upperAscii", s)
    return s.upper() if s.isascii() else s.translate(_UPPER)


@function(
    "replace",
    signatures=["(string, string, string) -> string", "(string, string, string, int) -> string"],
    receiver=True,
    needs_budget=True,
)
def replace(budget: Any, s: Any, old: Any, new: Any, n: Any = -1) -> str:
    if type(s) is not str or type(old) is not str or type(new) is not str or type(n) is not int:
        raise no_overload("replace", s, old, new, *(() if n == -1 else (n,)))
    # Charge for the result before building it: an empty ``old`` inserts ``new``
    # between every character.
    if len(new) <= len(old):
        size = len(s)
    elif old == "":
        size = len(s) + (len(s) + 1 if n < 0 else min(n, len(s) + 1)) * len(new)
    else:
        count = s.count(old) if n < 0 else min(n, s.count(old))
        size = len(s) + count * (len(new) - len(old))
    budget.charge_call((len(s) + size + 9) // 10 or 1)
    if n == 0:
        return s
    if old == "":
        # Go: an empty ``old`` matches before every character and at the end.
        limit = len(s) + 1 if n < 0 else min(n, len(s) + 1)
        out: list[str] = []
        for i in range(len(s) + 1):
            if i < limit:
                out.append(new)
            if i < len(s):
                out.append(s[i])
        return "".join(out)
    return s.replace(old, new, n if n >= 0 else -1)


@function(
    "split",
    signatures=["(string, string) -> list(string)", "(string, string, int) -> list(string)"],
    receiver=True,
    cost=_cost_target_twice,
)
def split(s: Any, sep: Any, n: Any = -1) -> list[str]:
    if type(s) is not str or type(sep) is not str or type(n) is not int:
        raise no_overload("split", s, sep, *(() if n == -1 else (n,)))
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        if n < 0 or n >= len(chars):
            return chars
        return [*chars[: n - 1], "".join(chars[n - 1 :])]
    if n < 0:
        return s.split(sep)
    return s.split(sep, n - 1)


@function(
    "substring",
    signatures=["(string, int) -> string", "(string, int, int) -> string"],
    receiver=True,
    cost=_cost_target,
)
def substring(s: Any, start: Any, end: Any = None) -> str:
    if type(s) is not str or type(start) is not int or (end is not None and type(end) is not int):
        raise no_overload("substring", s, start, *(() if end is None else (end,)))
    if end is None:
        if start < 0 or start > len(s):
            raise EvalError(f"index out of range: {start}")
        return s[start:]
    if start > end:
        raise EvalError(f"invalid substring range. start: {start}, end: {end}")
    if start < 0 or start > len(s):
        raise EvalError(f"index out of range: {start}")
    if end < 0 or end > len(s):
        raise EvalError(f"index out of range: {end}")
    return s[start:end]


#: Go's unicode.IsSpace: what strings.TrimSpace removes.
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


@function("trim", signatures=["(string) -> string"], receiver=True, cost=_cost_target)
def trim(s: Any) -> str:
    if type(s) is not str:
        raise no_overload("trim", s)
    return s.strip(_GO_SPACE)


@function(
    "join",
    signatures=["(list(string)) -> string", "(list(string), string) -> string"],
    receiver=True,
    needs_budget=True,
)
def join(budget: Any, items: Any, sep: Any = "") -> str:
    if type(items) is not list or type(sep) is not str:
        raise no_overload("join", items, sep)
    size = len(sep) * max(len(items) - 1, 0)
    for item in items:
        if type(item) is not str:
            raise EvalError(f"join: list element is a {type_name(item)}, not a string")
        size += len(item)
    # Kubernetes: 0.2 per character of the result, charged before it is built.
    budget.charge_call((size + 4) // 5 or 1)
    return sep.join(items)


def _reverse_cost(result: Any, target: Any) -> int:
    return max(1, len(target) if type(target) is list else _traversal(target))


@function("reverse", signatures=["(string) -> string", "(list(A)) -> list(A)"], receiver=True, cost=_reverse_cost)
def reverse(value: Any) -> Any:
    if type(value) is str:
        return value[::-1]
    if type(value) is list:
        return value[::-1]
    raise no_overload("reverse", value)


_QUOTE = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


@function("strings.quote", signatures=["(string) -> string"], cost=lambda result, s: _traversal(s))
def quote(s: Any) -> str:
    if type(s) is not str:
        raise no_overload("strings.quote", s)
    return '"' + "".join(_QUOTE.get(c, c) for c in s) + '"'


# -- format ---------------------------------------------------------------------------


def _float_plain(value: float) -> str:
    """Go's strconv.FormatFloat(v, 'f', -1, 64): shortest digits, no exponent."""
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "-0" if text == "0" and math.copysign(1.0, value) < 0 else text


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return None


def _format_string(value: Any) -> str:
    t = type(value)
    if t is bool:
        return "true" if value else "false"
    if t is int or t is Uint:
        return str(int(value))
    if t is float:
        return _special(value) or _float_plain(value)
    if t is str:
        return value  # type: ignore[no-any-return]
    if t is bytes:
        return value.decode("utf-8", errors="replace")  # type: ignore[no-any-return]
    if value is None:
        return "null"
    if t is Duration:
        return _float_plain(value.nanos / 1e9) + "s"
    if t is Timestamp:
        return format_timestamp(value)
    if t is CelType:
        return value.name  # type: ignore[no-any-return]
    if t is list:
        return "[" + ", ".join(_format_string(v) for v in value) + "]"
    if t is dict:
        entries = sorted((_format_string(k), _format_string(v)) for k, v in map_items(value))
        return "{" + ", ".join(f"{k}: {v}" for k, v in entries) + "}"
    raise EvalError(
        "error during formatting: string clause can only be used on strings, bools, bytes, ints, doubles, "
        f"maps, lists, types, durations, and timestamps, was given {type_name(value)}"
    )


def _format_decimal(value: Any) -> str:
    t = type(value)
    if t is int or t is Uint:
        return str(int(value))
    if t is float:
        return _special(value) or _float_plain(value)
    raise EvalError(
        f"error during formatting: decimal clause can only be used on integers, was given {type_name(value)}"
    )


def _as_float(value: Any, clause: str) -> float:
    t = type(value)
    if t is int or t is Uint or t is float:
        return float(value)
    raise EvalError(
        f"error during formatting: {clause} clause can only be used on doubles, was given {type_name(value)}"
    )


def _format_fixed(value: Any, precision: int) -> str:
    f = _as_float(value, "fixed-point")
    return _special(f) or f"{f:.{precision}f}"


def _format_scientific(value: Any, precision: int) -> str:
    f = _as_float(value, "scientific")
    return _special(f) or f"{f:.{precision}e}"


def _format_binary(value: Any) -> str:
    t = type(value)
    if t is bool:
        return "1" if value else "0"
    if t is int or t is Uint:
        return format(int(value), "b")
    raise EvalError(
        f"error during formatting: only integers and bools can be formatted as binary, was given {type_name(value)}"
    )


def _format_octal(value: Any) -> str:
    t = type(value)
    if t is int or t is Uint:
        return format(int(value), "o")
    raise EvalError(f"error during formatting: octal clause can only be used on integers, was given {type_name(value)}")


def _format_hex(value: Any, upper: bool) -> str:
    t = type(value)
    if t is int or t is Uint:
        text = format(int(value), "x")
    elif t is str:
        text = value.encode("utf-8").hex()
    elif t is bytes:
        text = value.hex()
    else:
        raise EvalError(
            "error during formatting: only integers, byte buffers, and strings can be formatted as hex, "
            f"was given {type_name(value)}"
        )
    return text.upper() if upper else text


#: The largest precision accepted in %.Nf / %.Ne.
MAX_PRECISION = 64


@function("format", signatures=["(string, list(dyn)) -> string"], receiver=True, needs_budget=True)
def format_(budget: Any, template: Any, args: Any) -> str:
    """``"%s is %d".format([a, b])``: clauses %s %d %f %e %b %o %x %X and %%.

    The template is charged first (cel-go: 0.1 per character), then every formatted
    argument as it is produced, so a huge result stops at the budget.
    """
    if type(template) is not str or type(args) is not list:
        raise no_overload("format", template, args)
    budget.charge_call(_traversal(template))
    out: list[str] = []
    i = 0
    arg = 0
    n = len(template)
    while i < n:
        ch = template[i]
        if ch != "%":
            j = template.find("%", i)
            j = n if j < 0 else j
            out.append(template[i:j])
            i = j
            continue
        i += 1
        if i < n and template[i] == "%":
            out.append("%")
            i += 1
            continue
        precision: int | None = None
        if i < n and template[i] == ".":
            j = i + 1
            while j < n and template[j].isdigit():
                j += 1
            if j == i + 1:
                raise EvalError("could not parse formatting clause: unable to find end of precision specifier")
            precision = int(template[i + 1 : j])
            if precision > MAX_PRECISION:
                raise EvalError(f"could not parse formatting clause: precision {precision} is too large")
            i = j
        if i >= n:
            raise EvalError("could not parse formatting clause: unexpected end of string")
        verb = template[i]
        i += 1
        if verb not in "sdfebxXo":
            raise EvalError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')
        if arg >= len(args):
            raise EvalError(f"index {arg} out of range")
        value = args[arg]
        arg += 1
        if out and len(out[-1]) >= 64:
            budget.charge(len(out[-1]) // 10)
        if verb == "s":
            out.append(_format_string(value))
        elif verb == "d":
            out.append(_format_decimal(value))
        elif verb == "f":
            out.append(_format_fixed(value, 6 if precision is None else precision))
        elif verb == "e":
            out.append(_format_scientific(value, 6 if precision is None else precision))
        elif verb == "b":
            out.append(_format_binary(value))
        elif verb == "o":
            out.append(_format_octal(value))
        else:
            out.append(_format_hex(value, upper=verb == "X"))
    return "".join(out)
