"""The policies volume is optional: the sidecar starts on an empty directory and waits for policies.

Before the policies ConfigMap exists the kubelet mounts an empty directory (the volume is
``optional: true`` in what ``mkpolicy export deploy`` renders) and fills it once the
ConfigMap is created. The sidecar must not crash-loop meanwhile (the pod's readiness
gates Kueue's webhooks): it serves, refuses Kueue's writes with 503 (Kueue retries), and
takes the policies up when they appear.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from sidecar_harness import POLICIES, client, clusters, eventually, pipelinerun

from mkpolicy.kube.client import ApiError
from mkpolicy.sidecar import Sidecar
from mkpolicy.sidecar.policies import ReloadError

pytestmark = [pytest.mark.timeout(60), pytest.mark.loopback_only("starts the sidecar on loopback clusters")]


def test_starts_on_an_empty_policies_directory_and_takes_policies_up(tmp_path: Path) -> None:
    async def scenario() -> None:
        with clusters(tmp_path) as env:
            policies = tmp_path / "policies"
            policies.mkdir()
            shutil.copytree(POLICIES.parent / "schemas", tmp_path / "schemas")
            sidecar = Sidecar(env.config(), str(policies))
            await sidecar.start()
            try:
                ready, checks = sidecar.readiness()
                assert not ready
                assert any(c.startswith("fail policies:") and "holds no" in c for c in checks), checks
                async with client(sidecar.kubeconfig("worker1")) as worker:
                    path = "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns"
                    with pytest.raises(ApiError) as refused:
                        await worker.create(path, pipelinerun("run-1"))
                    assert refused.value.status == 503
                    assert "no policy set is active yet" in refused.value.message
                    assert env.worker("worker1").list("tekton.dev/v1", "PipelineRun", "team-a") == []
                shutil.copy(POLICIES / "tekton-pipelinerun.yaml", policies)  # the ConfigMap appears
                await eventually(lambda: sidecar.ready, timeout=15)
            finally:
                await sidecar.stop()

    asyncio.run(scenario())


def test_an_empty_directory_without_reloads_is_still_an_error(tmp_path: Path) -> None:
    """With reloads off nothing would ever load: the start fails as before, saying why."""

    async def scenario() -> None:
        with clusters(tmp_path) as env:
            policies = tmp_path / "policies"
            policies.mkdir()
            sidecar = Sidecar(env.config(reload={"intervalSeconds": 0}), str(policies))
            with pytest.raises(ReloadError, match="holds no"):
                await sidecar.start()

    asyncio.run(scenario())
