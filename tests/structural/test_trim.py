"""``mkpolicy trim-schema``: a CRD without what only people read, validating the same."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from mkpolicy.cli.main import main
from mkpolicy.structural import Schema, read_schema_document
from mkpolicy.structural.trim import trim_crd, trim_schema
from mkpolicy.structural.validation import validate

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("MKPOLICY_SHARED", ROOT.parent / "shared")) / "crds"

#: (shipped trimmed file, upstream CRD in ../shared/crds, framework, an example object)
SHIPPED = [
    ("argoproj.io_workflows.json", "argoproj.io_workflows.yaml", "Workflow.v1alpha1.argoproj.io", "argo/workflow.yaml"),
    (
        "tekton.dev_pipelineruns.json",
        "tekton.dev_pipelineruns.yaml",
        "PipelineRun.v1.tekton.dev",
        "tekton/pipelinerun.yaml",
    ),
    (
        "trainer.kubeflow.org_trainjobs.json",
        "trainer.kubeflow.org_trainjobs.yaml",
        "TrainJob.v1alpha1.trainer.kubeflow.org",
        "kueue/trainjob/manager.yaml",
    ),
]

#: Shipped schemas of CRDs patched by ``mkpolicy export crd-patch`` (the policy that asks for it).
PATCHED = {"argoproj.io_workflows.json": "argo-workflow.yaml"}


def test_documentation_keywords_go_fields_named_like_them_stay() -> None:
    schema = {
        "type": "object",
        "description": "a job",
        "properties": {
            "description": {"type": "string", "description": "the field named description"},
            "items": {"type": "array", "items": {"type": "integer", "title": "n", "example": 3}},
        },
        "x-kubernetes-validations": [{"rule": "self.items.size() < 3", "message": "short"}],
        "default": {"description": "data, not documentation"},
    }
    assert trim_schema(schema) == {
        "type": "object",
        "properties": {"description": {"type": "string"}, "items": {"type": "array", "items": {"type": "integer"}}},
        "x-kubernetes-validations": [{"rule": "self.items.size() < 3", "message": "short"}],
        "default": {"description": "data, not documentation"},
    }


@pytest.mark.parametrize(("shipped", "upstream", "framework", "example"), SHIPPED, ids=[s[0] for s in SHIPPED])
def test_shipped_schemas_are_trimmed_and_fit_a_configmap(
    shipped: str, upstream: str, framework: str, example: str
) -> None:
    path = ROOT / "schemas" / "crds" / shipped
    document = json.loads(path.read_text())
    version = framework.split(".")[1]
    assert trim_crd(document, version) == document  # nothing left to trim
    assert path.stat().st_size < 1024 * 1024


def _variants(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The example, and copies broken in ways validation must see alike."""
    spec_wrong = copy.deepcopy(obj)
    spec_wrong["spec"] = "not an object"
    status_wrong = copy.deepcopy(obj)
    status_wrong["status"] = ["not an object"]
    return [obj, spec_wrong, status_wrong]


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"upstream CRDs not found at {SHARED}")
@pytest.mark.parametrize(("shipped", "upstream", "framework", "example"), SHIPPED, ids=[s[0] for s in SHIPPED])
def test_trimming_the_upstream_crd_gives_the_shipped_file_and_the_same_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shipped: str, upstream: str, framework: str, example: str
) -> None:
    out = tmp_path / shipped
    source = str(SHARED / upstream)
    if shipped in PATCHED:  # the manager's CRD: first given spec.managedBy by export crd-patch
        assert (
            main(["export", "crd-patch", "--policies", str(ROOT / "policies" / PATCHED[shipped]), "--crd", source]) == 0
        )
        source = str(tmp_path / "patched.yaml")
        Path(source).write_text(capsys.readouterr().out)
    assert main(["trim-schema", source, "--framework", framework, "-o", str(out)]) == 0
    assert out.read_bytes() == (ROOT / "schemas" / "crds" / shipped).read_bytes()
    version = framework.split(".")[1]
    full = Schema.from_document(read_schema_document(str(SHARED / upstream)), version).node
    trimmed = Schema.load(str(out), version).node
    assert full is not None and trimmed is not None
    obj = read_schema_document(str(ROOT / "examples" / example))
    seen = [[str(e) for e in validate(variant, full)] for variant in _variants(obj)]
    assert seen[0] == [] and all(seen[1:]), seen  # the example is valid, each broken copy is not
    assert [[str(e) for e in validate(variant, trimmed)] for variant in _variants(obj)] == seen


def test_a_crd_of_another_kind_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    crd = str(ROOT / "schemas" / "crds" / "tekton.dev_pipelineruns.json")
    assert main(["trim-schema", crd, "--framework", "Workflow.v1alpha1.argoproj.io"]) == 2
    assert "the CRD is for kind 'PipelineRun' in group 'tekton.dev'" in capsys.readouterr().err
