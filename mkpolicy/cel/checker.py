"""The CEL type checker.

It follows cel-go's checker: every node gets a type, function calls are resolved
against the overloads their library declares (with type parameters unified), list
and map literals join their element types. On top of that, variables can be typed by
the OpenAPI schema of the object they hold (:mod:`mkpolicy.structural`), as
Kubernetes does for admission policies: selecting a field the schema does not declare,
or using a field with the wrong type, is a :class:`CelTypeError` positioned in the
expression. ``x-kubernetes-preserve-unknown-fields`` makes undeclared fields ``dyn``,
``x-kubernetes-int-or-string`` makes a field ``dyn``.

Values at run time stay plain JSON, so schema strings (also ``format: date-time``)
are typed ``string`` and ``number`` is ``double``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mkpolicy.cel import ast
from mkpolicy.cel import types as t
from mkpolicy.cel.environment import Environment
from mkpolicy.cel.errors import CelTypeError
from mkpolicy.cel.types import Signature, Type
from mkpolicy.cel.values import Uint
from mkpolicy.structural import Schema, is_absent

if TYPE_CHECKING:
    from mkpolicy.cel.program import Program


def _sigs(*texts: str) -> tuple[Signature, ...]:
    return tuple(Signature(s) for s in texts)


_NUMERIC_CROSS = [f"({a}, {b}) -> bool" for a in ("int", "uint", "double") for b in ("int", "uint", "double") if a != b]
_ORDERED_KINDS = ("bool", "int", "uint", "double", "string", "bytes", "timestamp", "duration")
_ORDERED = [f"({x}, {x}) -> bool" for x in _ORDERED_KINDS]

#: Overloads of the operators (cel-go's standard declarations, with Kubernetes'
#: cross-type numeric comparisons).
OPERATORS: dict[str, tuple[Signature, ...]] = {
    "_?_:_": _sigs("(bool, A, A) -> A"),
    "_&&_": _sigs("(bool, bool) -> bool"),
    "_||_": _sigs("(bool, bool) -> bool"),
    "!_": _sigs("(bool) -> bool"),
    "-_": _sigs("(int) -> int", "(double) -> double", "(duration) -> duration"),
    "_==_": _sigs("(A, A) -> bool"),
    "_!=_": _sigs("(A, A) -> bool"),
    "_<_": _sigs(*_ORDERED, *_NUMERIC_CROSS),
    "_<=_": _sigs(*_ORDERED, *_NUMERIC_CROSS),
    "_>_": _sigs(*_ORDERED, *_NUMERIC_CROSS),
    "_>=_": _sigs(*_ORDERED, *_NUMERIC_CROSS),
    "_+_": _sigs(
        "(int, int) -> int",
        "(uint, uint) -> uint",
        "(double, double) -> double",
        "(string, string) -> string",
        "(bytes, bytes) -> bytes",
        "(list(A), list(A)) -> list(A)",
        "(timestamp, duration) -> timestamp",
        "(duration, timestamp) -> timestamp",
        "(duration, duration) -> duration",
    ),
    "_-_": _sigs(
        "(int, int) -> int",
        "(uint, uint) -> uint",
        "(double, double) -> double",
        "(timestamp, duration) -> timestamp",
        "(timestamp, timestamp) -> duration",
        "(duration, duration) -> duration",
    ),
    "_*_": _sigs("(int, int) -> int", "(uint, uint) -> uint", "(double, double) -> double"),
    "_/_": _sigs("(int, int) -> int", "(uint, uint) -> uint", "(double, double) -> double"),
    "_%_": _sigs("(int, int) -> int", "(uint, uint) -> uint"),
    "@in": _sigs("(A, list(A)) -> bool", "(A, map(A, B)) -> bool"),
    "_[_]": _sigs(
        "(list(A), int) -> A",
        "(map(A, B), A) -> B",
        "(optional_type(list(A)), int) -> optional_type(A)",
        "(optional_type(map(A, B)), A) -> optional_type(B)",
    ),
    "_[?_]": _sigs(
        "(list(A), int) -> optional_type(A)",
        "(map(A, B), A) -> optional_type(B)",
        "(optional_type(list(A)), int) -> optional_type(A)",
        "(optional_type(map(A, B)), A) -> optional_type(B)",
    ),
}

#: Fields of Kubernetes' ``JSONPatch`` message.
JSONPATCH_FIELDS: dict[str, Type] = {"op": t.STRING, "path": t.STRING, "from": t.STRING, "value": t.DYN}


@dataclass
class CheckResult:
    """What the checker learnt about one expression."""

    #: The deduced type of every node (type parameters left unbound become dyn).
    types: dict[ast.Node, Type] = field(default_factory=dict)
    #: The schema node a value was read from (for size estimates), when known.
    schemas: dict[ast.Node, Schema] = field(default_factory=dict)
    #: The overloads a call may dispatch to.
    overloads: dict[ast.Node, list[Signature]] = field(default_factory=dict)
    #: Calls of namespaced functions (``jsonpatch.escapeKey(x)``): their full name.
    qualified: dict[ast.Node, str] = field(default_factory=dict)
    errors: list[CelTypeError] = field(default_factory=list)

    def type_of(self, node: ast.Node) -> Type:
        """The type of ``node`` (dyn if unknown)."""
        return self.types.get(node, t.DYN)


def schema_type(schema: Schema, name: str) -> Type:
    """The CEL type of values described by ``schema``; ``name`` names message types."""
    if not schema.known or schema.int_or_string:
        return t.DYN
    kind = schema.type
    node = schema.node or {}
    if kind == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and not props:
            return t.map_of(t.STRING, schema_type(schema.field(""), name + ".@values"))
        if not props and schema.preserves_unknown:
            return t.DYN
        return t.message(name, schema)
    if kind == "array":
        return t.list_of(schema_type(schema.items(), name))
    if kind == "string":
        return t.STRING
    if kind == "integer":
        return t.INT
    if kind == "number":
        return t.DOUBLE
    if kind == "boolean":
        return t.BOOL
    return t.DYN


class Checker:
    """Types one expression's AST."""

    def __init__(
        self,
        env: Environment,
        variables: MappingABC[str, Type] | None = None,
        *,
        text: str = "",
        homogeneous_literals: bool = False,
        object_schema: Schema | None = None,
    ) -> None:
        self.env = env
        self.variables = dict(variables or {})
        self.text = text
        self.homogeneous = homogeneous_literals
        self.object_schema = object_schema
        self.result = CheckResult()
        self.mapping = t.Mapping()
        self.scopes: list[dict[str, tuple[Type, Schema | None]]] = []
        self._fresh = itertools.count()

    # -- entry point ----------------------------------------------------------------------
    def check(self, root: ast.Node) -> CheckResult:
        """Type ``root`` and all its sub-expressions."""
        self._check(root)
        final = {node: t.substitute(self.mapping, ty, params_to_dyn=True) for node, ty in self.result.types.items()}
        self.result.types = final
        return self.result

    def error(self, message: str, pos: int) -> None:
        """Record a type error at ``pos``."""
        self.result.errors.append(CelTypeError(message, self.text, pos))

    def fresh(self) -> Type:
        """A new type variable."""
        return t.param(f"_var{next(self._fresh)}")

    def _set(self, node: ast.Node, ty: Type, schema: Schema | None = None) -> Type:
        self.result.types[node] = ty
        if schema is not None:
            self.result.schemas[node] = schema
        return ty

    def _resolved(self, ty: Type) -> Type:
        return t.substitute(self.mapping, ty)

    def _check(self, node: ast.Node) -> Type:
        method = getattr(self, "_" + type(node).__name__)
        ty: Type = method(node)
        return ty

    # -- leaves -----------------------------------------------------------------------------
    def _Literal(self, node: ast.Literal) -> Type:
        v = node.value
        tv = type(v)
        ty = {
            bool: t.BOOL,
            int: t.INT,
            Uint: t.UINT,
            float: t.DOUBLE,
            str: t.STRING,
            bytes: t.BYTES,
            type(None): t.NULL,
        }.get(tv, t.DYN)
        return self._set(node, ty)

    def _lookup_scope(self, name: str) -> tuple[Type, Schema | None] | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _resolve_name(self, parts: list[str], root: bool) -> tuple[Type, Schema | None] | None:
        name = ".".join(parts)
        if len(parts) == 1 and not root:
            local = self._lookup_scope(name)
            if local is not None:
                return local
        for candidate in self.env.candidates(name, root):
            if candidate in self.env.variables or candidate in self.variables:
                ty = self.variables.get(candidate, t.DYN)
                return ty, ty.schema if ty.kind == "message" else None
        from mkpolicy.cel.values import TYPE_IDENTIFIERS

        if name in TYPE_IDENTIFIERS:
            return t.type_of(_type_value_type(name)), None
        return None

    def _Ident(self, node: ast.Ident) -> Type:
        found = self._resolve_name([node.name], node.root)
        if found is None:
            if not self.env.allow_undeclared:
                self.error(f"undeclared reference to '{node.name}'", node.pos)
            return self._set(node, t.DYN)
        ty, schema = found
        return self._set(node, ty, schema)

    # -- selection ----------------------------------------------------------------------------
    def _Select(self, node: ast.Select) -> Type:
        if not node.optional and not node.test_only:
            resolved = self._qualified_select(node)
            if resolved is not None:
                return resolved
        operand = self._check(node.operand)
        if node.test_only:
            self._select_type(node, operand, node.field)
            return self._set(node, t.BOOL)
        if node.optional:
            resolved_operand = self._resolved(operand)
            inner = resolved_operand.params[0] if resolved_operand.is_optional else resolved_operand
            field_type = self._select_type(node, inner, node.field)
            return self._set(node, t.optional_of(field_type), self.result.schemas.get(node))
        return self._select_type(node, operand, node.field)

    def _qualified_select(self, node: ast.Select) -> Type | None:
        """Resolve ``a.b.c`` when a prefix of it is a declared (qualified) variable name."""
        chain: list[ast.Select] = []
        cur: ast.Node = node
        while isinstance(cur, ast.Select) and not cur.optional and not cur.test_only:
            chain.append(cur)
            cur = cur.operand
        if not isinstance(cur, ast.Ident) or (not cur.root and self._lookup_scope(cur.name) is not None):
            return None
        chain.reverse()
        parts = [cur.name] + [s.field for s in chain]
        for n in range(len(parts), 1, -1):
            found = self._resolve_name(parts[:n], cur.root)
            if found is None:
                continue
            ty, schema = found
            self._set(chain[n - 2], ty, schema)
            for sel in chain[n - 1 :]:
                ty = self._select_type(sel, ty, sel.field)
            return ty
        return None

    def _select_type(self, node: ast.Select, operand: Type, name: str) -> Type:
        operand = self._resolved(operand)
        if operand.is_optional:
            # Selecting on an optional value is an optional selection (optional chaining).
            inner = self._select_type(node, operand.params[0], name)
            return self._set(node, inner if inner.is_optional else t.optional_of(inner))
        if operand.is_dyn or operand.kind == "param":
            return self._set(node, t.DYN)
        if operand.kind == "map":
            key = operand.params[0]
            if not (key.is_dyn or key.kind == "param" or key == t.STRING):
                self.error(f"type '{operand}' does not support field selection", node.pos)
            return self._set(node, operand.params[1])
        if operand.kind == "message":
            found = self._field_of(operand, name, node.pos)
            if found is None:
                return self._set(node, t.ERROR)
            return self._set(node, *found)
        self.error(f"type '{self._shown(operand)}' does not support field selection", node.pos)
        return self._set(node, t.ERROR)

    def _field_of(self, message: Type, name: str, pos: int) -> tuple[Type, Schema | None] | None:
        """The type (and schema) of field ``name`` of ``message``; None after reporting an error."""
        if message.name == "JSONPatch":
            if name not in JSONPATCH_FIELDS:
                self.error(f"undefined field '{name}' (JSONPatch has op, path, from and value)", pos)
                return None
            return JSONPATCH_FIELDS[name], None
        schema = message.schema
        if schema is None:
            return t.DYN, None
        sub = schema.field(name)
        if is_absent(sub):
            self.error(_undefined_field(message, name, schema), pos)
            return None
        return schema_type(sub, f"{message.name}.{name}"), sub

    # -- calls ---------------------------------------------------------------------------------
    def _Call(self, node: ast.Call) -> Type:
        if node.target is None and node.function in OPERATORS:
            return self._call_operator(node)
        if node.target is not None:
            qualified = self._qualified_function(node)
            if qualified is not None:
                self.result.qualified[node] = qualified
                return self._call_function(node, qualified, node.args, receiver=False)
            return self._call_function(node, node.function, [node.target, *node.args], receiver=True)
        name = node.function[1:] if node.function.startswith(".") else node.function
        return self._call_function(node, name, node.args, receiver=False)

    def _qualified_function(self, node: ast.Call) -> str | None:
        parts: list[str] = []
        cur = node.target
        while isinstance(cur, ast.Select) and not cur.optional and not cur.test_only:
            parts.append(cur.field)
            cur = cur.operand
        if not isinstance(cur, ast.Ident):
            return None
        parts.append(cur.name)
        name = ".".join(reversed(parts)) + "." + node.function
        if self.env.library.lookup(name, receiver=False) is None:
            return None
        if self._lookup_scope(cur.name) is not None:
            return None
        if any(c in self.env.variables or c in self.variables for c in self.env.candidates(cur.name, cur.root)):
            return None
        return name

    def _call_operator(self, node: ast.Call) -> Type:
        arg_types = [self._check(a) for a in node.args]
        return self._resolve_overloads(node, node.function, OPERATORS[node.function], arg_types)

    def _call_function(self, node: ast.Call, name: str, args: list[ast.Node], receiver: bool) -> Type:
        if name == "format" and receiver:
            # Kubernetes exempts the argument list of format() from the homogeneous
            # literal rule: '%s is %d'.format(['a', 1]) is fine.
            saved, self.homogeneous = self.homogeneous, False
            try:
                arg_types = [self._check(a) for a in args]
            finally:
                self.homogeneous = saved
        else:
            arg_types = [self._check(a) for a in args]
        fn = self.env.library.lookup(name, receiver=receiver)
        if fn is None:
            self.error(f"undeclared reference to function '{name}'", node.pos)
            return self._set(node, t.ERROR)
        if not fn.signatures:
            self.result.overloads[node] = []
            return self._set(node, t.DYN)
        return self._resolve_overloads(node, name, fn.signatures, arg_types)

    def _resolve_overloads(self, node: ast.Node, name: str, sigs: tuple[Signature, ...], arg_types: list[Type]) -> Type:
        result: Type | None = None
        matched: list[Signature] = []
        for sig in sigs:
            sig_params = sig.params_for(len(arg_types))
            if sig_params is None:
                continue
            renames = {p: self.fresh() for p in sig.type_params}
            params = [t.rename_params(p, renames) for p in sig_params]
            trial = t.assignable_list(self.mapping, arg_types, params)
            if trial is None:
                continue
            self.mapping = trial
            matched.append(sig)
            ty = t.substitute(self.mapping, t.rename_params(sig.result, renames))
            if result is None:
                result = ty
            elif not result.is_dyn and ty != result:
                result = t.DYN
        self.result.overloads[node] = matched
        if result is None:
            shown = ", ".join(str(t.substitute(self.mapping, a, params_to_dyn=True)) for a in arg_types)
            self.error(f"found no matching overload for '{name}' applied to '({shown})'", node.pos)
            return self._set(node, t.ERROR)
        return self._set(node, result)

    # -- literals -------------------------------------------------------------------------------
    def _join(self, previous: Type | None, current: Type, pos: int) -> Type:
        if previous is None:
            return current
        trial = t.assignable(self.mapping, previous, current)
        if trial is not None:
            self.mapping = trial
            return t.most_general(previous, current)
        if self.homogeneous:
            self.error(
                f"expected type '{self._shown(previous)}' but found '{self._shown(current)}' "
                "(Kubernetes requires list and map literals of one type; write each field in its own JSONPatch "
                "operation, or as fields of an Object{...} literal, and each value keeps its type check)",
                pos,
            )
        return t.DYN

    def _shown(self, ty: Type) -> str:
        return str(t.substitute(self.mapping, ty, params_to_dyn=True))

    def _ListLit(self, node: ast.ListLit) -> Type:
        elem: Type | None = None
        for element, optional in zip(node.elements, node.optional, strict=True):
            ty = self._check(element)
            if optional:
                ty = self._unwrap_optional(ty, element.pos)
            elem = self._join(elem, ty, element.pos)
        return self._set(node, t.list_of(elem if elem is not None else self.fresh()))

    def _unwrap_optional(self, ty: Type, pos: int) -> Type:
        resolved = self._resolved(ty)
        if resolved.is_dyn:
            return t.DYN
        if resolved.is_optional:
            return resolved.params[0]
        inner = self.fresh()
        trial = t.assignable(self.mapping, t.optional_of(inner), resolved)
        if trial is not None:
            self.mapping = trial
            return inner
        self.error(f"expected type 'optional_type' but found '{self._shown(resolved)}'", pos)
        return t.ERROR

    def _MapLit(self, node: ast.MapLit) -> Type:
        key: Type | None = None
        value: Type | None = None
        for entry in node.entries:
            assert isinstance(entry.key, ast.Node)
            kt = self._check(entry.key)
            resolved = self._resolved(kt)
            if not (resolved.is_dyn or resolved.kind in ("param", "string", "int", "uint", "bool")):
                self.error(f"unsupported map key type: '{resolved}'", entry.key.pos)
            key = self._join(key, kt, entry.key.pos)
            vt = self._check(entry.value)
            if entry.optional:
                vt = self._unwrap_optional(vt, entry.value.pos)
            value = self._join(value, vt, entry.value.pos)
        return self._set(
            node,
            t.map_of(key if key is not None else self.fresh(), value if value is not None else self.fresh()),
        )

    def _StructLit(self, node: ast.StructLit) -> Type:
        name = node.type_name.lstrip(".")
        schema: Schema | None = None
        if name == "Object" or name.startswith("Object."):
            errors_before = len(self.result.errors)
            schema = self._object_schema(name, node.pos)
            if len(self.result.errors) > errors_before:
                for entry in node.entries:
                    self._check(entry.value)
                return self._set(node, t.ERROR)
        elif name != "JSONPatch":
            self.error(f"unknown message type '{name}'", node.pos)
            for entry in node.entries:
                self._check(entry.value)
            return self._set(node, t.ERROR)
        message = t.message(name, schema)
        for entry in node.entries:
            assert isinstance(entry.key, str)
            actual = self._check(entry.value)
            if entry.optional:
                actual = self._unwrap_optional(actual, entry.value.pos)
            found = self._field_of(message, entry.key, entry.pos)
            if found is not None:
                self._check_field_value(name, entry, found[0], actual)
        return self._set(node, message, schema)

    def _object_schema(self, name: str, pos: int) -> Schema | None:
        schema = self.object_schema
        if schema is None:
            return None
        for part in name.split(".")[1:]:
            while schema.type == "array":
                schema = schema.items()
            sub = schema.field(part)
            if is_absent(sub):
                self.error(f"unknown message type '{name}': the schema of object has no field '{part}'", pos)
                return None
            schema = sub
        while schema.type == "array":
            schema = schema.items()
        return schema

    def _check_field_value(self, message: str, entry: ast.Entry, expected: Type, actual: Type) -> None:
        actual = self._resolved(actual)
        if _fits(expected, actual, f"{message}.{entry.key}"):
            # Unify type parameters of e.g. an empty list with the field's type.
            trial = t.assignable(self.mapping, _loosen(expected), actual)
            if trial is not None:
                self.mapping = trial
            return
        self.error(
            f"field '{message}.{entry.key}' expects {_describe_type(expected)}, found '{self._shown(actual)}'",
            entry.value.pos,
        )

    # -- comprehensions ---------------------------------------------------------------------------
    def _Comprehension(self, node: ast.Comprehension) -> Type:
        rng = self._resolved(self._check(node.iter_range))
        rng_schema = self.result.schemas.get(node.iter_range)
        scope: dict[str, tuple[Type, Schema | None]] = {}
        macro = node.macro
        var_schema: Schema | None = None
        if macro == "bind":
            scope[node.var] = (rng, rng_schema)
            self.scopes.append(scope)
            try:
                body = self._check(node.args[0])
            finally:
                self.scopes.pop()
            return self._set(node, body, self.result.schemas.get(node.args[0]))
        if macro in ("optMap", "optFlatMap"):
            if rng.is_dyn:
                inner = t.DYN
            elif rng.is_optional:
                inner = rng.params[0]
            else:
                self.error(f"{macro}() needs an optional value, found '{self._shown(rng)}'", node.iter_range.pos)
                inner = t.ERROR
            scope[node.var] = (inner, None)
            self.scopes.append(scope)
            try:
                body = self._resolved(self._check(node.args[0]))
            finally:
                self.scopes.pop()
            if macro == "optMap":
                return self._set(node, t.optional_of(body))
            if not (body.is_dyn or body.is_optional or body.kind == "param"):
                self.error(f"optFlatMap() must produce an optional, found '{self._shown(body)}'", node.args[0].pos)
            return self._set(node, body)
        # Iteration variables.
        key_type, value_type = t.DYN, t.DYN
        if rng.kind == "list":
            key_type, value_type = t.INT, rng.params[0]
            if rng_schema is not None:
                var_schema = rng_schema.items()
        elif rng.kind == "map":
            key_type, value_type = rng.params[0], rng.params[1]
        elif rng.kind == "message" and rng.schema is not None and rng.schema.is_map:
            key_type, value_type = t.STRING, t.DYN
        elif not (rng.is_dyn or rng.kind == "param"):
            self.error(f"expression of type '{self._shown(rng)}' cannot be the range of a comprehension", node.pos)
            key_type, value_type = t.ERROR, t.ERROR
        if node.var2 is not None:
            scope[node.var] = (key_type, None)
            scope[node.var2] = (value_type, var_schema)
        else:
            scope[node.var] = (value_type, var_schema) if rng.kind == "list" else (key_type, None)
        self.scopes.append(scope)
        try:
            arg_types = [self._check(a) for a in node.args]
        finally:
            self.scopes.pop()
        transforms = ("map", "transformList", "transformMap", "transformMapEntry", "sortBy")
        predicate_args = node.args[:-1] if macro in transforms else node.args
        for arg in predicate_args:
            self._expect_bool(arg, macro)
        if macro in ("all", "exists", "exists_one"):
            return self._set(node, t.BOOL)
        if macro == "sortBy":
            if rng.kind not in ("list",) and not rng.is_dyn:
                self.error(f"sortBy() needs a list, found '{self._shown(rng)}'", node.iter_range.pos)
            return self._set(node, rng if rng.kind == "list" else t.list_of(t.DYN))
        last = self._resolved(arg_types[-1])
        if macro == "map" or macro == "transformList":
            return self._set(node, t.list_of(last))
        if macro == "filter":
            return self._set(node, t.list_of(scope[node.var][0]))
        if macro == "transformMap":
            return self._set(node, t.map_of(key_type, last))
        if macro == "transformMapEntry":
            if last.kind == "map":
                return self._set(node, last)
            if not (last.is_dyn or last.kind == "param"):
                self.error(f"transformMapEntry() must produce a map, found '{self._shown(last)}'", node.args[-1].pos)
            return self._set(node, t.map_of(t.DYN, t.DYN))
        return self._set(node, t.DYN)

    def _expect_bool(self, node: ast.Node, macro: str) -> None:
        ty = self._resolved(self.result.types.get(node, t.DYN))
        trial = t.assignable(self.mapping, t.BOOL, ty)
        if trial is None:
            self.error(f"{macro}() predicate must be a bool, found '{self._shown(ty)}'", node.pos)
        else:
            self.mapping = trial


