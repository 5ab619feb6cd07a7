"""Argo Workflows on the harness's clusters: Argo's real CRD and the objects Argo's tools and controller write.

Argo's full Workflow CRD is read at run time from the Go module cache (``go mod download
github.com/argoproj/argo-workflows/v4@latest``), else from ``../shared/crds``; the workers serve
it as Argo ships it, the manager as ``mkpolicy export crd-patch`` gives it (``spec.managedBy``).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sidecar_harness import POLICIES, Clusters, clusters

import mkpolicy
from mkpolicy.lint.export import crd_patch
from mkpolicy.yamldata import load_all, load_file

ARGO = POLICIES / "argo-workflow.yaml"
WF = ("argoproj.io/v1alpha1", "Workflow")
WL = ("kueue.x-k8s.io/v1beta2", "Workload")
FRAMEWORK = "Workflow.v1alpha1.argoproj.io"
SHARED = Path(os.environ.get("MKPOLICY_SHARED", Path(__file__).resolve().parents[3] / "shared")) / "crds"
#: What the admission policy puts on a manager Workflow marked for MultiKueue.
MARKER = {"mkpolicy.io/managed-by": "multikueue"}
INSTANCE_ID = {"workflows.argoproj.io/controller-instanceid": "mkpolicy-multikueue"}


def module_cache() -> str:
    """The Go module cache (GOMODCACHE, else ``go env``, else ~/go/pkg/mod)."""
    if os.environ.get("GOMODCACHE"):
        return os.environ["GOMODCACHE"]
    try:
        out = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30, check=False)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except OSError:
        pass
    return os.path.expanduser("~/go/pkg/mod")


def argo_crd() -> Path:
    """Argo's full Workflow CRD: the newest Argo module in the Go module cache, else ../shared/crds."""
    pattern = os.path.join(
        module_cache(), "github.com/argoproj/argo-workflows/v*@v*/manifests/base/crds/full/argoproj.io_workflows.yaml"
    )

    def version(path: str) -> tuple[int, ...]:
        tag = path.split("@v", 1)[1].split("/", 1)[0]
        return tuple(int(p) for p in tag.split("-")[0].split(".") if p.isdigit())

    found = sorted(glob.glob(pattern), key=version)
    if found:
        return Path(found[-1])
    if (SHARED / "argoproj.io_workflows.yaml").is_file():
        return SHARED / "argoproj.io_workflows.yaml"
    pytest.skip("Argo's Workflow CRD not found: go mod download github.com/argoproj/argo-workflows/v4@latest")


@functools.cache
def argo_crds() -> tuple[dict[str, Any], dict[str, Any]]:
    """(Argo's CRD as the workers serve it, as ``export crd-patch`` gives it to the manager), parsed once."""
    (crd,) = [d for d in load_file(str(argo_crd())) if isinstance(d, dict)]
    text, _ = crd_patch(mkpolicy.load(str(ARGO)), [crd])
    (patched,) = [d for d in load_all(text) if isinstance(d, dict)]
    return crd, patched


@contextlib.contextmanager
def argo_clusters(tmp_path: Path, *, manager_patched: bool = True) -> Iterator[Clusters]:
    """The harness's clusters serving Argo's CRD (the manager's given spec.managedBy unless told not to)."""
    crd, patched = argo_crds()
    with clusters(tmp_path) as env:
        env.manager.register_crd(patched if manager_patched else crd)
        for worker in env.workers.values():
            worker.register_crd(crd)
        yield env


def workflow(name: str, namespace: str) -> dict[str, Any]:
    """A Workflow on the manager as the admission policy leaves it."""
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**MARKER, **INSTANCE_ID, "kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "managedBy": "kueue.x-k8s.io/multikueue",
            "entrypoint": "main",
            "templates": [{"name": "main", "container": {"image": "busybox", "command": ["true"]}}],
        },
    }


def argo_status(step: str, name: str) -> dict[str, Any]:
    """What Argo's controller writes (``nodes`` and the offload fields stay on the worker)."""
    node = {"id": name, "name": name, "type": "Pod", "templateName": "main", "phase": step}
    out: dict[str, Any] = {
        "phase": step,
        "startedAt": "2026-11-26T10:00:00Z",
        "progress": "0/1" if step == "Running" else "1/1",
        "nodes": {name: node},
        "offloadNodeStatusVersion": "fnv:1234567",
        "conditions": [{"type": "PodRunning", "status": "True" if step == "Running" else "False"}],
    }
    if step != "Running":
        out["finishedAt"] = "2026-11-26T10:05:00Z"
        out["message"] = "done" if step == "Succeeded" else "main failed"
        out["conditions"].append({"type": "Completed", "status": "True"})
    return out
