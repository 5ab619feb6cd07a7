"""MutatingAdmissionPolicy-style mutations without a FrameworkPolicy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from mkpolicy.cel import Environment
from mkpolicy.engine.apply import merge_schema
from mkpolicy.engine.expressions import Locator, PolicyExpression
from mkpolicy.engine.mutation import CompiledMutation, PatchType, too_deep
from mkpolicy.errors import PatchError
from mkpolicy.jsonvalues import copy_json
from mkpolicy.structural import Schema

#: Variables a standalone mutation can use (a subset of MutatingAdmissionPolicy's).
MUTATE_VARIABLES = frozenset({"object", "oldObject", "params"})


def mutate(
    obj: Mapping[str, Any],
    mutations: Sequence[Mapping[str, str]],
    schema: Mapping[str, Any] | None = None,
    params: Any = None,
    old: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Apply MutatingAdmissionPolicy mutations to ``obj`` exactly as Kubernetes does.

    Each mutation is ``{"patchType": "JSONPatch" | "ApplyConfiguration", "expression": CEL}``
    and sees ``object`` (the object after the previous mutations), ``oldObject`` (``old``:
    null on CREATE) and ``params``. ``schema`` is a CRD or an OpenAPI v3 schema guiding
    ApplyConfiguration merges (without one, lists are atomic and cannot be set).
    Returns a new dict; ``obj`` is not modified. Raises ``CelError`` or ``PatchError``.
    """
    structural = None
    if schema is not None:
        version = str(obj.get("apiVersion", "")).rsplit("/", 1)[-1] or None
        structural = Schema.from_document(dict(schema), version if schema.get("kind") else None)
    env = Environment.of(MUTATE_VARIABLES)
    compiled = []
    for i, m in enumerate(mutations):
        patch_type = m.get("patchType")
        if patch_type not in ("JSONPatch", "ApplyConfiguration"):
            raise PatchError(
                f"mutation #{i + 1}: patchType must be 'JSONPatch' or 'ApplyConfiguration'; found {patch_type!r}"
            )
        expression = m.get("expression")
        if not isinstance(expression, str):
            raise PatchError(f"mutation #{i + 1}: expression must be a string; found {expression!r}")
        where = f"mutation #{i + 1} ({patch_type})"
        expr = PolicyExpression(expression, (), where, Locator(), env)
        compiled.append(CompiledMutation(cast(PatchType, patch_type), expr))
    merge = merge_schema(structural)
    try:
        current = copy_json(dict(obj))
        for mutation in compiled:
            bindings = {"object": current, "oldObject": copy_json(dict(old)) if old is not None else None}
            current = mutation.apply(current, {**bindings, "params": params}, merge)
    except RecursionError:
        raise too_deep("mutate") from None
    return current  # type: ignore[no-any-return]
