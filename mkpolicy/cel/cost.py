"""Kubernetes-style cost of CEL expressions.

The unit is cel-go's: reading a variable or a field costs 1, a literal 0, a call 1
plus what its arguments cost, creating a list 10, a map 30, a message 40; functions
whose work grows with their input cost in proportion to it (0.1 per character of a
string traversed, the product of string and pattern length for regexes, one per list
element for list functions...), and a comprehension costs its per-iteration cost times
the number of iterations.

Two uses:

* :func:`estimate_cost` is the static *worst case*, as the Kubernetes API server
  computes it for CRD validation rules: sizes come from the schema (``maxLength``,
  ``maxItems``, ``maxProperties``, ``enum``) or, without one, from the largest object
  a request can carry (3 MiB). Compare it with :data:`PER_CALL_LIMIT`.
* :func:`fixed_cost` is the size-independent part of a node's cost. The evaluator
  charges it once per evaluation and once per comprehension iteration; functions
  charge their size-dependent part themselves, on the actual values (see
  :mod:`mkpolicy.cel.compiler`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mkpolicy.cel import ast
from mkpolicy.cel import types as t
from mkpolicy.cel.checker import CheckResult, check, schema_variables
from mkpolicy.cel.types import Type
from mkpolicy.structural import Schema

if TYPE_CHECKING:
    from mkpolicy.cel.program import Program

#: Kubernetes' cost limit of one expression evaluation (``PerCallLimit``).
PER_CALL_LIMIT = 1_000_000
#: Kubernetes' cost budget of all the expressions of one admission (``RuntimeCELCostBudget``).
RUNTIME_BUDGET = 10_000_000
#: The largest request the API server accepts; bounds sizes no schema limits.
MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024

UNBOUNDED = 2**64 - 1
#: The longest list ``lists.range`` builds (mkpolicy.cel.library.lists.MAX_RANGE).
MAX_RANGE = 1_000_000

SELECT_AND_IDENT_COST = 1
LIST_CREATE_COST = 10
MAP_CREATE_COST = 30
STRUCT_CREATE_COST = 40
STRING_TRAVERSAL_FACTOR = 0.1
REGEX_LENGTH_FACTOR = 0.25


def _add(a: int, b: int) -> int:
    return min(a + b, UNBOUNDED)


def _mul(a: int, b: int) -> int:
    return min(a * b, UNBOUNDED)


def _factor(size: int, factor: float) -> int:
    if size >= UNBOUNDED:
        return UNBOUNDED
    return min(math.ceil(size * factor), UNBOUNDED)


@dataclass(frozen=True)
class Size:
    """Bounds of the size of a string, bytes, list or map (``size()`` of it)."""

    min: int
    max: int

    def __add__(self, other: Size) -> Size:
        return Size(_add(self.min, other.min), _add(self.max, other.max))

    def __mul__(self, other: Size) -> Size:
        return Size(_mul(self.min, other.min), _mul(self.max, other.max))

    def union(self, other: Size) -> Size:
        """Bounds covering both."""
        return Size(min(self.min, other.min), max(self.max, other.max))


UNKNOWN_SIZE = Size(0, UNBOUNDED)
ONE = Size(1, 1)


def _min_serialized_size(schema: Schema) -> int:
    kind = schema.type
    if kind == "string":
        return 2  # ""
    if kind in ("object", "array"):
        return 2  # {} []
    return 1  # 0, true, null...


def schema_max_size(schema: Schema) -> int:
    """The largest ``size()`` a value described by ``schema`` can have in one request.

    The limits Kubernetes uses for CRD validation rules: ``maxLength``/``maxItems``/
    ``maxProperties`` when set, the longest ``enum`` value, otherwise as many
    smallest-possible elements as fit into the largest request.
    """
    node = schema.node or {}
    room = MAX_REQUEST_SIZE_BYTES - 2
    kind = schema.type
    if kind == "array":
        if isinstance(node.get("maxItems"), int):
            return int(node["maxItems"])
        return room // (_min_serialized_size(schema.items()) + 1)
    if kind == "object":
        if isinstance(node.get("maxProperties"), int):
            return int(node["maxProperties"])
        # "": x, -> at least 4 bytes per entry
        return room // (_min_serialized_size(schema.field("")) + 4)
    if kind == "string":
        if isinstance(node.get("maxLength"), int):
            return int(node["maxLength"])
        enum = node.get("enum")
        if isinstance(enum, list) and enum and all(isinstance(e, str) for e in enum):
            return max(len(e) for e in enum)
        return room
    if schema.int_or_string:
        return room
    return room


def default_max_size(ty: Type) -> int:
    """The size bound of a value of type ``ty`` read from a request without a schema."""
    room = MAX_REQUEST_SIZE_BYTES - 2
    if ty.kind == "list":
        return room // 2
    if ty.kind == "map":
        return room // 5
    return room


_COMPREHENSION_STEP: dict[str, int] = {
    # cel-go's macro expansions, per iteration, without the user's sub-expressions:
    # all/exists: @not_strictly_false(__result__) (2) and __result__ && p (1).
    "all": 3,
    "exists": 3,
    # p ? __result__ + 1 : __result__
    "exists_one": 2,
    # __result__ + [t]
    "map": 12,
    "transformList": 12,
    # p ? __result__ + [x] : __result__
    "filter": 13,
    # cel.@mapInsert(__result__, k, t)
    "transformMap": 3,
    "transformMapEntry": 2,
    # key evaluation; the sort itself is charged n*log(n) at run time
    "sortBy": 12,
}
_COMPREHENSION_FIXED: dict[str, int] = {
    # accumulator initialisation + the result expression
    "all": 1,
    "exists": 1,
    "exists_one": 2,
    "map": 11,
    "transformList": 11,
    "filter": 11,
    "transformMap": 31,
    "transformMapEntry": 31,
    "sortBy": 11,
}


def comprehension_step_cost(node: ast.Comprehension) -> int:
    """The size-independent cost of one iteration of ``node`` (charged per iteration)."""
    return _COMPREHENSION_STEP.get(node.macro, 1) + sum(fixed_cost(a) for a in node.args)


def fixed_cost(node: ast.Node) -> int:
    """The size-independent cost of evaluating ``node`` once, comprehension iterations excluded.

    Branches count their costlier side, so this is an upper bound of what cel-go
    charges for the same nodes.
    """
    if isinstance(node, ast.Literal):
        return 0
    if isinstance(node, ast.Ident):
        return SELECT_AND_IDENT_COST
    if isinstance(node, ast.Select):
        return fixed_cost(node.operand) + (0 if node.test_only else SELECT_AND_IDENT_COST)
    if isinstance(node, ast.Call):
        args = [fixed_cost(a) for a in node.args]
        target = fixed_cost(node.target) if node.target is not None else 0
        if node.target is None and node.function == "_?_:_":
            return args[0] + max(args[1], args[2])
        if node.target is None and node.function in ("_&&_", "_||_"):
            return args[0] + args[1]
        return 1 + target + sum(args)
    if isinstance(node, ast.ListLit):
        return LIST_CREATE_COST + sum(fixed_cost(e) for e in node.elements)
    if isinstance(node, ast.MapLit):
        return MAP_CREATE_COST + sum(fixed_cost(c) for c in node.children())
    if isinstance(node, ast.StructLit):
        return STRUCT_CREATE_COST + sum(fixed_cost(e.value) for e in node.entries)
    if isinstance(node, ast.Comprehension):
        rng = fixed_cost(node.iter_range)
        if node.macro == "bind":
            return rng + fixed_cost(node.args[0])
        if node.macro in ("optMap", "optFlatMap"):
            return rng + 3 + fixed_cost(node.args[0])
        return rng + _COMPREHENSION_FIXED.get(node.macro, 1)
    return 1


# -- static worst case -------------------------------------------------------------------


class Estimator:
    """Worst-case cost of one checked expression (cel-go's ``checker.Cost`` shape)."""

    def __init__(self, checked: CheckResult) -> None:
        self.checked = checked
        self.sizes: dict[ast.Node, Size] = {}
        self.elem_sizes: dict[ast.Node, Size] = {}
        # Iteration variables in scope: name -> (size, element size) of their values.
        self.scopes: list[dict[str, tuple[Size | None, Size | None]]] = []

    def type_of(self, node: ast.Node) -> Type:
        """The checked type of ``node``."""
        return self.checked.type_of(node)

    # -- sizes ----------------------------------------------------------------------------
    def size(self, node: ast.Node) -> Size:
        """Bounds of ``size()`` of the value of ``node``."""
        found = self.sizes.get(node)
        if found is not None:
            return found
        if isinstance(node, ast.Literal):
            v = node.value
            if isinstance(v, str):
                return Size(len(v), len(v))
            if isinstance(v, bytes):
                return Size(len(v), len(v))
            return ONE
        if isinstance(node, ast.ListLit):
            return Size(len(node.elements), len(node.elements))
        if isinstance(node, ast.MapLit):
            return Size(len(node.entries), len(node.entries))
        if isinstance(node, ast.Ident):
            local = self._local(node.name)
            if local is not None and local[0] is not None:
                return local[0]
        ty = self.type_of(node)
        if ty.kind in ("bool", "int", "uint", "double", "timestamp", "duration", "null_type"):
            return ONE
        schema = self.checked.schemas.get(node)
        if schema is not None and schema.known:
            return Size(0, schema_max_size(schema))
        if self._from_input(node):
            return Size(0, default_max_size(ty))
        return UNKNOWN_SIZE

    def _from_input(self, node: ast.Node) -> bool:
        """True when ``node`` reads (part of) a variable, so its size is bounded by a request."""
        cur = node
        while True:
            if isinstance(cur, ast.Select):
                cur = cur.operand
            elif isinstance(cur, ast.Call) and cur.function in ("_[_]", "_[?_]", "value", "orValue", "dyn"):
                cur = cur.target if cur.target is not None else cur.args[0]
            else:
                break
        if isinstance(cur, ast.Ident):
            local = self._local(cur.name)
            return local is None or local[0] is not None
        return False

    def elem_size(self, node: ast.Node) -> Size:
        """Bounds of the size of the elements of the list (or values of the map) ``node``."""
        found = self.elem_sizes.get(node)
        if found is not None:
            return found
        if isinstance(node, ast.ListLit):
            if not node.elements:
                return Size(0, 0)
            out = self.size(node.elements[0])
            for e in node.elements[1:]:
                out = out.union(self.size(e))
            return out
        if isinstance(node, ast.Ident):
            local = self._local(node.name)
            if local is not None and local[1] is not None:
                return local[1]
        schema = self.checked.schemas.get(node)
        if schema is not None and schema.known:
            inner = schema.items() if schema.type == "array" else schema.field("")
            if inner.known:
                return Size(0, schema_max_size(inner))
        if self._from_input(node):
            return Size(0, MAX_REQUEST_SIZE_BYTES - 2)
        return UNKNOWN_SIZE

    def key_size(self, node: ast.Node) -> Size:
        """Bounds of the size of the keys of the map ``node``."""
        if isinstance(node, ast.MapLit):
            if not node.entries:
                return Size(0, 0)
            sizes = [self.size(e.key) for e in node.entries if isinstance(e.key, ast.Node)]
            out = sizes[0]
            for other in sizes[1:]:
                out = out.union(other)
            return out
        if self._from_input(node) or node in self.checked.schemas:
            return Size(0, MAX_REQUEST_SIZE_BYTES - 2)
        return UNKNOWN_SIZE

    def _local(self, name: str) -> tuple[Size | None, Size | None] | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # -- costs ------------------------------------------------------------------------------
    def cost(self, node: ast.Node) -> int:
        """Worst-case cost of evaluating ``node``."""
        if isinstance(node, ast.Literal):
            return 0
        if isinstance(node, ast.Ident):
            return SELECT_AND_IDENT_COST
        if isinstance(node, ast.Select):
            return _add(self.cost(node.operand), 0 if node.test_only else SELECT_AND_IDENT_COST)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.ListLit):
            total = LIST_CREATE_COST
            for e in node.elements:
                total = _add(total, self.cost(e))
            return total
        if isinstance(node, ast.MapLit):
            total = MAP_CREATE_COST
            for c in node.children():
                total = _add(total, self.cost(c))
            return total
        if isinstance(node, ast.StructLit):
            total = STRUCT_CREATE_COST
            for entry in node.entries:
                total = _add(total, self.cost(entry.value))
            return total
        if isinstance(node, ast.Comprehension):
            return self._comprehension(node)
        return 1

    def _comprehension(self, node: ast.Comprehension) -> int:
        rng_cost = self.cost(node.iter_range)
        rng_type = self.type_of(node.iter_range)
        if node.macro == "bind":
            self.scopes.append({node.var: (self.size(node.iter_range), self.elem_size(node.iter_range))})
            try:
                body = self.cost(node.args[0])
                self._copy_size(node, node.args[0])
            finally:
                self.scopes.pop()
            return _add(rng_cost, body)
        if node.macro in ("optMap", "optFlatMap"):
            self.scopes.append({node.var: (None, None)})
            try:
                body = self.cost(node.args[0])
            finally:
                self.scopes.pop()
            return _add(_add(rng_cost, 3), body)
        count = self.size(node.iter_range)
        if rng_type.is_dyn and count.max == MAX_REQUEST_SIZE_BYTES - 2:
            count = Size(0, default_max_size(t.list_of(t.DYN)))
        elem = self.elem_size(node.iter_range)
        key = self.key_size(node.iter_range) if rng_type.kind != "list" else ONE
        scope: dict[str, tuple[Size | None, Size | None]] = {}
        if node.var2 is not None:
            scope[node.var] = (key, None)
            scope[node.var2] = (elem, None)
            single = elem
        else:
            # One variable: the element of a list, the key of a map.
            single = elem if rng_type.kind == "list" else key
            scope[node.var] = (single, None)
        self.scopes.append(scope)
        try:
            step = _COMPREHENSION_STEP.get(node.macro, 1)
            for arg in node.args:
                step = _add(step, self.cost(arg))
            if node.macro in ("map", "transformList", "transformMap"):
                self.elem_sizes[node] = self.size(node.args[-1])
        finally:
            self.scopes.pop()
        if node.macro in ("map", "filter", "transformList", "transformMap", "transformMapEntry", "sortBy"):
            self.sizes[node] = Size(0, count.max)
        if node.macro in ("filter", "sortBy"):
            self.elem_sizes[node] = single if node.macro == "filter" else elem
        fixed = _COMPREHENSION_FIXED.get(node.macro, 1)
        return _add(_add(rng_cost, fixed), _mul(self._iterations(node, count), step))

    def _iterations(self, node: ast.Comprehension, count: Size) -> int:
        """How many times the loop runs: at most the range's size."""
        return count.max

    def _branches(self, costs: list[int]) -> int:
        """The cost of ``c ? a : b`` beyond ``c``: the dearer branch."""
        return max(costs)

    def _short_circuit(self, left: int, right: int) -> int:
        """The cost of ``a && b`` / ``a || b``: both sides, at worst."""
        return _add(left, right)

    def _copy_size(self, dst: ast.Node, src: ast.Node) -> None:
        if src in self.sizes:
            self.sizes[dst] = self.sizes[src]

    def _call(self, node: ast.Call) -> int:
        qualified = self.checked.qualified.get(node)
        if qualified is not None:
            operands = list(node.args)
        else:
            operands = ([node.target] if node.target is not None else []) + list(node.args)
        costs = [self.cost(a) for a in operands]
        fn = node.function
        if node.target is None and fn == "_?_:_":
            then, otherwise = node.args[1], node.args[2]
            self.sizes[node] = self.size(then).union(self.size(otherwise))
            return _add(costs[0], self._branches(costs[1:]))
        if node.target is None and fn in ("_&&_", "_||_"):
            return self._short_circuit(costs[0], costs[1])
        if node.target is None and fn == "dyn" and len(node.args) == 1:
            self._copy_size(node, node.args[0])
            return _add(1, costs[0])
        total = 0
        for c in costs:
            total = _add(total, c)
        return _add(total, self._function_cost(node, operands))

    def _function_cost(self, node: ast.Call, operands: list[ast.Node]) -> int:
        """Cost of the call itself (arguments excluded); records result sizes."""
        fn = self.checked.qualified.get(node, node.function)
        kinds = [self.type_of(a).kind for a in operands]
        size = self.size
        if fn == "_+_" and len(operands) == 2:
            result = size(operands[0]) + size(operands[1])
            self.sizes[node] = result
            if kinds[0] == "list" or kinds[1] == "list":
                return 1
            if kinds[0] in ("string", "bytes") or kinds[1] in ("string", "bytes") or "dyn" in kinds:
                return max(1, _factor(result.max, STRING_TRAVERSAL_FACTOR))
            return 1
        if fn in ("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_") and len(operands) == 2:
            smallest = min(size(operands[0]).max, size(operands[1]).max)
            return max(1, _factor(smallest, STRING_TRAVERSAL_FACTOR)) if smallest else 0
        if fn == "@in" and len(operands) == 2:
            if kinds[1] == "map":
                return 1
            return max(1, size(operands[1]).max)
        if fn in ("_[_]", "_[?_]"):
            if kinds[0] in ("list", "map"):
                self.sizes[node] = self.elem_size(operands[0])
            elif self._from_input(node):  # an element of an input is no bigger than a request
                self.sizes[node] = Size(0, default_max_size(self.type_of(node)))
            else:
                self.sizes[node] = UNKNOWN_SIZE
            return 1
        if fn in ("matches", "find", "findAll") and len(operands) == 2:
            text = _factor(_add(size(operands[0]).max, 1), STRING_TRAVERSAL_FACTOR)
            pattern = _factor(size(operands[1]).max, REGEX_LENGTH_FACTOR)
            if fn != "matches":
                self.sizes[node] = Size(0, size(operands[0]).max)
            return max(1, _mul(text, pattern))
        if fn == "contains" and len(operands) == 2 and node.target is not None:
            return max(1, _mul(_factor(size(operands[0]).max, 0.1), _factor(size(operands[1]).max, 0.1)))
        if fn in ("startsWith", "endsWith") and len(operands) == 2:
            return max(1, _factor(size(operands[1]).max, STRING_TRAVERSAL_FACTOR))
        if fn in ("string", "bytes") and len(operands) == 1 and kinds[0] in ("string", "bytes", "dyn"):
            self.sizes[node] = size(operands[0])
            return max(1, _factor(size(operands[0]).max, STRING_TRAVERSAL_FACTOR))
        return self._library_cost(node, operands, kinds)

    def _library_cost(self, node: ast.Call, operands: list[ast.Node], kinds: list[str]) -> int:
        qualified = self.checked.qualified.get(node)
        fn = qualified or node.function
        size = self.size
        target = operands[0] if node.target is not None and qualified is None else None
        if fn in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") and target is not None:
            if kinds[0] == "list":
                elem_cost = 1
                elem_type = self.type_of(target).elem
                if elem_type.kind in ("string", "bytes"):
                    elem_cost = _add(1, _factor(self.elem_size(target).max, STRING_TRAVERSAL_FACTOR))
                return max(1, _mul(size(target).max, elem_cost))
            return max(1, _factor(size(target).max, STRING_TRAVERSAL_FACTOR))
        if fn in ("lowerAscii", "upperAscii", "substring", "trim", "reverse", "quote", "format") and target:
            self.sizes[node] = Size(0, size(target).max if fn != "quote" else _add(_mul(size(target).max, 2), 2))
            return max(1, _factor(size(target).max, STRING_TRAVERSAL_FACTOR))
        if fn == "jsonpatch.escapeKey" and operands:
            # "~" and "/" become two characters.
            self.sizes[node] = Size(size(operands[0]).min, _mul(size(operands[0]).max, 2))
            return max(1, _factor(size(operands[0]).max, STRING_TRAVERSAL_FACTOR))
        if fn == "charAt":
            return max(1, _factor(size(operands[0]).max, STRING_TRAVERSAL_FACTOR))
        if fn in ("replace", "split") and target is not None:
            sz = size(target)
            if fn == "split":
                self.sizes[node] = Size(0, sz.max)
            else:
                old = size(operands[1]) if len(operands) > 1 else UNKNOWN_SIZE
                new = size(operands[2]) if len(operands) > 2 else UNKNOWN_SIZE
                if old.min == 0:
                    grown = _add(sz.max, _mul(_add(sz.max, 1), new.max))
                elif new.max <= old.min:
                    grown = sz.max
                else:
                    grown = _mul(math.ceil(sz.max / old.min) if sz.max < UNBOUNDED else UNBOUNDED, new.max)
                self.sizes[node] = Size(0, grown)
                # The input and the (possibly longer) result are both traversed.
                return max(1, _factor(_add(sz.max, grown), STRING_TRAVERSAL_FACTOR))
            return max(1, _factor(sz.max, 2 * STRING_TRAVERSAL_FACTOR))
        if fn == "join" and target is not None:
            count = size(target)
            total = count * self.elem_size(target)
            if len(operands) > 1:
                total = total + Size(0, _mul(size(operands[1]).max, max(count.max - 1, 0)))
            self.sizes[node] = total
            # Kubernetes estimates 0.1 per character but charges 0.2 at run time;
            # the estimate here uses 0.2 so it bounds the actual cost.
            return max(1, _factor(total.max, 2 * STRING_TRAVERSAL_FACTOR))
        if fn == "url" or fn == "quantity" or fn == "isQuantity" or fn == "isURL" or fn == "semver" or fn == "isSemver":
            return max(1, _factor(size(operands[-1]).max, STRING_TRAVERSAL_FACTOR))
        if fn in ("ip", "cidr", "isIP", "isCIDR") and kinds[-1] in ("string", "dyn"):
            return max(1, _factor(size(operands[-1]).max, STRING_TRAVERSAL_FACTOR))
        if fn == "ip.isCanonical":
            return max(1, _factor(size(operands[-1]).max, 2 * STRING_TRAVERSAL_FACTOR))
        if fn in ("containsIP", "containsCIDR"):
            base = 4 if fn == "containsIP" else 7
            if kinds[-1] in ("string", "dyn"):
                return _add(base, _factor(size(operands[-1]).max, STRING_TRAVERSAL_FACTOR))
            return base
        if fn in ("sets.contains", "sets.intersects", "sets.equivalent") and len(operands) == 2:
            factor = 2 if fn == "sets.equivalent" else 1
            return _add(1, _mul(_mul(size(operands[0]).max, size(operands[1]).max), factor))
        if fn in ("slice", "flatten", "distinct", "sort", "sortBy", "lists.range") or (
            fn == "reverse" and kinds and kinds[0] == "list"
        ):
            sz = size(operands[0]) if operands else UNKNOWN_SIZE
            if fn == "lists.range":
                arg = operands[0] if operands else None
                if isinstance(arg, ast.Literal) and type(arg.value) is int:
                    n = max(0, min(arg.value, MAX_RANGE))
                    self.sizes[node] = Size(n, n)
                else:
                    self.sizes[node] = Size(0, MAX_RANGE)
                return max(1, self.size(node).max)
            self.sizes[node] = Size(0, sz.max)
            if fn in ("sort", "sortBy"):
                n = sz.max
                return max(1, _mul(n, max(1, n.bit_length())) if n < UNBOUNDED else UNBOUNDED)
            if fn == "distinct":
                return max(1, _mul(sz.max, sz.max) if sz.max < UNBOUNDED else UNBOUNDED)
            return max(1, sz.max)
        if fn in ("validate",) and operands:
            return max(1, _factor(size(operands[-1]).max, STRING_TRAVERSAL_FACTOR))
        if fn in ("math.greatest", "math.least") and len(operands) == 1 and kinds[0] == "list":
            return max(1, size(operands[0]).max)
        if fn == "size":
            return 1
        return 1


