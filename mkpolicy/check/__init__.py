"""The one checker: every lint rule over FrameworkPolicy files.

``mkpolicy lint`` reports what it finds (:func:`check_paths`); ``mkpolicy validate``,
``mkpolicy sidecar --check`` and the sidecar's policy loader (at start and on every hot
reload) load policies through :func:`load_checked`, which refuses every policy an
error-severity rule fires on, with the same ``file:line:col`` lines lint prints. What lint
calls an error is therefore exactly what the tools and the sidecar refuse.

Rules have stable IDs (:data:`RULES`), documented in ``docs/lint-rules.md``. A policy
silences rules for itself with the annotation ``lint.mkpolicy.io/disable``, except the
rules the engine itself enforces (:data:`ENFORCED`).

Names are imported lazily: the rule catalog (``mkpolicy lint --list-rules``) and the report
formats do not pay for the engine and the CEL compiler the checks import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_API = (
    "DISABLE_ANNOTATION",
    "ENFORCED",
    "Checked",
    "check",
    "check_loaded",
    "check_paths",
    "disabled_by",
    "load_checked",
)
_LAZY = {
    **dict.fromkeys(_API, "mkpolicy.check.api"),
    **dict.fromkeys(("CheckError", "Finding", "FindingError", "LintResult"), "mkpolicy.check.findings"),
    **dict.fromkeys(("RULES", "Rule"), "mkpolicy.check.rules"),
}

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


def __getattr__(name: str) -> Any:
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'mkpolicy.check' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