def _type_value_type(name: str) -> Type:
    mapping = {
        "int": t.INT,
        "uint": t.UINT,
        "double": t.DOUBLE,
        "bool": t.BOOL,
        "string": t.STRING,
        "bytes": t.BYTES,
        "list": t.list_of(t.DYN),
        "map": t.map_of(t.DYN, t.DYN),
        "null_type": t.NULL,
        "type": t.TYPE,
        "google.protobuf.Timestamp": t.TIMESTAMP,
        "google.protobuf.Duration": t.DURATION,
        "optional_type": t.optional_of(t.DYN),
    }
    found = mapping.get(name)
    return found if found is not None else t.parse_type(name)


def _undefined_field(message: Type, name: str, schema: Schema) -> str:
    props = (schema.node or {}).get("properties")
    where = message.name
    if isinstance(props, dict) and props:
        known = sorted(str(k) for k in props)
        shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        return f"undefined field '{name}' of '{where}' (the schema declares: {shown})"
    return f"undefined field '{name}' of '{where}' (the schema declares no fields)"


def _loosen(expected: Type) -> Type:
    """Schema message types accept maps too (``{...}`` where ``Object.x{...}`` would do)."""
    if expected.kind == "message":
        return t.DYN
    if expected.params:
        return Type(expected.kind, expected.name, tuple(_loosen(p) for p in expected.params), expected.schema)
    return expected


