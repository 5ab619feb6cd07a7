"""What ``mkpolicy export deploy`` renders, applied to a real kube-apiserver as docs/install.md says.

``kubectl apply --server-side -k`` of the whole output (Kueue's Deployment stood in by a
stub, the sidecar patched into it, every role and binding, the two ConfigMaps) is accepted
by kube-apiserver v1.36; the policies ConfigMap is updated the same way past 256 KiB, where a
client-side ``kubectl apply`` fails on its last-applied annotation; past 1 MiB kube-apiserver
refuses it however it is applied (what MKP109 and ``export deploy`` say first).

``mkpolicy sidecar --check``, as Kueue's service account (a TokenRequest token), reviews the
rendered roles with kube-apiserver's own RBAC authorizer: all granted, then each one taken
away named with the cluster, verb and resource.

Needs the real-peer harness (``real_kube``: mkpolicy.testing.peers, docs/testing.md) and kubectl.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("mkpolicy.testing.peers.fixtures", reason="the real-peer harness (mkpolicy.testing.peers)")

from mkpolicy.testing.peers.controlplane import KubeCluster

from mkpolicy.cli.main import main
from mkpolicy.testing.kubectl import Kubectl

pytestmark = [
    pytest.mark.real_peers,
    pytest.mark.timeout(600),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

POLICY = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: sim}
spec:
  framework: SimulationRun.v1beta1.sim.acme.io
  schema: sim.schema.json
"""


def schema(size: int) -> str:
    """A schema of about ``size`` bytes (long descriptions, as real CRDs have)."""
    fields = {f"f{i}": {"type": "string", "description": "x" * 1000} for i in range(size // 1040)}
    return json.dumps({"type": "object", "properties": {"spec": {"type": "object", "properties": fields}}})


def kueue_stub(namespace: str) -> str:
    return yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "kueue-controller-manager", "namespace": namespace},
         "spec": {"selector": {"matchLabels": {"app": "kueue"}},
                  "template": {"metadata": {"labels": {"app": "kueue"}},
                               "spec": {"containers": [{"name": "manager",
                                                        "image": "registry.k8s.io/kueue/kueue:v0.19.2"}]}}}},
    ])  # fmt: skip


