"""Every CEL expression of a policy, with where it lives in the document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mkpolicy.errors import Location
from mkpolicy.policy import FrameworkPolicy, JSONPatchMutation
from mkpolicy.policy.source import Path

SiteKind = Literal["matchCondition", "variable", "creation", "sync"]


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

    @property
    def where(self) -> str:
        """A human description: ``creation patch #2 (JSONPatch)``, ``variable 'sa'``..."""
        if self.kind == "matchCondition":
            return f"match condition {self.name!r}"
        if self.kind == "variable":
            return f"variable {self.name!r}"
        return f"{self.kind} patch #{self.index + 1} ({self.patch_type})"

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
    return out
