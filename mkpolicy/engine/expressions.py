"""CEL expressions of a policy, compiled once, with errors located in the policy file."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from mkpolicy.cel import Environment, Program
from mkpolicy.cel.ast import (
    Call,
    Comprehension,
    Ident,
    ListLit,
    Literal,
    MapLit,
    Node,
    Select,
    StructLit,
    line_col,
)
from mkpolicy.cel.checker import check
from mkpolicy.cel.convert import to_json
from mkpolicy.cel.errors import CelCompileError, CelCostError, CelExpressionError, CelTypeError, EvalError
from mkpolicy.cel.runtime import LazyMap, type_name
from mkpolicy.cel.values import ObjectValue
from mkpolicy.errors import CelError, Location, PatchError
from mkpolicy.policy.source import Path

#: The variables every policy expression can use (docs/architecture.md, "CEL variables").
POLICY_VARIABLES = frozenset(
    {
        "object",
        "managerObject",
        "workerObject",
        "workload",
        "workloadName",
        "origin",
        "cluster",
        "now",
        "params",
        "variables",
    }
)


class Locator:
    """Turns positions inside an expression into file locations."""

    def __init__(self, policy: Any | None = None) -> None:
        self.policy = policy

    def locate(self, path: Path, expression: str, offset: int | None, where: str) -> Location:
        """The location of ``offset`` in the expression stored at ``path``."""
        if self.policy is None:
            # No file: positions are relative to the expression itself.
            line, column = line_col(expression, offset or 0)
            return Location(line=line, column=column, where=where)
        loc: Location = self.policy.locate(path, value=expression, offset=offset, where=where)
        return loc


class PolicyExpression:
    """One compiled expression, knowing where it came from (for error messages)."""

    __slots__ = ("expression", "locator", "path", "program", "where")

    def __init__(
        self, expression: str, path: Path, where: str, locator: Locator, env: Environment, *, typecheck: bool = True
    ) -> None:
        """Parse, compile and (unless ``typecheck`` is False) type-check ``expression``.

        The type check is the one Kubernetes runs when it compiles an admission policy's
        expressions: variables are ``dyn``, list and map literals must be homogeneous, and
        ``JSONPatch{...}`` fields have their declared types (op, path, from: string). Its
        first error is raised (:class:`CelTypeError`); ``mkpolicy lint`` reports them all.
        """
        self.expression = expression
        self.path = path
        self.where = where
        self.locator = locator
        try:
            self.program = Program(expression, env)
        except CelExpressionError as exc:
            raise self.relocate(exc) from None
        if typecheck:
            errors = compile_type_errors(self.program)
            if errors:
                raise self.relocate(errors[0])

    @property
    def ast(self) -> Node:
        """The expression's syntax tree."""
        return self.program.ast

    def location(self, offset: int | None = None) -> Location:
        """The file location of ``offset`` in this expression (its start by default)."""
        return self.locator.locate(self.path, self.expression, offset if offset is not None else 0, self.where)

    def relocate(self, exc: CelExpressionError) -> CelError:
        """``exc`` positioned in the policy file."""
        return exc.relocated(self.location(exc.offset))

    def error(self, message: str) -> PatchError:
        """A PatchError located at this expression."""
        return PatchError(message, self.location())

    def evaluate(self, bindings: Mapping[str, Any]) -> Any:
        """Evaluate, raising errors located in the policy file."""
        try:
            return self.program.evaluate(bindings)
        except CelExpressionError as exc:
            raise self.relocate(exc) from None


def compile_type_errors(program: Program) -> list[CelTypeError]:
    """The type errors Kubernetes reports when it compiles ``program`` for an admission
    policy (every variable ``dyn``, homogeneous aggregate literals: the options of its
    base CEL environment, ``k8s.io/apiserver/pkg/cel/environment/base.go``)."""
    errors = check(program, homogeneous_literals=True).errors
    return sorted(errors, key=lambda e: (e.offset or 0, e.message))