def _fits(expected: Type, actual: Type, where: str) -> bool:
    if expected.is_dyn or actual.is_dyn or actual.kind == "param" or actual.kind == "null_type":
        return True
    if expected.kind == "message":
        if actual.kind == "message":
            same_schema = (
                actual.schema is not None and expected.schema is not None and actual.schema.node is expected.schema.node
            )
            return actual.name == where or actual.name == expected.name or same_schema
        return actual.kind == "map"
    if expected.kind == "list":
        return actual.kind == "list" and _fits(expected.params[0], actual.params[0], where)
    if expected.kind == "map":
        return actual.kind == "map" and _fits(expected.params[1], actual.params[1], where)
    return t.assignable(t.Mapping(), expected, actual) is not None


def _describe_type(ty: Type) -> str:
    if ty.kind == "message":
        return f"an object ({ty.name}{{...}} or a map)"
    return f"'{ty}'"


# -- public API ---------------------------------------------------------------------------


def check(
    program: Program,
    variables: MappingABC[str, Type] | None = None,
    *,
    homogeneous_literals: bool = True,
    object_schema: Schema | None = None,
) -> CheckResult:
    """Type-check a compiled program; ``variables`` types declared variables (default dyn)."""
    checker = Checker(
        program.env,
        variables,
        text=program.expression,
        homogeneous_literals=homogeneous_literals,
        object_schema=object_schema,
    )
    return checker.check(program.ast)


def schema_variables(schemas: MappingABC[str, Schema | None]) -> dict[str, Type]:
    """Variable types for ``schemas`` (None or an unknown schema: dyn)."""
    out: dict[str, Type] = {}
    for name, schema in schemas.items():
        out[name] = t.DYN if schema is None else schema_type(schema, name)
    return out


def typecheck(program: Program, schemas: MappingABC[str, Schema | None]) -> list[CelTypeError]:
    """Type errors of ``program`` with variables typed by their OpenAPI ``schemas``.

    Variables not in ``schemas`` (or mapped to None) are ``dyn``. ``Object{...}``
    literals are checked against the schema of ``object`` (the patch target) when it
    is given. Each error has ``.offset`` (0-based, in the expression) and a message.
    """
    # Kubernetes' type check of admission policies (its warnings) runs with the
    # schema types and the homogeneous-literal rule: {"a": object.spec.list,
    # "b": object.spec.s} is flagged there too.
    result = check(program, schema_variables(schemas), object_schema=schemas.get("object"), homogeneous_literals=True)
    errors = list(result.errors)
    return sorted(errors, key=lambda e: (e.offset or 0, e.message))
