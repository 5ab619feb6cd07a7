"""The whole MultiKueue lifecycle through the sidecar, Kueue played by its model.

MultiKueue is configured as in production: each worker's own kubeconfig in its
MultiKueueCluster Secret, the sidecar reading them and wiring the Secrets to its endpoints,
Kueue's model (mkpolicy.testing.kueue) connecting through them. The rest of Kueue (quota,
admission on the workers, eviction, finishing) is played by the test. Throughout: every
copy on a worker is exactly the policy's ``create``, the manager's status exactly its
``sync``, nothing is created untransformed, and no copy is left behind.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sidecar_harness import POLICIES, PolicyChecks, clusters, metric, multikueue, policy_dir

from mkpolicy.testing.kueue import PROFILES, Kueue
from mkpolicy.testing.kueue.env import MultiKueueEnv

pytestmark = [pytest.mark.timeout(120), pytest.mark.loopback_only("runs Kueue's model on loopback clusters")]

TEKTON = POLICIES / "tekton-pipelinerun.yaml"
PR = ("tekton.dev/v1", "PipelineRun")


def tekton_status(step: int) -> dict[str, Any]:
    """What Tekton writes on the worker (with fields the policy leaves there)."""
    done = step >= 2
    return {
        "startTime": "2026-11-21T10:00:00Z",
        "conditions": [{"type": "Succeeded", "status": "True" if done else "Unknown",
                        "reason": "Succeeded" if done else "Running"}],
        "pipelineSpec": {"tasks": [{"name": "build", "taskRef": {"name": "build"}}]},
        "provenance": {"featureFlags": {"enableAPIFields": "beta"}},
        **({"completionTime": "2026-11-21T10:05:00Z"} if done else {}),
    }  # fmt: skip


class Checks(PolicyChecks):
    """What the Tekton policy says, to compare the wire with."""

    def __init__(self, mk: MultiKueueEnv, model: Kueue) -> None:
        super().__init__(mk, model, TEKTON, PR)

    async def status_written(self, name: str, workload: str, cluster: str, step: int) -> None:
        """Tekton writes ``step`` on the worker; the manager ends with the policy's sync of it."""
        worker = self.mk.workers[cluster]
        worker.patch(*PR, name, {"status": tekton_status(step)}, namespace=self.ns, subresource="status")
        remote = worker.get(*PR, name, self.ns)
        status = await self.synced(name, remote, workload, cluster, f"status step {step}")
        assert "pipelineSpec" not in status and "provenance" not in status