class Variables:
    """A policy's ``variables``, compiled: what can be known before any call is.

    Kubernetes evaluates variables lazily, against the bindings of the expression that
    reads them. Three facts, found at compile time, spare work per call:

    * a variable that refers to no binding at all (``"kubectl.kubernetes.io/..."``) has
      the same value in every call: it is computed once, now (unless that fails: the
      error is then raised when, and only when, an expression reads it);
    * a variable that does not depend on ``object`` (directly or through other
      variables) keeps its value for the whole create or sync call, while ``object``
      changes from patch to patch;
    * the others are computed again for every version of ``object``.
    """

    __slots__ = ("by_name", "constants", "dependent", "names", "static")

    def __init__(self, variables: list[tuple[str, PolicyExpression]]) -> None:
        self.by_name = dict(variables)
        self.names = list(self.by_name)
        references = {name: _references(expr.ast) for name, expr in self.by_name.items()}
        #: Values of the variables that refer to no binding.
        self.constants: dict[str, Any] = {}
        for name, (idents, _) in references.items():
            if idents:
                continue
            # When that fails, the error is raised (located) when an expression reads it.
            with contextlib.suppress(CelExpressionError):
                self.constants[name] = self.by_name[name].program.evaluate({})
        #: Variables whose value depends on ``object``.
        self.dependent = _object_dependent(references)
        #: When all variables are constants, the map every call shares: a plain dict
        #: (CEL reads it fastest and never modifies a value).
        self.static: dict[str, Any] | None = None
        if len(self.constants) == len(self.names):
            self.static = {name: self.constants[name] for name in self.names}

    def bind(self, bindings: dict[str, Any]) -> VariableScope | None:
        """Set ``bindings["variables"]`` for one call; return the scope to
        :meth:`~VariableScope.refresh` when ``object`` changes, or None when no
        variable depends on it (the map then serves the whole call)."""
        if self.static is not None:
            bindings["variables"] = self.static
            return None
        scope = VariableScope(self, bindings)
        bindings["variables"] = scope.map
        return scope if self.dependent else None


class VariableScope:
    """The ``variables`` map of one call whose variables are not all constants.
    :meth:`refresh` gives the map to bind after ``object`` changed: entries depending on
    ``object`` are forgotten, the others kept."""

    __slots__ = ("bindings", "map", "shared", "variables")

    def __init__(self, variables: Variables, bindings: dict[str, Any]) -> None:
        self.variables = variables
        self.bindings = bindings
        #: The values that hold for the whole call.
        self.shared = dict(variables.constants)
        # Without variables depending on object, one map serves the whole call.
        cache = dict(self.shared) if variables.dependent else self.shared
        self.map = LazyMap(variables.names, self._compute, cache)

    def refresh(self) -> LazyMap:
        """The map for a new ``object``."""
        self.map = LazyMap(self.variables.names, self._compute, dict(self.shared))
        return self.map

    def _compute(self, name: str) -> Any:
        expr = self.variables.by_name[name]
        try:
            value = expr.program.evaluate(self.bindings)
        except CelExpressionError as exc:
            located = expr.relocate(exc)
            raise EvalError(
                f"variable {name!r} failed at {located.location}: {exc.message}", cost=isinstance(exc, CelCostError)
            ) from None
        if name not in self.variables.dependent:
            self.shared[name] = value
        return value


def _references(node: Node) -> tuple[set[str], set[str] | None]:
    """The bindings an expression refers to, and the variables it reads as
    ``variables.<name>`` (None when it uses ``variables`` otherwise, e.g. ``variables[k]``).

    Conservative: a comprehension variable named like a binding counts as a reference.
    """
    idents: set[str] = set()
    fields: set[str] | None = set()
    selected: set[int] = set()
    for n in node.walk():
        if isinstance(n, Select) and isinstance(n.operand, Ident) and n.operand.name == "variables":
            selected.add(id(n.operand))
            if fields is not None:
                fields.add(n.field)
        elif isinstance(n, Ident) and n.name in POLICY_VARIABLES:
            idents.add(n.name)
            if n.name == "variables" and id(n) not in selected:
                fields = None
    return idents, fields


def _object_dependent(references: dict[str, tuple[set[str], set[str] | None]]) -> frozenset[str]:
    """The variables whose value depends on ``object``, directly or through other variables."""
    dependent = {name for name, (idents, _) in references.items() if "object" in idents}
    changed = True
    while changed:
        changed = False
        for name, (idents, fields) in references.items():
            if name in dependent or "variables" not in idents:
                continue
            if dependent if fields is None else fields & dependent:
                dependent.add(name)
                changed = True
    return frozenset(dependent)


# -- result shapes ----------------------------------------------------------------------


def check_apply_configuration_shape(expr: PolicyExpression) -> None:
    """Reject ApplyConfiguration expressions that cannot produce an ``Object{...}``."""
    bad = _not_object(expr.ast)
    if bad is not None:
        exc = CelCompileError(
            f"an ApplyConfiguration expression must evaluate to an Object{{...}} value; found {_describe(bad)}",
            expr.expression,
            bad.pos,
        )
        raise expr.relocate(exc)


