"""Shared helpers of the CLI commands: reading objects, printing results and errors."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from mkpolicy.errors import InputError, MkpolicyError

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def error(message: object, stream: TextIO | None = None) -> None:
    """Print an error line to stderr."""
    print(f"error: {message}", file=stream or sys.stderr)


def exit_code_for(exc: MkpolicyError) -> int:
    """2 for unreadable input, 1 for everything a policy author must fix."""
    problems = getattr(exc, "problems", [exc])
    return EXIT_USAGE if any(isinstance(p, InputError) for p in problems) else EXIT_FINDINGS


def report_policy_error(exc: MkpolicyError, stream: TextIO | None = None) -> int:
    """Print every problem of ``exc`` (one line each) and return the exit code it deserves."""
    for problem in getattr(exc, "problems", [exc]):
        print(problem.report(), file=stream or sys.stderr)
    return exit_code_for(exc)


def dump(value: Any, fmt: str) -> str:
    """Format ``value`` as ``yaml`` or ``json``."""
    if fmt == "json":
        return json.dumps(value, indent=2, sort_keys=False) + "\n"
    import yaml

    return str(yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True))