def test_the_whole_lifecycle(tmp_path: Path) -> None:
    """Dispatch, status write-back, eviction, re-dispatch, finish, garbage collection."""
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with multikueue(env, policy_dir(tmp_path, TEKTON)) as (mk, sidecar, model):
                check = Checks(mk, model)
                ns = mk.namespace
                await model.wait_connected("worker1", "worker2")
                # Kueue talks to the workers through the sidecar only.
                for worker in ("worker1", "worker2"):
                    assert all(s.target == worker for s in model.requests(worker))
                assert {str(c.config.server) for r in model.remotes.values() if (c := r.client)} == {
                    sidecar.endpoint("worker1"),
                    sidecar.endpoint("worker2"),
                }

                # dispatch: the Workload to every worker, the job to the one that admits it
                wl = mk.core.submit(env.manager.create(mk.job("build")))
                await model.wait_for(lambda: model.outcome_kinds(ns, wl).count("dispatched") == 2, what="dispatch")
                mk.worker_kueue["worker1"].admit(wl, ns)
                await check.copy_created("build", wl, "worker1")
                mk.worker_kueue["worker1"].adopt(wl, ns, *PR)
                await check.status_written("build", wl, "worker1", 1)

                # eviction on the worker: Kueue asks for a retry, the manager evicts, the copies go
                mk.worker_kueue["worker1"].evict(wl, ns)
                await model.wait_for(lambda: mk.core.check_state(wl, ns) == "Retry", what="check Retry")
                mk.core.evict(wl, ns)
                mk.core.release_quota(wl, ns)  # the integration's part: the job stopped
                await check.nothing_left("worker1")
                # re-admitted: dispatched again, this time worker2 admits it
                mk.core.admit(wl, ns)
                await model.wait_for(lambda: model.outcome_kinds(ns, wl).count("dispatched") >= 4, what="re-dispatch")
                mk.worker_kueue["worker2"].admit(wl, ns)
                await check.copy_created("build", wl, "worker2")
                mk.worker_kueue["worker2"].adopt(wl, ns, *PR)
                await check.status_written("build", wl, "worker2", 1)
                await check.status_written("build", wl, "worker2", 2)

                # finish: the manager's Workload finishes, every copy goes
                mk.worker_kueue["worker2"].finish(wl, ns)
                await model.wait_for(lambda: "finished" in model.outcome_kinds(ns, wl), what="finished")
                for worker in ("worker1", "worker2"):
                    await check.nothing_left(worker)
                assert (env.manager.get(*PR, "build", ns)["status"]["conditions"][0]["status"]) == "True"

                # garbage collection: a workload deleted while Kueue was away
                wl2 = mk.core.submit(env.manager.create(mk.job("orphan")))
                await model.wait_for(lambda: model.outcome_kinds(ns, wl2).count("dispatched") == 2, what="dispatch 2")
                mk.worker_kueue["worker1"].admit(wl2, ns)
                await check.copy_created("orphan", wl2, "worker1")
                mk.worker_kueue["worker1"].adopt(wl2, ns, *PR)
                await model.stop()
                mk.core.delete(wl2, ns)
                async with mk.kueue(time_scale=0.01, gc_interval=1e6) as again:
                    await again.wait_connected("worker1", "worker2")
                    await again.gc()
                    check.model = again
                    for worker in ("worker1", "worker2"):
                        await check.nothing_left(worker, gc=True)

                # nothing untransformed: the two creations went through the policy, nothing failed
                assert metric(sidecar, "mkpolicy_sidecar_transforms_total", cluster="worker1",
                              policy="tekton-pipelinerun", phase="create", result="ok") == 2  # fmt: skip
                assert metric(sidecar, "mkpolicy_sidecar_transforms_total", cluster="worker2",
                              policy="tekton-pipelinerun", phase="create", result="ok") == 1  # fmt: skip
                for worker in ("worker1", "worker2"):
                    assert metric(sidecar, "mkpolicy_sidecar_transform_errors_total", cluster=worker,
                                  policy="tekton-pipelinerun", phase="create") == 0  # fmt: skip

        asyncio.run(scenario())


@pytest.mark.parametrize("version", ["0.15", "0.17", "main"])
def test_older_and_newer_kueue_through_the_sidecar(tmp_path: Path, version: str) -> None:
    """Other versions' wire (no ownership check, the whole object as POST body, the label
    identifier): the copy is still the policy's, the status its sync, the removal complete."""
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with multikueue(env, policy_dir(tmp_path, TEKTON), version=version) as (mk, _, model):
                check = Checks(mk, model)
                ns = mk.namespace
                assert model.identifier == PROFILES[version].default_identifier
                await model.wait_connected("worker1", "worker2")
                wl = mk.core.submit(env.manager.create(mk.job("build")))
                await model.wait_for(lambda: model.outcome_kinds(ns, wl).count("dispatched") == 2, what="dispatch")
                mk.worker_kueue["worker2"].admit(wl, ns)
                await check.copy_created("build", wl, "worker2")
                mk.worker_kueue["worker2"].adopt(wl, ns, *PR)
                await check.status_written("build", wl, "worker2", 2)
                mk.worker_kueue["worker2"].finish(wl, ns)
                for worker in ("worker1", "worker2"):
                    await check.nothing_left(worker)

        asyncio.run(scenario())