def check_json_patch_shape(expr: PolicyExpression) -> None:
    """Reject JSONPatch expressions that cannot produce a list of ``JSONPatch{...}``."""
    node = expr.ast
    if isinstance(node, (StructLit, MapLit, Literal)):
        exc = CelCompileError(
            f"a JSONPatch expression must evaluate to a list of JSONPatch{{...}} values; found {_describe(node)}",
            expr.expression,
            node.pos,
        )
        raise expr.relocate(exc)
    if isinstance(node, ListLit):
        for element in node.elements:
            if isinstance(element, (StructLit, MapLit, Literal, ListLit)) and not (
                isinstance(element, StructLit) and element.type_name == "JSONPatch"
            ):
                exc = CelCompileError(
                    f"a JSONPatch expression's list must hold JSONPatch{{...}} values; found {_describe(element)}",
                    expr.expression,
                    element.pos,
                )
                raise expr.relocate(exc)


def _not_object(node: Node) -> Node | None:
    """The sub-expression that proves the result is not an Object, or None."""
    if isinstance(node, StructLit):
        return None if node.type_name.lstrip(".") == "Object" else node
    if isinstance(node, Call) and node.function == "_?_:_" and node.target is None:
        return _not_object(node.args[1]) or _not_object(node.args[2])
    if isinstance(node, Comprehension) and node.macro == "bind":
        return _not_object(node.args[0])
    if isinstance(node, Select) and isinstance(node.operand, Ident) and node.operand.name == "variables":
        return None  # checked at run time
    if isinstance(node, Call) and node.function == "dyn":
        return None
    return node


def _describe(node: Node) -> str:
    if isinstance(node, StructLit):
        return f"a {node.type_name}{{...}} value"
    if isinstance(node, MapLit):
        return "a map literal (write Object{...} instead of {...})"
    if isinstance(node, ListLit):
        return "a list"
    if isinstance(node, Literal):
        return f"the constant {node.value!r}"
    if isinstance(node, Ident):
        return f"the variable {node.name!r} (not an Object{{...}})"
    if isinstance(node, Select):
        return f"the field '{node.field}' (not an Object{{...}})"
    if isinstance(node, Call):
        return f"the result of '{node.function}'"
    return "an expression of another type"


def json_patch_operations(value: Any, expr: PolicyExpression) -> list[dict[str, Any]]:
    """Convert a JSONPatch expression's result into JSON patch operations."""
    if not isinstance(value, list):
        raise expr.error(f"a JSONPatch expression must return a list of JSONPatch; found {type_name(value)}")
    ops = []
    for i, item in enumerate(value):
        if type(item) is not ObjectValue or item.type_name != "JSONPatch":
            raise expr.error(f"element {i} of the JSONPatch list is a {type_name(item)}, not a JSONPatch{{...}}")
        op: dict[str, Any] = {}
        for key, field in item.items():
            if key == "value":
                try:
                    op["value"] = to_json(field)
                except EvalError as exc:
                    raise expr.error(f"JSONPatch {i}: value cannot be written to an object: {exc.message}") from None
            elif type(field) is not str:
                raise expr.error(f"JSONPatch {i}: {key!r} must be a string; found {type_name(field)}")
            else:
                op[key] = field
        if "op" not in op or "path" not in op:
            raise expr.error(f"JSONPatch {i} has no {'op' if 'op' not in op else 'path'!r}")
        ops.append(op)
    return ops


def apply_configuration_value(value: Any, expr: PolicyExpression) -> dict[str, Any]:
    """Convert an ApplyConfiguration expression's result into a plain patch object.

    Kubernetes also checks that nested message names match their place
    (``Object.spec{...}`` under ``spec``); both happen in one walk.
    """
    if type(value) is not ObjectValue or value.type_name != "Object":
        raise expr.error(f"an ApplyConfiguration expression must return an Object{{...}}; found {type_name(value)}")
    try:
        result = _object_to_json(value, "Object", expr)
    except EvalError as exc:
        raise expr.error(f"the Object cannot be written to an object: {exc.message}") from None
    return result


def _object_to_json(value: ObjectValue, expected: str, expr: PolicyExpression) -> dict[str, Any]:
    if value.type_name != expected:
        raise expr.error(f"type mismatch: {value.type_name}{{...}} is set where {expected}{{...}} belongs")
    out: dict[str, Any] = {}
    for key, child in value.items():
        tc = type(child)
        if tc is str or tc is int or tc is bool or child is None:
            out[key] = child
        elif tc is ObjectValue:
            out[key] = _object_to_json(child, f"{expected}.{key}", expr)
        elif tc is list:
            out[key] = [
                _object_to_json(item, f"{expected}.{key}", expr) if type(item) is ObjectValue else to_json(item)
                for item in child
            ]
        else:
            out[key] = to_json(child)
    return out
