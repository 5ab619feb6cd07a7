"""Shared helpers of the CLI commands: reading objects, printing results and errors."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from mkpolicy.errors import InputError, Location, MkpolicyError

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


def read_object(path: str) -> dict[str, Any]:
    """Read one Kubernetes object from a YAML or JSON file ("-" for stdin)."""
    import yaml

    try:
        if path == "-":
            text = sys.stdin.read()
            name = "<stdin>"
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            name = path
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read object: {getattr(exc, 'strerror', None) or exc}", Location(path)) from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        loc = Location(name, mark.line + 1, mark.column + 1) if mark is not None else Location(name)
        raise InputError(f"malformed YAML: {exc.problem}", loc) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", Location(name)) from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        found = f"{len(docs)} documents" if len(docs) != 1 else f"a {type(docs[0]).__name__}"
        raise InputError(f"expected exactly one Kubernetes object (a mapping); found {found}", Location(name))
    # Round-trip through JSON: YAML timestamps and the like become plain strings.
    obj: dict[str, Any] = json.loads(json.dumps(docs[0], default=str))
    return obj


def dump(value: Any, fmt: str) -> str:
    """Format ``value`` as ``yaml`` or ``json``."""
    if fmt == "json":
        return json.dumps(value, indent=2, sort_keys=False) + "\n"
    import yaml

    return str(yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True))
