"""What every check sees: the policy, its schema and its compiled expressions."""

from __future__ import annotations

from dataclasses import dataclass, field

from mkpolicy.cel.ast import Node
from mkpolicy.cel.checker import CheckResult, check, schema_variables
from mkpolicy.check.findings import Finding
from mkpolicy.check.sites import Site
from mkpolicy.engine import Adapter
from mkpolicy.engine.expressions import PolicyExpression
from mkpolicy.errors import Location
from mkpolicy.policy import FrameworkPolicy
from mkpolicy.policy.source import Path
from mkpolicy.structural import Schema

#: Variables that hold an object of the framework's kind (typed by its schema).
SCHEMA_VARIABLES = ("object", "managerObject", "workerObject")


@dataclass
class Compiled:
    """A site whose expression compiled (its AST is available to the rules)."""

    site: Site
    expression: PolicyExpression
    #: Compiled by the engine, type check included (so it has no engine-level type error).
    engine_checked: bool = True
    #: The type check with objects typed by the schema (see :meth:`PolicyContext.types`).
    typed: CheckResult | None = None

    @property
    def ast(self) -> Node:
        """The expression's syntax tree."""
        return self.expression.ast


@dataclass
class PolicyContext:
    """One policy under lint; checks append findings with :meth:`report`."""

    policy: FrameworkPolicy
    schema: Schema | None = None
    #: The policy as the engine compiles it; None when the engine refuses it.
    adapter: Adapter | None = None
    compiled: list[Compiled] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def schemas(self) -> dict[str, Schema | None]:
        """The schema of each variable holding an object of the framework's kind."""
        return {name: self.schema for name in SCHEMA_VARIABLES}

    def types(self, compiled: Compiled) -> CheckResult:
        """The type check of ``compiled`` with objects typed by the schema and literals
        joining to ``dyn`` (computed once, shared by the rules)."""
        if compiled.typed is None:
            schemas = self.schemas
            compiled.typed = check(
                compiled.expression.program,
                schema_variables(schemas),
                homogeneous_literals=False,
                object_schema=schemas["object"],
            )
        return compiled.typed

    def report(self, rule_id: str, message: str, location: Location) -> None:
        """Record a finding of ``rule_id`` at ``location``."""
        self.findings.append(Finding.at(rule_id, message, location, self.policy.name))

    def at(self, path: Path, key: bool = False) -> Location:
        """The location of a document path (its key with ``key=True``)."""
        source = self.policy.source
        if source is None:
            return Location()
        return source.location(path, key=key)
