"""Compile the CEL AST into Python closures over plain values.

Each node becomes a function ``f(activation) -> value``; the activation is a dict of
variable values (comprehension variables live under private keys that no user name can
collide with). Names, functions, arities and message types are resolved here, once,
so evaluation does no lookups by name. Runtime failures raise
:class:`~mkpolicy.cel.errors.EvalError`; each closure that can fail stamps its node's
position on errors that do not have one yet.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Mapping
from typing import Any

from mkpolicy.cel import ast
from mkpolicy.cel.cost import comprehension_step_cost
from mkpolicy.cel.environment import Environment
from mkpolicy.cel.errors import CelCompileError, EvalError, no_overload
from mkpolicy.cel.library.regex import compile_regex
from mkpolicy.cel.library.time import parse_duration, parse_timestamp
from mkpolicy.cel.runtime import (
    ARITHMETIC,
    Budget,
    cel_equal,
    compare,
    contains,
    has_field,
    index,
    logical_not,
    negate,
    optional_index,
    optional_select,
    select,
    type_name,
)
from mkpolicy.cel.values import (
    TYPE_IDENTIFIERS,
    ObjectValue,
    OptionalValue,
    Uint,
    map_items,
    map_key,
    map_keys,
)

Evaluator = Callable[[dict[str, Any]], Any]

#: Activation key holding the evaluation's :class:`Budget`.
BUDGET_KEY = "\x00budget"
#: Concatenations producing values at least this long charge the budget by size
#: (shorter ones are covered by the fixed cost of the call).
_LARGE = 64
#: ``in`` on lists at least this long charges one unit per element.
_LONG_LIST = 16

_counter = itertools.count()


def _stamp(exc: EvalError, pos: int) -> EvalError:
    if exc.pos is None:
        exc.pos = pos
    return exc


def in_list(item: Any, c: Any, pos: int, budget: Budget) -> bool:
    """``item in c``, charging one unit per element of a long list."""
    try:
        if type(c) is list and len(c) >= _LONG_LIST:
            budget.charge_call(len(c))
        return contains(c, item)
    except EvalError as exc:
        raise _stamp(exc, pos) from None


class Compiler:
    """Turns one expression's AST into an :data:`Evaluator`."""

    def __init__(self, env: Environment, text: str) -> None:
        self.env = env
        self.text = text
        # Comprehension variables in scope: user name -> activation key.
        self.scope: dict[str, str] = {}

    def error(self, message: str, pos: int) -> CelCompileError:
        """A compile error at ``pos``."""
        return CelCompileError(message, self.text, pos)

    def compile(self, node: ast.Node) -> Evaluator:
        """Compile ``node`` and its sub-expressions."""
        method = getattr(self, "_" + type(node).__name__)
        result: Evaluator = method(node)
        return result

    # -- leaves -------------------------------------------------------------------------
    def _Literal(self, node: ast.Literal) -> Evaluator:
        value = node.value
        return lambda a: value

    def _Ident(self, node: ast.Ident) -> Evaluator:
        resolved = self._resolve([node.name], node.root, node.pos)
        if resolved is None:
            return self._undeclared(node.name, node.pos)
        return resolved

    def _resolve(self, parts: list[str], root: bool, pos: int) -> Evaluator | None:
        """Resolve the qualified name ``parts`` (no field selection) or return None."""
        name = ".".join(parts)
        if len(parts) == 1 and not root and name in self.scope:
            key = self.scope[name]
            return lambda a: a[key]
        for candidate in self.env.candidates(name, root):
            if candidate in self.env.variables:
                return _variable(candidate, pos)
        if name in TYPE_IDENTIFIERS:
            value = TYPE_IDENTIFIERS[name]
            return lambda a: value
        return None

    def _undeclared(self, name: str, pos: int) -> Evaluator:
        if not self.env.allow_undeclared:
            raise self.error(f"undeclared reference to '{name}'", pos)
        return _variable(name, pos)

    # -- selection ----------------------------------------------------------------------
    def _Select(self, node: ast.Select) -> Evaluator:
        if node.test_only:
            operand = self.compile(node.operand)
            field, pos = node.field, node.pos

            def has(a: dict[str, Any]) -> bool:
                try:
                    return has_field(operand(a), field)
                except EvalError as exc:
                    raise _stamp(exc, pos) from None

            return has
        if node.optional:
            operand = self.compile(node.operand)
            field, pos = node.field, node.pos

            def opt_select(a: dict[str, Any]) -> OptionalValue:
                try:
                    return optional_select(operand(a), field)
                except EvalError as exc:
                    raise _stamp(exc, pos) from None

            return opt_select
        # Collect the plain selection chain a.b.c so that qualified variable names
        # resolve (longest declared prefix wins) and field access runs in one loop.
        chain: list[ast.Select] = []
        cur: ast.Node = node
        while isinstance(cur, ast.Select) and not cur.optional and not cur.test_only:
            chain.append(cur)
            cur = cur.operand
        chain.reverse()
        base: Evaluator | None = None
        if isinstance(cur, ast.Ident) and (cur.root or cur.name not in self.scope):
            parts = [cur.name] + [s.field for s in chain]
            for n in range(len(parts), 0, -1):
                base = self._resolve(parts[:n], cur.root, cur.pos)
                if base is not None:
                    chain = chain[n - 1 :]
                    break
            if base is None:
                if not self.env.allow_undeclared:
                    raise self.error(f"undeclared reference to '{cur.name}'", cur.pos)
                base = _variable(cur.name, cur.pos)
        else:
            base = self.compile(cur)
        return _select_chain(base, [(s.field, s.pos) for s in chain])

    # -- calls --------------------------------------------------------------------------
    def _Call(self, node: ast.Call) -> Evaluator:
        special = _SPECIAL.get(node.function)
        if special is not None and node.target is None:
            return special(self, node)
        if node.target is not None:
            qualified = self._qualified_function(node)
            if qualified is not None:
                return self._global_call(qualified, node.args, node.pos)
            return self._receiver_call(node)
        name = node.function[1:] if node.function.startswith(".") else node.function
        return self._global_call(name, node.args, node.pos)

    def _qualified_function(self, node: ast.Call) -> str | None:
        """``ns.fn(args)`` where ``ns.fn`` is a global function and ``ns`` no variable."""
        parts: list[str] = []
        cur = node.target
        while isinstance(cur, ast.Select) and not cur.optional and not cur.test_only:
            parts.append(cur.field)
            cur = cur.operand
        if not isinstance(cur, ast.Ident):
            return None
        parts.append(cur.name)
        prefix = ".".join(reversed(parts))
        name = f"{prefix}.{node.function}"
        if self.env.library.lookup(name, receiver=False) is None:
            return None
        if cur.name in self.scope or any(c in self.env.variables for c in self.env.candidates(cur.name, cur.root)):
            return None
        return name

    def _global_call(self, name: str, arg_nodes: list[ast.Node], pos: int) -> Evaluator:
        fn = self.env.library.lookup(name, receiver=False)
        if fn is None:
            if self.env.library.lookup(name, receiver=True) is not None:
                raise self.error(f"'{name}' must be called on a value, as x.{name}(...)", pos)
            if self.env.allow_undeclared:
                return _unknown_function(name, [self.compile(n) for n in arg_nodes], pos)
            raise self.error(f"undeclared reference to function '{name}'", pos)
        if len(arg_nodes) not in fn.arities:
            raise self.error(_arity_message(name, fn.arities, len(arg_nodes)), pos)
        self._validate_literals(name, arg_nodes)
        args = [self.compile(n) for n in arg_nodes]
        return _call(fn.impl, args, pos, fn.cost, fn.needs_budget)

    def _receiver_call(self, node: ast.Call) -> Evaluator:
        name = node.function
        fn = self.env.library.lookup(name, receiver=True)
        if fn is None:
            if self.env.library.lookup(name, receiver=False) is not None:
                raise self.error(f"'{name}' is not a method; call it as {name}(...)", node.pos)
            if self.env.allow_undeclared:
                assert node.target is not None
                args = [self.compile(node.target)] + [self.compile(n) for n in node.args]
                return _unknown_function(name, args, node.pos)
            raise self.error(f"undeclared reference to function '{name}'", node.pos)
        if len(node.args) not in fn.arities:
            raise self.error(_arity_message(name, fn.arities, len(node.args)), node.pos)
        assert node.target is not None
        self._validate_literals(name, [node.target, *node.args])
        args = [self.compile(node.target)] + [self.compile(n) for n in node.args]
        return _call(fn.impl, args, node.pos, fn.cost, fn.needs_budget)

    def _validate_literals(self, name: str, operands: list[ast.Node]) -> None:
        """Reject constant arguments that can never work, as Kubernetes' validators do:
        regular expressions, ``duration('...')`` and ``timestamp('...')`` literals."""
        literal = [n.value if isinstance(n, ast.Literal) and type(n.value) is str else None for n in operands]
        try:
            if name in ("matches", "find", "findAll") and len(literal) >= 2 and literal[1] is not None:
                compile_regex(literal[1])
            elif name == "duration" and len(literal) == 1 and literal[0] is not None:
                parse_duration(literal[0])
            elif name == "timestamp" and len(literal) == 1 and literal[0] is not None:
                parse_timestamp(literal[0])
        except EvalError as exc:
            arg = operands[1] if name in ("matches", "find", "findAll") else operands[0]
            raise self.error(exc.message, arg.pos) from None

    # -- operators ----------------------------------------------------------------------
    def _logical(self, node: ast.Call) -> Evaluator:
        left, right = (self.compile(n) for n in node.args)
        pos = node.pos
        is_and = node.function == "_&&_"
        short: bool = not is_and  # the value that decides the result on its own
        decided: bool = short  # returned when an operand equals ``short``

        def logical(a: dict[str, Any]) -> bool:
            left_error: EvalError | None = None
            try:
                lv = left(a)
            except EvalError as exc:
                if exc.cost:
                    raise
                left_error = _stamp(exc, pos)
            else:
                if lv is short:
                    return decided
                if lv is not (not short):
                    left_error = _stamp(no_overload(node.function, lv), pos)
            try:
                rv = right(a)
            except EvalError as exc:
                if exc.cost:
                    raise
                raise left_error or _stamp(exc, pos) from None
            if rv is short:
                return decided
            if left_error is not None:
                raise left_error
            if rv is not (not short):
                raise _stamp(no_overload(node.function, rv), pos)
            return not short

        return logical

    def _conditional(self, node: ast.Call) -> Evaluator:
        cond, then, otherwise = (self.compile(n) for n in node.args)
        pos = node.pos

        def conditional(a: dict[str, Any]) -> Any:
            c = cond(a)
            if c is True:
                return then(a)
            if c is False:
                return otherwise(a)
            raise _stamp(no_overload("_?_:_", c), pos)

        return conditional

    def _unary(self, node: ast.Call) -> Evaluator:
        (operand,) = (self.compile(n) for n in node.args)
        impl = logical_not if node.function == "!_" else negate
        pos = node.pos

        def unary(a: dict[str, Any]) -> Any:
            try:
                return impl(operand(a))
            except EvalError as exc:
                raise _stamp(exc, pos) from None

        return unary

    def _equality(self, node: ast.Call) -> Evaluator:
        left, right = (self.compile(n) for n in node.args)
        if node.function == "_==_":
            return lambda a: cel_equal(left(a), right(a))
        return lambda a: not cel_equal(left(a), right(a))

    def _relation(self, node: ast.Call) -> Evaluator:
        left, right = (self.compile(n) for n in node.args)
        function = node.function
        test = _RELATIONS[function]
        fast = _FAST_RELATIONS[function]
        pos = node.pos

        def relation(a: dict[str, Any]) -> bool:
            lv = left(a)
            rv = right(a)
            t = type(lv)
            if t is type(rv) and (t is int or t is str or t is float):
                return bool(fast(lv, rv))
            try:
                return test(compare(lv, rv, function))
            except EvalError as exc:
                raise _stamp(exc, pos) from None

        return relation

    def _arithmetic(self, node: ast.Call) -> Evaluator:
        left, right = (self.compile(n) for n in node.args)
        table = ARITHMETIC[node.function]
        function = node.function
        pos = node.pos

        def arithmetic(a: dict[str, Any]) -> Any:
            lv = left(a)
            rv = right(a)
            impl = table.get((type(lv), type(rv)))
            if impl is None:
                raise _stamp(no_overload(function, lv, rv), pos)
            try:
                result = impl(lv, rv)
            except EvalError as exc:
                raise _stamp(exc, pos) from None
            tr = type(result)
            if (tr is str or tr is bytes or tr is list) and len(result) >= _LARGE:
                # cel-go charges 0.1 per character of a concatenation; lists are
                # charged the same way here because Python copies them.
                try:
                    a[BUDGET_KEY].charge(len(result) // 10, pos)
                except EvalError as exc:
                    raise _stamp(exc, pos) from None
            return result

        return arithmetic

    def _in(self, node: ast.Call) -> Evaluator:
        item, container = (self.compile(n) for n in node.args)
        pos = node.pos

        def in_(a: dict[str, Any]) -> bool:
            try:
                i = item(a)  # left to right, as cel-go (and the generated code)
                c = container(a)
            except EvalError as exc:
                raise _stamp(exc, pos) from None
            return in_list(i, c, pos, a[BUDGET_KEY])

        return in_

    def _index(self, node: ast.Call) -> Evaluator:
        container, key = (self.compile(n) for n in node.args)
        pos = node.pos
        if node.function == "_[?_]":

            def optional_index_(a: dict[str, Any]) -> OptionalValue:
                try:
                    return optional_index(container(a), key(a))
                except EvalError as exc:
                    raise _stamp(exc, pos) from None

            return optional_index_

        def index_(a: dict[str, Any]) -> Any:
            c = container(a)
            k = key(a)
            if type(c) is dict and type(k) is str:
                try:
                    return c[k]
                except KeyError:
                    pass
            try:
                return index(c, k)
            except EvalError as exc:
                raise _stamp(exc, pos) from None

        return index_

    # -- literals -----------------------------------------------------------------------
    def _ListLit(self, node: ast.ListLit) -> Evaluator:
        elements = [self.compile(n) for n in node.elements]
        if not any(node.optional):
            if len(elements) == 0:
                return lambda a: []
            return lambda a: [e(a) for e in elements]
        flags = list(zip(elements, node.optional, (n.pos for n in node.elements), strict=True))

        def list_lit(a: dict[str, Any]) -> list[Any]:
            out: list[Any] = []
            for element, optional, pos in flags:
                value = element(a)
                if optional:
                    if type(value) is not OptionalValue:
                        raise _stamp(no_overload("optional element", value), pos)
                    if value.has_value:
                        out.append(value.value)
                else:
                    out.append(value)
            return out

        return list_lit

    def _MapLit(self, node: ast.MapLit) -> Evaluator:
        entries = []
        for e in node.entries:
            assert isinstance(e.key, ast.Node)
            entries.append((self.compile(e.key), self.compile(e.value), e.optional, e.pos))

        def map_lit(a: dict[str, Any]) -> dict[Any, Any]:
            out: dict[Any, Any] = {}
            for key_fn, value_fn, optional, pos in entries:
                key = key_fn(a)
                tk = type(key)
                if tk is not str and tk is not int and tk is not Uint and tk is not bool:
                    raise EvalError(f"unsupported map key type: {type_name(key)}", pos)
                key = map_key(key)
                if key in out:
                    raise EvalError(f"Failed with repeated key: {key!r}", pos)
                value = value_fn(a)
                if optional:
                    if type(value) is not OptionalValue:
                        raise _stamp(no_overload("optional entry", value), pos)
                    if not value.has_value:
                        continue
                    value = value.value
                out[key] = value
            return out

        return map_lit

    def _StructLit(self, node: ast.StructLit) -> Evaluator:
        type_name_ = node.type_name.lstrip(".")
        try:
            allowed = self.env.message_fields(type_name_)
        except KeyError:
            raise self.error(f"unknown message type '{type_name_}'", node.pos) from None
        fields = []
        seen: set[str] = set()
        for e in node.entries:
            assert isinstance(e.key, str)
            if allowed is not None and e.key not in allowed:
                raise self.error(f"'{type_name_}' has no field '{e.key}' (fields: {', '.join(sorted(allowed))})", e.pos)
            if e.key in seen:
                raise self.error(f"field '{e.key}' is set twice", e.pos)
            seen.add(e.key)
            fields.append((e.key, self.compile(e.value), e.optional, e.pos))

        def struct_lit(a: dict[str, Any]) -> ObjectValue:
            out = ObjectValue(type_name_)
            for name, value_fn, optional, pos in fields:
                value = value_fn(a)
                if optional:
                    if type(value) is not OptionalValue:
                        raise _stamp(no_overload("optional field", value), pos)
                    if not value.has_value:
                        continue
                    value = value.value
                out[name] = value
            return out

        return struct_lit

    # -- comprehensions -----------------------------------------------------------------
    def _Comprehension(self, node: ast.Comprehension) -> Evaluator:
        iter_range = self.compile(node.iter_range)
        saved = dict(self.scope)
        key1 = f"\x00{node.var}#{next(_counter)}"
        self.scope[node.var] = key1
        key2 = None
        if node.var2 is not None:
            key2 = f"\x00{node.var2}#{next(_counter)}"
            self.scope[node.var2] = key2
        try:
            args = [self.compile(n) for n in node.args]
        finally:
            self.scope = saved
        builder = _COMPREHENSIONS[node.macro]
        return builder(iter_range, key1, key2, args, node.pos, comprehension_step_cost(node))


def _variable(name: str, pos: int) -> Evaluator:
    def variable(a: dict[str, Any]) -> Any:
        try:
            return a[name]
        except KeyError:
            raise EvalError(f"undeclared reference to '{name}' (no value bound)", pos) from None

    return variable


def _unknown_function(name: str, args: list[Evaluator], pos: int) -> Evaluator:
    """With undeclared names allowed, an unknown function fails when it is called."""

    def unknown(a: dict[str, Any]) -> Any:
        for f in args:
            f(a)
        raise EvalError(f"no such overload: unknown function '{name}'", pos)

    return unknown


def _select_chain(base: Evaluator, fields: list[tuple[str, int]]) -> Evaluator:
    if not fields:
        return base
    if len(fields) == 1:
        ((field, pos),) = fields

        def select1(a: dict[str, Any]) -> Any:
            v = base(a)
            if type(v) is dict:
                try:
                    return v[field]
                except KeyError:
                    pass
            try:
                return select(v, field)
            except EvalError as exc:
                raise _stamp(exc, pos) from None

        return select1

    def select_chain(a: dict[str, Any]) -> Any:
        v = base(a)
        for field, pos in fields:
            if type(v) is dict:
                try:
                    v = v[field]
                    continue
                except KeyError:
                    pass
            try:
                v = select(v, field)
            except EvalError as exc:
                raise _stamp(exc, pos) from None
        return v

    return select_chain


def _call(
    impl: Callable[..., Any],
    args: list[Evaluator],
    pos: int,
    cost: Callable[..., int] | None,
    needs_budget: bool,
) -> Evaluator:
    if needs_budget:

        def call_budget(a: dict[str, Any]) -> Any:
            try:
                return impl(a[BUDGET_KEY], *[f(a) for f in args])
            except EvalError as exc:
                raise _stamp(exc, pos) from None

        return call_budget
    if cost is not None:

        def call_cost(a: dict[str, Any]) -> Any:
            values = [f(a) for f in args]
            try:
                result = impl(*values)
                a[BUDGET_KEY].charge_call(cost(result, *values))
            except EvalError as exc:
                raise _stamp(exc, pos) from None
            return result

        return call_cost
    if len(args) == 1:
        (f0,) = args

        def call1(a: dict[str, Any]) -> Any:
            try:
                return impl(f0(a))
            except EvalError as exc:
                raise _stamp(exc, pos) from None

        return call1
    if len(args) == 2:
        f0, f1 = args

        def call2(a: dict[str, Any]) -> Any:
            try:
                return impl(f0(a), f1(a))
            except EvalError as exc:
                raise _stamp(exc, pos) from None

        return call2

    def call(a: dict[str, Any]) -> Any:
        try:
            return impl(*[f(a) for f in args])
        except EvalError as exc:
            raise _stamp(exc, pos) from None

    return call


def _arity_message(name: str, arities: frozenset[int], got: int) -> str:
    want = " or ".join(str(n) for n in sorted(arities))
    return f"found no matching overload for '{name}': expected {want} argument(s), got {got}"


_RELATIONS: dict[str, Callable[[int], bool]] = {
    "_<_": lambda c: c == -1,
    "_<=_": lambda c: c in (-1, 0),
    "_>_": lambda c: c == 1,
    "_>=_": lambda c: c in (1, 0),
}

_FAST_RELATIONS: dict[str, Callable[[Any, Any], bool]] = {
    "_<_": operator.lt,
    "_<=_": operator.le,
    "_>_": operator.gt,
    "_>=_": operator.ge,
}

_SPECIAL: dict[str, Callable[[Compiler, ast.Call], Evaluator]] = {
    "_&&_": Compiler._logical,
    "_||_": Compiler._logical,
    "_?_:_": Compiler._conditional,
    "!_": Compiler._unary,
    "-_": Compiler._unary,
    "_==_": Compiler._equality,
    "_!=_": Compiler._equality,
    "_<_": Compiler._relation,
    "_<=_": Compiler._relation,
    "_>_": Compiler._relation,
    "_>=_": Compiler._relation,
    "_+_": Compiler._arithmetic,
    "_-_": Compiler._arithmetic,
    "_*_": Compiler._arithmetic,
    "_/_": Compiler._arithmetic,
    "_%_": Compiler._arithmetic,
    "@in": Compiler._in,
    "_[_]": Compiler._index,
    "_[?_]": Compiler._index,
}


# -- comprehension builders -------------------------------------------------------------

#: ``builder(range, key1, key2, args, pos, step)``; ``step`` is the fixed cost charged per iteration.
ComprehensionBuilder = Callable[[Evaluator, str, "str | None", list[Evaluator], int, int], Evaluator]


def _iteration(value: Any, two_vars: bool, pos: int) -> Any:
    """Pairs (var1, var2) to iterate: list -> (index, elem) / elem; map -> (key, value) / key."""
    t = type(value)
    if t is list or t is tuple:
        return enumerate(value) if two_vars else value
    if isinstance(value, Mapping) and t is not ObjectValue:
        return map_items(value) if two_vars else map_keys(value)
    raise EvalError(f"expression of type '{type_name(value)}' cannot be the range of a comprehension", pos)


def _bool_result(value: Any, macro: str, pos: int) -> bool:
    if value is True or value is False:
        return value
    raise EvalError(f"{macro}() predicate must return a bool, got {type_name(value)}", pos)


def _quantifier(macro: str) -> ComprehensionBuilder:
    # all: a false decides (errors elsewhere are absorbed); exists: a true decides.
    decisive = macro == "exists"

    def build(rng: Evaluator, k1: str, k2: str | None, args: list[Evaluator], pos: int, step: int) -> Evaluator:
        (pred,) = args
        two = k2 is not None

        def quantifier(a: dict[str, Any]) -> bool:
            budget: Budget = a[BUDGET_KEY]
            first_error: EvalError | None = None
            for item in _iteration(rng(a), two, pos):
                budget.charge(step, pos)
                if two:
                    a[k1], a[k2] = item  # type: ignore[index]
                else:
                    a[k1] = item
                try:
                    result = _bool_result(pred(a), macro, pos)
                except EvalError as exc:
                    if exc.cost:
                        raise
                    if first_error is None:
                        first_error = _stamp(exc, pos)
                    continue
                if result is decisive:
                    return decisive
            if first_error is not None:
                raise first_error
            return not decisive

        return quantifier

    return build


def _exists_one(rng: Evaluator, k1: str, k2: str | None, args: list[Evaluator], pos: int, step: int) -> Evaluator:
    (pred,) = args
    two = k2 is not None

    def exists_one(a: dict[str, Any]) -> bool:
        budget: Budget = a[BUDGET_KEY]
        count = 0
        for item in _iteration(rng(a), two, pos):
            budget.charge(step, pos)
            if two:
                a[k1], a[k2] = item  # type: ignore[index]
            else:
                a[k1] = item
            if _bool_result(pred(a), "exists_one", pos):
                count += 1
        return count == 1

    return exists_one


def _map(rng: Evaluator, k1: str, k2: str | None, args: list[Evaluator], pos: int, step: int) -> Evaluator:
    transform = args[-1]
    keep = args[0] if len(args) == 2 else None

    def map_(a: dict[str, Any]) -> list[Any]:
        budget: Budget = a[BUDGET_KEY]
        out = []
        source = rng(a)
        items = _iteration(source, False, pos)
        # No early exit: all iterations are charged before the first one runs.
        budget.charge(len(source) * step, pos)
        for item in items:
            a[k1] = item
            if keep is not None and not _bool_result(keep(a), "map", pos):
                continue
            out.append(transform(a))
        return out

    return map_


def _filter(rng: Evaluator, k1: str, k2: str | None, args: list[Evaluator], pos: int, step: int) -> Evaluator:
    (pred,) = args

    def filter_(a: dict[str, Any]) -> list[Any]:
        budget: Budget = a[BUDGET_KEY]
        out = []
        source = rng(a)
        items = _iteration(source, False, pos)
        budget.charge(len(source) * step, pos)
        for item in items:
            a[k1] = item
            if _bool_result(pred(a), "filter", pos):
                out.append(item)
        return out

    return filter_


def _transform(kind: str) -> ComprehensionBuilder:
    def build(rng: Evaluator, k1: str, k2: str | None, args: list[Evaluator], pos: int, step: int) -> Evaluator:
        transform = args[-1]
        keep = args[0] if len(args) == 2 else None

        def transform_(a: dict[str, Any]) -> Any:
            budget: Budget = a[BUDGET_KEY]
            source = rng(a)
            out_list: list[Any] = []
            out_map: dict[Any, Any] = {}
            pairs = _iteration(source, True, pos)
            budget.charge(len(source) * step, pos)
            for first, second in pairs:
                a[k1] = first
                a[k2] = second  # type: ignore[index]
                if keep is not None and not _bool_result(keep(a), kind, pos):
                    continue
                value = transform(a)
                if kind == "transformList":
                    out_list.append(value)
                elif kind == "transformMap":
                    out_map[map_key(first)] = value
                else:
                    if not isinstance(value, Mapping):
                        raise EvalError(f"transformMapEntry() must produce a map, got {type_name(value)}", pos)
                    for k, v in value.items():
                        if k in out_map:
                            raise EvalError(f"transformMapEntry() produced the key {k!r} twice", pos)
                        out_map[k] = v
            return out_list if kind == "transformList" else out_map

        return transform_

    return build


def _opt_map(flat: bool) -> ComprehensionBuilder:
    def build(rng: Evaluator, k1: str, k2: str | None, args: list[Evaluator], pos: int, step: int) -> Evaluator:
        (transform,) = args
        macro = "optFlatMap" if flat else "optMap"

        def opt_map(a: dict[str, Any]) -> OptionalValue:
            opt = rng(a)
            if type(opt) is not OptionalValue:
                raise _stamp(no_overload(macro, opt), pos)
            if not opt.has_value:
                return opt
            a[k1] = opt.value
            result = transform(a)
            if flat:
                if type(result) is not OptionalValue:
                    raise EvalError(f"optFlatMap() must produce an optional, got {type_name(result)}", pos)
                return result
            return OptionalValue(result)

        return opt_map

    return build


def _sort_by(rng: Evaluator, k1: str, k2: str | None, args: list[Evaluator], pos: int, step: int) -> Evaluator:
    (key_fn,) = args

    def sort_by(a: dict[str, Any]) -> list[Any]:
        from mkpolicy.cel.library.lists import sort_indexes

        budget: Budget = a[BUDGET_KEY]
        items = rng(a)
        if type(items) is not list:
            raise EvalError(f"sortBy() needs a list, got {type_name(items)}", pos)
        keys = []
        for item in items:
            budget.charge(step, pos)
            a[k1] = item
            keys.append(key_fn(a))
        budget.charge(len(items) * max(1, len(items).bit_length()), pos)
        try:
            order = sort_indexes("sortBy", keys)
        except EvalError as exc:
            raise _stamp(exc, pos) from None
        return [items[i] for i in order]

    return sort_by


def _bind(rng: Evaluator, k1: str, k2: str | None, args: list[Evaluator], pos: int, step: int) -> Evaluator:
    (body,) = args

    def bind(a: dict[str, Any]) -> Any:
        a[k1] = rng(a)
        return body(a)

    return bind


_COMPREHENSIONS: dict[str, ComprehensionBuilder] = {
    "all": _quantifier("all"),
    "exists": _quantifier("exists"),
    "exists_one": _exists_one,
    "map": _map,
    "filter": _filter,
    "transformList": _transform("transformList"),
    "transformMap": _transform("transformMap"),
    "transformMapEntry": _transform("transformMapEntry"),
    "optMap": _opt_map(False),
    "optFlatMap": _opt_map(True),
    "sortBy": _sort_by,
    "bind": _bind,
}
