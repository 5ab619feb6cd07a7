"""List functions: Kubernetes' lists library (``isSorted``, ``sum``, ``min``, ``max``;
``indexOf``/``lastIndexOf`` live with the string functions of the same name), cel-go's
list extension (``slice``, ``flatten``, ``distinct``, ``sort``, ``sortBy``,
``lists.range``, ``first``, ``last``; ``reverse`` is shared with strings) and the
sets extension (``sets.contains``, ``sets.equivalent``, ``sets.intersects``).

Every function charges the evaluation budget in proportion to the elements it
touches, so long lists cannot make a call expensive for free.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.runtime import ADD, cel_equal, compare, type_name
from mkpolicy.cel.values import OPTIONAL_NONE, Duration, OptionalValue, Uint

_COMPARABLE = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")
_SUMMABLE = {"int": 0, "uint": Uint(0), "double": 0.0, "duration": Duration(0)}


def _list(name: str, value: Any, *rest: Any) -> list[Any]:
    if type(value) is not list:
        raise no_overload(name, value, *rest)
    return value


def _size_cost(result: Any, value: Any, *rest: Any) -> int:
    return max(1, len(value)) if type(value) is list else 1


def _result_cost(result: Any, *args: Any) -> int:
    return max(1, len(result)) if type(result) is list else 1


@function("isSorted", signatures=[f"(list({t})) -> bool" for t in _COMPARABLE], receiver=True, cost=_size_cost)
def is_sorted(value: Any) -> bool:
    items = _list("isSorted", value)
    return all(compare(a, b, "isSorted") != 1 for a, b in itertools.pairwise(items))


@function("sum", signatures=[f"(list({t})) -> {t}" for t in _SUMMABLE], receiver=True, cost=_size_cost)
def sum_(value: Any) -> Any:
    items = _list("sum", value)
    if not items:
        return 0
    total = items[0]
    if type(total) not in (int, Uint, float, Duration):
        raise no_overload("sum", value)
    for item in items[1:]:
        impl = ADD.get((type(total), type(item)))
        if impl is None or type(item) is not type(total):
            raise EvalError(f"sum(): cannot add {type_name(item)} to {type_name(total)}")
        total = impl(total, item)
    return total


def _extremum(name: str, value: Any, prefer: int) -> Any:
    items = _list(name, value)
    if not items:
        raise EvalError(f"{name} called on empty list")
    best = items[0]
    for item in items[1:]:
        if compare(best, item, name) == prefer:
            best = item
    return best


@function("min", signatures=[f"(list({t})) -> {t}" for t in _COMPARABLE], receiver=True, cost=_size_cost)
def min_(value: Any) -> Any:
    return _extremum("min", value, 1)


@function("max", signatures=[f"(list({t})) -> {t}" for t in _COMPARABLE], receiver=True, cost=_size_cost)
def max_(value: Any) -> Any:
    return _extremum("max", value, -1)


@function("slice", signatures=["(list(A), int, int) -> list(A)"], receiver=True, cost=_result_cost)
def slice_(value: Any, start: Any, end: Any) -> list[Any]:
    items = _list("slice", value, start, end)
    if type(start) is not int or type(end) is not int:
        raise no_overload("slice", value, start, end)
    if start < 0 or end < 0:
        raise EvalError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise EvalError(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if end > len(items):
        raise EvalError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return items[start:end]


def _flatten(items: list[Any], depth: int) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if type(item) is list and depth > 0:
            out.extend(_flatten(item, depth - 1))
        else:
            out.append(item)
    return out


@function(
    "flatten",
    signatures=["(list(list(A))) -> list(A)", "(list(dyn), int) -> list(dyn)"],
    receiver=True,
    cost=_result_cost,
)
def flatten(value: Any, depth: Any = 1) -> list[Any]:
    items = _list("flatten", value)
    if type(depth) is not int:
        raise no_overload("flatten", value, depth)
    if depth < 0:
        raise EvalError("level must be non-negative")
    return _flatten(items, min(depth, 100))


@function("distinct", signatures=["(list(A)) -> list(A)"], receiver=True, needs_budget=True)
def distinct(budget: Any, value: Any) -> list[Any]:
    items = _list("distinct", value)
    # Quadratic (CEL equality has no hash): charged before the work.
    budget.charge_call(len(items) * len(items) or 1)
    out: list[Any] = []
    for item in items:
        if not any(cel_equal(item, seen) for seen in out):
            out.append(item)
    return out


def _sort_cost(value: Any) -> int:
    n = len(value) if type(value) is list else 1
    return max(1, n * max(1, n.bit_length()))


def sort_indexes(name: str, keys: list[Any]) -> list[int]:
    """Indexes of ``keys`` in ascending CEL order (stable); keys of mixed types are an error."""
    if not keys:
        return []
    first = type(keys[0])
    for key in keys:
        if type(key) is not first:
            raise EvalError(f"{name}(): list elements must have the same type")

    def by_key(i: int, j: int) -> int:
        return _cmp(name, keys[i], keys[j])

    return sorted(range(len(keys)), key=functools.cmp_to_key(by_key))


def sort_values(name: str, items: list[Any]) -> list[Any]:
    """Sort comparable values of one type (CEL ordering); mixed types are an error."""
    return [items[i] for i in sort_indexes(name, items)]


def _cmp(name: str, a: Any, b: Any) -> int:
    result = compare(a, b, name)
    return 0 if result == 2 else result


@function("sort", signatures=[f"(list({t})) -> list({t})" for t in _COMPARABLE], receiver=True, needs_budget=True)
def sort(budget: Any, value: Any) -> list[Any]:
    items = _list("sort", value)
    budget.charge_call(_sort_cost(items))
    return sort_values("sort", items)


#: Longest list ``lists.range`` builds.
MAX_RANGE = 1_000_000


@function("lists.range", signatures=["(int) -> list(int)"], cost=_result_cost)
def range_(n: Any) -> list[int]:
    if type(n) is not int:
        raise no_overload("lists.range", n)
    if n > MAX_RANGE:
        raise EvalError(f"lists.range({n}): at most {MAX_RANGE} elements", cost=True)
    return list(range(max(0, n)))


@function("first", signatures=["(list(A)) -> optional_type(A)"], receiver=True)
def first(value: Any) -> OptionalValue:
    items = _list("first", value)
    return OptionalValue(items[0]) if items else OPTIONAL_NONE


@function("last", signatures=["(list(A)) -> optional_type(A)"], receiver=True)
def last(value: Any) -> OptionalValue:
    items = _list("last", value)
    return OptionalValue(items[-1]) if items else OPTIONAL_NONE


def _sets(name: str, budget: Any, a: Any, b: Any, factor: int) -> None:
    """Check the arguments and charge cel-go's cost (the product of the sizes) first."""
    if type(a) is not list or type(b) is not list:
        raise no_overload(name, a, b)
    budget.charge_call(1 + len(a) * len(b) * factor)


def _contains_all(a: list[Any], b: list[Any]) -> bool:
    return all(any(cel_equal(x, y) for y in a) for x in b)


@function("sets.contains", signatures=["(list(A), list(A)) -> bool"], needs_budget=True)
def sets_contains(budget: Any, a: Any, b: Any) -> bool:
    _sets("sets.contains", budget, a, b, 1)
    return _contains_all(a, b)


@function("sets.equivalent", signatures=["(list(A), list(A)) -> bool"], needs_budget=True)
def sets_equivalent(budget: Any, a: Any, b: Any) -> bool:
    _sets("sets.equivalent", budget, a, b, 2)
    return _contains_all(a, b) and _contains_all(b, a)


@function("sets.intersects", signatures=["(list(A), list(A)) -> bool"], needs_budget=True)
def sets_intersects(budget: Any, a: Any, b: Any) -> bool:
    _sets("sets.intersects", budget, a, b, 1)
    return any(any(cel_equal(x, y) for y in a) for x in b)
