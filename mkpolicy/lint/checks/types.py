"""Checks against the framework's schema: types (MKP204), cost (MKP205), has() (MKP211)."""

from __future__ import annotations

from mkpolicy.cel import PER_CALL_LIMIT, CelTypeError, estimate_cost, typecheck
from mkpolicy.cel.ast import Select
from mkpolicy.cel.checker import check, schema_variables
from mkpolicy.lint.celpaths import accesses
from mkpolicy.lint.checks.context import Compiled, PolicyContext
from mkpolicy.structural import Schema, is_absent

#: Variables that hold an object of the framework's kind (typed by its schema).
SCHEMA_VARIABLES = ("object", "managerObject", "workerObject")
#: Fields every stored object has, whatever its schema says.
_ALWAYS_PRESENT = frozenset({"apiVersion", "kind", "metadata"})
#: The estimator's cap: the cost of an expression whose sizes it cannot bound.
_UNBOUNDED = 2**64 - 1


def _schemas(ctx: PolicyContext) -> dict[str, Schema | None]:
    return {name: ctx.schema for name in SCHEMA_VARIABLES}


def check_types(ctx: PolicyContext) -> None:
    """MKP204: type errors, with objects typed by the schema when ``spec.schema`` is set;
    MKP212: literals mixing types (an error only under Kubernetes' homogeneous-literal rule).

    The expression is checked twice: as Kubernetes checks it (homogeneous literals) and
    with literals joining to ``dyn``; errors of the second check are MKP204, errors only
    the first check finds are MKP212.
    """
    schemas = _schemas(ctx)
    variables = schema_variables(schemas)
    for compiled in ctx.compiled:
        site = compiled.site
        program = compiled.expression.program
        loose = check(program, variables, homogeneous_literals=False, object_schema=schemas.get("object")).errors
        hard = {(e.offset, e.message) for e in loose}
        strict = typecheck(program, schemas)
        for error in sorted({(e.offset or 0, e.message): e for e in [*strict, *loose]}.values(), key=_order):
            rule_id = "MKP204" if (error.offset, error.message) in hard else "MKP212"
            ctx.report(rule_id, f"{site.where}: {error.message}", site.locate(error.offset))


def _order(error: CelTypeError) -> tuple[int, str]:
    return (error.offset or 0, error.message)


def check_cost(ctx: PolicyContext) -> None:
    """MKP205: worst-case static cost above Kubernetes' per-call limit."""
    schemas = _schemas(ctx)
    for compiled in ctx.compiled:
        site = compiled.site
        cost = estimate_cost(compiled.expression.program, schemas)
        if PER_CALL_LIMIT < cost < _UNBOUNDED:
            bound = "the schema's maxItems/maxProperties/maxLength" if ctx.schema else "a schema with size limits"
            ctx.report(
                "MKP205",
                f"{site.where}: worst-case cost {cost:,} exceeds the per-call limit {PER_CALL_LIMIT:,}; "
                f"evaluation on large objects fails with a cost error (bound sizes with {bound}, "
                "or iterate over less)",
                site.locate(0),
            )


def check_has_required(ctx: PolicyContext) -> None:
    """MKP211: ``has(x.f)`` where the schema requires ``f`` in ``x``."""
    if ctx.schema is None:
        return
    for compiled in ctx.compiled:
        _has_required(ctx, compiled)


def _has_required(ctx: PolicyContext, compiled: Compiled) -> None:
    assert ctx.schema is not None
    site = compiled.site
    tests = {node.pos for node in compiled.ast.walk() if isinstance(node, Select) and node.test_only}
    for access in accesses(compiled.ast):
        if not access.test or access.pos not in tests or access.root not in SCHEMA_VARIABLES:
            continue
        schema: Schema = ctx.schema
        parent_required: list[str] = []
        for seg in access.path:
            if not isinstance(seg, str) or not schema.known or schema.type != "object":
                break
            parent_required = [str(r) for r in (schema.node or {}).get("required") or []]
            child = schema.field(seg)
            if is_absent(child):
                break
            schema = child
        else:
            last = access.path[-1] if access.path else None
            if isinstance(last, str) and (
                last in parent_required or (len(access.path) == 1 and last in _ALWAYS_PRESENT)
            ):
                ctx.report(
                    "MKP211",
                    f"{site.where}: has({access.render()}) is never false: the schema requires {last!r}; "
                    "drop the has() test or test an optional field",
                    site.locate(access.pos),
                )
