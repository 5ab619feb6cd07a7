"""One compiled mutation (a JSONPatch or ApplyConfiguration expression) and its application."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from mkpolicy.engine.apply import MergeSchema, apply_configuration
from mkpolicy.engine.expressions import (
    PolicyExpression,
    apply_configuration_value,
    check_apply_configuration_shape,
    check_json_patch_shape,
    json_patch_operations,
)
from mkpolicy.engine.jsonpatch import apply_json_patch
from mkpolicy.errors import PatchError
from mkpolicy.structural import Schema

PatchType = Literal["JSONPatch", "ApplyConfiguration"]


class CompiledMutation:
    """A mutation ready to run: its expression is compiled and its shape checked."""

    __slots__ = ("expression", "patch_type")

    def __init__(self, patch_type: PatchType, expression: PolicyExpression) -> None:
        self.patch_type = patch_type
        self.expression = expression
        if patch_type == "JSONPatch":
            check_json_patch_shape(expression)
        else:
            check_apply_configuration_shape(expression)

    def apply(
        self, target: dict[str, Any], bindings: Mapping[str, Any], schema: Schema | MergeSchema | None
    ) -> dict[str, Any]:
        """Evaluate against ``bindings`` and apply to ``target`` (which is not modified)."""
        value = self.expression.evaluate(bindings)
        try:
            if self.patch_type == "JSONPatch":
                operations = json_patch_operations(value, self.expression)
                return apply_json_patch(target, operations) if operations else target
            return apply_configuration(target, apply_configuration_value(value, self.expression), schema)
        except PatchError as exc:
            if exc.location.file is not None or exc.location.where is not None:
                raise
            raise PatchError(exc.message, self.expression.location()) from None
