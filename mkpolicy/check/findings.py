"""Findings of the checker (what lint reports) and the result of a run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mkpolicy.check.rules import RULES, Severity
from mkpolicy.errors import Location, PolicyError


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

    def report(self) -> str:
        """One line: ``file:line:col: severity RULE message`` (lint's text report, validate,
        ``sidecar --check`` and the sidecar's log all print this line)."""
        return f"{self.file}:{self.line}:{self.column}: {self.severity} {self.rule} {self.message}"


@dataclass
class LintResult:
    """Everything a lint run found.

    ``input_errors`` are paths that could not be read as policy input (exit code 2);
    ``files`` are the files that were read; ``suppressed`` counts findings silenced by
    ``--disable`` or a policy's ``lint.mkpolicy.io/disable`` annotation.
    """

    findings: list[Finding] = field(default_factory=list)
    input_errors: list[PolicyError] = field(default_factory=list)
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


class FindingError(PolicyError):
    """An error-severity finding, as an error: :meth:`report` prints the finding's line."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(f"{finding.rule} {finding.message}", Location(finding.file, finding.line, finding.column))
        self.finding = finding

    def report(self, severity: str = "error") -> str:
        """``file:line:col: error RULE message``, exactly as ``mkpolicy lint`` prints it."""
        return self.finding.report()


class CheckError(PolicyError):
    """Policies the checker refuses. ``problems`` are the unreadable inputs
    (:class:`~mkpolicy.errors.InputError`) and a :class:`FindingError` per error finding;
    ``stage`` is ``load`` when a document could not be read or validated, else ``compile``."""

    def __init__(self, problems: Sequence[PolicyError]) -> None:
        count = len(problems)
        super().__init__(f"{count} problem{'s' * (count != 1)} in the policies", problems[0].location, list(problems))
        document = any(not isinstance(p, FindingError) or p.finding.rule.startswith("MKP1") for p in problems)
        self.stage = "load" if document else "compile"

    def report(self, severity: str = "error") -> str:
        """Every problem, one line each."""
        return "\n".join(p.report() for p in self.problems)
