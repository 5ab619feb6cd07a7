"""What ``mkpolicy export deploy`` renders, applied to a real kube-apiserver as docs/install.md says.

``kubectl apply --server-side -k`` of the whole output (Kueue's Deployment stood in by a
stub, the sidecar patched into it, every role and binding, the two ConfigMaps) is accepted
by kube-apiserver v1.36; the policies ConfigMap is updated the same way past 256 KiB, where a
client-side ``kubectl apply`` fails on its last-applied annotation; past 1 MiB kube-apiserver
refuses it however it is applied (what MKP109 and ``export deploy`` say first).

Needs the real-peer harness (``real_kube``: mkpolicy.testing.peers, docs/testing.md) and kubectl.
"""

from __future__ import annotations

import json
import secrets
import shutil
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
