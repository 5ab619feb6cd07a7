"""CEL checks: syntax (MKP201), compilation (MKP202) and patch result types (MKP203).

The policy is compiled exactly as the engine compiles it (:class:`~mkpolicy.engine.Adapter`);
the other rules then read the engine's own compiled expressions. Only when the engine
refuses the policy is every expression compiled on its own, so that one run reports
every broken expression, not just the first.
"""

from __future__ import annotations

from mkpolicy.cel import CelSyntaxError, Environment
from mkpolicy.check.checks.context import Compiled, PolicyContext
from mkpolicy.check.sites import sites
from mkpolicy.engine import Adapter
from mkpolicy.engine.expressions import POLICY_VARIABLES, Locator, PolicyExpression
from mkpolicy.engine.integration import INTEGRATION_VARIABLES
from mkpolicy.engine.mutation import CompiledMutation
from mkpolicy.errors import CelError, MkpolicyError


def check_compile(ctx: PolicyContext) -> None:
    """Compile the policy as the engine does; keep the expressions that compile."""
    try:
        ctx.adapter = Adapter(ctx.policy, ctx.schema)
    except CelError:
        _compile_each(ctx)
        return
    except MkpolicyError as exc:  # not an expression's fault: say so, the policy cannot run
        ctx.report("MKP202", f"the engine refuses the policy: {exc.message}", exc.location)
        return
    by_path = {expression.path: expression for expression in ctx.adapter.expressions()}
    ctx.compiled = [Compiled(site, by_path[site.path]) for site in sites(ctx.policy)]


def _compile_each(ctx: PolicyContext) -> None:
    envs = {names: Environment.of(names) for names in (POLICY_VARIABLES, INTEGRATION_VARIABLES)}
    locator = Locator(ctx.policy)
    for site in sites(ctx.policy):
        where = f"policy {ctx.policy.name}: {site.where}"
        try:
            # Type errors are left to check_types, which reports them all.
            expression = PolicyExpression(site.text, site.path, where, locator, envs[site.variables], typecheck=False)
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
        ctx.compiled.append(Compiled(site, expression, engine_checked=False))
