"""CEL types for the type checker and the cost estimator.

A :class:`Type` is immutable and compared structurally. ``kind`` is one of the CEL
kinds (``dyn``, ``null_type``, ``bool``, ``int``, ``uint``, ``double``, ``string``,
``bytes``, ``timestamp``, ``duration``, ``list``, ``map``, ``type``, ``opaque``
(``optional_type`` and the Kubernetes library types such as ``net.IP``), ``message``
(``JSONPatch``, ``Object``...), ``param`` (a type parameter) and ``error``.

Objects described by an OpenAPI schema are ``message`` types that carry their
:class:`~mkpolicy.structural.Schema`: selecting a field the schema does not declare
is a type error, as in Kubernetes.

Types are written the way cel-go prints them: ``list(int)``, ``map(string, dyn)``,
``optional_type(string)``, ``type(int)``; :func:`parse_type` reads that notation (it
is also used to declare function signatures).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkpolicy.structural import Schema


class Type:
    """One CEL type. Use the module constants and constructors, not ``Type(...)``."""

    __slots__ = ("kind", "name", "params", "schema")

    def __init__(
        self,
        kind: str,
        name: str = "",
        params: tuple[Type, ...] = (),
        schema: Schema | None = None,
    ) -> None:
        self.kind = kind
        self.name = name or kind
        self.params = params
        self.schema = schema

    def _key(self) -> tuple[object, ...]:
        if self.schema is not None:
            # Schema-described objects are the same type wherever they are read from
            # (object.spec and managerObject.spec): compare the schema node.
            return (self.kind, id(self.schema.node), self.params)
        return (self.kind, self.name, self.params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Type({self})"

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.params[0]})"
        if self.kind == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if self.kind == "type":
            return f"type({self.params[0]})" if self.params else "type"
        if self.params:
            return f"{self.name}({', '.join(str(p) for p in self.params)})"
        return self.name

    # -- shapes ------------------------------------------------------------------------
    @property
    def is_dyn(self) -> bool:
        """``dyn`` (or the error type, which is as permissive)."""
        return self.kind == "dyn" or self.kind == "error"

    @property
    def is_optional(self) -> bool:
        """``optional_type(T)``."""
        return self.kind == "opaque" and self.name == "optional_type"

    @property
    def elem(self) -> Type:
        """The element type of a list, the value type of a map, the value of an optional."""
        if self.kind == "list" or self.is_optional:
            return self.params[0]
        if self.kind == "map":
            return self.params[1]
        return DYN


DYN = Type("dyn")
ERROR = Type("error")
NULL = Type("null_type")
BOOL = Type("bool")
INT = Type("int")
UINT = Type("uint")
DOUBLE = Type("double")
STRING = Type("string")
BYTES = Type("bytes")
TIMESTAMP = Type("timestamp", "google.protobuf.Timestamp")
DURATION = Type("duration", "google.protobuf.Duration")
TYPE = Type("type")


def list_of(elem: Type) -> Type:
    """``list(elem)``."""
    return Type("list", params=(elem,))


def map_of(key: Type, value: Type) -> Type:
    """``map(key, value)``."""
    return Type("map", params=(key, value))


def optional_of(value: Type) -> Type:
    """``optional_type(value)``."""
    return Type("opaque", "optional_type", (value,))


def type_of(value: Type) -> Type:
    """``type(value)``: the type of a type value."""
    return Type("type", params=(value,))


def opaque(name: str, *params: Type) -> Type:
    """An abstract type such as ``net.IP`` or ``kubernetes.Quantity``."""
    return Type("opaque", name, tuple(params))


def message(name: str, schema: Schema | None = None) -> Type:
    """A message (struct) type; ``schema`` describes its fields when known."""
    return Type("message", name, schema=schema)


def param(name: str) -> Type:
    """A type parameter."""
    return Type("param", name)


_PRIMITIVES: dict[str, Type] = {
    "dyn": DYN,
    "null_type": NULL,
    "bool": BOOL,
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "string": STRING,
    "bytes": BYTES,
    "error": ERROR,
    "google.protobuf.Timestamp": TIMESTAMP,
    "timestamp": TIMESTAMP,
    "google.protobuf.Duration": DURATION,
    "duration": DURATION,
    "type": TYPE,
    "list": Type("list", params=(DYN,)),
    "map": Type("map", params=(DYN, DYN)),
    # Well-known protobuf types that CEL unwraps into plain values.
    "google.protobuf.Value": DYN,
    "google.protobuf.Any": DYN,
    "google.protobuf.Struct": Type("map", params=(STRING, DYN)),
    "google.protobuf.ListValue": Type("list", params=(DYN,)),
    "google.protobuf.NullValue": NULL,
    "google.protobuf.BoolValue": BOOL,
    "google.protobuf.BytesValue": BYTES,
    "google.protobuf.DoubleValue": DOUBLE,
    "google.protobuf.FloatValue": DOUBLE,
    "google.protobuf.Int32Value": INT,
    "google.protobuf.Int64Value": INT,
    "google.protobuf.StringValue": STRING,
    "google.protobuf.UInt32Value": UINT,
    "google.protobuf.UInt64Value": UINT,
}

_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.]*|[(),|]|->)")


def parse_type(text: str, params: frozenset[str] | None = None) -> Type:
    """Parse cel-go's type notation (``list(int)``, ``map(string, T)``...).

    Single upper-case letters, and names listed in ``params``, are type parameters.
    """
    tokens = _tokens(text)
    result, rest = _parse(tokens, 0, params or frozenset())
    if rest != len(tokens):
        raise ValueError(f"unexpected {tokens[rest]!r} in type {text!r}")
    return result


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"cannot parse type {text!r} at {pos}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _parse(tokens: list[str], i: int, params: frozenset[str]) -> tuple[Type, int]:
    first, i = _parse_one(tokens, i, params)
    if i < len(tokens) and tokens[i] == "|":
        alternatives = [first]
        while i < len(tokens) and tokens[i] == "|":
            alt, i = _parse_one(tokens, i + 1, params)
            alternatives.append(alt)
        return Type("union", "|".join(str(a) for a in alternatives), tuple(alternatives)), i
    return first, i


def _parse_one(tokens: list[str], i: int, params: frozenset[str]) -> tuple[Type, int]:
    name = tokens[i]
    i += 1
    args: list[Type] = []
    if i < len(tokens) and tokens[i] == "(":
        i += 1
        while tokens[i] != ")":
            arg, i = _parse(tokens, i, params)
            args.append(arg)
            if tokens[i] == ",":
                i += 1
        i += 1
    if name == "list":
        return list_of(args[0] if args else DYN), i
    if name == "map":
        return map_of(*(args if args else [DYN, DYN])), i
    if name == "type":
        return (type_of(args[0]) if args else TYPE), i
    if name == "wrapper":
        return args[0], i
    if name == "optional_type" or name == "optional":
        return optional_of(args[0] if args else DYN), i
    if not args and (name in params or (len(name) == 1 and name.isupper())):
        return param(name), i
    if not args and name in _PRIMITIVES:
        return _PRIMITIVES[name], i
    if args or "." in name or name[:1].islower():
        return opaque(name, *args), i
    return message(name), i


class Signature:
    """One overload: parameter types (the receiver first for methods) and result type."""

    __slots__ = ("params", "result", "text", "type_params", "variadic")

    def __init__(self, text: str) -> None:
        self.text = text
        m = re.fullmatch(r"\s*\((.*)\)\s*->\s*(.+?)\s*", text)
        if m is None:
            raise ValueError(f"bad signature {text!r}: expected '(T1, T2) -> R'")
        inner = m.group(1).strip()
        parts = _split_top(inner) if inner else []
        #: The last parameter may repeat (``(int, int...) -> int``).
        self.variadic = bool(parts) and parts[-1].endswith("...")
        if self.variadic:
            parts[-1] = parts[-1][:-3]
        self.params: tuple[Type, ...] = tuple(parse_type(p) for p in parts)
        self.result = parse_type(m.group(2))
        names: set[str] = set()
        for t in (*self.params, self.result):
            _collect_params(t, names)
        self.type_params = frozenset(names)

    def __repr__(self) -> str:
        return f"Signature({self.text!r})"

    def params_for(self, count: int) -> tuple[Type, ...] | None:
        """The parameter types for a call with ``count`` arguments, or None."""
        if not self.variadic:
            return self.params if count == len(self.params) else None
        fixed = len(self.params) - 1
        if count < fixed:
            return None
        return self.params[:fixed] + (self.params[-1],) * (count - fixed)


def _split_top(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _collect_params(t: Type, out: set[str]) -> None:
    if t.kind == "param":
        out.add(t.name)
    for p in t.params:
        _collect_params(p, out)


# -- assignability (cel-go's checker/types.go, over an explicit substitution map) --------


class Mapping:
    """Substitutions of type parameters found so far."""

    __slots__ = ("subs",)

    def __init__(self, subs: dict[str, Type] | None = None) -> None:
        self.subs: dict[str, Type] = subs if subs is not None else {}

    def copy(self) -> Mapping:
        """An independent copy (a trial unification works on a copy)."""
        return Mapping(dict(self.subs))

    def find(self, t: Type) -> Type | None:
        """The substitution of type parameter ``t``, if any."""
        return self.subs.get(t.name) if t.kind == "param" else None


def _exact(a: Type, b: Type) -> bool:
    return a == b


def is_less_specific(t1: Type, t2: Type) -> bool:
    """True when ``t1`` is as general as or more general than ``t2``."""
    if t1.is_dyn or t1.kind == "param":
        return True
    if t2.is_dyn or t2.kind == "param":
        return False
    if t1.kind != t2.kind:
        return False
    if t1.kind in ("opaque", "list", "map"):
        if t1.name != t2.name or len(t1.params) != len(t2.params):
            return False
        return all(is_less_specific(a, b) for a, b in zip(t1.params, t2.params, strict=True))
    if t1.kind == "type":
        return True
    return _exact(t1, t2)


def most_general(t1: Type, t2: Type) -> Type:
    """The more general of two compatible types."""
    return t1 if is_less_specific(t1, t2) else t2


def _legacy_nullable(t: Type) -> bool:
    return t.kind in ("opaque", "message", "timestamp", "duration")


def _assignable(m: Mapping, t1: Type, t2: Type) -> bool:
    if t2.kind == "param":
        valid, has_sub = _valid_substitution(m, t1, t2)
        if valid:
            return True
        if has_sub:
            return False
    if t1.kind == "param":
        return _valid_substitution(m, t2, t1)[0]
    if t1.is_dyn or t2.is_dyn:
        return True
    if t1.kind == "union" or t2.kind == "union":
        union, other = (t1, t2) if t1.kind == "union" else (t2, t1)
        for alt in union.params:
            trial = m.copy()
            if _assignable(trial, alt, other):
                m.subs = trial.subs
                return True
        return False
    if t1.kind == "null_type":
        return t2.kind == "null_type" or _legacy_nullable(t2)
    if t2.kind == "null_type":
        return _legacy_nullable(t1)
    if t1.kind == "type":
        return t2.kind == "type"
    if t1.kind in ("opaque", "list", "map"):
        return (
            t1.kind == t2.kind
            and t1.name == t2.name
            and len(t1.params) == len(t2.params)
            and all(_assignable(m, a, b) for a, b in zip(t1.params, t2.params, strict=True))
        )
    if t1.kind == "message" and t2.kind == "message":
        if t1.schema is not None and t2.schema is not None:
            return t1.schema.node is t2.schema.node
        return t1.name == t2.name
    return t1.kind == t2.kind and t1.name == t2.name


def _valid_substitution(m: Mapping, t1: Type, t2: Type) -> tuple[bool, bool]:
    if _exact(t1, t2):
        return True, True
    sub = m.find(t2)
    if sub is not None:
        if _exact(t1, sub):
            return True, True
        if _assignable(m, t1, sub):
            new = most_general(t1, sub)
            if _not_referenced_in(m, t2, new):
                m.subs[t2.name] = new
            return True, True
        return False, True
    if _not_referenced_in(m, t2, t1):
        m.subs[t2.name] = t1
        return True, False
    return False, False


def _not_referenced_in(m: Mapping, t: Type, within: Type) -> bool:
    if _exact(t, within):
        return False
    if within.kind == "param":
        sub = m.find(within)
        return True if sub is None else _not_referenced_in(m, t, sub)
    return all(_not_referenced_in(m, t, p) for p in within.params)


def assignable(m: Mapping, t1: Type, t2: Type) -> Mapping | None:
    """A copy of ``m`` extended so that a ``t2`` value fits where ``t1`` is wanted, or None."""
    trial = m.copy()
    return trial if _assignable(trial, t1, t2) else None


def assignable_list(m: Mapping, l1: list[Type], l2: list[Type]) -> Mapping | None:
    """Like :func:`assignable`, pairwise over two equally long lists."""
    if len(l1) != len(l2):
        return None
    trial = m.copy()
    for a, b in zip(l1, l2, strict=True):
        if not _assignable(trial, a, b):
            return None
    return trial


def substitute(m: Mapping, t: Type, params_to_dyn: bool = False) -> Type:
    """``t`` with every bound type parameter replaced (unbound ones by dyn on request)."""
    sub = m.find(t)
    if sub is not None:
        return substitute(m, sub, params_to_dyn)
    if t.kind == "param":
        return DYN if params_to_dyn else t
    if not t.params:
        return t
    return Type(t.kind, t.name, tuple(substitute(m, p, params_to_dyn) for p in t.params), t.schema)


def rename_params(t: Type, renames: dict[str, Type]) -> Type:
    """``t`` with type parameters renamed (fresh variables for one overload instance)."""
    if t.kind == "param":
        return renames.get(t.name, t)
    if not t.params:
        return t
    return Type(t.kind, t.name, tuple(rename_params(p, renames) for p in t.params), t.schema)
