"""The RBAC ``mkpolicy export deploy`` renders is what the sidecar needs, and ``--check`` finds what is missing.

The loopback servers authorize restricted tokens by the Roles and bindings they store
(docs/apiserver.md, "Authorization"): the sidecar runs as Kueue's service account with
exactly the rendered roles, the whole creation path and a refusal Event go through, and
``mkpolicy sidecar --check`` reviews every permission (SelfSubjectAccessReview) on the
manager and each worker, naming what is missing.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from sidecar_harness import WORKERS, Clusters, clusters, metric, policy_dir, running

from mkpolicy.cli.main import main
from mkpolicy.kube.kubeconfig import write_kubeconfig
from mkpolicy.testing import ApiServer
from mkpolicy.testing.kueue.env import MultiKueueEnv, kubeconfig_bytes

pytestmark = [pytest.mark.timeout(120), pytest.mark.loopback_only("RBAC of the loopback server's authorizer model")]

KUEUE_SA = "system:serviceaccount:kueue-system:kueue-controller-manager"
WORKER_SA = "system:serviceaccount:kueue-system:multikueue-sa"
HOLD = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: hold}
spec:
  framework: PipelineRun.v1.tekton.dev
  matchConditions:
    - name: not_held
      expression: '!has(object.metadata.labels) || object.metadata.labels[?"hold"].orValue("") != "true"'
"""
PR = ("tekton.dev/v1", "PipelineRun")


def render(tmp: Path, policies: Path, config: dict[str, Any]) -> Path:
    """``mkpolicy export deploy`` for ``policies`` and ``config``; returns the output directory."""
    (tmp / "sidecar.yaml").write_text(yaml.safe_dump(config))
    argv = ["export", "deploy", "--policies", str(policies), "--config", str(tmp / "sidecar.yaml")]
    assert main([*argv, "-o", str(tmp / "out")]) == 0
    return tmp / "out"


def apply(server: ApiServer, path: Path) -> None:
    """What ``kubectl apply`` of a rendered RBAC file does on an empty cluster."""
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            server.create(doc)


def restricted(server: ApiServer, tmp: Path, user: str, name: str) -> Path:
    """A kubeconfig for a token of ``user`` (a service account: RBAC applies to it)."""
    token = f"{name}-token"
    server.add_token(token, user=user, groups=["system:serviceaccounts", "system:serviceaccounts:kueue-system"])
    path = tmp / f"{name}.kubeconfig"
    write_kubeconfig(str(path), server.kubeconfig_for(token, cluster=name))
    return path


def deploy_config(env: Clusters, manager_kubeconfig: Path) -> dict[str, Any]:
    return {
        "manager": {"kubeconfig": str(manager_kubeconfig), "namespace": "kueue-system"},
        "workers": [{"name": w, "kubeconfig": {"secret": {"name": f"{w}-secret"}}} for w in ("worker1", "worker2")],
    }


def test_the_sidecar_works_with_exactly_the_rendered_roles(tmp_path: Path) -> None:
    """Kueue's service account with only the rendered roles: the sidecar wires the Secrets,
    transforms a creation (it reads the manager's object) and records a refusal as an Event."""
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "hold.yaml").write_text(HOLD)
        sa = restricted(env.manager, tmp_path, KUEUE_SA, "kueue")  # type: ignore[arg-type]
        out = render(tmp_path, policies, deploy_config(env, sa))
        apply(env.manager, out / "sidecar" / "rbac.yaml")  # type: ignore[arg-type]

        async def scenario() -> None:
            mk = MultiKueueEnv(env.manager, dict(env.workers), env.ns)  # type: ignore[arg-type]
            mk.configure()
            workers = [{"name": w, "kubeconfig": {"secret": {"name": f"{w}-secret"}}} for w in WORKERS]
            config = env.config(manager={"kubeconfig": str(sa), "namespace": "kueue-system"}, workers=workers)
            async with running(config, policies) as sidecar, mk.kueue(time_scale=0.01) as model:
                assert set((await sidecar.wire()).values()) == {"updated"}
                await model.wait_connected("worker1", "worker2")
                held = mk.job("held")
                held["metadata"]["labels"] = {"hold": "true"}
                wl = mk.core.submit(mk.manager.create(held))
                ns = mk.namespace
                await model.wait_for(lambda: model.outcome_kinds(ns, wl).count("dispatched") >= 2, what="dispatched")
                mk.worker_kueue["worker1"].admit(wl, ns)

                def refused() -> list[dict[str, Any]]:
                    return [e for e in env.manager.list("v1", "Event", namespace=ns) if e["reason"] == "NotManaged"]

                await model.wait_for(refused, what="a NotManaged event, written as Kueue's service account")
                free = mk.core.submit(mk.manager.create(mk.job("free")))
                await model.wait_for(lambda: model.outcome_kinds(ns, free).count("dispatched") >= 2, what="free")
                mk.worker_kueue["worker2"].admit(free, ns)
                worker2 = mk.workers["worker2"]
                await model.wait_for(lambda: worker2.list(*PR, namespace=ns), what="the transformed copy")
                assert metric(sidecar, "mkpolicy_sidecar_events_total", reason="NotManaged", result="failed") == 0
                secret = env.manager.get("v1", "Secret", "worker1-secret", "kueue-system")
                assert secret["metadata"]["annotations"]["mkpolicy.io/wired"]

        asyncio.run(scenario())


