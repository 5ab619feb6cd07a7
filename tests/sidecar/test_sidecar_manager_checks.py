"""What the manager must provide for Argo on the wire, found by ``--check`` and by the running sidecar:
the Workflow CRD keeps ``spec.managedBy`` (a CRD replaced without ``export crd-patch`` is found), and
Kueue reaches each worker through the sidecar (a bypass is visible: /readyz, a metric, ``--check``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from argo_harness import ARGO, argo_clusters, argo_crds
from sidecar_harness import WORKERS, metric, policy_dir, running, worker_secret_config

from mkpolicy.cli.main import main
from mkpolicy.testing.kueue.env import MultiKueueEnv

pytestmark = [pytest.mark.timeout(120), pytest.mark.loopback_only("changes the manager's CRDs")]


def check(capsys: pytest.CaptureFixture[str], policies: Path, config: Path) -> tuple[int, str, str]:
    code = main(["sidecar", "--check", "--policies", str(policies), "--config", str(config)])
    out, err = capsys.readouterr()
    return code, out, err


def test_check_finds_a_workflow_crd_that_prunes_managed_by(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crd, patched = argo_crds()
    with argo_clusters(tmp_path, manager_patched=False) as env:
        policies = policy_dir(tmp_path, ARGO)
        config = tmp_path / "sidecar.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "manager": {"kubeconfig": str(env.kubeconfigs["manager"])},
                    "workers": [{"name": w, "kubeconfig": {"file": str(env.kubeconfigs[w])}} for w in WORKERS],
                }
            )
        )
        code, out, err = check(capsys, policies, config)
        assert code == 2
        assert (
            "policy argo-workflow: error (Workflow.v1alpha1.argoproj.io): the manager's CRD workflows.argoproj.io "
            "prunes /spec/managedBy (v1alpha1): Kueue never sees the marker and never dispatches a Workflow; give "
            "the CRD the field: kubectl get crd workflows.argoproj.io -o yaml | mkpolicy export crd-patch" in err
        ), err
        # patched: ok, and said how its status travels
        env.manager.register_crd(patched)
        code, out, err = check(capsys, policies, config)
        assert code == 0, err
        assert "policy argo-workflow: ok (Workflow.v1alpha1.argoproj.io)" in out
        assert (
            "policy argo-workflow: Workflow has no status subresource: the sidecar hands Kueue the worker's objects "
            "without status and writes the policy's status to the manager's object itself" in out
        )
        # Argo's CRD applied again over the patched one (an upgrade that replaced it): found again
        env.manager.register_crd(crd)
        code, out, err = check(capsys, policies, config)
        assert code == 2 and "prunes /spec/managedBy" in err


def test_a_bypassed_sidecar_and_a_pruning_crd_are_visible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """MultiKueue configured with the workers' own kubeconfigs (Kueue talks to them directly) and the
    manager's CRD without managedBy: /readyz warns (the sidecar stays ready: the rest keeps serving),
    the gauges say 1, ``--check`` warns; wired and patched, all of it clears."""
    _, patched = argo_crds()
    with argo_clusters(tmp_path, manager_patched=False) as env:
        mk = MultiKueueEnv(env.manager, dict(env.workers), env.ns)  # type: ignore[arg-type]
        mk.configure()  # the Secrets hold each worker's own kubeconfig: Kueue bypasses the sidecar
        policies = policy_dir(tmp_path, ARGO)
        config = worker_secret_config(env)
        config_file = tmp_path / "sidecar.yaml"
        config_file.write_text(
            yaml.safe_dump(
                {
                    "manager": {"kubeconfig": str(env.kubeconfigs["manager"]), "namespace": "kueue-system"},
                    "workers": [{"name": w, "kubeconfig": {"secret": {"name": f"{w}-secret"}}} for w in WORKERS],
                }
            )
        )
        code, out, err = check(capsys, policies, config_file)
        assert code == 2 and "prunes /spec/managedBy" in err  # warnings alone would not fail; the CRD does
        for worker in WORKERS:
            assert (
                f"warning: worker {worker}: Kueue reaches worker {worker} directly: Secret kueue-system/{worker}-secret "
                f"points at {env.workers[worker].url}, not at this sidecar (run the sidecar with --wire, or point the "
                "Secret at its endpoint); a kind without a status subresource would never finish"
            ) in out, out

        async def scenario() -> None:
            async with running(config, policies) as sidecar:
                await sidecar.check_manager()
                ready, checks = sidecar.readiness()
                assert ready
                assert any(
                    c.startswith("warn crd argo-workflow: the manager's CRD workflows.argoproj.io") for c in checks
                )
                for worker in WORKERS:
                    assert any(
                        c.startswith(f"warn bypass {worker}: Kueue reaches worker {worker} directly") for c in checks
                    )
                    assert metric(sidecar, "mkpolicy_sidecar_worker_bypassed", cluster=worker) == 1
                assert metric(sidecar, "mkpolicy_sidecar_crd_prunes_managed_by", policy="argo-workflow") == 1
                env.manager.register_crd(patched)
                await sidecar.wire()  # looks again once the Secrets point here
                ready, checks = sidecar.readiness()
                assert ready and not [c for c in checks if c.startswith(("warn crd", "warn bypass"))], checks
                for worker in WORKERS:
                    assert metric(sidecar, "mkpolicy_sidecar_worker_bypassed", cluster=worker) == 0
                assert metric(sidecar, "mkpolicy_sidecar_crd_prunes_managed_by", policy="argo-workflow") == 0

        asyncio.run(scenario())
