"""``mkpolicy export crd-patch``: the CRDs of the policies' kinds given spec.managedBy, ready for server-side apply."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from mkpolicy.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
ARGO = ROOT / "policies" / "argo-workflow.yaml"
SHIPPED = ROOT / "schemas" / "crds" / "argoproj.io_workflows.json"
#: The Go module cache (``go mod download github.com/argoproj/argo-workflows/v4@latest`` puts Argo there).
MODCACHE = Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod")
ARGO_CRDS = sorted(
    MODCACHE.glob("github.com/argoproj/argo-workflows/v*@*/manifests/base/crds/full/argoproj.io_workflows.yaml")
)


def argo_upstream(tmp_path: Path) -> Path:
    """Argo's Workflow CRD without the field (the shipped schema is the patched one)."""
    doc = json.loads(SHIPPED.read_text())
    del doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["managedBy"]
    out = tmp_path / "argo.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["export", "crd-patch", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_patched_crd_declares_managed_by_and_says_how_to_apply_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--policies", str(ROOT / "policies"), "--crd", str(argo_upstream(tmp_path)))
    assert code == 0 and "argo" not in err  # (Tekton's CRD is not given: a note)
    assert "kubectl apply --server-side --force-conflicts --field-manager=mkpolicy-crd-patch -f -" in out
    (doc,) = [d for d in yaml.safe_load_all(out) if d is not None]
    assert doc["metadata"]["name"] == "workflows.argoproj.io"
    declared = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert declared["managedBy"]["type"] == "string"


def test_nothing_to_patch_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the shipped schema already declares it; Tekton's CRD is not given
    code, out, err = run(capsys, "--policies", str(ROOT / "policies"), "--crd", str(SHIPPED))
    assert code == 0
    assert [d for d in yaml.safe_load_all(out) if d is not None] == []
    assert "note: workflows.argoproj.io (policy argo-workflow): /spec/managedBy already declared" in err
    assert (
        "note: PipelineRun.v1.tekton.dev (policy tekton-pipelinerun): no CustomResourceDefinition of this kind given"
        in err
    )


def test_stdin_and_the_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(capsys, "--policies", str(ARGO))
    assert code == 2 and "expected --crd FILE (the CRDs to patch); found none" in err
    code, _, err = run(capsys, "--policies", str(ARGO), "--crd", str(tmp_path / "nope.yaml"))
    assert code == 2 and "nope.yaml" in err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(argo_upstream(tmp_path).read_bytes())))
    code, out, _ = run(capsys, "--policies", str(ARGO), "--crd", "-")
    assert code == 0 and "managedBy" in out


@pytest.mark.skipif(not ARGO_CRDS, reason=f"Argo's Go module not in {MODCACHE}")
def test_argos_real_crd(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--policies", str(ARGO), "--crd", str(ARGO_CRDS[-1]))
    assert code == 0
    (doc,) = [d for d in yaml.safe_load_all(out) if d is not None]
    assert doc["spec"]["versions"][0]["additionalPrinterColumns"]  # the whole CRD, not a trimmed one
