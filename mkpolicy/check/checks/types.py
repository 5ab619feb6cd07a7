"""Checks against the framework's schema: types (MKP204), cost (MKP205), has() (MKP211)."""

from __future__ import annotations

from mkpolicy.cel import PER_CALL_LIMIT, CelTypeError, typecheck
from mkpolicy.cel.ast import Select
from mkpolicy.cel.cost import UNBOUNDED, Estimator, LeastEstimator
from mkpolicy.check.celpaths import accesses
from mkpolicy.check.checks.context import SCHEMA_VARIABLES, Compiled, PolicyContext
from mkpolicy.engine.expressions import compile_type_errors
from mkpolicy.structural import Schema, is_absent

#: Fields every stored object has, whatever its schema says.
_ALWAYS_PRESENT = frozenset({"apiVersion", "kind", "metadata"})


def check_types(ctx: PolicyContext) -> None:
    """MKP202: the type errors Kubernetes' compiler reports (objects ``dyn``, homogeneous
    literals), which the engine refuses too; MKP204: type errors once objects are typed by
    the schema (``spec.schema``); MKP212: literals that mix types only the schema reveals.

    The expression is checked up to three times: as the engine compiles it (only when the
    engine refused the policy: otherwise it passed), with the schema's types and literals
    joining to ``dyn``, and with the schema's types and homogeneous literals (only with a
    schema: without one, that is the engine's check again).
    """
    schemas = ctx.schemas
    for compiled in ctx.compiled:
        site = compiled.site
        program = compiled.expression.program
        engine = [] if compiled.engine_checked else compile_type_errors(program)
        loose = ctx.types(compiled).errors
        strict = typecheck(program, schemas) if ctx.schema is not None else engine
        refused = {(e.offset or 0, e.message) for e in engine}
        hard = {(e.offset or 0, e.message) for e in loose}
        for error in sorted({(e.offset or 0, e.message): e for e in [*strict, *loose, *engine]}.values(), key=_order):
            key = (error.offset or 0, error.message)
            rule_id = "MKP202" if key in refused else "MKP204" if key in hard else "MKP212"
            ctx.report(rule_id, f"{site.where}: {error.message}", site.locate(error.offset))


def _order(error: CelTypeError) -> tuple[int, str]:
    return (error.offset or 0, error.message)


def check_cost(ctx: PolicyContext) -> None:
    """MKP205: a worst-case static cost above Kubernetes' per-call limit, or one the
    estimator cannot bound at all (it saturates: the most expensive expressions);
    MKP213 instead when even the least cost, on the smallest input, is over it."""
    for compiled in ctx.compiled:
        site = compiled.site
        # estimate_cost() would type-check again: the estimator reads the shared check.
        cost = Estimator(ctx.types(compiled)).cost(compiled.ast)
        if cost <= PER_CALL_LIMIT:
            continue
        least = LeastEstimator(ctx.types(compiled)).cost(compiled.ast)
        if least > PER_CALL_LIMIT:
            ctx.report(
                "MKP213",
                f"{site.where}: costs at least {least:,} on any object, over the per-call limit "
                f"{PER_CALL_LIMIT:,}: every evaluation fails with a cost error (iterate over less: a smaller "
                "range or list literal, or the object's own fields)",
                site.locate(0),
            )
            continue
        bound = "the schema's maxItems/maxProperties/maxLength" if ctx.schema else "a schema with size limits"
        worst = (
            "has no bound: the estimate saturates (sizes multiply past 2^64 units)"
            if cost >= UNBOUNDED
            else f"{cost:,}"
        )
        ctx.report(
            "MKP205",
            f"{site.where}: worst-case cost {worst}, over the per-call limit {PER_CALL_LIMIT:,}; "
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
