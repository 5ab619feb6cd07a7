"""One compiled mutation (a JSONPatch or ApplyConfiguration expression) and its application."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Literal

import jsonpointer

from mkpolicy.cel.convert import to_json
from mkpolicy.cel.errors import CelExpressionError, EvalError
from mkpolicy.cel.values import ObjectValue
from mkpolicy.engine.apply import MergeSchema, apply_configuration
from mkpolicy.engine.expressions import (
    PolicyExpression,
    apply_configuration_value,
    check_apply_configuration_shape,
    check_json_patch_shape,
    json_patch_operations,
)
from mkpolicy.engine.jsonpatch import WRITERS, Step, apply_json_patch, apply_steps, pointer_parts
from mkpolicy.errors import Location, PatchError
from mkpolicy.structural import Schema

PatchType = Literal["JSONPatch", "ApplyConfiguration"]


def too_deep(where: str) -> PatchError:
    """The error for an object nested deeper than the engine's recursion can follow."""
    # Kubernetes objects nest a few dozen levels; hundreds mean hostile or broken input.
    # Catching RecursionError at the entry points costs nothing on the common path,
    # unlike measuring every object's depth first.
    return PatchError(
        "expected an object nested at most a few hundred levels deep; found deeper nesting than "
        f"Python's recursion limit ({sys.getrecursionlimit()}) lets the engine follow",
        Location(where=where),
    )


_LEAVES = frozenset({str, int, bool, type(None)})


class CompiledMutation:
    """A mutation ready to run: its expression is compiled and its shape checked."""

    __slots__ = ("expression", "json_patch", "patch_type")

    def __init__(self, patch_type: PatchType, expression: PolicyExpression) -> None:
        self.patch_type = patch_type
        self.expression = expression
        self.json_patch = patch_type == "JSONPatch"
        if self.json_patch:
            check_json_patch_shape(expression)
        else:
            check_apply_configuration_shape(expression)

    def apply(
        self, target: dict[str, Any], bindings: Mapping[str, Any], schema: Schema | MergeSchema | None
    ) -> dict[str, Any]:
        """Evaluate against ``bindings`` and apply to ``target`` (which is not modified)."""
        expression = self.expression
        try:
            value = expression.program.evaluate(bindings)
        except CelExpressionError as exc:
            raise expression.relocate(exc) from None
        try:
            if self.json_patch:
                if type(value) is list:
                    if not value:
                        return target
                    steps = _steps(value)
                    if steps is not None:
                        return apply_steps(target, steps)
                operations = json_patch_operations(value, expression)
                return apply_json_patch(target, operations) if operations else target
            return apply_configuration(target, apply_configuration_value(value, expression), schema)
        except PatchError as exc:
            if exc.location.file is not None or exc.location.where is not None:
                raise
            raise PatchError(exc.message, expression.location()) from None


def _steps(value: list[Any]) -> list[Step] | None:
    """The steps of a JSONPatch result made only of well-formed add, remove and replace
    operations (nearly all of them), checked and converted in one pass; None for
    anything else, which :func:`json_patch_operations` and :func:`apply_json_patch`
    then handle (and report, with the same errors in the same order)."""
    steps: list[Step] = []
    for item in value:
        if type(item) is not ObjectValue or item.type_name != "JSONPatch" or "from" in item:
            return None
        kind = item.get("op")
        path = item.get("path")
        if type(kind) is not str or type(path) is not str or path[:1] != "/":
            return None
        at = WRITERS.get(kind)
        if at is None:
            return None
        field = item.get("value")  # absent: null, as Kubernetes stores it
        if type(field) not in _LEAVES:
            try:
                field = to_json(field)
            except EvalError:
                return None
        try:
            parts = pointer_parts(path)
        except jsonpointer.JsonPointerException:
            return None
        steps.append((at, parts, path, kind, field))
    return steps
