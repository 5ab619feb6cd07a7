"""Authoring tools: lint rules and reports, policy test suites, scaffolding, explain, export.

``lint_paths(paths)`` lints policy files and returns a :class:`LintResult` of
:class:`Finding` values with stable rule IDs (:data:`RULES`, documented in
``docs/lint-rules.md``). Names are imported lazily: the rule catalog and the test runner
do not pay for the lint rules' imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mkpolicy.lint.api import DISABLE_ANNOTATION, lint_paths
    from mkpolicy.lint.findings import Finding, LintResult
    from mkpolicy.lint.rules import RULES, Rule

_LAZY = {
    "DISABLE_ANNOTATION": "mkpolicy.lint.api",
    "lint_paths": "mkpolicy.lint.api",
    "Finding": "mkpolicy.lint.findings",
    "LintResult": "mkpolicy.lint.findings",
    "RULES": "mkpolicy.lint.rules",
    "Rule": "mkpolicy.lint.rules",
}

__all__ = ["DISABLE_ANNOTATION", "RULES", "Finding", "LintResult", "Rule", "lint_paths"]


def __getattr__(name: str) -> Any:
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'mkpolicy.lint' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
