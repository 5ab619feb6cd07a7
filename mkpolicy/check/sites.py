"""Every CEL expression of a policy, with where it lives in the document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mkpolicy.engine.expressions import POLICY_VARIABLES
from mkpolicy.engine.integration import INTEGRATION_VARIABLES, integration_sites
from mkpolicy.errors import Location
from mkpolicy.policy import FrameworkPolicy, JSONPatchMutation
from mkpolicy.policy.source import Path

SiteKind = Literal["matchCondition", "variable", "creation", "sync", "integration"]


@dataclass(frozen=True)
class Site:
    """One expression: its kind, index, name (match conditions and variables) or patch type."""

    policy: FrameworkPolicy
    kind: SiteKind
    index: int
    text: str
    path: Path
    name: str | None = None
    patch_type: Literal["JSONPatch", "ApplyConfiguration"] | None = None
    #: For ``integration`` sites: the method (``podSets``, ``inject``...).
    method: str | None = None

    @property
    def where(self) -> str:
        """A human description: ``creation patch #2 (JSONPatch)``, ``variable 'sa'``..."""
        if self.kind == "matchCondition":
            return f"match condition {self.name!r}"
        if self.kind == "variable":
            return f"variable {self.name!r}"
        if self.kind == "integration":
            if self.patch_type is None:
                return f"integration.{self.method}"
            return f"integration.{self.method} patch #{self.index + 1} ({self.patch_type})"
        return f"{self.kind} patch #{self.index + 1} ({self.patch_type})"

    @property
    def variables(self) -> frozenset[str]:
        """The CEL variables the expression may use."""
        return INTEGRATION_VARIABLES if self.kind == "integration" else POLICY_VARIABLES

    def locate(self, offset: int | None = None) -> Location:
        """The file location of ``offset`` in the expression (its start by default)."""
        return self.policy.locate(self.path, value=self.text, offset=offset if offset is not None else 0)


def sites(policy: FrameworkPolicy) -> list[Site]:
    """The policy's expressions in document order."""
    spec = policy.spec
    out = [
        Site(policy, "matchCondition", i, mc.expression, ("spec", "matchConditions", i, "expression"), mc.name)
        for i, mc in enumerate(spec.match_conditions)
    ]
    out += [
        Site(policy, "variable", i, v.expression, ("spec", "variables", i, "expression"), v.name)
        for i, v in enumerate(spec.variables)
    ]
    for phase, patches in (("creation", spec.creation.patches), ("sync", spec.sync.patches)):
        for i, patch in enumerate(patches):
            if isinstance(patch, JSONPatchMutation):
                text, field = patch.json_patch.expression, "jsonPatch"
            else:
                text, field = patch.apply_configuration.expression, "applyConfiguration"
            kind: SiteKind = "creation" if phase == "creation" else "sync"
            out.append(
                Site(policy, kind, i, text, ("spec", phase, "patches", i, field, "expression"), None, patch.type)
            )
    if spec.integration is not None:
        for method, index, text, path, patch_type in integration_sites(spec.integration):
            out.append(
                Site(policy, "integration", index or 0, text, path, None, patch_type, method)  # type: ignore[arg-type]
            )
    return out
