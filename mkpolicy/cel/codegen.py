"""Compile the CEL AST into Python source: the fast evaluator.

:mod:`mkpolicy.cel.compiler` turns every node into a closure; that is simple and is
the reference semantics, but each node costs a Python call. This module generates one
Python function per expression instead: field chains become nested subscripts with one
``try`` (``a['object']['spec']['x']``), comprehensions become ``for`` loops over Python
locals, operators get inline fast paths for the common types and call the runtime
helpers otherwise, library functions are called directly. The semantics are the
closure compiler's: the same runtime helpers raise the same errors at the same
positions, ``&&``/``||``/``all``/``exists`` absorb errors the same way, and the cost
budget is charged the same amounts (the fixed cost once, the step cost per iteration,
size-dependent costs by the functions).

Nodes the generator does not handle itself (rare macros, calls that only fail at run
time, sub-expressions nested too deeply for Python's block limit) are compiled by the
closure compiler and called from the generated code, with the comprehension variables
in scope copied into its activation. Compile-time errors come from the closure
compiler, which validates every expression first.

The generated function is ``fn(a, b)``: ``a`` the bindings (not copied), ``b`` the
:class:`~mkpolicy.cel.runtime.Budget`.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from mkpolicy.cel import ast
from mkpolicy.cel.compiler import _LARGE, _RELATIONS, BUDGET_KEY, Compiler, _stamp, in_list
from mkpolicy.cel.cost import PER_CALL_LIMIT, comprehension_step_cost
from mkpolicy.cel.environment import Environment
from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library.core import to_dyn
from mkpolicy.cel.library.regex import matcher
from mkpolicy.cel.runtime import (
    ARITHMETIC,
    Budget,
    cel_equal,
    compare,
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
    INT64_MAX,
    INT64_MIN,
    OPTIONAL_NONE,
    TYPE_IDENTIFIERS,
    ObjectValue,
    OptionalValue,
    Uint,
    map_items,
    map_key,
    map_keys,
)

Generated = Callable[[Mapping[str, Any], "Budget | None"], Any]

#: Python allows 20 statically nested blocks; deeper sub-expressions use closures.
_MAX_BLOCKS = 12


# -- runtime helpers the generated code calls -------------------------------------------------


def _unbound(name: str, pos: int) -> EvalError:
    return EvalError(f"undeclared reference to '{name}' (no value bound)", pos)


def _chain(base: Any, fields: tuple[str, ...], positions: tuple[int, ...]) -> Any:
    """The slow path of a field chain: select one field at a time, with positions.

    The fast path (plain subscripts) lands here on any failure, including an error
    computing a lazy ``variables`` entry, so that errors get their field's position."""
    v = base
    for field, pos in zip(fields, positions, strict=True):
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


def _var_chain(a: Mapping[str, Any], name: str, pos: int, fields: tuple[str, ...], positions: tuple[int, ...]) -> Any:
    try:
        base = a[name]
    except KeyError:
        raise _unbound(name, pos) from None
    return _chain(base, fields, positions)


def _has(v: Any, field: str, pos: int) -> bool:
    try:
        return has_field(v, field)
    except EvalError as exc:
        raise _stamp(exc, pos) from None


def _opt_select(v: Any, field: str, pos: int) -> OptionalValue:
    try:
        return optional_select(v, field)
    except EvalError as exc:
        raise _stamp(exc, pos) from None


def _opt_index(c: Any, k: Any, pos: int) -> OptionalValue:
    try:
        return optional_index(c, k)
    except EvalError as exc:
        raise _stamp(exc, pos) from None


def _index(c: Any, k: Any, pos: int) -> Any:
    try:
        return index(c, k)
    except EvalError as exc:
        raise _stamp(exc, pos) from None


