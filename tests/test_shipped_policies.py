"""Every shipped policy (``policies/**``) has a test suite, every suite passes, and every
policy lints without errors. Suites are discovered, so new policies and suites are picked
up without touching this file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mkpolicy.check import check_paths
from mkpolicy.lint.suite.discover import SUITE_SUFFIXES
from mkpolicy.lint.suite.report import format_suite
from mkpolicy.lint.suite.runner import run_paths

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
SUITES = sorted(p for p in POLICIES.rglob("*") if p.name.endswith(SUITE_SUFFIXES)) if POLICIES.is_dir() else []


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_every_shipped_policy_has_a_suite() -> None:
    if not POLICIES.is_dir():
        pytest.skip("no policies/ directory")
    run = run_paths(["policies"], require_suites=True)
    assert run.input_errors == []
    assert run.uncovered == [], "policy files without a test suite (add <stem>.test.yaml next to each)"


@pytest.mark.parametrize("suite", SUITES, ids=[str(s.relative_to(POLICIES)) for s in SUITES])
def test_shipped_suite_passes(suite: Path) -> None:
    run = run_paths([os.path.relpath(suite, ROOT)])
    assert run.input_errors == []
    # One suite document per file: an empty list would make the checks below vacuous.
    assert [s.file for s in run.suites] == [os.path.relpath(suite, ROOT)]
    report = "".join(format_suite(s, color=False, quiet=True) for s in run.suites)
    assert run.ok, report
    assert run.suites[0].error is None, report
    assert run.suites[0].cases, "a suite without cases tests nothing"


def test_shipped_policies_lint_without_errors() -> None:
    if not POLICIES.is_dir():
        pytest.skip("no policies/ directory")
    result = check_paths(["policies"])
    assert result.input_errors == []
    errors = [f"{f.file}:{f.line}:{f.column}: {f.rule} {f.message}" for f in result.findings if f.severity == "error"]
    assert errors == []
