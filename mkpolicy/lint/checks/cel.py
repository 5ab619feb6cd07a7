"""CEL checks: syntax (MKP201), compilation (MKP202) and patch result types (MKP203)."""

from __future__ import annotations

from mkpolicy.cel import CelSyntaxError, Environment
from mkpolicy.engine.expressions import POLICY_VARIABLES, Locator, PolicyExpression
from mkpolicy.engine.mutation import CompiledMutation
from mkpolicy.errors import CelError
from mkpolicy.lint.checks.context import Compiled, PolicyContext
from mkpolicy.lint.sites import sites


def check_compile(ctx: PolicyContext) -> None:
    """Compile every expression as the engine does; keep the ones that compile."""
    env = Environment.of(POLICY_VARIABLES)
    locator = Locator(ctx.policy)
    for site in sites(ctx.policy):
        where = f"policy {ctx.policy.name}: {site.where}"
        try:
            expression = PolicyExpression(site.text, site.path, where, locator, env)
        except CelError as exc:
            rule_id = "MKP201" if isinstance(exc, CelSyntaxError) else "MKP202"
            ctx.report(rule_id, f"{site.where}: {exc.message}", exc.location)
            continue
        if site.patch_type is not None:
            try:
                CompiledMutation(site.patch_type, expression)
            except CelError as exc:
                ctx.report("MKP203", f"{site.where}: {exc.message}", exc.location)
                continue
        ctx.compiled.append(Compiled(site, expression))
