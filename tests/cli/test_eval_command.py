"""``mkpolicy eval``: evaluate an expression against objects, print JSON or the error."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from mkpolicy.cli.main import main

RUN = """\
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata:
  name: build-1
  namespace: team-a
  creationTimestamp: "2024-01-02T03:04:05Z"
spec:
  taskRunTemplate: {serviceAccountName: builder}
  pipelineSpec:
    tasks: [{name: a}, {name: b}]
"""

CRD_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "pipelineSpec": {
                    "type": "object",
                    "properties": {
                        "tasks": {
                            "type": "array",
                            "maxItems": 50,
                            "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
                        }
                    },
                }
            },
        }
    },
}


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(RUN)
    return path


def test_object_from_file(run_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["eval", "object.spec.?taskRunTemplate.?serviceAccountName.orValue('default')", "--var", f"object={run_file}"]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out) == "builder"


def test_inline_json_and_yaml_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "eval",
            "params.names.map(n, n + '-' + cluster)",
            "--var",
            'params={"names": ["a", "b"]}',
            "--var",
            'cluster="w1"',
            "-o",
            "yaml",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out == "- a-w1\n- b-w1\n"


def test_non_json_values_are_printed_as_kubernetes_writes_them(
    run_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expression = (
        "{'at': timestamp(object.metadata.creationTimestamp) + duration('90m'), 'u': 3u, 'b': b'hi', 't': type(1)}"
    )
    assert main(["eval", expression, "--var", f"object={run_file}"]) == 0
    assert json.loads(capsys.readouterr().out) == {"at": "2024-01-02T04:34:05Z", "u": 3, "b": "aGk=", "t": "int"}


def test_errors_show_line_column_and_caret(run_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", "object.spec\n  .nope + 1", "--var", f"object={run_file}"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines() == ["error: 2:4: no such key: nope", "    .nope + 1", "     ^"]


def test_syntax_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "1 + (2"]) == 1
    assert "error: 1:7: syntax error: unexpected end of expression" in capsys.readouterr().err


def test_undeclared_variable_is_a_compile_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "object.metadata.name"]) == 1
    assert "error: 1:1: undeclared reference to 'object'" in capsys.readouterr().err


def test_bad_var_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "cluster", "--var", "cluster=worker1"]) == 2
    assert "quote strings as JSON" in capsys.readouterr().err
    assert main(["eval", "x", "--var", "novalue"]) == 2
    assert "expects NAME=VALUE" in capsys.readouterr().err
    assert main(["eval", "x", "--var", "x=" + "[" * 20_000 + "]" * 20_000]) == 2
    assert "--var x: the JSON value nests too deeply" in capsys.readouterr().err


def test_schema_type_errors_are_warnings_and_cost_is_reported(
    run_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(CRD_SCHEMA))
    code = main(
        [
            "eval",
            "object.spec.pipelineSpec.tasks.map(t, t.name)",
            "--var",
            f"object={run_file}",
            "--schema",
            f"object={schema}",
            "--cost",
        ]
    )
    out = capsys.readouterr()
    assert code == 0
    assert json.loads(out.out) == ["a", "b"]
    # 4 (object.spec.pipelineSpec.tasks) + 11 (map) + per task 14 (12 for the step, 2 for t.name):
    # 2 tasks actually, 50 (maxItems) at worst.
    assert "cost: actual 43, estimated worst case 715 (limit 1000000)" in out.err
    code = main(
        ["eval", "object.spec.pipelineSpec.taskz", "--var", f"object={run_file}", "--schema", f"object={schema}"]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "warning: 1:26: undefined field 'taskz'" in err
    assert "error: 1:26: no such key: taskz" in err


def test_expression_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("[1, 2, 3].filter(x, x > 1)"))
    assert main(["eval", "-"]) == 0
    assert json.loads(capsys.readouterr().out) == [2, 3]


def test_the_wire_variables_are_bound(capsys: pytest.CaptureFixture[str]) -> None:
    """workloadName, origin, cluster, now (and null workload, params), as a create or sync binds them."""
    expression = '{"c": cluster, "w": workloadName, "o": origin, "n": string(now), "nulls": [workload, params]}'
    code = main(
        ["eval", expression, "--cluster", "worker1", "--workload-name", "wl-1", "--now", "2026-11-26T10:00:00.7Z"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out) == {
        "c": "worker1",
        "w": "wl-1",
        "o": "multikueue",
        "n": "2026-11-26T10:00:00Z",
        "nulls": [None, None],
    }
    assert main(["eval", "now > timestamp('2020-01-01T00:00:00Z') && origin == 'prod'", "--origin", "prod"]) == 0
    assert capsys.readouterr().out == "true\n"
    # a --var of the same name wins
    assert main(["eval", "cluster", "--cluster", "a", "--var", 'cluster="b"']) == 0
    assert capsys.readouterr().out == '"b"\n'
    assert main(["eval", "now", "--now", "yesterday"]) == 2
    assert "--now: expected an RFC 3339 time" in capsys.readouterr().err
