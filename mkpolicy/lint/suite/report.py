"""Test-run reports: a readable text report (with coloured diffs) and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from mkpolicy.lint.suite.runner import CaseResult, SuiteResult, TestRun

_COLORS = {"passed": "\033[32m", "failed": "\033[31m", "error": "\033[31m", "updated": "\033[33m"}
_RESET = "\033[0m"
_LABELS = {"passed": "PASS ", "failed": "FAIL ", "error": "ERROR"}


def _paint(text: str, color: str | None, enabled: bool) -> str:
    return f"{color}{text}{_RESET}" if enabled and color else text


def _diff_line(line: str, color: bool) -> str:
    if line.startswith(("+++", "---")):
        return _paint(line, "\033[1m", color)
    if line.startswith("+"):
        return _paint(line, "\033[32m", color)
    if line.startswith("-"):
        return _paint(line, "\033[31m", color)
    if line.startswith("@@"):
        return _paint(line, "\033[36m", color)
    return line


def _indent(text: str, prefix: str) -> str:
    return "".join(prefix + line + "\n" for line in text.splitlines())


def format_case(case: CaseResult, color: bool) -> str:
    """One case: its status line and, unless it passed, why (with the diff)."""
    label = "UPD  " if case.updated and case.status == "passed" else _LABELS[case.status]
    tint = _COLORS["updated"] if case.updated and case.status == "passed" else _COLORS[case.status]
    line = f"  {_paint(label, tint, color)} {case.name}"
    if case.updated:
        line += " (snapshot updated)"
    out = line + "\n"
    if case.status != "passed":
        out += f"        at {case.location.position()}\n"
        out += _indent(case.message, "        ")
        if case.diff:
            out += "".join("        " + _diff_line(d, color) + "\n" for d in case.diff.splitlines())
    return out


def format_suite(suite: SuiteResult, color: bool, quiet: bool) -> str:
    """A suite: header, then its cases (only failures when ``quiet``)."""
    policy = f" -> {suite.policy_file}" if suite.policy_file else ""
    out = f"{suite.file}: {suite.name}{policy}\n"
    if suite.error is not None:
        label = _paint(_LABELS["error"], _COLORS["error"], color)
        problems = getattr(suite.error, "problems", [suite.error])
        out += f"  {label} the suite cannot run:\n"
        out += "".join(f"        {p}\n" for p in problems)
        return out
    cases = [c for c in suite.cases if not quiet or c.status != "passed" or c.updated]
    if quiet and not cases:
        return ""
    return out + "".join(format_case(c, color) for c in cases)


def format_run(run: TestRun, color: bool = False, quiet: bool = False) -> str:
    """The whole report (without the summary line)."""
    return "".join(format_suite(s, color, quiet) for s in run.suites)


def summary(run: TestRun, updated: int = 0) -> str:
    """``3 passed, 1 failed, 0 errors in 2 suites (0.12 s)``."""
    text = (
        f"{run.count('passed')} passed, {run.count('failed')} failed, {run.count('error')} errors "
        f"in {len(run.suites)} suite{'s' * (len(run.suites) != 1)} ({run.duration:.2f} s)"
    )
    if updated:
        text += f"; {updated} snapshot{'s' * (updated != 1)} updated"
    if run.uncovered:
        text += f"; {len(run.uncovered)} polic{'ies' if len(run.uncovered) != 1 else 'y'} without a suite"
    return text


def junit_xml(run: TestRun) -> str:
    """JUnit XML (the dialect Jenkins, GitLab and GitHub test reporters read)."""
    root = ET.Element(
        "testsuites",
        name="mkpolicy test",
        tests=str(sum(len(s.cases) + (s.error is not None) for s in run.suites) + len(run.uncovered)),
        failures=str(run.count("failed") + len(run.uncovered)),
        errors=str(run.count("error")),
        time=f"{run.duration:.3f}",
    )
    for suite in run.suites:
        element = ET.SubElement(
            root,
            "testsuite",
            name=suite.name,
            file=suite.file,
            tests=str(len(suite.cases) + (suite.error is not None)),
            failures=str(sum(1 for c in suite.cases if c.status == "failed")),
            errors=str(sum(1 for c in suite.cases if c.status == "error") + (suite.error is not None)),
            time=f"{suite.duration:.3f}",
        )
        if suite.error is not None:
            case = ET.SubElement(element, "testcase", classname=suite.name, name="(suite)", file=suite.file)
            err = ET.SubElement(case, "error", message=suite.error.message.splitlines()[0])
            err.text = str(suite.error)
        for result in suite.cases:
            case = ET.SubElement(
                element,
                "testcase",
                classname=suite.name,
                name=result.name,
                file=suite.file,
                line=str(result.location.line or 1),
                time=f"{result.duration:.3f}",
            )
            if result.status != "passed":
                tag = "failure" if result.status == "failed" else "error"
                node = ET.SubElement(case, tag, message=result.message.splitlines()[0] if result.message else tag)
                node.text = result.message + ("\n" + result.diff if result.diff else "")
    if run.uncovered:
        element = ET.SubElement(root, "testsuite", name="policies without a suite", tests=str(len(run.uncovered)))
        for file in run.uncovered:
            case = ET.SubElement(element, "testcase", classname="coverage", name=file, file=file)
            ET.SubElement(case, "failure", message=f"{file} has no test suite")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def json_report(run: TestRun, updated: int = 0, exit_code: int | None = None) -> str:
    """The run as one JSON document: suites with their cases, input errors, counts."""

    def case(c: CaseResult) -> dict[str, Any]:
        out: dict[str, Any] = {"name": c.name, "status": c.status, "location": c.location.position()}
        if c.status != "passed":
            out["message"] = c.message
            if c.diff:
                out["diff"] = c.diff
        if c.updated:
            out["snapshotUpdated"] = True
        return out

    def suite(s: SuiteResult) -> dict[str, Any]:
        out: dict[str, Any] = {"file": s.file, "name": s.name, "policy": s.policy_file}
        if s.error is not None:
            out["error"] = [str(p) for p in getattr(s.error, "problems", [s.error])]
        out["cases"] = [case(c) for c in s.cases]
        return out

    document: dict[str, Any] = {
        "suites": [suite(s) for s in run.suites],
        "inputErrors": [e.report() for e in run.input_errors],
        "uncovered": list(run.uncovered),
        "summary": {
            "passed": run.count("passed"),
            "failed": run.count("failed"),
            "errors": run.count("error"),
            "suites": len(run.suites),
            "snapshotsUpdated": updated,
            "seconds": round(run.duration, 3),
        },
    }
    if exit_code is not None:
        document["exitCode"] = exit_code
    return json.dumps(document, indent=2) + "\n"
