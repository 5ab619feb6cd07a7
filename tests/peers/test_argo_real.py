"""Argo's manager side on a real kube-apiserver (v1.36, from the real-peer harness ``mkpolicy.testing.peers``),
driven the way docs/install.md tells a user: kubectl server-side apply of Argo's real CRD (read from the Go
module cache), ``mkpolicy export crd-patch`` piped into ``kubectl apply --server-side`` with its own field
manager, ``mkpolicy export argo-admission`` applied as is, and the sidecar's status write meeting a real
ValidatingAdmissionPolicy. Skipped where the harness, Go or kubectl is missing."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("mkpolicy.testing.peers.controlplane", reason="the real-peer harness (mkpolicy.testing.peers)")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sidecar"))
import contextlib

from argo_harness import ARGO, argo_crd

import mkpolicy
from mkpolicy.kube.client import KubeClient, ResourceInfo
from mkpolicy.kube.kubeconfig import rest_config
from mkpolicy.lint.argo_admission import manifests
from mkpolicy.sidecar.mainstatus import write_status
from mkpolicy.sidecar.policies import Entry
from mkpolicy.sidecar.transform import measure
from mkpolicy.testing.apiserver import ApiError
from mkpolicy.testing.kubectl import Kubectl
from mkpolicy.testing.peers.admission import create_admitted

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
WF = ("argoproj.io/v1alpha1", "Workflow")
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "workflows.argoproj.io")
MK = "kueue.x-k8s.io/multikueue"
INSTANCE = "workflows.argoproj.io/controller-instanceid"
_names = itertools.count()


def eventually(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``check()`` until truthy (policies and CRDs take effect when kube-apiserver's informers see them)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {value!r})")
        time.sleep(0.2)


def mkpolicy_cmd(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkpolicy", *args], input=input, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def kube(real_kube: Any, tmp_path: Path) -> Iterator[tuple[Any, Kubectl, str]]:
    """The real cluster, kubectl on it, a fresh namespace; Argo's CRD removed afterwards."""
    kubectl = Kubectl.for_kubeconfig(real_kube.write_kubeconfig(tmp_path / "kube.kubeconfig"), tmp_path)
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    namespace = f"argo-{next(_names)}"
    real_kube.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    yield real_kube, kubectl, namespace
    real_kube.admin.delete("v1", "Namespace", namespace)
    with contextlib.suppress(ApiError):
        real_kube.admin.delete(*CRD)

    def gone() -> bool:
        try:
            real_kube.admin.get(*CRD)
        except ApiError as exc:
            return exc.code == 404
        return False

    eventually(gone, "Argo's CRD deleted")


def install_patched_crd(kubectl: Kubectl) -> None:
    """What docs/install.md says: Argo's CRD as Argo installs it, then the patch with its own field manager."""
    kubectl.run("apply", "--server-side", "-f", str(argo_crd()), timeout=120)
    current = kubectl.run("get", "crd", "workflows.argoproj.io", "-o", "yaml").stdout
    patch = mkpolicy_cmd("export", "crd-patch", "--policies", str(ARGO), "--crd", "-", input=current)
    assert patch.returncode == 0, patch.stderr
    kubectl.run(
        "apply", "--server-side", "--force-conflicts", "--field-manager=mkpolicy-crd-patch", "-f", "-",
        input=patch.stdout, timeout=120,
    )  # fmt: skip


def declares_managed_by(cluster: Any) -> bool:
    crd = cluster.admin.get(*CRD)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    return "managedBy" in spec


def workflow(name: str, namespace: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": WF[0], "kind": WF[1], "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}],
                     **spec}}  # fmt: skip


