"""Lint reports: ``text``, ``json``, ``sarif`` (2.1.0) and ``github`` (workflow commands).

Every formatter takes a :class:`LintResult` and returns the whole report as a string,
so the CLI prints it in one write and tests compare it whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from mkpolicy.check.findings import LintResult
from mkpolicy.check.rules import RULES
from mkpolicy.errors import MkpolicyError

TOOL_NAME = "mkpolicy"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
JSON_REPORT_VERSION = 1


def _version() -> str:
    from mkpolicy import __version__

    return __version__


def summary(result: LintResult) -> str:
    """``2 errors, 1 warning in 3 files (4 policies)``, plus suppressed findings if any."""
    errors, warnings = result.count("error"), result.count("warning")
    text = (
        f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)} "
        f"in {len(result.files)} file{'s' * (len(result.files) != 1)} "
        f"({result.policies} polic{'ies' if result.policies != 1 else 'y'})"
    )
    if result.suppressed:
        text += f"; {result.suppressed} suppressed"
    return text


def format_text(result: LintResult) -> str:
    """One line per finding: ``file:line:col: severity RULE message``."""
    return "".join(f.report() + "\n" for f in result.findings)


def _input_error(exc: MkpolicyError) -> dict[str, Any]:
    loc = exc.location
    return {"file": loc.file, "line": loc.line, "column": loc.column, "message": exc.message}


def format_json(result: LintResult) -> str:
    """A JSON document: findings, input errors and counts."""
    document = {
        "version": JSON_REPORT_VERSION,
        "tool": {"name": TOOL_NAME, "version": _version()},
        "findings": [
            {
                "file": f.file,
                "line": f.line,
                "column": f.column,
                "severity": f.severity,
                "rule": f.rule,
                "name": f.name,
                "message": f.message,
                "policy": f.policy,
            }
            for f in result.findings
        ],
        "inputErrors": [_input_error(e) for e in result.input_errors],
        "summary": {
            "errors": result.count("error"),
            "warnings": result.count("warning"),
            "files": len(result.files),
            "policies": result.policies,
            "suppressed": result.suppressed,
        },
    }
    return json.dumps(document, indent=2) + "\n"


def artifact_uri(path: str) -> str:
    """A SARIF artifact URI: relative paths stay relative (to the checkout), with '/'."""
    if os.path.isabs(path):
        from pathlib import Path

        return Path(path).as_uri()
    from urllib.parse import quote

    return quote(path.replace(os.sep, "/"))


def format_sarif(result: LintResult) -> str:
    """A SARIF 2.1.0 log with one run; every rule of the catalog is listed."""
    index = {rule_id: i for i, rule_id in enumerate(RULES)}
    rules = [
        {
            "id": rule.id,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "help": {"text": f"{rule.summary} See docs/lint-rules.md, section {rule.id} {rule.name}."},
            "defaultConfiguration": {"level": rule.severity},
        }
        for rule in RULES.values()
    ]
    results = [
        {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": f.severity,
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact(f.file),
                        "region": {"startLine": f.line, "startColumn": f.column},
                    }
                }
            ],
            **({"properties": {"policy": f.policy}} if f.policy else {}),
        }
        for f in result.findings
    ]
    notifications = [
        {
            "level": "error",
            "message": {"text": e.message},
            **(
                {"locations": [{"physicalLocation": {"artifactLocation": _artifact(e.location.file)}}]}
                if e.location.file
                else {}
            ),
        }
        for e in result.input_errors
    ]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "version": _version(),
                "rules": rules,
            }
        },
        "invocations": [
            {
                "executionSuccessful": not result.input_errors,
                **({"toolExecutionNotifications": notifications} if notifications else {}),
            }
        ],
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2) + "\n"


def _artifact(path: str) -> dict[str, Any]:
    # Relative URIs resolve against the checkout (GitHub code scanning does exactly that).
    return {"uri": artifact_uri(path)}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(result: LintResult) -> str:
    """GitHub Actions workflow commands: one ``::error``/``::warning`` annotation per finding."""
    lines = []
    for f in result.findings:
        title = _escape_property(f"{f.rule} {f.name}")
        lines.append(
            f"::{f.severity} file={_escape_property(f.file)},line={f.line},col={f.column},title={title}"
            f"::{_escape_data(f.message)}"
        )
    for e in result.input_errors:
        where = f"file={_escape_property(e.location.file)}::" if e.location.file else "::"
        lines.append(f"::error {where}{_escape_data(e.message)}")
    return "".join(line + "\n" for line in lines)


FORMATTERS: dict[str, Callable[[LintResult], str]] = {
    "text": format_text,
    "json": format_json,
    "sarif": format_sarif,
    "github": format_github,
}


def render(result: LintResult, fmt: str) -> str:
    """The report of ``result`` in format ``fmt`` (one of :data:`FORMATTERS`)."""
    return FORMATTERS[fmt](result)
