"""The lint rules over one validated policy, in a fixed order."""

from __future__ import annotations

from mkpolicy.check.checks.cel import check_compile
from mkpolicy.check.checks.context import PolicyContext
from mkpolicy.check.checks.integration import check_integration
from mkpolicy.check.checks.managed_by import check_managed_by_schema, check_stock_kueue
from mkpolicy.check.checks.metadata import check_metadata
from mkpolicy.check.checks.patches import check_patches
from mkpolicy.check.checks.podtemplate import check_pod_templates
from mkpolicy.check.checks.schema import SchemaCache, check_schema
from mkpolicy.check.checks.types import check_cost, check_has_required, check_types
from mkpolicy.check.checks.usage import check_constant_match_conditions, check_phase_variables, check_variables
from mkpolicy.check.checks.writes import check_writes
from mkpolicy.check.findings import Finding
from mkpolicy.engine import Adapter
from mkpolicy.policy import FrameworkPolicy


def check_policy(policy: FrameworkPolicy, cache: SchemaCache | None = None) -> tuple[list[Finding], Adapter | None]:
    """Every finding of the rules MKP107 and up for ``policy``, and its compiled adapter
    (None when the engine refuses to compile it)."""
    ctx = PolicyContext(policy)
    check_schema(ctx, cache if cache is not None else {})
    check_managed_by_schema(ctx)
    check_stock_kueue(ctx)
    check_compile(ctx)
    check_types(ctx)
    check_cost(ctx)
    check_has_required(ctx)
    check_constant_match_conditions(ctx)
    check_variables(ctx)
    check_phase_variables(ctx)
    check_patches(ctx)
    check_writes(ctx)
    check_metadata(ctx)
    check_pod_templates(ctx)
    check_integration(ctx)
    return ctx.findings, ctx.adapter


__all__ = ["PolicyContext", "SchemaCache", "check_policy"]
