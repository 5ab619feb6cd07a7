"""``mkpolicy init``, ``explain`` and ``export``: scaffolds that pass lint and test, whole outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from syrupy.assertion import SnapshotAssertion

from mkpolicy.cli.main import main
from mkpolicy.sidecar.policies import compile_directory

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "lint" / "corpus"

KUBEFLOW_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pytorchjobs.kubeflow.org}
spec:
  group: kubeflow.org
  names: {kind: PyTorchJob, plural: pytorchjobs}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [pytorchReplicaSpecs]
              properties:
                runPolicy:
                  type: object
                  properties: {managedBy: {type: string}}
                pytorchReplicaSpecs:
                  type: object
                  additionalProperties:
                    type: object
                    required: [replicas]
                    properties: {replicas: {type: integer, minimum: 1}}
            status:
              type: object
              properties: {conditions: {type: array, items: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("framework", "crd", "name", "managed_by", "cases", "warnings"),
    [
        ("Thing.v1.example.com", None, "example-thing", "/spec/managedBy", 3, []),
        (
            "PipelineRun.v1.tekton.dev",
            "schemas/crds/tekton.dev_pipelineruns.json",
            "tekton-pipelinerun",
            "/spec/managedBy",
            3,
            [],
        ),
        ("PyTorchJob.v1.kubeflow.org", "kubeflow", "kubeflow-pytorchjob", "/spec/runPolicy/managedBy", 3, ["MKP401"]),
        (
            "Workflow.v1alpha1.argoproj.io",
            "argo-upstream",
            "argoproj-workflow",
            None,
            2,
            ["MKP402", "MKP405"],
        ),
        (
            "Workflow.v1alpha1.argoproj.io",
            "schemas/crds/argoproj.io_workflows.json",
            "argoproj-workflow",
            "/spec/managedBy",
            3,
            ["MKP405"],
        ),
        ("ConfigMap.v1", None, "configmap", "/spec/managedBy", 3, []),
    ],
    ids=["no-crd", "tekton", "kubeflow", "argo-without-managedby", "argo-crd-patched", "core-group"],
)
def test_init_scaffolds_what_lint_and_test_accept(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    framework: str,
    crd: str | None,
    name: str,
    managed_by: str | None,
    cases: int,
    warnings: list[str],
) -> None:
    argv = ["init", "--framework", framework, "--dir", "policies"]
    if crd == "kubeflow":
        (tmp_path / "crd.yaml").write_text(KUBEFLOW_CRD)
        argv += ["--crd", "crd.yaml"]
    elif crd == "argo-upstream":  # the shipped schema without the field export crd-patch adds: Argo's own
        document = json.loads((ROOT / "schemas" / "crds" / "argoproj.io_workflows.json").read_text())
        del document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
            "managedBy"
        ]
        (tmp_path / "crd.json").write_text(json.dumps(document))
        argv += ["--crd", "crd.json"]
    elif crd is not None:
        argv += ["--crd", str(ROOT / crd)]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    assert out.splitlines() == [
        f"created policies/{name}.yaml",
        f"created policies/{name}.test.yaml",
        f"created policies/examples/{name}.yaml",
        f"created policies/examples/{name}-worker.yaml",
        *([f"created policies/{name}.schema.json"] if crd is not None else []),
        "next: mkpolicy lint policies && mkpolicy test policies",
        "deploy: kubectl -n kueue-system create configmap mkpolicy-policies --from-file=policies/",
    ]
    policy = yaml.safe_load((tmp_path / "policies" / f"{name}.yaml").read_text())
    # spec.schema resolves inside the directory: its files, flat as a ConfigMap mounts them,
    # load in the sidecar as they are.
    if crd is not None:
        assert policy["spec"]["schema"] == f"{name}.schema.json"
    configmap = tmp_path / "configmap"
    configmap.mkdir()
    for file in (tmp_path / "policies").iterdir():
        if file.is_file():
            shutil.copy(file, configmap / file.name)
    assert [a.name for a in compile_directory(str(configmap))] == [name]
    assert policy["spec"]["framework"] == framework
    assert (policy["spec"]["managedBy"] or {}).get("path") == managed_by
    code, out, _ = run(capsys, "lint", "--format", "json", "policies")
    assert code == 0
    assert [f["rule"] for f in json.loads(out)["findings"]] == warnings
    code, out, _ = run(capsys, "test", "--color", "never", "--require-suites", "policies")
    assert code == 0, out
    assert out.count("  PASS ") == cases
    example = yaml.safe_load((tmp_path / "policies" / "examples" / f"{name}.yaml").read_text())
    if crd == "kubeflow":
        assert example["spec"] == {
            "pytorchReplicaSpecs": {},
            "runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"},
        }


def test_init_refuses_to_overwrite_and_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "init", "--framework", "Thing.v1.example.com")[0] == 0
    code, _, err = run(capsys, "init", "--framework", "Thing.v1.example.com")
    assert code == 2 and "would overwrite ./example-thing.yaml" in err
    # what --help says is what it does
    from mkpolicy.cli.main import build_parser

    init_help = " ".join(build_parser()._subparsers._group_actions[0].choices["init"].format_help().split())  # type: ignore[union-attr]
    assert "init writes nothing and exits 2 naming them; --force overwrites them" in init_help
    assert "kept unless" not in init_help
    assert run(capsys, "init", "--framework", "Thing.v1.example.com", "--force")[0] == 0
    code, _, err = run(capsys, "init", "--framework", "thing")
    assert code == 2 and "expected Kind.version.group" in err
    (tmp_path / "crd.yaml").write_text(KUBEFLOW_CRD)
    code, _, err = run(capsys, "init", "--framework", "TFJob.v1.kubeflow.org", "--crd", "crd.yaml", "--dir", "x")
    assert code == 2 and "the CRD is for kind 'PyTorchJob' in group 'kubeflow.org'; expected 'TFJob'" in err
    code, _, err = run(capsys, "init", "--framework", "PyTorchJob.v2.kubeflow.org", "--crd", "crd.yaml", "--dir", "x")
    assert code == 2 and "serves no version 'v2'" in err
    code, _, err = run(capsys, "init", "--framework", "PyTorchJob.v1.kubeflow.org", "--crd", "nope.yaml", "--dir", "x")
    assert code == 2 and "cannot read schema file" in err


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_explain(
    capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CORPUS)
    code, out, _ = run(capsys, "explain", "-o", fmt, "clean.yaml", "patches.yaml", "kueue-compat.yaml")
    assert code == 0
    assert out == snapshot


def test_explain_shows_expressions_that_do_not_compile(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CORPUS)
    code, out, _ = run(capsys, "explain", "cel.yaml")
    assert code == 0
    assert "      does not compile: cel.yaml:18:42: variable 'broken': syntax error: unexpected '*'" in out
    assert (
        "      reads:  object.spec.replicas (presence), object.spec.replica, variables.owner,\n"
        "              object.spec.replicas\n" in out
    )
    assert run(capsys, "explain", "documents.yaml")[0] == 1
    assert run(capsys, "explain", "nowhere.yaml")[0] == 2


def _policies(tmp_path: Path) -> Path:
    policies = tmp_path / "policies"
    shutil.copytree(ROOT / "schemas", tmp_path / "schemas")
    policies.mkdir()
    for name in ("tekton-pipelinerun.yaml", "argo-workflow.yaml"):
        shutil.copy(ROOT / "policies" / name, policies / name)
    header = (
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata:\n  name: {name}\nspec:\n  framework: {fw}\n"
    )
    (policies / "more.yaml").write_text(
        "\n---\n".join(
            [
                header.format(name="job", fw="Job.v1.batch"),
                header.format(name="dataset", fw="Dataset.v1beta1.data.example.com") + "  sync: {mode: none}\n",
                header.format(name="policy", fw="Policy.v1.example.com"),
                header.format(name="configmap", fw="ConfigMap.v1"),
                header.format(name="lws", fw="Gang.v1.example.com") + "  managedBy: null\n",
            ]
        )
    )
    return policies


@pytest.mark.parametrize("what", ["kueue-config", "rbac"])
@pytest.mark.parametrize("include_all", [False, True], ids=["stock", "all"])
def test_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion, what: str, include_all: bool
) -> None:
    _policies(tmp_path)
    code, out, _ = run(capsys, "export", what, *(["--all"] if include_all else []))
    assert code == 0
    assert out == snapshot
    documents = [d for d in yaml.safe_load_all(out) if d is not None]
    if what == "rbac":
        assert [d["metadata"]["name"] for d in documents] == ["mkpolicy-manager", "mkpolicy-worker", "mkpolicy-sidecar"]
        manager_resources = {r for rule in documents[0]["rules"] for r in rule["resources"]}
        assert "pipelineruns/status" in manager_resources
        assert "policies" in manager_resources  # Kubernetes' plural of Policy
        assert "workflows" in manager_resources  # no status subresource: carried, the sidecar writes status
        assert ("gangs" in manager_resources) == include_all
    else:
        names = [e["name"] for e in documents[0]["multiKueue"]["externalFrameworks"]]
        assert "Workflow.v1alpha1.argoproj.io" in names
        assert ("Gang.v1.example.com" in names) == include_all
        assert ("Job.v1.batch" in names) == include_all


def test_export_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "export", "rbac", "--policies", "nowhere") == (
        2,
        "",
        "nowhere: error: no such file or directory\n",
    )
    (tmp_path / "bad.yaml").write_text("apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nspec: {}\n")
    assert run(capsys, "export", "kueue-config", "--policies", "bad.yaml") == (
        1,
        "",
        "bad.yaml:1:1: error: missing required field 'metadata'\n"
        "bad.yaml:3:1: error: missing required field 'spec.framework'\n",
    )
    (tmp_path / "job.yaml").write_text(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: job}\nspec: {framework: Job.v1.batch}\n"
    )
    code, out, err = run(capsys, "export", "kueue-config", "--policies", "job.yaml")
    assert code == 0 and "externalFrameworks: []" in out
    assert "warning: no policy can be carried by stock Kueue" in err
