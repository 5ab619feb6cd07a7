"""Deployment artefacts: what ``mkpolicy export deploy`` renders for the shipped policies and the
example SidecarConfig (pod, RBAC, kustomize build), and the Dockerfile (checked structurally)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mkpolicy.cli.main import main
from mkpolicy.sidecar.config import load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = ROOT / "examples" / "deploy" / "sidecar-config.yaml"
#: Ports Kueue's manager container uses in the same pod (metrics, health, webhook, pprof).
KUEUE_PORTS = {8080, 8081, 8082, 8443, 9443}

STUB_KUEUE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: kueue-controller-manager, namespace: kueue-system}
spec:
  selector: {matchLabels: {control-plane: controller-manager}}
  template:
    metadata: {labels: {control-plane: controller-manager}}
    spec:
      serviceAccountName: kueue-controller-manager
      containers:
        - name: manager
          image: registry.k8s.io/kueue/kueue:v0.15.2
          args: [--config=/controller_manager_config.yaml]
      volumes:
        - name: manager-config
          configMap: {name: kueue-manager-config}
"""


def yaml_docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@pytest.fixture
def rendered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """``export deploy`` of the shipped Tekton policy with the example config."""
    (tmp_path / "kueue.yaml").write_text(STUB_KUEUE)
    argv = ["export", "deploy", "--policies", str(ROOT / "policies" / "tekton-pipelinerun.yaml")]
    argv += ["--config", str(EXAMPLE_CONFIG), "--kueue", str(tmp_path / "kueue.yaml"), "-o", str(tmp_path / "out")]
    assert main(argv) == 0, capsys.readouterr().err
    return tmp_path / "out"


def test_example_config_is_valid() -> None:
    cfg = load_config(str(EXAMPLE_CONFIG))
    ports = set(cfg.worker_ports()) | {cfg.ops.port}
    assert not ports & KUEUE_PORTS, "the sidecar must not take a port Kueue uses in the same pod"
    assert cfg.listen.address == "127.0.0.1"
    assert cfg.manager.kubeconfig is None  # in-cluster
    assert cfg.state.dir == "/var/run/mkpolicy"


def rbac_rules(out: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        (doc["metadata"]["name"], rule)
        for doc in yaml_docs(out / "sidecar" / "rbac.yaml")
        if doc["kind"] in ("Role", "ClusterRole")
        for rule in doc["rules"]
    ]


def test_rbac_is_least_privilege(rendered: Path) -> None:
    rules = rbac_rules(rendered)
    assert rules
    for name, rule in rules:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], f"{name}: no wildcards in {key}"
        writes = set(rule["verbs"]) - {"get", "list", "watch"}
        if name == "mkpolicy-manager":  # Kueue's own: the jobs and their status
            assert rule["apiGroups"] == ["tekton.dev"] and writes <= {"update", "patch"}
        elif writes and rule["resources"] == ["events"]:
            # refusals recorded on the jobs (client-go's recorder creates, then patches the count)
            assert rule["apiGroups"] == [""] and writes == {"create", "patch"}, name
        elif writes:
            assert name == "mkpolicy-sidecar-wiring", f"{name}: only the wiring writes"
            assert rule["resources"] == ["secrets"] and rule.get("resourceNames"), f"{name}: named Secrets only"
            assert writes == {"update", "delete"}
        if rule["resources"] in (["configmaps"], ["deployments"]):
            assert rule.get("resourceNames") and rule["verbs"] == ["get"], f"{name}: Kueue's own objects, read only"
        if "secrets" in rule["resources"]:
            assert rule.get("resourceNames"), f"{name}: Secrets are named, never all of them"
    for doc in yaml_docs(rendered / "sidecar" / "rbac.yaml"):
        if doc["kind"].endswith("Binding"):
            assert doc["subjects"] == [
                {"kind": "ServiceAccount", "name": "kueue-controller-manager", "namespace": "kueue-system"}
            ]


def sidecar_container(out: Path) -> dict[str, Any]:
    ops = yaml_docs(out / "sidecar" / "sidecar-container.yaml")[0]
    (op,) = [o for o in ops if o["op"] == "add"]
    assert op["path"] == "/spec/template/spec/containers/-"
    container: dict[str, Any] = op["value"]
    return container


def check_pod(spec: dict[str, Any], wired: bool) -> None:
    names = [c["name"] for c in spec["containers"]]
    assert names[0] == "manager" and "mkpolicy" in names, names
    container = next(c for c in spec["containers"] if c["name"] == "mkpolicy")
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    for mount in mounts.values():
        assert mount in volumes, f"volume {mount} is mounted but not defined"
    args = container["args"]
    assert args[0] == "sidecar"
    policies = next(a.split("=", 1)[1] for a in args if a.startswith("--policies="))
    config = next(a.split("=", 1)[1] for a in args if a.startswith("--config="))
    assert volumes[mounts[policies]]["configMap"] == {"name": "mkpolicy-policies", "optional": True}
    assert os.path.dirname(config) in mounts
    assert ("--wire" in args) is wired
    assert "/var/run/mkpolicy" in mounts and "/tmp" in mounts  # state dir, private temp files
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    port = container["ports"][0]["containerPort"]
    assert port not in KUEUE_PORTS
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "readinessProbe" not in container  # the pod's readiness gates Kueue's webhook


def test_component_files_structurally(rendered: Path) -> None:
    spec = yaml.safe_load(STUB_KUEUE)["spec"]["template"]["spec"]
    patch = yaml_docs(rendered / "sidecar" / "sidecar-patch.yaml")[0]
    spec["containers"].append(sidecar_container(rendered))
    spec["volumes"].extend(patch["spec"]["template"]["spec"]["volumes"])
    check_pod(spec, wired=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with kustomize) is not installed")
def test_kustomize_build(rendered: Path) -> None:
    proc = subprocess.run(
        ["kubectl", "kustomize", str(rendered)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    kinds = sorted(d["kind"] for d in docs)
    expected = ["ClusterRole"] * 3 + ["ClusterRoleBinding"] * 3 + ["ConfigMap"] * 2 + ["Deployment"]
    expected += ["Role", "RoleBinding"] * 2
    assert kinds == sorted(expected)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    check_pod(spec, wired=True)
    volume = next(v for v in spec["volumes"] if v["name"] == "mkpolicy-config")
    configmap = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == volume["configMap"]["name"]
    )
    assert configmap["metadata"]["namespace"] == "kueue-system"
    config_file = rendered / "check.yaml"
    config_file.write_text(configmap["data"]["sidecar.yaml"])
    load_config(str(config_file))


def test_dockerfile(rendered: Path) -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.strip() and ln[0] != "#"]
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    assert len(froms) == 2 and all("python:3.11" in ln for ln in froms)
    user = next(ln for ln in lines if ln.startswith("USER "))
    uid = user.split()[1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    assert 'ENTRYPOINT ["mkpolicy"]' in lines
    assert any(ln.startswith("COPY mkpolicy") for ln in lines)
    # the policies mount sits next to the schemas the shipped policies name (../schemas/crds/...)
    args = sidecar_container(rendered)["args"]
    policies = next(a.split("=", 1)[1] for a in args if a.startswith("--policies="))
    assert f"COPY schemas {os.path.dirname(policies)}/schemas" in lines
    assert any("pip wheel" in ln for ln in lines)
    # the image serves the ops port the manifests probe
    assert f"EXPOSE {sidecar_container(rendered)['ports'][0]['containerPort']}" in lines
