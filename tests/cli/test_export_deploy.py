"""``mkpolicy export deploy`` and ``export rbac --config``: a new user's own kind, deployed without editing a file.

The rendered directory is built with the kubectl on PATH (``kubectl kustomize``), offline:
proxies that lead nowhere stand in for a machine without network.
"""

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

SIM_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: simulationruns.sim.acme.io}
spec:
  group: sim.acme.io
  names: {kind: SimulationRun, plural: simulationruns, singular: simulationrun}
  scope: Namespaced
  versions:
    - name: v1beta1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                managedBy: {type: string}
                steps: {type: integer}
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
"""

#: A user's SidecarConfig: their own worker and Secret names.
CONFIG = """\
apiVersion: mkpolicy.io/v1alpha1
kind: SidecarConfig
manager: {namespace: kueue-system}
workers:
  - name: east
    kubeconfig: {secret: {name: east-kubeconfig}}
  - name: west
    kubeconfig: {secret: {name: west-real}}
    wireSecret: west-multikueue
"""

KUEUE = """\
apiVersion: v1
kind: Namespace
metadata: {name: kueue-system}
---
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
          image: registry.k8s.io/kueue/kueue:v0.19.2
"""

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with kustomize) is not installed")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    """A new user's directory: a policy for their kind (``mkpolicy init --crd``), a config, Kueue's manifests."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "crd.yaml").write_text(SIM_CRD)
    argv = ["init", "--framework", "SimulationRun.v1beta1.sim.acme.io", "--crd", "crd.yaml", "--dir", "my-policies"]
    assert run(capsys, *argv)[0] == 0
    (tmp_path / "sidecar.yaml").write_text(CONFIG)
    (tmp_path / "kueue.yaml").write_text(KUEUE)
    return tmp_path


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize`` without network (proxies to a closed port: a fetch would fail)."""
    env = {**os.environ, "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
    proc = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {[(d['kind'], d['metadata']['name']) for d in docs]}"
    return found[0]


def rules_of(docs: list[dict[str, Any]], kind: str, name: str) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(verb, group, resource, names) of every rule of a role."""
    role = find(docs, kind, name)
    return [
        (verb, group, resource, tuple(rule.get("resourceNames", ())))
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    ]


