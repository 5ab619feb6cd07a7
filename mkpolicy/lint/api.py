"""Lint policy files: :func:`lint_paths`."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from mkpolicy.lint.checks import SchemaCache, check_policy
from mkpolicy.lint.documents import collect
from mkpolicy.lint.findings import Finding, LintResult
from mkpolicy.policy import FrameworkPolicy

#: Policy annotation listing rule IDs to silence for that policy (comma or space separated).
DISABLE_ANNOTATION = "lint.mkpolicy.io/disable"


def lint_paths(paths: Iterable[str], disable: Collection[str] = ()) -> LintResult:
    """Lint the policies under ``paths``; rules in ``disable`` are not reported.

    Never raises for problems in the input: unreadable paths are ``input_errors``,
    everything else is a :class:`Finding`.
    """
    collected = collect(paths)
    result = LintResult(input_errors=collected.input_errors, files=collected.files, policies=len(collected.policies))
    findings = list(collected.findings)
    cache: SchemaCache = {}
    for policy in collected.policies:
        silenced = disabled_by(policy)
        for finding in check_policy(policy, cache):
            if finding.rule in silenced:
                result.suppressed += 1
            else:
                findings.append(finding)
    kept = [f for f in findings if f.rule not in disable]
    result.suppressed += len(findings) - len(kept)
    result.findings = sorted(set(kept), key=_order)
    return result


def disabled_by(policy: FrameworkPolicy) -> set[str]:
    """The rule IDs a policy silences with its ``lint.mkpolicy.io/disable`` annotation."""
    value = policy.metadata.annotations.get(DISABLE_ANNOTATION, "")
    return {token.strip().upper() for token in value.replace(",", " ").split() if token.strip()}


def _order(finding: Finding) -> tuple[str, int, int, str, str]:
    return (finding.file, finding.line, finding.column, finding.rule, finding.message)
