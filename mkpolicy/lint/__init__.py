"""Authoring tools: lint rules and reports, policy test suites, scaffolding, explain, export.

``lint_paths(paths)`` lints policy files and returns a :class:`LintResult` of
:class:`Finding` values with stable rule IDs (:data:`RULES`, documented in
``docs/lint-rules.md``).
"""

from mkpolicy.lint.api import DISABLE_ANNOTATION, lint_paths
from mkpolicy.lint.findings import Finding, LintResult
from mkpolicy.lint.rules import RULES, Rule

__all__ = ["DISABLE_ANNOTATION", "RULES", "Finding", "LintResult", "Rule", "lint_paths"]
