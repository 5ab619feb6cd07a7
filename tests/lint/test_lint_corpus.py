"""``mkpolicy lint`` on the broken corpus: whole reports in every format, positions, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from syrupy.assertion import SnapshotAssertion

from mkpolicy.check.rules import RULES
from mkpolicy.cli.main import main

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = ["corpus", "corpus/not-a-policy.yaml"]


@pytest.fixture(autouse=True)
def _in_tests_lint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(HERE)


def lint(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["lint", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_corpus_report(capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion, fmt: str) -> None:
    code, out, err = lint(capsys, "--format", fmt, *CORPUS)
    assert code == 1
    assert err == "45 errors, 24 warnings in 14 files (15 policies); 2 suppressed\n"
    assert out == snapshot


def test_sarif_report_is_valid_sarif_2_1_0(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = lint(capsys, "--format", "sarif", *CORPUS)
    log = json.loads(out)
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(log), key=lambda e: list(e.path))
    assert [e.message for e in errors] == []
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_sarif_validation_catches_a_broken_log() -> None:
    """The schema check above can fail: a result without a message is rejected."""
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text())
    broken = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"ruleId": "MKP101"}]}]}
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert any("message" in e.message for e in validator.iter_errors(broken))


def test_formats_agree(capsys: pytest.CaptureFixture[str]) -> None:
    _, text, _ = lint(capsys, *CORPUS)
    _, out, _ = lint(capsys, "--format", "json", *CORPUS)
    findings = json.loads(out)["findings"]
    assert text.splitlines() == [
        f"{f['file']}:{f['line']}:{f['column']}: {f['severity']} {f['rule']} {f['message']}" for f in findings
    ]
    _, github, _ = lint(capsys, "--format", "github", *CORPUS)
    assert [line.split(" ", 1)[0] for line in github.splitlines()] == [f"::{f['severity']}" for f in findings]


def test_every_rule_fires_on_the_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = lint(capsys, "--format", "json", *CORPUS)
    fired = {f["rule"] for f in json.loads(out)["findings"]}
    # MKP406 fires too, on a policy that silences it (counted as suppressed).
    _, out, _ = lint(capsys, "--format", "json", "corpus/kueue-compat.yaml")
    assert "MKP406" in {f["rule"] for f in json.loads(out)["findings"]}
    # MKP109 needs a schema over 1 MiB: test_lint_rules.py writes one instead of committing it.
    # MKP605 and MKP606 need an object: test suites report them (tests/suite/test_suite_integration.py).
    assert sorted(set(RULES) - fired) == ["MKP109", "MKP605", "MKP606"]


def test_clean_policy_has_no_findings(capsys: pytest.CaptureFixture[str]) -> None:
    assert lint(capsys, "corpus/clean.yaml") == (0, "", "0 errors, 0 warnings in 1 file (1 policy)\n")


def test_every_rule_is_documented() -> None:
    doc = (ROOT / "docs" / "lint-rules.md").read_text()
    headings = re.findall(r"^## (MKP\d{3}) (\S+)\n\n\*(error|warning)\*", doc, flags=re.MULTILINE)
    assert headings == [(r.id, r.name, r.severity) for r in RULES.values()]


def test_rule_catalog_is_stable(snapshot: SnapshotAssertion) -> None:
    """IDs never change meaning: a change here must be deliberate (and documented)."""
    assert [f"{r.id} {r.name} {r.severity}" for r in RULES.values()] == snapshot


# Where each rule's first finding in the corpus points: its exact (line, column), and the
# offending token found there in the YAML file ("" for the end of the file: MKP101 reports an
# unclosed flow sequence where the stream ends, on the line after the last one).
POSITIONS = [
    ("MKP101", "yaml-syntax.yaml", (9, 1), ""),
    ("MKP103", "documents.yaml", (7, 3), "frameworks:"),
    ("MKP105", "documents.yaml", (24, 5), "- name: sa"),
    ("MKP104", "duplicate-b.yaml", (7, 14), "Widget.v1.example.com"),
    ("MKP107", "schemas-bad.yaml", (8, 11), "schemas/ghost.yaml"),
    ("MKP201", "cel.yaml", (18, 42), "* 2"),
    ("MKP202", "cel.yaml", (15, 19), "size(object.spec, 2)"),
    ("MKP203", "cel.yaml", (27, 24), '{"metadata"'),
    ("MKP204", "cel.yaml", (31, 54), "replica >"),
    ("MKP206", "cel.yaml", (11, 19), "1 < 2"),
    ("MKP207", "cel.yaml", (19, 13), "unused"),
    ("MKP208", "cel.yaml", (38, 69), "missing"),
    ("MKP209", "cel.yaml", (38, 32), "workerObject.status.phase"),
    ("MKP210", "cel.yaml", (38, 78), "params.suffix"),
    ("MKP211", "cel.yaml", (31, 29), "replicas) &&"),
    ("MKP212", "cel.yaml", (45, 79), "replicas}}]"),
    ("MKP301", "managedby.yaml", (10, 11), "/spec/controller"),
    ("MKP302", "managedby.yaml", (20, 11), "/spec/owner"),
    ("MKP402", "kueue-compat.yaml", (8, 14), "null"),
    ("MKP404", "kueue-compat.yaml", (12, 11), "none"),
    ("MKP501", "patches.yaml", (14, 45), '"/metadata/name"'),
    ("MKP502", "patches.yaml", (35, 52), '"/metadata/labels/synced"'),
    ("MKP503", "patches.yaml", (19, 29), '"delete"'),
    ("MKP407", "writes.yaml", (10, 3), "matchConditions:"),
    ("MKP504", "writes.yaml", (19, 45), '"/spec/nodeSelecter"'),
    ("MKP505", "writes.yaml", (20, 42), '"/spec/priority"'),
    ("MKP506", "writes.yaml", (21, 71), '"2"'),
    ("MKP507", "writes.yaml", (22, 92), "3}"),
    ("MKP508", "writes.yaml", (28, 21), '["--fast"]'),
    ("MKP509", "writes.yaml", (29, 35), "ports{port: 8080}"),
    ("MKP601", "integration.yaml", (23, 5), "inject:"),
    ("MKP602", "integration.yaml", (20, 14), 'JSONPatch{op: "add", path: "/spec/startedBy"'),
    ("MKP603", "integration.yaml", (21, 14), 'JSONPatch{op: "remove"'),
    ("MKP604", "integration.yaml", (22, 16), '{"name": "main", "replicas"'),
    ("MKP607", "integration.yaml", (10, 23), "bind(s, object.spec"),
]


@pytest.fixture(scope="module")
def corpus_findings() -> list[dict[str, Any]]:
    from mkpolicy.check import check_paths

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(HERE)
        result = check_paths(CORPUS)
    return [{"rule": f.rule, "file": f.file, "line": f.line, "column": f.column} for f in result.findings]


@pytest.mark.parametrize(("rule", "file", "position", "token"), POSITIONS, ids=[p[0] for p in POSITIONS])
def test_findings_point_at_the_offending_token(
    corpus_findings: list[dict[str, Any]], rule: str, file: str, position: tuple[int, int], token: str
) -> None:
    finding = next(f for f in corpus_findings if f["rule"] == rule and f["file"] == f"corpus/{file}")
    assert (finding["line"], finding["column"]) == position
    lines = [*(HERE / "corpus" / file).read_text().splitlines(), ""]
    at = lines[finding["line"] - 1][finding["column"] - 1 :]
    if token:
        assert at.startswith(token), f"{rule} points at {at!r}, expected {token!r}"
    else:  # the end of the file: past its last line, nothing left to point at
        assert finding["line"] == len(lines) and at == "", f"{rule} points at {at!r}, expected the end of the file"


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["corpus/clean.yaml"], 0),
        (["corpus/kueue-compat.yaml"], 0),
        (["--fail-on", "warning", "corpus/kueue-compat.yaml"], 1),
        (["--fail-on", "warning", "corpus/clean.yaml"], 0),
        (["corpus/cel.yaml"], 1),
        (["--disable", "MKP402,MKP404", "--disable", "MKP405", "--fail-on", "warning", "corpus/kueue-compat.yaml"], 1),
        (
            ["--disable", "mkp402,MKP404,MKP405,MKP406", "--fail-on", "warning", "corpus/kueue-compat.yaml"],
            0,
        ),
        (["corpus/missing.yaml"], 2),
        (["corpus/clean.yaml", "corpus/missing.yaml"], 2),
        (["--disable", "MKP999", "corpus/clean.yaml"], 2),
        ([], 2),
    ],
)
def test_exit_codes(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> None:
    assert lint(capsys, *argv)[0] == code


def test_disable_counts_suppressed_findings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lint(capsys, "--disable", "MKP402,MKP404", "corpus/kueue-compat.yaml")
    assert code == 0
    assert [line.split()[2] for line in out.splitlines()] == ["MKP406", "MKP405"]
    assert err == "0 errors, 2 warnings in 1 file (2 policies); 3 suppressed\n"


def test_input_errors_are_reported_in_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lint(capsys, "--format", "json", "corpus/clean.yaml", "nowhere/")
    assert code == 2
    assert json.loads(out)["inputErrors"] == [
        {"file": "nowhere/", "line": None, "column": None, "message": "no such file or directory"}
    ]
    assert "nowhere/: error: no such file or directory" in err
    _, out, _ = lint(capsys, "--format", "github", "nowhere/")
    assert out == "::error file=nowhere/::no such file or directory\n"
    _, out, _ = lint(capsys, "--format", "sarif", "nowhere/")
    invocation = json.loads(out)["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["message"]["text"] == "no such file or directory"


def test_output_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = tmp_path / "lint.sarif"
    code, out, _ = lint(capsys, "-f", "sarif", "-o", str(report), "corpus/cel.yaml")
    assert (code, out) == (1, "")
    assert json.loads(report.read_text())["runs"][0]["results"]
    assert lint(capsys, "-o", str(tmp_path / "no" / "such" / "dir.txt"), "corpus/cel.yaml")[0] == 2


def test_list_rules(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = lint(capsys, "--list-rules")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == list(RULES)
