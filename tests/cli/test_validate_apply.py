"""``mkpolicy validate`` and ``mkpolicy apply`` run in-process: outputs and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from mkpolicy.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
TEKTON = "examples/tekton/pipelinerun.yaml"
TEKTON_WORKER = "examples/tekton/pipelinerun-worker.yaml"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_shipped_policies(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "policies/tekton-pipelinerun.yaml", "policies/argo-workflow.yaml")
    assert code == 0
    assert out.splitlines() == [
        "policies/tekton-pipelinerun.yaml: ok: tekton-pipelinerun (PipelineRun.v1.tekton.dev)",
        "policies/argo-workflow.yaml: ok: argo-workflow (Workflow.v1alpha1.argoproj.io)",
    ]


def test_validate_reports_problems_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: bad}\nspec:\n"
        "  framework: PipelineRun.v1.tekton.dev\n  creation:\n    patches:\n      - type: JSONPatch\n"
        '        jsonPatch: {expression: \'[JSONPatch{op: "add", path: "/x", value: objct}]\'}\n'
    )
    code, out, _ = run(capsys, "validate", str(bad))
    assert code == 1
    assert out == f"{bad}:9:75: error MKP202 creation patch #1 (JSONPatch): undeclared reference to 'objct'\n"
    code, out, _ = run(capsys, "validate", "--output", "json", str(bad), "policies/argo-workflow.yaml")
    report = json.loads(out)
    assert code == 1 and report["exitCode"] == 1
    assert report["policies"] == [
        {"file": "policies/argo-workflow.yaml", "name": "argo-workflow", "framework": "Workflow.v1alpha1.argoproj.io"}
    ]
    [error] = report["errors"]
    assert (error["file"], error["line"], error["column"], error["rule"]) == (str(bad), 9, 75, "MKP202")
    assert report["inputErrors"] == []
    code, out, _ = run(capsys, "validate", "-o", "json", "nope/")
    assert code == 2 and json.loads(out)["inputErrors"][0]["file"] == "nope/"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["validate", "nope/"], "nope/: error: no such file or directory"),
        (["apply", "--policy", "policies/", "--phase", "create", "-f", "nope.yaml"], "nope.yaml: error: cannot read"),
        (["apply", "--policy", "policies/", "--phase", "sync", "-f", TEKTON], "needs --worker-object"),
        (["apply", "--policy", "policies/", "--phase", "create", "-f", "pyproject.toml"], "malformed YAML"),
    ],
)
def test_usage_and_input_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in out + err


@pytest.mark.parametrize(
    "argv",
    [
        ["--phase", "create", "-f", TEKTON, "--workload-name", "wl-1"],
        ["--phase", "create", "-f", TEKTON, "--identifier", "label", "-o", "json"],
        ["--phase", "create", "-f", TEKTON, "-o", "diff"],
        ["--phase", "sync", "-f", TEKTON, "--worker-object", TEKTON_WORKER, "-o", "json"],
        ["--phase", "sync", "-f", TEKTON, "--worker-object", TEKTON_WORKER, "-o", "diff"],
        ["--phase", "create", "-f", "examples/argo/workflow.yaml", "-o", "diff"],
        [
            "--phase",
            "sync",
            "-f",
            "examples/argo/workflow.yaml",
            "--worker-object",
            "examples/argo/workflow-worker.yaml",
        ],
    ],
    ids=[
        "create-yaml",
        "create-label-json",
        "create-diff",
        "sync-json",
        "sync-diff",
        "argo-create-diff",
        "argo-sync-yaml",
    ],
)
def test_apply_outputs(capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion, argv: list[str]) -> None:
    code, out, err = run(capsys, "apply", "--policy", "policies/", *argv)
    assert (code, err) == (0, "")
    assert out == snapshot


def test_apply_sync_without_change_prints_null(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    worker = tmp_path / "worker.yaml"
    worker.write_text(json.dumps({"apiVersion": "tekton.dev/v1", "kind": "PipelineRun"}))
    code, out, _ = run(
        capsys,
        "apply",
        "--policy",
        "policies/",
        "--phase",
        "sync",
        "-f",
        TEKTON,
        "--worker-object",
        str(worker),
        "-o",
        "json",
    )
    assert (code, out) == (0, "null\n")


def test_apply_not_managed_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    obj = tmp_path / "pr.yaml"
    obj.write_text(
        json.dumps({"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "metadata": {"name": "x"}, "spec": {}})
    )
    code, _, err = run(capsys, "apply", "--policy", "policies/", "--phase", "create", "-f", str(obj))
    assert code == 1
    assert err == (
        "error: not managed by policy tekton-pipelinerun: "
        'Expecting .spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""\n'
    )


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "examples:" in out and "exit codes:" in out and "apply" in out and "validate" in out


def test_apply_warns_of_what_the_api_server_would_refuse(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "schema.json").write_text(
        json.dumps({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "managedBy": {"type": "string"}, "mode": {"type": "string", "enum": ["fast", "slow"]}}}}})
    )  # fmt: skip
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: thing}\nspec:\n"
        "  framework: Thing.v1.example.com\n  schema: schema.json\n  creation:\n    patches:\n"
        "      - type: JSONPatch\n        jsonPatch:\n"
        '          expression: \'[JSONPatch{op: "add", path: "/spec/mode", value: "turbo"}]\'\n'
    )
    (tmp_path / "thing.json").write_text(
        json.dumps({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
                    "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}})
    )  # fmt: skip
    argv = ["apply", "--policy", str(tmp_path / "policy.yaml"), "--phase", "create", "-f", str(tmp_path / "thing.json")]
    code, out, err = run(capsys, *argv)
    assert code == 0 and "mode: turbo" in out
    assert err == (
        "warning: the worker's API server would refuse the worker copy (spec.schema): "
        'spec.mode: Unsupported value: "turbo": supported values: "fast", "slow"\n'
    )
    # ObjectMeta is validated with or without a schema: a label value from params
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: thing}\nspec:\n"
        "  framework: Thing.v1.example.com\n  params: {team: Aero Team}\n  creation:\n    patches:\n"
        "      - type: JSONPatch\n        jsonPatch:\n"
        '          expression: \'[JSONPatch{op: "add", path: "/metadata/labels/team", value: params.team}]\'\n'
    )
    code, out, err = run(capsys, *argv)
    assert code == 0 and "team: Aero Team" in out
    assert err.startswith(
        "warning: the worker's API server would refuse the worker copy (ObjectMeta): "
        'metadata.labels: Invalid value: "Aero Team": a valid label must be an empty string'
    ), err


def test_apply_says_when_the_sidecar_would_refuse_the_policy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: p}\nspec:\n"
        "  framework: PipelineRun.v1.tekton.dev\n  creation:\n    patches:\n      - type: JSONPatch\n"
        '        jsonPatch: {expression: \'[JSONPatch{op: "add", path: "/metadata/annotations/n", value: 1}]\'}\n'
    )
    code, out, err = run(capsys, "apply", "--policy", str(policy), "--phase", "create", "-f", TEKTON, "-o", "json")
    assert code == 0 and json.loads(out)["metadata"]["annotations"]["n"] == 1  # what the engine does
    assert err == (
        f"{policy}:9:96: error MKP507 creation patch #1 (JSONPatch): /metadata/annotations/n: an annotation value "
        "must be a string; found int (the API server answers 400 Bad Request, on every retry); convert it with "
        "string() [the sidecar and 'mkpolicy validate' refuse this policy]\n"
    )