@needs_kubectl
def test_a_new_kind_deploys_from_generated_files(user: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["export", "deploy", "--policies", "my-policies", "--config", "sidecar.yaml", "--kueue", "kueue.yaml"]
    code, out, err = run(capsys, *argv, "-o", "out")
    assert code == 0, err
    assert "kubectl apply --server-side -k out" in out
    docs = kustomize(user / "out")

    deployment = find(docs, "Deployment", "kueue-controller-manager")
    pod = deployment["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["manager", "mkpolicy"]
    sidecar = pod["containers"][1]
    assert "--wire" in sidecar["args"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in sidecar["volumeMounts"]}
    assert set(mounts.values()) <= set(volumes)
    # The policies: a fixed name (hot reload without a restart), an optional volume (no wait on a new install).
    policies_volume = volumes[mounts["/usr/share/mkpolicy/policies"]]["configMap"]
    assert policies_volume == {"name": "mkpolicy-policies", "optional": True}
    policies_cm = find(docs, "ConfigMap", "mkpolicy-policies")
    assert policies_cm["metadata"]["namespace"] == "kueue-system"
    data = policies_cm["data"]
    assert sorted(data) == ["sim-simulationrun.schema.json", "sim-simulationrun.yaml"]  # the policy and its trimmed CRD
    assert data["sim-simulationrun.yaml"] == (user / "my-policies" / "sim-simulationrun.yaml").read_text()
    # The configuration: the user's own file, under a hashed name the volume follows.
    config_volume = volumes[mounts["/etc/mkpolicy/config"]]["configMap"]["name"]
    assert config_volume.startswith("mkpolicy-sidecar-config-")
    (user / "check.yaml").write_text(find(docs, "ConfigMap", config_volume)["data"]["sidecar.yaml"])
    assert [w.name for w in load_config(str(user / "check.yaml")).workers] == ["east", "west"]

    # RBAC: the user's kind and Secrets, nothing of Tekton's or of worker1/worker2.
    text = yaml.safe_dump_all(docs)
    assert "tekton" not in text and "worker1" not in text and "pipelineruns" not in text
    kueue = set(rules_of(docs, "ClusterRole", "mkpolicy-manager"))
    assert ("patch", "sim.acme.io", "simulationruns/status", ()) in kueue
    own = set(rules_of(docs, "ClusterRole", "mkpolicy-sidecar"))
    assert own == {
        ("get", "sim.acme.io", "simulationruns", ()),
        ("create", "", "events", ()),
        ("patch", "", "events", ()),
    }
    secrets = set(rules_of(docs, "Role", "mkpolicy-sidecar"))
    assert ("watch", "", "secrets", ("east-kubeconfig", "west-real")) in secrets
    assert ("get", "", "configmaps", ("kueue-manager-config",)) in secrets
    wiring = set(rules_of(docs, "Role", "mkpolicy-sidecar-wiring"))
    assert ("update", "", "secrets", ("east-kubeconfig", "west-multikueue")) in wiring
    assert ("create", "", "secrets", ()) in wiring  # a wireSecret that does not exist yet
    assert set(rules_of(docs, "ClusterRole", "mkpolicy-sidecar-wiring")) == {
        ("get", "kueue.x-k8s.io", "multikueueclusters", ("east",))  # west names its wireSecret
    }
    for binding in (d for d in docs if d["kind"].endswith("Binding")):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "kueue-controller-manager", "namespace": "kueue-system"}
        ]
    assert {d["roleRef"]["name"] for d in docs if d["kind"].endswith("Binding")} == {
        d["metadata"]["name"] for d in docs if d["kind"] in ("Role", "ClusterRole")
    }

    workers = kustomize(user / "out" / "workers")
    assert set(rules_of(workers, "ClusterRole", "mkpolicy-worker")) >= {
        ("create", "sim.acme.io", "simulationruns", ()),
        ("get", "sim.acme.io", "simulationruns/status", ()),
    }
    assert find(workers, "ClusterRoleBinding", "mkpolicy-worker")["subjects"] == [
        {"kind": "ServiceAccount", "name": "multikueue-sa", "namespace": "kueue-system"}
    ]