def check(policies: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkpolicy", "sidecar", "--check", "--policies", str(policies), "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_check_reviews_every_permission_and_names_what_is_missing(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "hold.yaml").write_text(HOLD)
        manager, worker1 = env.manager, env.worker("worker1")
        assert isinstance(manager, ApiServer) and isinstance(worker1, ApiServer)
        sa = restricted(manager, tmp_path, KUEUE_SA, "kueue")
        worker_sa = restricted(worker1, tmp_path, WORKER_SA, "worker1")
        # The worker kubeconfigs in their Secrets: worker1's authenticates as Kueue's worker service account.
        for name, kubeconfig in (
            ("worker1", worker_sa.read_bytes()),
            ("worker2", kubeconfig_bytes(env.worker("worker2").kubeconfig(cluster="worker2"))),
        ):
            manager.create({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": f"{name}-secret", "namespace": "kueue-system"},
                            "data": {"kubeconfig": base64.b64encode(kubeconfig).decode()}})  # fmt: skip
        out = render(tmp_path, policies, deploy_config(env, sa))
        config = tmp_path / "sidecar.yaml"

        # Nothing granted yet: every permission is missing, each named with cluster, verb and resource.
        proc = check(policies, config)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "worker worker1: error: cannot read Secret kueue-system/worker1-secret" in proc.stderr

        apply(manager, out / "sidecar" / "rbac.yaml")
        apply(worker1, out / "workers" / "rbac.yaml")
        proc = check(policies, config)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "rbac manager: ok" in proc.stdout
        assert "rbac worker1: ok" in proc.stdout and "rbac worker2: ok" in proc.stdout

        manager.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "mkpolicy-sidecar")
        manager.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "mkpolicy-manager")
        manager.delete("rbac.authorization.k8s.io/v1", "RoleBinding", "mkpolicy-sidecar-wiring", "kueue-system")
        worker1.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "mkpolicy-worker")
        proc = check(policies, config)
        assert proc.returncode == 2
        lines = proc.stdout.splitlines()
        for expected in (
            "error: rbac manager: cannot get pipelineruns.tekton.dev (all namespaces): needed for Kueue's reads of "
            "the job and writes of its status; the sidecar's reads of the manager's object (each transformed request)",
            "error: rbac manager: cannot patch pipelineruns.tekton.dev/status (all namespaces): needed for Kueue's "
            "reads of the job and writes of its status",
            "error: rbac manager: cannot create events (all namespaces): needed for the sidecar's Events on the jobs "
            "(refusals)",
            'warning: rbac manager: cannot update secrets "worker1-secret" in namespace kueue-system: needed for '
            "--wire and --unwire (they rewrite these Secrets)",
            "error: rbac worker1: cannot create pipelineruns.tekton.dev (all namespaces): needed for Kueue's copy on "
            "the worker (created, read and deleted through the sidecar)",
            "error: rbac worker1: cannot get pipelineruns.tekton.dev/status (all namespaces): needed for Kueue's copy "
            "on the worker (created, read and deleted through the sidecar)",
        ):
            assert expected in lines, proc.stdout
        assert "rbac worker2: ok" in proc.stdout  # an unrestricted token
        rbac = [ln for ln in lines if ": rbac " in ln]
        assert not any("configmaps" in ln or "cannot get secrets" in ln for ln in rbac)  # the Role is still bound
