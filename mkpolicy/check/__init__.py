"""The one checker: every lint rule over FrameworkPolicy files.

``mkpolicy lint`` reports what it finds (:func:`check_paths`); ``mkpolicy validate``,
``mkpolicy sidecar --check`` and the sidecar's policy loader (at start and on every hot
reload) load policies through :func:`load_checked`, which refuses every policy an
error-severity rule fires on, with the same ``file:line:col`` lines lint prints. What lint
calls an error is therefore exactly what the tools and the sidecar refuse.

Rules have stable IDs (:data:`RULES`), documented in ``docs/lint-rules.md``. A policy
silences rules for itself with the annotation ``lint.mkpolicy.io/disable``, except the
rules the engine itself enforces (:data:`ENFORCED`).
"""

from mkpolicy.check.api import (
    DISABLE_ANNOTATION,
    ENFORCED,
    Checked,
    check,
    check_loaded,
    check_paths,
    disabled_by,
    load_checked,
)
from mkpolicy.check.findings import CheckError, Finding, FindingError, LintResult
from mkpolicy.check.rules import RULES, Rule

__all__ = [
    "DISABLE_ANNOTATION",
    "ENFORCED",
    "RULES",
    "CheckError",
    "Checked",
    "Finding",
    "FindingError",
    "LintResult",
    "Rule",
    "check",
    "check_loaded",
    "check_paths",
    "disabled_by",
    "load_checked",
]