class LeastEstimator(Estimator):
    """A lower bound of the cost of one checked expression, whatever its input.

    Every size that depends on the input is taken at its smallest (empty strings, lists and
    maps); only literals and ``lists.range`` of a literal keep their size. A conditional
    costs its cheaper branch, ``&&``/``||`` their left side, ``all``/``exists`` one iteration
    (they stop early). An expression whose least cost is over :data:`PER_CALL_LIMIT` fails
    on every object: lint reports it as an error (MKP213), not a warning.
    """

    def size(self, node: ast.Node) -> Size:
        """Bounds of ``size()`` of ``node``'s value, both at their smallest."""
        found = super().size(node)
        return Size(found.min, found.min)

    def elem_size(self, node: ast.Node) -> Size:
        """Element sizes at their smallest."""
        found = super().elem_size(node)
        return Size(found.min, found.min)

    def key_size(self, node: ast.Node) -> Size:
        """Key sizes at their smallest."""
        found = super().key_size(node)
        return Size(found.min, found.min)

    def _iterations(self, node: ast.Comprehension, count: Size) -> int:
        if node.macro in ("all", "exists"):
            return min(count.min, 1)
        return count.min

    def _branches(self, costs: list[int]) -> int:
        return min(costs)

    def _short_circuit(self, left: int, right: int) -> int:
        return left