def test_the_crd_patch_is_kept_by_its_own_field_manager(kube: tuple[Any, Kubectl, str], tmp_path: Path) -> None:
    cluster, kubectl, namespace = kube
    install_patched_crd(kubectl)
    assert declares_managed_by(cluster)
    managers = {m["manager"] for m in cluster.admin.get(*CRD)["metadata"]["managedFields"]}
    assert "mkpolicy-crd-patch" in managers
    # spec.managedBy is kept, not pruned
    stored = eventually(
        lambda: _create_kept(cluster, workflow("kept", namespace, {}, managedBy=MK)), "spec.managedBy kept"
    )
    assert stored["spec"]["managedBy"] == MK
    # Argo's upgrade by server-side apply (its documented command) does not silently drop the field:
    # spec.versions is an atomic list owned by mkpolicy-crd-patch, so the apply conflicts
    upgrade = kubectl.run("apply", "--server-side", "-f", str(argo_crd()), check=False, timeout=120)
    assert upgrade.returncode != 0 and "mkpolicy-crd-patch" in upgrade.stderr and ".spec.versions" in upgrade.stderr
    assert declares_managed_by(cluster)
    # forced, it does: mkpolicy sidecar --check finds the CRD without the field
    kubectl.run("apply", "--server-side", "--force-conflicts", "-f", str(argo_crd()), timeout=120)
    assert not declares_managed_by(cluster)
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / ARGO.name).write_text(ARGO.read_text().replace("../schemas/", str(ROOT / "schemas") + "/"))
    config = tmp_path / "sidecar.yaml"
    config.write_text(yaml.safe_dump({
        "manager": {"kubeconfig": str(kubectl.kubeconfig)},
        "workers": [{"name": "worker1", "kubeconfig": {"file": str(kubectl.kubeconfig)}}],
    }))  # fmt: skip
    check = mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(config))
    assert check.returncode == 2 and "the manager's CRD workflows.argoproj.io prunes /spec/managedBy" in check.stderr
    install_patched_crd(kubectl)  # the documented fix
    check = mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(config))
    assert check.returncode == 0, check.stderr


def _create_kept(cluster: Any, obj: dict[str, Any]) -> dict[str, Any] | None:
    """Create ``obj`` under a fresh name; the stored object when kube-apiserver kept spec.managedBy."""
    meta = obj["metadata"]
    body = {**obj, "metadata": {**meta, "name": f"{meta['name']}-{next(_names)}"}}
    stored = create_admitted(cluster, body)  # the CRD replaced just now: admission learns its kind again
    return stored if (stored.get("spec") or {}).get("managedBy") else None


def test_the_argo_admission_policies_on_kube_apiserver(kube: tuple[Any, Kubectl, str]) -> None:
    cluster, kubectl, namespace = kube
    install_patched_crd(kubectl)
    docs = manifests(mkpolicy.load(str(ARGO))[0])
    kubectl.run("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    marked = {"mkpolicy.io/managed-by": "multikueue"}
    # the policies take effect once kube-apiserver's informers see them: create until they do
    stored = eventually(lambda: _create_kept(cluster, workflow("wf", namespace, marked)), "the admission policies")
    name = stored["metadata"]["name"]
    assert stored["spec"]["managedBy"] == MK
    assert stored["metadata"]["labels"][INSTANCE] == "mkpolicy-multikueue"

    # The UPDATE policies take effect on their own, maybe after the CREATE one: probe until they act.
    def kept_on_update() -> Any:
        probe = _create_kept(cluster, workflow("probe", namespace, marked))
        if probe is None:
            return None
        probe["spec"] = {k: v for k, v in probe["spec"].items() if k != "managedBy"}
        probe["metadata"]["labels"][INSTANCE] = "prod"
        updated: dict[str, Any] = cluster.admin.update(probe)
        labels = updated["metadata"].get("labels") or {}
        return updated["spec"].get("managedBy") == MK and labels.get(INSTANCE) == "mkpolicy-multikueue"

    eventually(kept_on_update, "the UPDATE admission policies")
    # Argo's CLI round trip (a whole-object update through Go types without the field): kept
    dropped = dict(stored)
    dropped["spec"] = {k: v for k, v in stored["spec"].items() if k != "managedBy"} | {"suspend": True}
    updated = cluster.admin.update(dropped)
    assert updated["spec"]["managedBy"] == MK and updated["spec"]["suspend"] is True
    # the instance id cannot be taken away
    relabelled = cluster.admin.get(*WF, name, namespace)
    relabelled["metadata"]["labels"][INSTANCE] = "prod"
    assert cluster.admin.update(relabelled)["metadata"]["labels"][INSTANCE] == "mkpolicy-multikueue"
    # unmarked Workflows and worker copies are left alone
    plain = cluster.admin.create(workflow("plain", namespace, {"team": "a"}))
    assert "managedBy" not in plain["spec"] and INSTANCE not in plain["metadata"]["labels"]
    copy = cluster.admin.create(workflow("copy", namespace, {**marked, "kueue.x-k8s.io/multikueue-origin": "mk"}))
    assert "managedBy" not in copy["spec"] and INSTANCE not in copy["metadata"]["labels"]
    for doc in docs:
        cluster.admin.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])


