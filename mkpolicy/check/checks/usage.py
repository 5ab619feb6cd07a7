"""How expressions use the policy's variables: MKP206-MKP210."""

from __future__ import annotations

from mkpolicy.cel import CelError
from mkpolicy.check.celpaths import accesses
from mkpolicy.check.checks.context import PolicyContext
from mkpolicy.check.sites import sites

#: Variables whose value differs from one object (or call) to the next.
_PER_CALL = frozenset({"object", "managerObject", "workerObject", "workload", "workloadName", "origin", "cluster"})


def check_constant_match_conditions(ctx: PolicyContext) -> None:
    """MKP206: a match condition that reads nothing that varies between objects."""
    for compiled in ctx.compiled:
        site = compiled.site
        if site.kind != "matchCondition":
            continue
        roots = {a.root for a in accesses(compiled.ast)}
        if roots & _PER_CALL or "variables" in roots:
            continue
        if roots:
            continue  # params only: a switch per deployment, on purpose
        try:
            value = compiled.expression.program.evaluate({})
        except CelError as exc:
            outcome = f"it always fails ({exc.message})"
        else:
            if value is True:
                outcome = "it is always true and has no effect"
            elif value is False:
                outcome = "it is always false: the policy never manages any object"
            else:
                outcome = f"it always returns {value!r}, not a bool"
        ctx.report(
            "MKP206",
            f"{site.where} reads neither the object nor the context: {outcome}",
            site.locate(0),
        )


def check_variables(ctx: PolicyContext) -> None:
    """MKP207 (unused variables) and MKP208 (references to undeclared variables)."""
    declared = {v.name: i for i, v in enumerate(ctx.policy.spec.variables)}
    used: set[str] = set()
    dynamic = False
    for compiled in ctx.compiled:
        site = compiled.site
        for access in accesses(compiled.ast):
            if access.root != "variables":
                continue
            if not access.path or access.path[0] is None:
                dynamic = True  # variables[expr] or the whole map: any variable may be used
                continue
            name = access.path[0]
            if not isinstance(name, str) or name not in declared:
                known = ", ".join(sorted(declared)) or "none are declared"
                ctx.report(
                    "MKP208",
                    f"{site.where}: variables.{name} is not declared in spec.variables (declared: {known})",
                    site.locate(access.positions[1]),
                )
                continue
            if site.kind == "variable" and site.name == name:
                continue  # a variable referring to itself does not make it used
            used.add(name)
    if dynamic:
        return
    compiled_paths = {c.site.path for c in ctx.compiled}
    failed = [site for site in sites(ctx.policy) if site.path not in compiled_paths]
    for name, index in declared.items():
        # Expressions that did not compile may use any variable whose name they mention;
        # a variable that does not compile already has its finding.
        if name in used or any(name in site.text or site.name == name for site in failed):
            continue
        ctx.report(
            "MKP207",
            f"variable {name!r} is never used: no expression reads variables.{name}",
            ctx.at(("spec", "variables", index, "name")),
        )


def check_phase_variables(ctx: PolicyContext) -> None:
    """MKP209 (workerObject read during creation) and MKP210 (params read but unset)."""
    params_unset = ctx.policy.spec.params is None
    for compiled in ctx.compiled:
        site = compiled.site
        reported_params = False
        for access in accesses(compiled.ast):
            if access.root == "workerObject" and site.kind in ("creation", "matchCondition"):
                phase = "creation" if site.kind == "creation" else "the managedBy decision"
                ctx.report(
                    "MKP209",
                    f"{site.where} reads workerObject, which is always null in {phase}; "
                    "read object or managerObject instead",
                    site.locate(access.positions[0]),
                )
            if access.root == "params" and params_unset and not reported_params:
                reported_params = True
                ctx.report(
                    "MKP210",
                    f"{site.where} reads params, but the policy sets no spec.params (params is null)",
                    site.locate(access.positions[0]),
                )