def estimate_cost(program: Program, schemas: Mapping[str, Schema | None] | None = None) -> int:
    """Worst-case static cost of ``program`` in Kubernetes cost units.

    Compare it with :data:`PER_CALL_LIMIT`. ``schemas`` (optional) gives the OpenAPI
    schemas of variables: their ``maxItems``/``maxLength``/``maxProperties`` bound the
    sizes; without a schema a variable's strings and lists are as large as a 3 MiB
    request allows, as Kubernetes assumes. The result is capped at 2**64 - 1.
    """
    schemas = schemas or {}
    checked = check(
        program,
        schema_variables(schemas),
        homogeneous_literals=False,
        object_schema=schemas.get("object"),
    )
    return Estimator(checked).cost(program.ast)


def estimate(
    program: Program,
    variables: Mapping[str, Type] | None = None,
) -> int:
    """Worst-case cost with variables typed explicitly (used by tools that know more)."""
    checked = check(program, variables or {}, homogeneous_literals=False)
    return Estimator(checked).cost(program.ast)


__all__ = [
    "MAX_REQUEST_SIZE_BYTES",
    "PER_CALL_LIMIT",
    "RUNTIME_BUDGET",
    "Estimator",
    "LeastEstimator",
    "Size",
    "comprehension_step_cost",
    "estimate",
    "estimate_cost",
    "fixed_cost",
    "schema_max_size",
]