@needs_kubectl
def test_the_component_goes_into_the_users_own_kustomization(user: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --kueue: DIR/sidecar is a component for the kustomization that installs Kueue."""
    argv = ["export", "deploy", "--policies", "my-policies", "--config", "sidecar.yaml", "--no-wire", "-o", "out"]
    assert run(capsys, *argv)[0] == 0
    assert not (user / "out" / "kustomization.yaml").exists()
    (user / "mine").mkdir()
    shutil.move(user / "kueue.yaml", user / "mine" / "kueue.yaml")
    (user / "mine" / "kustomization.yaml").write_text("resources: [kueue.yaml]\ncomponents: [../out/sidecar]\n")
    docs = kustomize(user / "mine")
    sidecar = find(docs, "Deployment", "kueue-controller-manager")["spec"]["template"]["spec"]["containers"][1]
    assert "--wire" not in sidecar["args"]
    assert "--kubeconfig-dir=/var/run/mkpolicy/kubeconfigs" in sidecar["args"]  # to wire by hand
    assert not [d for d in docs if "wiring" in d["metadata"]["name"]]


def test_what_cannot_be_rendered_says_why(user: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["export", "deploy", "--policies", "my-policies", "--config", "sidecar.yaml"]
    assert run(capsys, "export", "deploy", "--policies", "my-policies") == (
        2, "", "error: export deploy: --config FILE is required (the SidecarConfig the sidecar runs with)\n"
    )  # fmt: skip
    code, _, err = run(capsys, *base, "--kueue", "https://github.com/kubernetes-sigs/kueue/releases/manifests.yaml")
    assert code == 2 and "is a URL: kustomize would fetch it at every build; download it first" in err
    # A kubeconfig file and no wireSecret: the Secret --wire rewrites is unknown.
    (user / "files.yaml").write_text(
        CONFIG.replace("{secret: {name: east-kubeconfig}}", "{file: /etc/east.kubeconfig}")
    )
    code, _, err = run(capsys, *base[:-1], "files.yaml")
    assert code == 2
    assert "worker(s) east: the kubeconfig is a file and no wireSecret is set" in err
    code, _, err = run(capsys, *base[:-1], "files.yaml", "--no-wire")
    assert code == 0
    assert "note: worker east reads its kubeconfig from the file /etc/east.kubeconfig: mount it" in err
    # A schema in a directory cannot sit in the flat ConfigMap; one over 1 MiB does not fit at all.
    policy = user / "my-policies" / "sim-simulationrun.yaml"
    policy.write_text(policy.read_text().replace("schema: sim-simulationrun.schema.json", "schema: sub/s.json"))
    code, _, err = run(capsys, *base)
    assert code == 2
    assert "spec.schema 'sub/s.json' names a directory: the policies ConfigMap is flat; put the schema beside" in err
    assert err.startswith(os.path.join("my-policies", "sim-simulationrun.yaml") + ":")
    policy.write_text(policy.read_text().replace("schema: sub/s.json", "schema: big.json"))
    (user / "my-policies" / "big.json").write_text('{"type": "object", "description": "' + "x" * (1 << 20) + '"}')
    code, _, err = run(capsys, *base)
    assert code == 2
    size = policy.stat().st_size + (user / "my-policies" / "big.json").stat().st_size
    assert f"error: the policies ConfigMap would hold {size:,} bytes;" in err
    assert "kube-apiserver refuses a ConfigMap whose data is over 1,048,576 bytes (the largest file: big.json)" in err


def test_export_rbac_includes_the_sidecars_own_rules(user: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "export", "rbac", "--policies", "my-policies")
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["metadata"]["name"] for d in docs] == ["mkpolicy-manager", "mkpolicy-worker", "mkpolicy-sidecar"]
    assert ("get", "sim.acme.io", "simulationruns", ()) in rules_of(docs, "ClusterRole", "mkpolicy-sidecar")
    code, out, _ = run(capsys, "export", "rbac", "--policies", "my-policies", "--config", "sidecar.yaml")
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ClusterRole", "mkpolicy-manager"),
        ("ClusterRole", "mkpolicy-worker"),
        ("ClusterRole", "mkpolicy-sidecar"),
        ("Role", "mkpolicy-sidecar"),
        ("ClusterRole", "mkpolicy-sidecar-wiring"),
        ("Role", "mkpolicy-sidecar-wiring"),
    ]
    assert ("get", "", "secrets", ("east-kubeconfig", "west-real")) in rules_of(docs, "Role", "mkpolicy-sidecar")
    # manager.reads: cache keeps a watch cache of the kinds: list and watch too (sidecar/cache.py).
    (user / "cache.yaml").write_text(CONFIG.replace("manager: {namespace: kueue-system}", "manager: {reads: cache}"))
    code, out, _ = run(capsys, "export", "rbac", "--policies", "my-policies", "--config", "cache.yaml")
    own = set(rules_of([d for d in yaml.safe_load_all(out) if d], "ClusterRole", "mkpolicy-sidecar"))
    assert {(v, "sim.acme.io", "simulationruns", ()) for v in ("get", "list", "watch")} <= own
    code, _, err = run(capsys, "export", "rbac", "--policies", "my-policies", "--config", "nowhere.yaml")
    assert code == 2 and "nowhere.yaml" in err
