"""Report formats on hand-made results: escaping, URIs, summaries."""

from __future__ import annotations

import json

import pytest

from mkpolicy.check.findings import Finding, LintResult
from mkpolicy.errors import InputError, Location
from mkpolicy.lint.formats import artifact_uri, format_github, format_sarif, render, summary


def result(
    *findings: Finding, errors: list[InputError] | None = None, files: int = 1, suppressed: int = 0
) -> LintResult:
    return LintResult(
        findings=list(findings),
        input_errors=errors or [],
        files=[f"f{i}.yaml" for i in range(files)],
        policies=files,
        suppressed=suppressed,
    )


def test_github_annotations_escape_data_and_properties() -> None:
    finding = Finding("dir,with:odd/p%.yaml", 3, 7, "MKP201", "100% broken:\nsecond line", "error")
    assert format_github(result(finding)) == (
        "::error file=dir%2Cwith%3Aodd/p%25.yaml,line=3,col=7,title=MKP201 cel-syntax::100%25 broken:%0Asecond line\n"
    )


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        ("policies/a.yaml", "policies/a.yaml"),
        ("my policies/ä.yaml", "my%20policies/%C3%A4.yaml"),
        ("/abs/p.yaml", "file:///abs/p.yaml"),
    ],
)
def test_sarif_artifact_uris(path: str, uri: str) -> None:
    assert artifact_uri(path) == uri


def test_sarif_levels_and_rule_indexes() -> None:
    log = json.loads(format_sarif(result(Finding("a.yaml", 1, 2, "MKP401", "m", "warning", "p"))))
    (run,) = log["runs"]
    (res,) = run["results"]
    assert res["level"] == "warning"
    assert run["tool"]["driver"]["rules"][res["ruleIndex"]]["id"] == "MKP401"
    assert res["properties"] == {"policy": "p"}
    assert run["invocations"] == [{"executionSuccessful": True}]


@pytest.mark.parametrize(
    ("res", "text"),
    [
        (result(files=0), "0 errors, 0 warnings in 0 files (0 policies)"),
        (result(Finding("a", 1, 1, "MKP101", "m", "error"), files=1), "1 error, 0 warnings in 1 file (1 policy)"),
        (
            result(Finding("a", 1, 1, "MKP401", "m", "warning"), files=2, suppressed=3),
            "0 errors, 1 warning in 2 files (2 policies); 3 suppressed",
        ),
    ],
)
def test_summary(res: LintResult, text: str) -> None:
    assert summary(res) == text


def test_empty_reports() -> None:
    empty = result(files=0)
    assert render(empty, "text") == ""
    assert render(empty, "github") == ""
    assert json.loads(render(empty, "json"))["findings"] == []
    assert json.loads(render(empty, "sarif"))["runs"][0]["results"] == []


def test_input_error_without_file_in_github_format() -> None:
    assert format_github(result(errors=[InputError("boom", Location())])) == "::error ::boom\n"
