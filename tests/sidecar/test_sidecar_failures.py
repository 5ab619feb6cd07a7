"""Failures on Kueue's wire, Kueue played by its model: nothing untransformed, nothing stuck in silence.

MultiKueue as in production (the workers' kubeconfigs in their MultiKueueCluster Secrets, the
sidecar wiring them); the rest of Kueue played by the test. Each scenario: a failing status
write-back, a refused creation, a version mismatch between Kueue's externalFrameworks and the
policy, a rotated Secret (with a revoked token), a refused worker kubeconfig. Throughout: no
copy created untransformed, no copy left behind, every refusal an Event on the job.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sidecar_harness import (
    POLICIES,
    Clusters,
    adapter_for,
    clusters,
    metric,
    multikueue,
    policy_dir,
    running,
    strip_server_fields,
    worker_secret_config,
)

import mkpolicy
from mkpolicy.sidecar import Sidecar
from mkpolicy.testing.kueue import Kueue
from mkpolicy.testing.kueue.env import MultiKueueEnv, kubeconfig_bytes

pytestmark = [pytest.mark.timeout(120), pytest.mark.loopback_only("runs Kueue's model on loopback clusters")]

TEKTON = POLICIES / "tekton-pipelinerun.yaml"
PR = ("tekton.dev/v1", "PipelineRun")

FAILING_SYNC = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: failing-sync}
spec:
  framework: PipelineRun.v1.tekton.dev
  sync:
    patches:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "replace", path: "/status/does/not/exist", value: 1}]'
"""

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


def events(env: Clusters, reason: str) -> list[dict[str, Any]]:
    return [e for e in env.manager.list("v1", "Event", namespace=env.ns) if e["reason"] == reason]


async def dispatched_and_admitted(
    mk: MultiKueueEnv, model: Kueue, name: str, worker: str, version: str = "v1", **labels: str
) -> str:
    """A job submitted (at ``version``), its Workload dispatched to every worker and admitted by ``worker``."""
    job = mk.job(name)
    job["apiVersion"] = f"tekton.dev/{version}"
    if labels:
        job["metadata"]["labels"] = labels
    wl = mk.core.submit(mk.manager.create(job))
    ns = mk.namespace
    await model.wait_for(lambda: model.outcome_kinds(ns, wl).count("dispatched") >= 2, what=f"{name} dispatched")
    mk.worker_kueue[worker].admit(wl, ns)
    return wl


async def nothing_left(mk: MultiKueueEnv, model: Kueue) -> None:
    for name, worker in mk.workers.items():
        await model.wait_for(lambda w=worker: not w.list(*PR, namespace=mk.namespace), what=f"no copy on {name}")


def test_failing_sync_is_an_event_and_removal_still_works(tmp_path: Path) -> None:
    """A sync patch that fails: Kueue's read gets the copy without a status (Kueue writes nothing)
    and the job says why; finishing is not blocked (Kueue finishes a workload only after a
    successful SyncJob), so the manager's Workload finishes and every copy is removed."""
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "failing.yaml").write_text(FAILING_SYNC)

        async def scenario() -> None:
            async with multikueue(env, policies) as (mk, sidecar, model):
                await model.wait_connected("worker1", "worker2")
                wl = await dispatched_and_admitted(mk, model, "build", "worker1")
                worker = mk.workers["worker1"]
                await model.wait_for(lambda: worker.list(*PR, namespace=env.ns), what="the copy")
                mk.worker_kueue["worker1"].adopt(wl, env.ns, *PR)
                worker.patch(*PR, "build", {"status": {"startTime": "2026-11-21T10:00:00Z"}}, namespace=env.ns,
                             subresource="status")  # fmt: skip

                await model.wait_for(lambda: events(env, "SyncFailed"), what="a SyncFailed event")
                [event] = events(env, "SyncFailed")
                assert event["involvedObject"]["name"] == "build" and "sync patch #1" in event["message"]
                assert event["message"].count("mkpolicy:") == 1, event[
                    "message"
                ]  # said once, not "mkpolicy: mkpolicy:"
                assert "status" not in env.manager.get(*PR, "build", env.ns)  # nothing written
                assert metric(sidecar, "mkpolicy_sidecar_transforms_total", cluster="worker1",
                              policy="failing-sync", phase="sync", result="error") >= 1  # fmt: skip
                # the remote workload finishes: Kueue's SyncJob succeeds (it copies nothing), the
                # manager's Workload finishes and every copy goes
                mk.worker_kueue["worker1"].finish(wl, env.ns)
                await model.wait_for(lambda: "finished" in model.outcome_kinds(env.ns, wl), what="finished")
                await nothing_left(mk, model)

        asyncio.run(scenario())


