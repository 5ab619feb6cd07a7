"""Lint findings and the result of a lint run."""

from __future__ import annotations

from dataclasses import dataclass, field

from mkpolicy.errors import Location, MkpolicyError
from mkpolicy.lint.rules import RULES, Severity


@dataclass(frozen=True, order=True)
class Finding:
    """One problem a rule found, at a position in a file (1-based line and column)."""

    file: str
    line: int
    column: int
    rule: str
    message: str
    severity: Severity = "error"
    policy: str | None = None

    @classmethod
    def at(cls, rule_id: str, message: str, location: Location, policy: str | None = None) -> Finding:
        """A finding of rule ``rule_id`` (with its default severity) at ``location``."""
        return cls(
            file=location.file or "<unknown>",
            line=location.line or 1,
            column=location.column or 1,
            rule=rule_id,
            message=message,
            severity=RULES[rule_id].severity,
            policy=policy,
        )

    @property
    def name(self) -> str:
        """The rule's name (``yaml-syntax``...)."""
        return RULES[self.rule].name


@dataclass
class LintResult:
    """Everything a lint run found.

    ``input_errors`` are paths that could not be read as policy input (exit code 2);
    ``files`` are the files that were read; ``suppressed`` counts findings silenced by
    ``--disable`` or a policy's ``lint.mkpolicy.io/disable`` annotation.
    """

    findings: list[Finding] = field(default_factory=list)
    input_errors: list[MkpolicyError] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    policies: int = 0
    suppressed: int = 0

    def count(self, severity: Severity) -> int:
        """How many findings have ``severity``."""
        return sum(1 for f in self.findings if f.severity == severity)

    def fails(self, fail_on: Severity) -> bool:
        """True when a finding is at least as severe as ``fail_on``."""
        if fail_on == "warning":
            return bool(self.findings)
        return self.count("error") > 0