def _arith(function: str, x: Any, y: Any, pos: int, b: Budget) -> Any:
    impl = ARITHMETIC[function].get((type(x), type(y)))
    if impl is None:
        raise _stamp(no_overload(function, x, y), pos)
    try:
        result = impl(x, y)
        tr = type(result)
        if (tr is str or tr is bytes or tr is list) and len(result) >= _LARGE:
            b.charge(len(result) // 10, pos)
    except EvalError as exc:
        raise _stamp(exc, pos) from None
    return result


def _overflow(pos: int) -> EvalError:
    return EvalError("return error for overflow", pos)


def _relation(function: str, x: Any, y: Any, pos: int) -> bool:
    try:
        return _RELATIONS[function](compare(x, y, function))
    except EvalError as exc:
        raise _stamp(exc, pos) from None


def _unary(function: str, x: Any, pos: int) -> Any:
    try:
        return logical_not(x) if function == "!_" else negate(x)
    except EvalError as exc:
        raise _stamp(exc, pos) from None


def _iter1(value: Any, pos: int) -> Any:
    t = type(value)
    if t is list or t is tuple:
        return value
    if isinstance(value, Mapping) and t is not ObjectValue:
        return map_keys(value)
    raise EvalError(f"expression of type '{type_name(value)}' cannot be the range of a comprehension", pos)


def _iter2(value: Any, pos: int) -> Any:
    t = type(value)
    if t is list or t is tuple:
        return enumerate(value)
    if isinstance(value, Mapping) and t is not ObjectValue:
        return map_items(value)
    raise EvalError(f"expression of type '{type_name(value)}' cannot be the range of a comprehension", pos)


def _not_bool(macro: str, value: Any, pos: int) -> EvalError:
    return EvalError(f"{macro}() predicate must return a bool, got {type_name(value)}", pos)


def _optional_element(value: Any, what: str, pos: int) -> OptionalValue:
    if type(value) is not OptionalValue:
        raise _stamp(no_overload(what, value), pos)
    return value


def _map_key(key: Any, out: dict[Any, Any], pos: int) -> Any:
    tk = type(key)
    if tk is not str and tk is not int and tk is not Uint and tk is not bool:
        raise EvalError(f"unsupported map key type: {type_name(key)}", pos)
    key = map_key(key)
    if key in out:
        raise EvalError(f"Failed with repeated key: {key!r}", pos)
    return key


_ABSENT = object()
_SLOW = object()


def _opt_path(value: Any, fields: tuple[str, ...]) -> Any:
    """Walk ``fields`` through dicts: the value, ``_ABSENT`` when a key is missing,
    ``_SLOW`` when something is not a plain dict (the general path decides)."""
    for field in fields:
        if type(value) is not dict:
            return _SLOW
        if field not in value:
            return _ABSENT
        value = value[field]
    if type(value) is OptionalValue:
        return _SLOW
    return value


_HELPERS: dict[str, Any] = {
    "_opt_path": _opt_path,
    "_ABSENT": _ABSENT,
    "_SLOW": _SLOW,
    "EvalError": EvalError,
    "_stamp": _stamp,
    "_unbound": _unbound,
    "_chain": _chain,
    "_var_chain": _var_chain,
    "_has": _has,
    "_opt_select": _opt_select,
    "_opt_index": _opt_index,
    "_index": _index,
    "_arith": _arith,
    "_overflow": _overflow,
    "_relation": _relation,
    "_unary": _unary,
    "_in": in_list,
    "_iter1": _iter1,
    "_iter2": _iter2,
    "_not_bool": _not_bool,
    "_eq": cel_equal,
    "_no_overload": no_overload,
    "_optional_element": _optional_element,
    "_map_key": _map_key,
    "_map_key_of": map_key,
    "_ObjectValue": ObjectValue,
    "_new_dict": dict.__new__,
    "_OptionalValue": OptionalValue,
    "_NONE": OPTIONAL_NONE,
    "_Uint": Uint,
    "_MIN": INT64_MIN,
    "_MAX": INT64_MAX,
    "_BUDGET_KEY": BUDGET_KEY,
}


_NOT_CONSTANT = object()

#: Receiver functions of optionals inlined when the receiver is one: (arity, code).
_OPTIONAL_INLINE: dict[str, tuple[int, str]] = {
    "orValue": (2, "({o}.value if {o}.has_value else {d})"),
    "hasValue": (1, "{o}.has_value"),
}


class _Fallback(Exception):
    """The generator leaves this node to the closure compiler."""


class CodeGenerator:
    """Generates the Python function of one expression."""

    def __init__(self, env: Environment, text: str) -> None:
        self.env = env
        self.text = text
        self.lines: list[str] = []
        self.indent = 1
        self.blocks = 0
        self.names = itertools.count()
        self.namespace: dict[str, Any] = dict(_HELPERS)
        self.constants: dict[int, str] = {}
        # Comprehension variables in scope: CEL name -> (python local, activation key).
        self.scope: dict[str, tuple[str, str]] = {}
        self.uses_fallback = False
        #: Folded values by call node: ``fold`` of a node asks for each of its sub-calls.
        self.folded: dict[int, Any] = {}
        #: Whether the code charges the budget itself (loops, size-dependent costs).
        self.uses_budget = False

    # -- emission --------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        """Add one line at the current indentation."""
        self.lines.append("    " * self.indent + line)

    def tmp(self) -> str:
        """A fresh local name."""
        return f"t{next(self.names)}"

    def const(self, value: Any) -> str:
        """A name bound to ``value`` in the generated function's namespace."""
        key = id(value)
        found = self.constants.get(key)
        if found is None:
            found = f"k{len(self.constants)}"
            self.constants[key] = found
            self.namespace[found] = value
        return found

    def literal(self, value: Any) -> str:
        """Python source for a constant."""
        t = type(value)
        if value is None or t is bool or t is int or t is str or t is bytes:
            return repr(value)
        if t is float and value == value and value not in (float("inf"), float("-inf")):
            return repr(value)
        return self.const(value)

    def block(self) -> _Block:
        """``with self.block():`` indents the lines emitted inside."""
        return _Block(self)

    # -- entry point -----------------------------------------------------------------------
    def generate(self, root: ast.Node) -> Generated:
        """Generate, compile and return the function for ``root``.

        The function does not charge the fixed cost (the caller does); it uses the
        budget ``b`` only when :attr:`uses_budget` is set, and may be passed None
        otherwise.
        """
        result = self.node(root)
        self.emit(f"return {result}")
        if self.uses_fallback:
            self.uses_budget = True
            self.lines.insert(0, "    act = dict(a); act[_BUDGET_KEY] = b")
        source = "def _cel(a, b):\n" + "\n".join(self.lines) + "\n"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            code = compile(source, "<cel expression>", "exec")
        exec(code, self.namespace)
        fn: Generated = self.namespace["_cel"]
        fn.__doc__ = source
        return fn

    def local(self, node: ast.Node) -> str:
        """Like :meth:`node`, but the result is always a local variable."""
        value = self.node(node)
        if value.isidentifier() and value not in ("None", "True", "False"):
            return value
        out = self.tmp()
        self.emit(f"{out} = {value}")
        return out

    def node(self, node: ast.Node) -> str:
        """Emit code computing ``node``; return a Python expression of its value."""
        if self.blocks >= _MAX_BLOCKS:
            return self.fallback(node)
        if isinstance(node, ast.Call):
            folded = self.fold(node)
            if folded is not _NOT_CONSTANT:
                return self.literal(folded)
        method = getattr(self, "_" + type(node).__name__)
        try:
            result: str = method(node)
        except _Fallback:
            return self.fallback(node)
        return result

    def fold(self, node: ast.Call) -> Any:
        """The value of a call of pure functions on constants, computed now; or
        ``_NOT_CONSTANT`` (also when it fails: errors are raised at run time)."""
        key = id(node)
        if key not in self.folded:
            self.folded[key] = self._fold(node)
        return self.folded[key]

    def _fold(self, node: ast.Call) -> Any:
        operands: list[ast.Node] = list(node.children())
        if node.function in _SPECIAL and node.target is None:
            if node.function in ("_[_]", "_[?_]"):
                return _NOT_CONSTANT
        else:
            name = node.function.lstrip(".")
            receiver = node.target is not None
            if receiver:
                qualified = self.closure_compiler()._qualified_function(node)
                if qualified is not None:
                    name, receiver, operands = qualified, False, list(node.args)
            fn = self.env.library.lookup(name, receiver=receiver)
            if fn is None or not fn.pure:
                return _NOT_CONSTANT
        for child in operands:
            if isinstance(child, ast.Literal):
                continue
            if not isinstance(child, ast.Call) or self.fold(child) is _NOT_CONSTANT:
                return _NOT_CONSTANT
        try:
            # Within one evaluation's limit: what costs more fails at run time anyway.
            value = Compiler(self.env, self.text).compile(node)({BUDGET_KEY: Budget(PER_CALL_LIMIT)})
        except Exception:
            return _NOT_CONSTANT
        # Only immutable scalars: a folded list or map would be shared by every result.
        if type(value) in (bool, int, float, str, bytes, Uint) or value is None:
            return value
        return _NOT_CONSTANT

    def closure_compiler(self) -> Compiler:
        """The closure compiler, seeing the comprehension variables in scope here."""
        compiler = Compiler(self.env, self.text)
        compiler.scope = {name: key for name, (_, key) in self.scope.items()}
        return compiler

    def fallback(self, node: ast.Node) -> str:
        """Compute ``node`` with the closure compiler."""
        fn = self.closure_compiler().compile(node)
        self.uses_fallback = True
        for local, key in self.scope.values():
            self.emit(f"act[{key!r}] = {local}")
        out = self.tmp()
        self.emit(f"{out} = {self.const(fn)}(act)")
        return out

    # -- leaves -----------------------------------------------------------------------------
    def _Literal(self, node: ast.Literal) -> str:
        return self.literal(node.value)

    def _resolve(self, parts: list[str], root: bool) -> tuple[str, str] | None:
        """``("local", name)``, ``("var", name)`` or ``("const", source)`` for a qualified name."""
        name = ".".join(parts)
        if len(parts) == 1 and not root and name in self.scope:
            return ("local", self.scope[name][0])
        for candidate in self.env.candidates(name, root):
            if candidate in self.env.variables:
                return ("var", candidate)
        if name in TYPE_IDENTIFIERS:
            return ("const", self.const(TYPE_IDENTIFIERS[name]))
        return None

    def _read_var(self, name: str, pos: int) -> str:
        out = self.tmp()
        self.emit("try:")
        self.emit(f"    {out} = a[{name!r}]")
        self.emit("except KeyError:")
        self.emit(f"    raise _unbound({name!r}, {pos}) from None")
        return out

    def _Ident(self, node: ast.Ident) -> str:
        found = self._resolve([node.name], node.root)
        if found is None:
            if not self.env.allow_undeclared:
                raise _Fallback
            return self._read_var(node.name, node.pos)
        return self._Ident_value(*found, node.pos)

    # -- selection ---------------------------------------------------------------------------
    def _Select(self, node: ast.Select) -> str:
        if node.test_only:
            operand = self.node(node.operand)
            out = self.tmp()
            self.emit(
                f"{out} = ({node.field!r} in {operand}) if type({operand}) is dict "
                f"else _has({operand}, {node.field!r}, {node.pos})"
            )
            return out
        if node.optional:
            operand = self.local(node.operand)
            out = self.tmp()
            f = repr(node.field)
            self.emit(f"if type({operand}) is dict:")
            self.emit(f"    {out} = _OptionalValue({operand}[{f}]) if {f} in {operand} else _NONE")
            self.emit("else:")
            self.emit(f"    {out} = _opt_select({operand}, {f}, {node.pos})")
            return out
        chain: list[ast.Select] = []
        cur: ast.Node = node
        while isinstance(cur, ast.Select) and not cur.optional and not cur.test_only:
            chain.append(cur)
            cur = cur.operand
        chain.reverse()
        out = self.tmp()
        if isinstance(cur, ast.Ident) and (cur.root or cur.name not in self.scope):
            parts = [cur.name] + [s.field for s in chain]
            for n in range(len(parts), 0, -1):
                found = self._resolve(parts[:n], cur.root)
                if found is None:
                    continue
                rest = chain[n - 1 :]
                kind, value = found
                if not rest:
                    return self._Ident_value(kind, value, cur.pos)
                fields = tuple(s.field for s in rest)
                positions = tuple(s.pos for s in rest)
                subscripts = "".join(f"[{f!r}]" for f in fields)
                self.emit("try:")
                if kind == "var":
                    self.emit(f"    {out} = a[{value!r}]{subscripts}")
                    self.emit("except (KeyError, TypeError, EvalError):")
                    self.emit(f"    {out} = _var_chain(a, {value!r}, {cur.pos}, {fields!r}, {positions!r})")
                else:
                    self.emit(f"    {out} = {value}{subscripts}")
                    self.emit("except (KeyError, TypeError, EvalError):")
                    self.emit(f"    {out} = _chain({value}, {fields!r}, {positions!r})")
                return out
            if not self.env.allow_undeclared:
                raise _Fallback
            base = self._read_var(cur.name, cur.pos)
        else:
            base = self.node(cur)
        fields = tuple(s.field for s in chain)
        positions = tuple(s.pos for s in chain)
        subscripts = "".join(f"[{f!r}]" for f in fields)
        self.emit("try:")
        self.emit(f"    {out} = {base}{subscripts}")
        self.emit("except (KeyError, TypeError, EvalError):")
        self.emit(f"    {out} = _chain({base}, {fields!r}, {positions!r})")
        return out

    def _Ident_value(self, kind: str, value: str, pos: int) -> str:
        if kind == "var":
            return self._read_var(value, pos)
        return value

    # -- calls ----------------------------------------------------------------------------------
    def _Call(self, node: ast.Call) -> str:
        if node.target is None:
            special = _SPECIAL.get(node.function)
            if special is not None:
                return special(self, node)
        if node.target is not None:
            qualified = self.closure_compiler()._qualified_function(node)
            if qualified is not None:
                fn = self.env.library.lookup(qualified, receiver=False)
                args = list(node.args)
            else:
                fn = self.env.library.lookup(node.function, receiver=True)
                args = [node.target, *node.args]
                if fn is not None and len(node.args) not in fn.arities:
                    raise _Fallback
        else:
            name = node.function[1:] if node.function.startswith(".") else node.function
            fn = self.env.library.lookup(name, receiver=False)
            args = list(node.args)
            if fn is not None and len(args) not in fn.arities:
                raise _Fallback
        if fn is None:
            raise _Fallback
        if node.target is None and self._is_dyn(node):
            return self.node(node.args[0])
        if fn.name == "orValue" and fn.receiver and len(args) == 2:
            fast = self._or_value_chain(node, args[0], args[1])
            if fast is not None:
                return fast
        values = [self.local(arg) for arg in args]
        impl_fn = fn.impl
        needs_budget = fn.needs_budget
        out = self.tmp()
        if fn.name == "matches" and isinstance(args[-1], ast.Literal) and type(args[-1].value) is str:
            # A constant pattern: compiled once, its cost factor folded in, charged first. The
            # charge is regex.regex_cost written inline: a call per match costs ~10% on regex loops.
            impl_fn, needs_budget = matcher(args[-1].value), False
            factor = (len(args[-1].value) + 3) // 4
            text = values[0]
            self.uses_budget = True
            self.emit(
                f"b.charge_call(((len({text}) + 10) // 10 * {factor} or 1) if type({text}) is str else 1, {node.pos})"
            )
        impl = self.const(impl_fn)
        if needs_budget or fn.cost is not None:
            self.uses_budget = True
        call_args = ", ".join(values)
        self.emit("try:")
        if fn.receiver and fn.name in _OPTIONAL_INLINE and len(values) == _OPTIONAL_INLINE[fn.name][0]:
            o = values[0]
            inline = _OPTIONAL_INLINE[fn.name][1].format(o=o, d=values[-1])
            self.emit(f"    {out} = {inline} if type({o}) is _OptionalValue else {impl}({call_args})")
        elif fn.name == "size" and len(values) == 1:
            v = values[0]
            self.emit(
                f"    {out} = len({v}) if (type({v}) is list or type({v}) is str or type({v}) is dict) else {impl}({v})"
            )
        elif needs_budget:
            self.emit(f"    {out} = {impl}(b{', ' if values else ''}{call_args})")
        else:
            self.emit(f"    {out} = {impl}({call_args})")
        if fn.cost is not None:
            self.emit(f"    b.charge_call({self.const(fn.cost)}({out}{', ' if values else ''}{call_args}))")
        self.emit("except EvalError as e:")
        self.emit(f"    raise _stamp(e, {node.pos}) from None")
        return out

    def _or_value_chain(self, node: ast.Call, target: ast.Node, default: ast.Node) -> str | None:
        """``x.?a.?b.orValue(d)`` on maps without building optionals.

        The chain is walked on dicts; anything else (a missing intermediate that is
        not a map, an optional-valued field...) takes the general path, emitted in
        the ``else`` branch, so the semantics stay those of the optional library.
        """
        chain: list[ast.Select] = []
        cur = target
        while isinstance(cur, ast.Select) and cur.optional:
            chain.append(cur)
            cur = cur.operand
        if not chain:
            return None
        chain.reverse()
        fields = [s.field for s in chain]
        base = self.local(cur)
        fallback_default = self.local(default)  # orValue is strict: the default is evaluated first
        out = self.tmp()
        walk = self.tmp()
        self.emit(f"{walk} = _opt_path({base}, {tuple(fields)!r})")
        self.emit(f"if {walk} is _ABSENT:")
        self.emit(f"    {out} = {fallback_default}")
        self.emit(f"elif {walk} is not _SLOW:")
        self.emit(f"    {out} = {walk}")
        self.emit("else:")
        with self.block():
            opt = base
            for sel in chain:
                nxt = self.tmp()
                self.emit(f"{nxt} = _opt_select({opt}, {sel.field!r}, {sel.pos})")
                opt = nxt
            or_value = self.env.library.lookup("orValue", receiver=True)
            assert or_value is not None
            self.emit("try:")
            self.emit(f"    {out} = {self.const(or_value.impl)}({opt}, {fallback_default})")
            self.emit("except EvalError as e:")
            self.emit(f"    raise _stamp(e, {node.pos}) from None")
        return out

    def _logical(self, node: ast.Call) -> str:
        is_and = node.function == "_&&_"
        short = "False" if is_and else "True"
        other = "True" if is_and else "False"
        fname = node.function
        pos = node.pos
        out, err = self.tmp(), self.tmp()
        self.emit(f"{err} = None")
        self.emit("try:")
        with self.block():
            left = self.node(node.args[0])
            self.emit(f"{out} = {left}")
        self.emit("except EvalError as e:")
        self.emit("    if e.cost: raise")
        self.emit(f"    {err} = _stamp(e, {pos}); {out} = None")
        self.emit(f"if {out} is not {short}:")
        with self.block():
            self.emit(f"if {err} is None and {out} is not {other}:")
            self.emit(f"    {err} = _stamp(_no_overload({fname!r}, {out}), {pos})")
            self.emit("try:")
            with self.block():
                right = self.node(node.args[1])
                self.emit(f"{out} = {right}")
            self.emit("except EvalError as e:")
            self.emit("    if e.cost: raise")
            self.emit(f"    raise ({err} or _stamp(e, {pos})) from None")
            self.emit(f"if {out} is not {short}:")
            self.emit(f"    if {err} is not None: raise {err}")
            self.emit(f"    if {out} is not {other}: raise _stamp(_no_overload({fname!r}, {out}), {pos})")
        return out

    def _conditional(self, node: ast.Call) -> str:
        cond = self.local(node.args[0])
        out = self.tmp()
        self.emit(f"if {cond} is True:")
        with self.block():
            then = self.node(node.args[1])
            self.emit(f"{out} = {then}")
        self.emit(f"elif {cond} is False:")
        with self.block():
            otherwise = self.node(node.args[2])
            self.emit(f"{out} = {otherwise}")
        self.emit("else:")
        self.emit(f"    raise _stamp(_no_overload('_?_:_', {cond}), {node.pos})")
        return out

    def _unary(self, node: ast.Call) -> str:
        x = self.local(node.args[0])
        out = self.tmp()
        if node.function == "!_":
            self.emit(f"{out} = (not {x}) if type({x}) is bool else _unary('!_', {x}, {node.pos})")
        else:
            self.emit(
                f"{out} = -{x} if (type({x}) is int and {x} != _MIN) or type({x}) is float "
                f"else _unary('-_', {x}, {node.pos})"
            )
        return out

    def _equality(self, node: ast.Call) -> str:
        x = self.local(node.args[0])
        y = self.local(node.args[1])
        out = self.tmp()
        tx = self.tmp()
        eq = f"({x} == {y}) if ({tx} is type({y}) and ({tx} is str or {tx} is int or {tx} is bool)) else _eq({x}, {y})"
        self.emit(f"{tx} = type({x})")
        if node.function == "_==_":
            self.emit(f"{out} = {eq}")
        else:
            self.emit(f"{out} = not ({eq})")
        return out

    def _relation(self, node: ast.Call) -> str:
        x = self.local(node.args[0])
        y = self.local(node.args[1])
        op = {"_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">="}[node.function]
        out, tx = self.tmp(), self.tmp()
        self.emit(f"{tx} = type({x})")
        self.emit(
            f"{out} = ({x} {op} {y}) if ({tx} is type({y}) and ({tx} is int or {tx} is str or {tx} is float)) "
            f"else _relation({node.function!r}, {x}, {y}, {node.pos})"
        )
        return out

    def _arithmetic(self, node: ast.Call) -> str:
        x = self.local(node.args[0])
        y = self.local(node.args[1])
        fname = node.function
        out = self.tmp()
        self.uses_budget = True
        if fname in ("_+_", "_-_", "_*_"):
            op = {"_+_": "+", "_-_": "-", "_*_": "*"}[fname]
            self.emit(f"if type({x}) is int and type({y}) is int:")
            self.emit(f"    {out} = {x} {op} {y}")
            self.emit(f"    if {out} < _MIN or {out} > _MAX: raise _overflow({node.pos})")
            if fname == "_+_":
                self.emit(f"elif type({x}) is str and type({y}) is str:")
                self.emit(f"    {out} = {x} + {y}")
                self.emit(f"    if len({out}) >= {_LARGE}: b.charge(len({out}) // 10, {node.pos})")
            self.emit("else:")
            self.emit(f"    {out} = _arith({fname!r}, {x}, {y}, {node.pos}, b)")
            return out
        self.emit(f"{out} = _arith({fname!r}, {x}, {y}, {node.pos}, b)")
        return out

    def _in(self, node: ast.Call) -> str:
        item = self.local(node.args[0])
        container = self.local(node.args[1])
        out = self.tmp()
        self.uses_budget = True
        # A string in a map is a key lookup (maps decoded from JSON have string keys).
        self.emit(
            f"{out} = ({item} in {container}) if type({container}) is dict and type({item}) is str "
            f"else _in({item}, {container}, {node.pos}, b)"
        )
        return out

    def _index(self, node: ast.Call) -> str:
        c = self.local(node.args[0])
        k = self.local(node.args[1])
        out = self.tmp()
        if node.function == "_[?_]":
            self.emit(f"{out} = _opt_index({c}, {k}, {node.pos})")
            return out
        self.emit(f"if type({c}) is dict and type({k}) is str and {k} in {c}:")
        self.emit(f"    {out} = {c}[{k}]")
        self.emit(f"elif type({c}) is list and type({k}) is int and 0 <= {k} < len({c}):")
        self.emit(f"    {out} = {c}[{k}]")
        self.emit("else:")
        self.emit(f"    {out} = _index({c}, {k}, {node.pos})")
        return out

    # -- literals -----------------------------------------------------------------------------
    def _ListLit(self, node: ast.ListLit) -> str:
        if not any(node.optional):
            values = [self.node(e) for e in node.elements]
            out = self.tmp()
            self.emit(f"{out} = [{', '.join(values)}]")
            return out
        out = self.tmp()
        self.emit(f"{out} = []")
        for optional, element in zip(node.optional, node.elements, strict=True):
            if optional:
                self._optional_into(element, "optional element", element.pos, f"{out}.append({{}})")
            else:
                self.emit(f"{out}.append({self.node(element)})")
        return out

    def _MapLit(self, node: ast.MapLit) -> str:
        out = self.tmp()
        constant_keys = all(isinstance(e.key, ast.Literal) and type(e.key.value) is str for e in node.entries)
        keys = [e.key.value for e in node.entries if isinstance(e.key, ast.Literal)]
        if constant_keys and len(set(keys)) == len(keys):
            # Distinct constant string keys: no key can be invalid or repeated.
            if not any(e.optional for e in node.entries):
                values = [self.node(e.value) for e in node.entries]
                items = ", ".join(f"{k!r}: {v}" for k, v in zip(keys, values, strict=True))
                self.emit(f"{out} = {{{items}}}")
                return out
            self.emit(f"{out} = {{}}")
            for entry, key in zip(node.entries, keys, strict=True):
                if entry.optional:
                    self._optional_into(entry.value, "optional entry", entry.pos, f"{out}[{key!r}] = {{}}")
                else:
                    self.emit(f"{out}[{key!r}] = {self.node(entry.value)}")
            return out
        self.emit(f"{out} = {{}}")
        for entry in node.entries:
            assert isinstance(entry.key, ast.Node)
            key = self.node(entry.key)
            checked = self.tmp()
            self.emit(f"{checked} = _map_key({key}, {out}, {entry.pos})")
            value = self.node(entry.value)
            if entry.optional:
                opt = self.tmp()
                self.emit(f"{opt} = _optional_element({value}, 'optional entry', {entry.pos})")
                self.emit(f"if {opt}.has_value: {out}[{checked}] = {opt}.value")
            else:
                self.emit(f"{out}[{checked}] = {value}")
        return out

    def _StructLit(self, node: ast.StructLit) -> str:
        # Field names and the message type were validated by the closure compiler.
        type_name_ = node.type_name.lstrip(".")
        out = self.tmp()
        # Built without ObjectValue.__init__ (a Python call): an empty value, then its fields.
        if not any(e.optional for e in node.entries):
            values = [self.node(e.value) for e in node.entries]
            self.emit(f"{out} = _new_dict(_ObjectValue); {out}.type_name = {type_name_!r}")
            for e, v in zip(node.entries, values, strict=True):
                self.emit(f"{out}[{e.key!r}] = {v}")
            return out
        self.emit(f"{out} = _new_dict(_ObjectValue); {out}.type_name = {type_name_!r}")
        for entry in node.entries:
            if entry.optional:
                self._optional_into(entry.value, "optional field", entry.pos, f"{out}[{entry.key!r}] = {{}}")
            else:
                self.emit(f"{out}[{entry.key!r}] = {self.node(entry.value)}")
        return out

    def _optional_into(self, node: ast.Node, what: str, pos: int, store: str) -> None:
        """Emit ``store`` (a statement with ``{}`` for the value) when the optional
        ``node`` has a value; it must be an optional (or the ``what`` overload fails).

        ``x.?f`` (possibly wrapped in ``dyn()``) on a map stores ``x['f']`` without
        building the optional; other operands take the general path.
        """
        inner = node
        while isinstance(inner, ast.Call) and self._is_dyn(inner):
            inner = inner.args[0]
        if isinstance(inner, ast.Select) and inner.optional and not inner.test_only and self.blocks < _MAX_BLOCKS:
            operand = self.local(inner.operand)
            f = repr(inner.field)
            self.emit(f"if type({operand}) is dict:")
            self.emit(f"    if {f} in {operand}: " + store.format(f"{operand}[{f}]"))
            self.emit("else:")
            with self.block():
                opt = self.tmp()
                self.emit(f"{opt} = _opt_select({operand}, {f}, {inner.pos})")
                self.emit(f"if {opt}.has_value: " + store.format(f"{opt}.value"))
            return
        value = self.node(node)
        opt = self.tmp()
        self.emit(f"{opt} = _optional_element({value}, {what!r}, {pos})")
        self.emit(f"if {opt}.has_value: " + store.format(f"{opt}.value"))

    def _is_dyn(self, node: ast.Call) -> bool:
        """``dyn(x)``: the identity at run time (its cost is part of the fixed cost)."""
        if node.target is not None or len(node.args) != 1 or node.function.lstrip(".") != "dyn":
            return False
        fn = self.env.library.lookup("dyn", receiver=False)
        return fn is not None and fn.impl is to_dyn and fn.cost is None and not fn.needs_budget

    # -- comprehensions ---------------------------------------------------------------------------
    def _Comprehension(self, node: ast.Comprehension) -> str:
        builder = _COMPREHENSIONS.get(node.macro)
        if builder is None:
            raise _Fallback
        rng = self.node(node.iter_range)
        saved = dict(self.scope)
        n = next(self.names)
        var1 = (f"c{n}", f"\x00{node.var}#g{n}")
        self.scope[node.var] = var1
        var2: tuple[str, str] | None = None
        if node.var2 is not None:
            var2 = (f"d{n}", f"\x00{node.var2}#g{n}")
            self.scope[node.var2] = var2
        try:
            out: str = builder(self, node, rng, var1[0], var2[0] if var2 else None)
        finally:
            self.scope = saved
        return out

    def _loop_header(self, node: ast.Comprehension, rng: str, v1: str, v2: str | None, upfront: bool = False) -> None:
        """The ``for`` line; the step cost is charged per iteration, or for all
        iterations before the loop when it cannot stop early (``upfront``)."""
        step = comprehension_step_cost(node)
        self.uses_budget = True
        it = self.tmp()
        self.emit(f"{it} = _iter1({rng}, {node.pos})" if v2 is None else f"{it} = _iter2({rng}, {node.pos})")
        if upfront:
            self.emit(f"b.remaining -= len({rng}) * {step}")
            self.emit(f"if b.remaining < 0: b.charge(0, {node.pos})")
        self.emit(f"for {v1} in {it}:" if v2 is None else f"for {v1}, {v2} in {it}:")
        if not upfront:
            self.emit(f"    b.remaining -= {step}")
            self.emit(f"    if b.remaining < 0: b.charge(0, {node.pos})")

    def _quantifier(self, node: ast.Comprehension, rng: str, v1: str, v2: str | None) -> str:
        decisive = "True" if node.macro == "exists" else "False"
        other = "False" if node.macro == "exists" else "True"
        out, err = self.tmp(), self.tmp()
        self.emit(f"{out} = {other}; {err} = None")
        self._loop_header(node, rng, v1, v2)
        with self.block():
            pred_out = self.tmp()
            self.emit("try:")
            with self.block():
                pred = self.node(node.args[0])
                self.emit(f"{pred_out} = {pred}")
            self.emit("except EvalError as e:")
            self.emit("    if e.cost: raise")
            self.emit(f"    if {err} is None: {err} = _stamp(e, {node.pos})")
            self.emit("    continue")
            self.emit(f"if {pred_out} is {decisive}:")
            self.emit(f"    {out} = {decisive}")
            self.emit("    break")
            self.emit(f"if {pred_out} is not {other} and {err} is None:")
            self.emit(f"    {err} = _not_bool({node.macro!r}, {pred_out}, {node.pos})")
        self.emit("else:")
        self.emit(f"    if {err} is not None: raise {err}")
        return out

    def _exists_one(self, node: ast.Comprehension, rng: str, v1: str, v2: str | None) -> str:
        count = self.tmp()
        self.emit(f"{count} = 0")
        self._loop_header(node, rng, v1, v2)
        with self.block():
            pred = self.local(node.args[0])
            self.emit(f"if {pred} is True: {count} += 1")
            self.emit(f"elif {pred} is not False: raise _not_bool('exists_one', {pred}, {node.pos})")
        out = self.tmp()
        self.emit(f"{out} = {count} == 1")
        return out

    def _keep(self, node: ast.Comprehension, keep: ast.Node) -> None:
        """Emit a filter predicate: ``continue`` when it is false."""
        pred = self.local(keep)
        self.emit(f"if {pred} is not True:")
        self.emit(f"    if {pred} is False: continue")
        self.emit(f"    raise _not_bool({node.macro!r}, {pred}, {node.pos})")

    def _map(self, node: ast.Comprehension, rng: str, v1: str, v2: str | None) -> str:
        out = self.tmp()
        self.emit(f"{out} = []")
        self._loop_header(node, rng, v1, v2, upfront=True)
        with self.block():
            if len(node.args) == 2:
                self._keep(node, node.args[0])
            value = self.node(node.args[-1])
            self.emit(f"{out}.append({value})")
        return out

    def _filter(self, node: ast.Comprehension, rng: str, v1: str, v2: str | None) -> str:
        out = self.tmp()
        self.emit(f"{out} = []")
        self._loop_header(node, rng, v1, v2, upfront=True)
        with self.block():
            self._keep(node, node.args[0])
            self.emit(f"{out}.append({v1})")
        return out

    def _transform(self, node: ast.Comprehension, rng: str, v1: str, v2: str | None) -> str:
        out = self.tmp()
        as_map = node.macro == "transformMap"
        self.emit(f"{out} = {{}}" if as_map else f"{out} = []")
        self._loop_header(node, rng, v1, v2, upfront=True)
        with self.block():
            if len(node.args) == 2:
                self._keep(node, node.args[0])
            value = self.node(node.args[-1])
            self.emit(f"{out}[_map_key_of({v1})] = {value}" if as_map else f"{out}.append({value})")
        return out

    def _bind(self, node: ast.Comprehension, rng: str, v1: str, v2: str | None) -> str:
        self.emit(f"{v1} = {rng}")
        return self.node(node.args[0])


class _Block:
    def __init__(self, gen: CodeGenerator) -> None:
        self.gen = gen

    def __enter__(self) -> None:
        self.gen.indent += 1
        self.gen.blocks += 1

    def __exit__(self, *exc: object) -> None:
        self.gen.indent -= 1
        self.gen.blocks -= 1


_SPECIAL: dict[str, Callable[[CodeGenerator, ast.Call], str]] = {
    "_&&_": CodeGenerator._logical,
    "_||_": CodeGenerator._logical,
    "_?_:_": CodeGenerator._conditional,
    "!_": CodeGenerator._unary,
    "-_": CodeGenerator._unary,
    "_==_": CodeGenerator._equality,
    "_!=_": CodeGenerator._equality,
    "_<_": CodeGenerator._relation,
    "_<=_": CodeGenerator._relation,
    "_>_": CodeGenerator._relation,
    "_>=_": CodeGenerator._relation,
    "_+_": CodeGenerator._arithmetic,
    "_-_": CodeGenerator._arithmetic,
    "_*_": CodeGenerator._arithmetic,
    "_/_": CodeGenerator._arithmetic,
    "_%_": CodeGenerator._arithmetic,
    "@in": CodeGenerator._in,
    "_[_]": CodeGenerator._index,
    "_[?_]": CodeGenerator._index,
}

_COMPREHENSIONS: dict[str, Callable[[CodeGenerator, ast.Comprehension, str, str, str | None], str]] = {
    "all": CodeGenerator._quantifier,
    "exists": CodeGenerator._quantifier,
    "exists_one": CodeGenerator._exists_one,
    "map": CodeGenerator._map,
    "filter": CodeGenerator._filter,
    "transformList": CodeGenerator._transform,
    "transformMap": CodeGenerator._transform,
    "bind": CodeGenerator._bind,
}


def generate(env: Environment, text: str, root: ast.Node) -> tuple[Generated, bool]:
    """The generated evaluator of ``root`` (already validated by the closure compiler),
    and whether it needs a budget (see :meth:`CodeGenerator.generate`)."""
    gen = CodeGenerator(env, text)
    fn = gen.generate(root)
    return fn, gen.uses_budget
