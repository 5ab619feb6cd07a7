"""Check policy files: :func:`check_paths` (every finding) and :func:`load_checked` (adapters,
or :class:`CheckError` when any error-severity rule fires)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from mkpolicy.check.checks import SchemaCache, check_policy
from mkpolicy.check.documents import collect
from mkpolicy.check.findings import CheckError, Finding, FindingError, LintResult
from mkpolicy.engine import Adapter
from mkpolicy.errors import PolicyError
from mkpolicy.policy import FrameworkPolicy

#: Policy annotation listing rule IDs to silence for that policy (comma or space separated).
DISABLE_ANNOTATION = "lint.mkpolicy.io/disable"

#: Rules a policy cannot silence with its annotation: the document rules (they fire before
#: a policy exists) and what the engine itself refuses to compile.
ENFORCED = frozenset(
    {"MKP101", "MKP102", "MKP103", "MKP104", "MKP105", "MKP106", "MKP107", "MKP108", "MKP201", "MKP202", "MKP203"}
)


@dataclass
class Checked:
    """A check run: its :class:`LintResult` and the compiled adapter of every policy that
    has no error finding (in the order the policies were read)."""

    result: LintResult
    adapters: list[Adapter] = field(default_factory=list)


def check_paths(paths: Iterable[str], disable: Collection[str] = ()) -> LintResult:
    """Every finding for the policies under ``paths``; rules in ``disable`` are not reported.

    Never raises for problems in the input: unreadable paths are ``input_errors``,
    everything else is a :class:`Finding`.
    """
    return check(paths, disable).result


def check(paths: Iterable[str], disable: Collection[str] = ()) -> Checked:
    """Read, check and compile the policies under ``paths``.

    ``disable`` hides rules from the report (``mkpolicy lint --disable``); it does not
    make a policy with errors compile.
    """
    collected = collect(paths)
    result = LintResult(input_errors=collected.input_errors, files=collected.files, policies=len(collected.policies))
    checked = Checked(result)
    findings = list(collected.findings)
    cache: SchemaCache = {}
    for policy in collected.policies:
        kept, suppressed, adapter = check_loaded(policy, cache)
        result.suppressed += suppressed
        findings.extend(kept)
        if adapter is not None and not any(f.severity == "error" for f in kept):
            checked.adapters.append(adapter)
    shown = [f for f in findings if f.rule not in disable]
    result.suppressed += len(findings) - len(shown)
    result.findings = sorted(set(shown), key=_order)
    return checked


def check_loaded(
    policy: FrameworkPolicy, cache: SchemaCache | None = None
) -> tuple[list[Finding], int, Adapter | None]:
    """Check one policy already loaded (its document rules passed): the findings its
    ``lint.mkpolicy.io/disable`` annotation leaves, in report order; how many the annotation
    silenced; and the engine's adapter, None only when the engine refuses the policy (a
    policy with error findings has one too: the caller decides whether to run it)."""
    silenced = disabled_by(policy) - ENFORCED
    own, adapter = check_policy(policy, cache)
    kept = [f for f in own if f.rule not in silenced]
    return sorted(set(kept), key=_order), len(own) - len(kept), adapter


def load_checked(paths: Iterable[str]) -> list[Adapter]:
    """The compiled adapters of the policies under ``paths``, all or none.

    Raises :class:`CheckError` listing every unreadable input and every error finding
    (lint's rules, unsilenced by ``--disable``): what ``mkpolicy lint`` reports as an
    error, ``mkpolicy validate``, ``mkpolicy sidecar --check`` and the sidecar refuse.
    """
    run = check(paths)
    problems: list[PolicyError] = list(run.result.input_errors)
    problems += [FindingError(f) for f in run.result.findings if f.severity == "error"]
    if problems:
        raise CheckError(problems)
    return run.adapters


def disabled_by(policy: FrameworkPolicy) -> set[str]:
    """The rule IDs a policy silences with its ``lint.mkpolicy.io/disable`` annotation."""
    value = policy.metadata.annotations.get(DISABLE_ANNOTATION, "")
    return {token.strip().upper() for token in value.replace(",", " ").split() if token.strip()}


def _order(finding: Finding) -> tuple[str, int, int, str, str]:
    return (finding.file, finding.line, finding.column, finding.rule, finding.message)