def test_refused_creation_is_an_event_and_creates_nothing(tmp_path: Path) -> None:
    """The policy does not manage the job (a match condition): Kueue's creation is refused, the job
    says why, nothing is created on the worker; a managed job beside it travels transformed."""
    adapter = adapter_for(TEKTON)
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "hold.yaml").write_text(HOLD)

        async def scenario() -> None:
            async with multikueue(env, policies) as (mk, sidecar, model):
                await model.wait_connected("worker1", "worker2")
                held = await dispatched_and_admitted(mk, model, "held", "worker1", hold="true")

                await model.wait_for(lambda: events(env, "NotManaged"), what="a NotManaged event")
                [event] = events(env, "NotManaged")
                assert event["involvedObject"]["name"] == "held" and "not_held" in event["message"]
                assert event["message"].startswith("mkpolicy: policy hold does not manage"), event["message"]
                assert mk.workers["worker1"].list(*PR, namespace=env.ns) == []
                assert metric(sidecar, "mkpolicy_sidecar_refusals_total", cluster="worker1", policy="hold",
                              reason="NotManaged") >= 1  # fmt: skip
                # a job the policy manages travels, transformed
                wl = await dispatched_and_admitted(mk, model, "free", "worker2")
                worker2 = mk.workers["worker2"]
                await model.wait_for(lambda: worker2.list(*PR, namespace=env.ns), what="the managed copy")
                ctx = mkpolicy.Context(wl, "multikueue", "worker2", None, model.identifier)
                expected = adapter.create(env.manager.get(*PR, "free", env.ns), ctx)
                copy = strip_server_fields(worker2.get(*PR, "free", env.ns))
                assert copy["metadata"]["labels"] == expected["metadata"]["labels"]
                # the held job is evicted: nothing is left anywhere
                mk.core.evict(held, env.ns)
                mk.core.release_quota(held, env.ns)  # the integration's part: the job stopped
                mk.worker_kueue["worker2"].finish(wl, env.ns)
                await nothing_left(mk, model)

        asyncio.run(scenario())


def test_version_mismatch_keeps_kueue_connected_and_refuses_creations(tmp_path: Path) -> None:
    """Kueue's externalFrameworks names PipelineRun at v1beta1, the policy at v1: Kueue's watches of
    v1beta1 pass (its connection stays up), the sidecar reports the mismatch at start, and Kueue's
    creations at v1beta1 are refused with an Event (never created untransformed)."""
    with clusters(tmp_path) as env:
        env.manager.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                "data": {
                    "controller_manager_config.yaml": yaml.safe_dump(
                        {"multiKueue": {"externalFrameworks": [{"name": "PipelineRun.v1beta1.tekton.dev"}]}}
                    )
                },
            }
        )

        async def scenario() -> None:
            frameworks = ("PipelineRun.v1beta1.tekton.dev",)
            async with multikueue(env, policy_dir(tmp_path, TEKTON), frameworks=frameworks) as (mk, sidecar, model):
                ready, checks = sidecar.readiness()
                assert ready and any("warn kueue: policy tekton-pipelinerun" in c and "version mismatch" in c
                                     for c in checks), checks  # fmt: skip
                await model.wait_connected("worker1", "worker2")  # its v1beta1 watches pass through
                # users create v1beta1 jobs: Kueue finds its adapter by the job's version
                await dispatched_and_admitted(mk, model, "build", "worker1", version="v1beta1")

                await model.wait_for(lambda: events(env, "VersionMismatch"), what="a VersionMismatch event")
                [event] = events(env, "VersionMismatch")
                assert event["involvedObject"]["name"] == "build"
                assert mk.workers["worker1"].list(*PR, namespace=env.ns) == []
                assert model.connection("worker1").active

        asyncio.run(scenario())


