"""Nothing dispatched untransformed because of a name.

Kueue dispatches a kind (its ``multiKueue.externalFrameworks``) while the policy meant for it
names another (a typo in the group, so the manager does not serve it): the sidecar refuses
the copies (an Event on the job, a warning log, a counted refusal) instead of forwarding them
as Kueue made them, and ``--check`` fails naming both kinds.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from sidecar_harness import WORKERS, client, clusters, metric, pipelinerun, policy_dir
from test_sidecar_cli import mkpolicy_cmd

from mkpolicy.kube.client import ApiError
from mkpolicy.sidecar import Sidecar

pytestmark = pytest.mark.timeout(120)

TYPO = (
    "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: pipelinerun}\n"
    "spec: {framework: PipelineRun.v1.tekton.dv}\n"
)


def kueue_config(*frameworks: str) -> dict[str, Any]:
    entries = "".join(f"  - name: {f}\n" for f in frameworks)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {
            "controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
            f"multiKueue:\n  externalFrameworks:\n{entries}"
        },
    }


def copy_body(obj: dict[str, Any], workload: str) -> dict[str, Any]:
    """What Kueue's generic adapter POSTs for ``obj``."""
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"},
            "annotations": {"kueue.x-k8s.io/prebuilt-workload-name": workload},
        },
        "spec": {k: v for k, v in obj["spec"].items() if k != "managedBy"},
    }


def test_a_typo_in_the_framework_refuses_the_kind_kueue_dispatches(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with clusters(tmp_path) as env:
        env.manager.create(kueue_config("PipelineRun.v1.tekton.dev"))
        policies = policy_dir(tmp_path)
        (policies / "pipelinerun.yaml").write_text(TYPO)

        async def scenario() -> None:
            sidecar = Sidecar(env.config(), str(policies))
            with caplog.at_level(logging.WARNING):
                await sidecar.start()
            try:
                assert any(
                    "Kueue dispatches PipelineRun.v1.tekton.dev" in r.getMessage()
                    and "PipelineRun.v1.tekton.dv" in r.getMessage()
                    for r in caplog.records
                    if r.levelno == logging.WARNING
                )
                env.manager.create(pipelinerun("run-1", env.ns))
                job = env.manager.get("tekton.dev/v1", "PipelineRun", "run-1", env.ns)
                async with client(sidecar.kubeconfig("worker1")) as w1:
                    with pytest.raises(ApiError) as info:
                        await w1.create(f"/apis/tekton.dev/v1/namespaces/{env.ns}/pipelineruns", copy_body(job, "wl-1"))
                assert info.value.status == 503
                assert "Kueue dispatches PipelineRun.v1.tekton.dev" in info.value.message
                assert "policy pipelinerun names PipelineRun.v1.tekton.dv" in info.value.message
                assert env.worker("worker1").list("tekton.dev/v1", "PipelineRun", namespace=env.ns) == []
                refused = {"cluster": "worker1", "policy": "pipelinerun", "reason": "PolicyNotActive"}
                assert metric(sidecar, "mkpolicy_sidecar_refusals_total", **refused) == 1
                await sidecar.events.flush()
                events = env.manager.list("v1", "Event", namespace=env.ns)
                assert [(e["involvedObject"]["kind"], e["involvedObject"].get("uid"), e["reason"]) for e in events] == [
                    ("PipelineRun", job["metadata"]["uid"], "PolicyNotActive")
                ]
                assert events[0]["message"].startswith("mkpolicy: Kueue dispatches PipelineRun.v1.tekton.dev")
            finally:
                await sidecar.stop()

        asyncio.run(scenario())


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_check_fails_naming_both_kinds_and_strict_fails_on_warnings(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        env.manager.create(kueue_config("PipelineRun.v1.tekton.dev"))
        policies = policy_dir(tmp_path)
        (policies / "pipelinerun.yaml").write_text(TYPO)
        workers = [{"name": w, "kubeconfig": {"file": str(env.kubeconfigs[w])}} for w in WORKERS]
        config = write(
            tmp_path / "sidecar.yaml",
            {"manager": {"kubeconfig": str(env.kubeconfigs["manager"])}, "workers": workers, "state": {"dir": None}},
        )
        proc = mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(config))
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert (
            "error: policy pipelinerun (PipelineRun.v1.tekton.dv): the manager cluster does not serve this kind"
            in proc.stdout
        )
        assert (
            "error: Kueue dispatches PipelineRun.v1.tekton.dev (multiKueue.externalFrameworks) but no policy is "
            "active for it: policy pipelinerun names PipelineRun.v1.tekton.dv, which the manager cluster does not "
            "serve" in proc.stdout
        )
        proc = mkpolicy_cmd("sidecar", "--check", "-o", "json", "--policies", str(policies), "--config", str(config))
        report = json.loads(proc.stdout)
        assert proc.returncode == 1 and report["exitCode"] == 1
        assert [(p["status"], p["reason"]) for p in report["policies"]] == [
            ("pending", "the manager cluster does not serve this kind")
        ]
        assert "policy pipelinerun: pending (PipelineRun.v1.tekton.dv): the manager cluster does not serve" in (
            mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(config)).stdout
        )
        assert [f["level"] for f in report["findings"]].count("error") == 2

        # fixed: clean, but one warning (state.dir null) fails --strict
        (policies / "pipelinerun.yaml").write_text(TYPO.replace("tekton.dv", "tekton.dev"))
        proc = mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(config))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "warning: state.dir is null" in proc.stdout
        strict = ("sidecar", "--check", "--strict", "--policies", str(policies), "--config", str(config))
        assert mkpolicy_cmd(*strict).returncode == 1
        # --strict fails on a worker it could not check (a Secret, no manager connection)
        unchecked = write(
            tmp_path / "unchecked.yaml",
            {
                "workers": [{"name": "worker1", "kubeconfig": {"secret": {"name": "w1"}}}],
                "state": {"dir": str(tmp_path)},
            },
        )
        plain = mkpolicy_cmd("sidecar", "--check", "--policies", str(policies), "--config", str(unchecked))
        assert plain.returncode == 0 and "worker worker1: not checked" in plain.stdout
        proc = mkpolicy_cmd("sidecar", "--check", "--strict", "--policies", str(policies), "--config", str(unchecked))
        assert proc.returncode == 1
