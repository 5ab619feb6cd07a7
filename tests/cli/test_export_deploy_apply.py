"""Applying the rendered policies ConfigMap past 256 KiB, with kubectl, on the loopback API server.

A client-side ``kubectl apply`` copies the whole object into the
``kubectl.kubernetes.io/last-applied-configuration`` annotation, and kube-apiserver refuses
annotations over 256 KiB in all: such a ConfigMap cannot be applied that way although its
data is far below the 1 MiB a ConfigMap may hold. ``kubectl create`` then ``kubectl replace``
(and ``kubectl apply --server-side``, which the loopback server does not serve; the real
API server's test is in tests/peers/) write no such annotation. MKP109 and ``export deploy``
refuse only what the API server refuses in every way: data over 1 MiB.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from mkpolicy.cli.main import main
from mkpolicy.testing.apiserver import ApiServer
from mkpolicy.testing.kubectl import Kubectl

pytestmark = [
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
    pytest.mark.loopback_only("the loopback server's own limits, through kubectl"),
]

POLICY = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: sim}
spec:
  framework: SimulationRun.v1beta1.sim.acme.io
  schema: sim.schema.json
"""
CONFIG = "workers:\n  - name: east\n    kubeconfig: {secret: {name: east-kubeconfig}}\n"
KUEUE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: kueue-controller-manager, namespace: kueue-system}
spec:
  selector: {matchLabels: {app: kueue}}
  template:
    metadata: {labels: {app: kueue}}
    spec: {containers: [{name: manager, image: registry.k8s.io/kueue/kueue:v0.19.2}]}
"""


def schema(size: int) -> str:
    """A schema of about ``size`` bytes (long descriptions, as real CRDs have)."""
    fields = {f"f{i}": {"type": "string", "description": "x" * 1000} for i in range(size // 1040)}
    return json.dumps({"type": "object", "properties": {"spec": {"type": "object", "properties": fields}}})


def rendered_configmap(tmp: Path, schema_size: int) -> Path:
    """The policies ConfigMap ``export deploy`` renders (through ``kubectl kustomize``), as a file."""
    policies = tmp / "policies"
    policies.mkdir(exist_ok=True)
    (policies / "sim.yaml").write_text(POLICY)
    (policies / "sim.schema.json").write_text(schema(schema_size))
    (tmp / "sidecar.yaml").write_text(CONFIG)
    (tmp / "kueue.yaml").write_text(KUEUE)
    argv = ["export", "deploy", "--policies", str(policies), "--config", str(tmp / "sidecar.yaml")]
    assert main([*argv, "--kueue", str(tmp / "kueue.yaml"), "-o", str(tmp / "out")]) == 0
    kubectl = Kubectl.for_kubeconfig(tmp / "none", tmp)
    assert kubectl is not None
    docs = yaml.safe_load_all(kubectl.run("kustomize", str(tmp / "out")).stdout)
    [cm] = [d for d in docs if d and d["kind"] == "ConfigMap" and d["metadata"]["name"] == "mkpolicy-policies"]
    path = tmp / "policies-configmap.yaml"
    path.write_text(yaml.safe_dump(cm))
    return path


def data_size(cm: dict[str, Any]) -> int:
    return sum(len(v.encode()) for v in cm["data"].values())


def test_past_256_kib_create_and_replace_work_client_side_apply_does_not(tmp_path: Path) -> None:
    with ApiServer("manager", namespaces=("default", "kueue-system")) as srv:
        kubectl = Kubectl.for_kubeconfig(srv.write_kubeconfig(tmp_path / "manager.kubeconfig"), tmp_path)
        assert kubectl is not None
        path = rendered_configmap(tmp_path, 400 * 1024)
        cm = yaml.safe_load(path.read_text())
        assert 256 * 1024 < data_size(cm) < 1024 * 1024

        applied = kubectl.run("apply", "--validate=false", "-f", str(path), check=False)
        assert applied.returncode != 0
        assert "metadata.annotations: Too long: may not be more than 262144 bytes" in applied.stderr

        kubectl.run("create", "--validate=false", "-f", str(path))  # a new install
        stored = srv.get("v1", "ConfigMap", "mkpolicy-policies", "kueue-system")
        assert stored["data"] == cm["data"]
        assert "kubectl.kubernetes.io/last-applied-configuration" not in (stored["metadata"].get("annotations") or {})

        # A policy update: rendered again and replaced, or made with kubectl create --dry-run | replace.
        path = rendered_configmap(tmp_path, 500 * 1024)
        kubectl.run("replace", "--validate=false", "-f", str(path))
        assert (
            srv.get("v1", "ConfigMap", "mkpolicy-policies", "kueue-system")["data"]
            == yaml.safe_load(path.read_text())["data"]
        )
        piped = kubectl.run(
            "create", "configmap", "mkpolicy-policies", "-n", "kueue-system",
            f"--from-file={tmp_path / 'out' / 'sidecar' / 'policies'}", "--dry-run=client", "-o", "yaml",
        ).stdout  # fmt: skip
        kubectl.run("replace", "--validate=false", "-f", "-", input=piped)
        data = srv.get("v1", "ConfigMap", "mkpolicy-policies", "kueue-system")["data"]
        assert sorted(data) == ["sim.schema.json", "sim.yaml"] and data_size({"data": data}) > 500 * 1024


def test_past_1_mib_nothing_works_and_export_says_so_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "sim.yaml").write_text(POLICY)
    (policies / "sim.schema.json").write_text(schema(1100 * 1024))
    (tmp_path / "sidecar.yaml").write_text(CONFIG)
    argv = ["export", "deploy", "--policies", str(policies), "--config", str(tmp_path / "sidecar.yaml")]
    assert main([*argv, "-o", str(tmp_path / "out")]) == 2
    assert "kube-apiserver refuses a ConfigMap whose data is over 1,048,576 bytes" in capsys.readouterr().err
    with ApiServer("manager", namespaces=("default", "kueue-system")) as srv:
        kubectl = Kubectl.for_kubeconfig(srv.write_kubeconfig(tmp_path / "manager.kubeconfig"), tmp_path)
        assert kubectl is not None
        manifest = kubectl.run(
            "create", "configmap", "mkpolicy-policies", "-n", "kueue-system", f"--from-file={policies}",
            "--dry-run=client", "-o", "yaml",
        ).stdout  # fmt: skip
        made = kubectl.run("create", "--validate=false", "-f", "-", input=manifest, check=False)
        assert made.returncode != 0
        assert "Too long: may not be more than 1048576 bytes" in made.stderr