def test_rotated_secret_and_revoked_token(tmp_path: Path) -> None:
    """GitOps re-applies worker1's Secret with a new token and the old one is revoked: the sidecar
    takes the new kubeconfig, wires the Secret again, Kueue reconnects through the sidecar and
    the next job travels transformed with the new token."""
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with multikueue(env, policy_dir(tmp_path, TEKTON)) as (mk, sidecar, model):
                await model.wait_connected("worker1", "worker2")
                worker = mk.workers["worker1"]
                rotated = worker.kubeconfig(cluster="worker1")
                old_token = rotated["users"][0]["user"]["token"]
                worker.add_token("rotated-token")
                rotated["users"][0]["user"]["token"] = "rotated-token"
                mk.core.rotate_secret("worker1", kubeconfig_bytes(rotated))
                worker.settings.tokens.discard(old_token)  # revoked
                link = sidecar._links["worker1"]
                await model.wait_for(lambda: link.upstream.config.token == "rotated-token", what="taken up")

                def wired() -> bool:
                    secret = env.manager.get("v1", "Secret", "worker1-secret", "kueue-system")
                    held = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
                    return bool(held["clusters"][0]["cluster"]["server"] == sidecar.endpoint("worker1"))

                await model.wait_for(wired, what="the Secret wired again")
                await model.wait_connected("worker1")
                wl = await dispatched_and_admitted(mk, model, "after", "worker1")
                await model.wait_for(lambda: worker.list(*PR, namespace=env.ns), what="a copy with the new token")
                assert "mkpolicy.io/origin-uid" in worker.get(*PR, "after", env.ns)["metadata"]["annotations"]
                mk.worker_kueue["worker1"].finish(wl, env.ns)
                await nothing_left(mk, model)

        asyncio.run(scenario())


@contextlib.asynccontextmanager
async def wired_with(
    env: Clusters, policies: Path, kubeconfigs: dict[str, bytes]
) -> AsyncIterator[tuple[MultiKueueEnv, Sidecar, Kueue]]:
    """As the harness's ``multikueue``, with the Secrets holding ``kubeconfigs``."""
    mk = MultiKueueEnv(env.manager, dict(env.workers), env.ns)  # type: ignore[arg-type]
    mk.configure(kubeconfigs)
    async with running(worker_secret_config(env), policies) as sidecar:
        await sidecar.wire()
        async with mk.kueue(time_scale=0.01) as model:
            yield mk, sidecar, model


def test_refused_worker_kubeconfig_is_isolated_until_fixed(tmp_path: Path) -> None:
    """worker2's Secret holds a kubeconfig Kueue's rules refuse: the sidecar starts anyway, Kueue
    connects to worker1 and sees worker2 refused with the reason; the fixed kubeconfig is taken up
    without a restart and Kueue connects to worker2 through the sidecar."""
    with clusters(tmp_path) as env:
        mk = MultiKueueEnv(env.manager, dict(env.workers), env.ns)  # type: ignore[arg-type]
        kubeconfigs = mk.worker_kubeconfigs()
        insecure = yaml.safe_load(kubeconfigs["worker2"])
        insecure["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
        kubeconfigs["worker2"] = kubeconfig_bytes(insecure)

        async def scenario() -> None:
            async with wired_with(env, policy_dir(tmp_path, TEKTON), kubeconfigs) as (mk, sidecar, model):
                await model.wait_connected("worker1")
                # Kueue's discovery through the refused endpoint gets a 503 whose message client-go
                # drops (as real Kueue shows it: tests/peers/test_multikueue_failures_real.py); the
                # sidecar's /readyz says why
                await model.wait_for(
                    lambda: (
                        model.connection("worker2").message
                        == "failed to get server groups: the server is currently unable to handle the request"
                    ),
                    what="worker2 refused",
                )
                assert not model.connection("worker2").active
                _, checks = sidecar.readiness()
                assert any(c.startswith("warn worker worker2: refused:") and "insecure-skip-tls-verify" in c
                           for c in checks), checks  # fmt: skip
                mk.core.rotate_secret("worker2", mk.worker_kubeconfigs()["worker2"])
                await model.wait_connected("worker2", timeout=30)
                assert sidecar.worker_problem("worker2") is None
                assert all(s.target == "worker2" for s in model.requests("worker2"))

        asyncio.run(scenario())