def test_a_status_write_a_validating_admission_policy_refuses_is_told(kube: tuple[Any, Kubectl, str]) -> None:
    """The sidecar's write of the policy's status to the main resource, refused by a real
    ValidatingAdmissionPolicy: the refusal comes back with kube-apiserver's message (the sidecar
    makes it an Event, tests/sidecar/test_sidecar_argo.py); allowed, the status is written."""
    cluster, kubectl, namespace = kube
    install_patched_crd(kubectl)
    vap: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"no-failed-{namespace}"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["argoproj.io"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["UPDATE"],
                        "resources": ["workflows"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": 'object.?status.?phase.orValue("") != "Failed"',
                    "message": "Failed Workflows are reported elsewhere",
                }
            ],
        },
    }
    binding: dict[str, Any] = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": vap["metadata"]["name"]},
        "spec": {"policyName": vap["metadata"]["name"], "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}},
    }  # fmt: skip
    cluster.admin.create(vap)
    cluster.admin.create(binding)
    manager = eventually(
        lambda: _create_kept(cluster, workflow("run", namespace, {}, managedBy=MK)), "spec.managedBy kept"
    )
    name = manager["metadata"]["name"]
    adapter = mkpolicy.compile(mkpolicy.load(str(ARGO))[0])
    entry = Entry(adapter, ResourceInfo("argoproj.io", "v1alpha1", "Workflow", "workflows", True, False))
    worker = {
        "apiVersion": WF[0], "kind": WF[1],
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/multikueue-origin": "mk"},
                     "annotations": {"kueue.x-k8s.io/prebuilt-workload-name": "wl"}},
        "spec": {"entrypoint": "main"},
    }  # fmt: skip

    async def write(phase: str, target: str = name, note: str | None = None) -> Any:
        worker["metadata"]["name"] = target
        worker["status"] = {"phase": phase, "startedAt": "2026-11-26T10:00:00Z", "nodes": {"x": {"id": "x"}}}
        if note is not None:
            worker["status"]["message"] = note
        async with KubeClient(rest_config(cluster.kubeconfig())) as client:

            async def run(key: object, *args: Any) -> Any:
                return measure(*args)

            return await write_status(client, entry, worker, "worker1", "mk", run)

    # The policy takes effect when kube-apiserver's informers see it: probe on another Workflow
    # (a new message each attempt, so a write that got through before is no "unchanged").
    probe = eventually(
        lambda: _create_kept(cluster, workflow("probe", namespace, {}, managedBy=MK)), "spec.managedBy kept"
    )["metadata"]["name"]
    attempts = itertools.count()

    def refused() -> Any:
        written = asyncio.run(write("Failed", probe, f"attempt {next(attempts)}"))
        return written if written.result == "refused" else None

    eventually(refused, "the ValidatingAdmissionPolicy")
    written = asyncio.run(write("Failed"))
    assert written.result == "refused"
    assert "Failed Workflows are reported elsewhere" in written.message
    assert "status" not in cluster.admin.get(*WF, name, namespace)
    assert asyncio.run(write("Running")).result == "written"
    stored = cluster.admin.get(*WF, name, namespace)
    assert stored["status"] == {"phase": "Running", "startedAt": "2026-11-26T10:00:00Z"}
    assert "mkpolicy-sidecar" in {m["manager"] for m in stored["metadata"]["managedFields"]}
    cluster.admin.delete(binding["apiVersion"], binding["kind"], binding["metadata"]["name"])
    cluster.admin.delete(vap["apiVersion"], vap["kind"], vap["metadata"]["name"])