def test_rendered_output_applies_server_side_past_256_kib(real_kube: KubeCluster, tmp_path: Path) -> None:
    ns = f"deploy-{secrets.token_hex(3)}"
    prefix = f"mkp-{secrets.token_hex(3)}"  # cluster-scoped roles: a name of this test's own
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "sim.yaml").write_text(POLICY)
    (tmp_path / "kueue.yaml").write_text(kueue_stub(ns))
    (tmp_path / "sidecar.yaml").write_text(
        f"manager: {{namespace: {ns}}}\nworkers:\n  - name: east\n    kubeconfig: {{secret: {{name: east-kc}}}}\n"
    )
    kubectl = Kubectl.for_kubeconfig(real_kube.write_kubeconfig(tmp_path / "kube.kubeconfig"), tmp_path)
    assert kubectl is not None

    def render(size: int) -> Path:
        (policies / "sim.schema.json").write_text(schema(size))
        argv = ["export", "deploy", "--policies", str(policies), "--config", str(tmp_path / "sidecar.yaml")]
        argv += ["--kueue", str(tmp_path / "kueue.yaml"), "--name-prefix", prefix, "-o", str(tmp_path / "out")]
        assert main(argv) == 0
        return tmp_path / "out"

    def stored() -> dict[str, str]:
        data: dict[str, str] = kubectl.json("get", "configmap", f"{prefix}-policies", "-n", ns)["data"]
        return data

    # A new install: one server-side apply, nothing to order.
    out = render(400 * 1024)
    kubectl.run("apply", "--server-side", "-k", str(out))
    deployment = kubectl.json("get", "deployment", "kueue-controller-manager", "-n", ns)
    pod = deployment["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["manager", "mkpolicy"]
    assert {"name": f"{prefix}-policies", "optional": True, "defaultMode": 420} in [
        v.get("configMap") for v in pod["volumes"]
    ]
    assert len(stored()["sim.schema.json"]) > 256 * 1024
    # A policy update past 256 KiB: applied again, server-side.
    render(700 * 1024)
    kubectl.run("apply", "--server-side", "-k", str(out))
    assert len(stored()["sim.schema.json"]) > 700 * 1024 - 2048

    # What a client-side apply does with the same ConfigMap: its last-applied annotation is too long.
    manifest = kubectl.run("kustomize", str(out)).stdout
    [cm] = [d for d in yaml.safe_load_all(manifest) if d and d["kind"] == "ConfigMap" and "policies" in
            d["metadata"]["name"]]  # fmt: skip
    cm["metadata"]["name"] = f"{prefix}-client-side"
    client_side = kubectl.run("apply", "-f", "-", input=yaml.safe_dump(cm), check=False)
    assert client_side.returncode != 0
    assert "metadata.annotations: Too long: may not be more than 262144 bytes" in client_side.stderr

    # Past 1 MiB of data kube-apiserver refuses the ConfigMap whatever applies it.
    cm["metadata"]["name"] = f"{prefix}-too-big"
    cm["data"]["sim.schema.json"] = schema(1100 * 1024)
    too_big = kubectl.run("apply", "--server-side", "-f", "-", input=yaml.safe_dump(cm), check=False)
    assert too_big.returncode != 0
    assert "Too long: may not be more than 1048576 bytes" in too_big.stderr

    kubectl.run("delete", "namespace", ns, "--wait=false")
    for kind in ("clusterrolebinding", "clusterrole"):
        names = [f"{prefix}-manager", f"{prefix}-sidecar", f"{prefix}-sidecar-wiring"]
        kubectl.run("delete", kind, *names, "--ignore-not-found")


CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: simulationruns.{group}}}
spec:
  group: {group}
  names: {{kind: SimulationRun, plural: simulationruns}}
  scope: Namespaced
  versions:
    - name: v1beta1
      served: true
      storage: true
      subresources: {{status: {{}}}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"""


def token_kubeconfig(kubectl: Kubectl, admin: Path, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig authenticating as ``namespace/account`` (a TokenRequest), like a pod's."""
    kubectl.run("create", "serviceaccount", account, "-n", namespace)
    token = kubectl.run("create", "token", account, "-n", namespace).stdout.strip()
    config = yaml.safe_load(admin.read_text())
    config["users"][0]["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


def test_check_reviews_the_rendered_rbac_on_a_real_api_server(real_kube: KubeCluster, tmp_path: Path) -> None:
    """``sidecar --check`` as Kueue's service account: every permission granted by the rendered
    roles (kube-apiserver's RBAC authorizer answers the reviews), then each one taken away named."""
    suffix = secrets.token_hex(3)
    ns, prefix, group = f"check-{suffix}", f"mkc-{suffix}", f"sim{suffix}.acme.io"
    admin = real_kube.write_kubeconfig(tmp_path / "kube.kubeconfig")
    kubectl = Kubectl.for_kubeconfig(admin, tmp_path)
    assert kubectl is not None
    kubectl.run("apply", "--server-side", "-f", "-", input=CRD.format(group=group))
    kubectl.run("wait", "--for=condition=Established", f"crd/simulationruns.{group}", "--timeout=60s")
    (tmp_path / "kueue.yaml").write_text(kueue_stub(ns))
    kubectl.run("apply", "--server-side", "-f", str(tmp_path / "kueue.yaml"))
    manager = token_kubeconfig(kubectl, admin, ns, "kueue-controller-manager", tmp_path / "sa.kubeconfig")
    worker = token_kubeconfig(kubectl, admin, ns, "multikueue-sa", tmp_path / "worker.kubeconfig")
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "east-kc", "namespace": ns},
              "data": {"kubeconfig": base64.b64encode(worker.read_bytes()).decode()}}  # fmt: skip
    kubectl.run("apply", "--server-side", "-f", "-", input=yaml.safe_dump(secret))
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "sim.yaml").write_text(
        f"apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {{name: sim}}\n"
        f"spec: {{framework: SimulationRun.v1beta1.{group}}}\n"
    )
    config = tmp_path / "sidecar.yaml"
    config.write_text(
        f"manager: {{namespace: {ns}, kubeconfig: {manager}}}\n"
        "workers:\n  - name: east\n    kubeconfig: {secret: {name: east-kc}}\n"
    )
    argv = ["export", "deploy", "--policies", str(policies), "--config", str(config), "--name-prefix", prefix]
    argv += ["--worker-service-account", f"{ns}/multikueue-sa", "-o", str(tmp_path / "out")]
    assert main(argv) == 0

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mkpolicy", "sidecar", "--check", "--policies", str(policies), "--config",
             str(config)], capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    try:
        before = check()
        assert before.returncode == 2  # nothing granted yet: not even the worker's Secret
        assert "worker east: error: cannot read Secret" in before.stderr
        (tmp_path / "out" / "kustomization.yaml").write_text("components: [sidecar]\n")  # no Kueue base here
        kubectl.run("apply", "--server-side", "-k", str(tmp_path / "out"))
        kubectl.run("apply", "--server-side", "-k", str(tmp_path / "out" / "workers"))
        granted = check()
        assert granted.returncode == 0, granted.stdout + granted.stderr
        assert "rbac manager: ok" in granted.stdout and "rbac east: ok" in granted.stdout

        kubectl.run("delete", "clusterrolebinding", f"{prefix}-manager", f"{prefix}-sidecar")
        kubectl.run("delete", "clusterrolebinding", f"{prefix}-worker")
        revoked = check()
        assert revoked.returncode == 2
        lines = revoked.stdout.splitlines()
        assert (
            f"error: rbac manager: cannot get simulationruns.{group} (all namespaces): needed for Kueue's reads of "
            "the job and writes of its status; the sidecar's reads of the manager's object (each transformed request)"
        ) in lines, revoked.stdout
        assert (
            "error: rbac manager: cannot create events (all namespaces): needed for the sidecar's Events on the "
            "jobs (refusals)" in lines
        )
        assert (
            f"error: rbac east: cannot create simulationruns.{group} (all namespaces): needed for Kueue's copy "
            "on the worker (created, read and deleted through the sidecar)" in lines
        )
        assert not [ln for ln in lines if ": rbac " in ln and "secrets" in ln and "cannot get" in ln]
    finally:
        kubectl.run("delete", "namespace", ns, "--wait=false", check=False)
        kubectl.run("delete", "crd", f"simulationruns.{group}", "--wait=false", check=False)
        for kind in ("clusterrolebinding", "clusterrole"):
            names = [f"{prefix}-{n}" for n in ("manager", "sidecar", "sidecar-wiring", "worker")]
            kubectl.run("delete", kind, *names, "--ignore-not-found", check=False)
