"""Faults on the wire: workers and manager down, conflicts, expired watches, restarts, reloads, hostile CEL.

Invariants checked throughout: no status update lost (the manager ends with the
policy's sync of the worker's last status), no duplicate object, nothing half-created.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sidecar_harness import (
    DATA,
    PIPELINERUNS,
    POLICIES,
    adapter_for,
    client,
    clusters,
    eventually,
    free_ports,
    kueue,
    metric,
    pipelinerun,
    policy_dir,
    probes,
    running,
    sidecar_kubeconfigs,
)

import mkpolicy
from mkpolicy.kube.client import ApiError, Gone
from mkpolicy.sidecar.transform import apply_merge_patch
from mkpolicy.testing.kueue import ApiStatusError
from mkpolicy.testing.kueue.env import MultiKueueEnv

pytestmark = pytest.mark.timeout(120)

TEKTON = POLICIES / "tekton-pipelinerun.yaml"
PR = ("tekton.dev/v1", "PipelineRun")


def running_status(i: int) -> dict[str, Any]:
    return {
        "startTime": "2026-11-21T10:00:00Z",
        "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running", "message": f"step {i}"}],
    }


def expected_status(
    adapter: mkpolicy.Adapter, manager: dict[str, Any], worker: dict[str, Any], cluster: str, workload: str
) -> Any:
    ctx = mkpolicy.Context(workload, "multikueue", cluster)
    patch = adapter.sync(manager, worker, ctx)
    return apply_merge_patch(manager, patch).get("status") if patch else manager.get("status")


def worker_names(env: Any, cluster: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in env.worker(cluster).list(*PR, namespace=env.ns))


@pytest.mark.loopback_only("takes a worker down and back up (fault injection)")
def test_worker_down_and_back(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar, kueue(env, sidecar) as driver:
                env.manager.create(pipelinerun("run-1"))
                env.worker("worker1").faults.unreachable()
                with pytest.raises(ApiStatusError) as info:
                    await driver.sync_job("worker1", "team-a", "run-1", "wl-1")
                # (Kueue's first request is discovery, whose 503 client-go reports without the
                # sidecar's message: the sidecar's /readyz says why)
                assert info.value.code == 503
                _, checks = sidecar.readiness()
                assert any(c.startswith("warn worker worker1: unreachable") for c in checks), checks
                # the other worker is not affected
                assert await driver.sync_job("worker2", "team-a", "run-1", "wl-1") == "created"
                env.worker("worker1").faults.reachable()
                results = []
                for _ in range(20):  # Kueue retries
                    try:
                        results.append(await driver.sync_job("worker1", "team-a", "run-1", "wl-1"))
                        break
                    except ApiStatusError as exc:
                        results.append(exc.code)
                        await asyncio.sleep(0.05)
                assert results[-1] == "created"
                assert worker_names(env, "worker1") == ["run-1"]
                assert (
                    metric(sidecar, "mkpolicy_sidecar_upstream_errors_total", cluster="worker1", reason="connect") >= 1
                )

        asyncio.run(scenario())


@pytest.mark.loopback_only("takes the manager down (fault injection)")
def test_manager_down_uses_the_cache_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    adapter = adapter_for(TEKTON)
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with (
                running(
                    env.config(manager={"reads": "cache"}, wire=probes("tekton.dev")), policy_dir(tmp_path, TEKTON)
                ) as sidecar,
                kueue(env, sidecar) as driver,
            ):
                env.manager.create(pipelinerun("cached"))
                await driver.sync_job("worker1", "team-a", "cached", "wl-c")
                await eventually(
                    lambda: metric(sidecar, "mkpolicy_sidecar_manager_cache_objects", policy="tekton-pipelinerun") == 1
                )
                manager_obj = env.manager.get(*PR, "cached", "team-a")
                env.worker("worker1").patch(
                    *PR, "cached", {"status": running_status(1)}, namespace="team-a", subresource="status"
                )
                env.manager.faults.unreachable()
                w1 = client(sidecar.kubeconfig("worker1"))
                try:
                    # a GET through the sidecar still answers from the cache
                    obj = await w1.get(PIPELINERUNS.path("team-a", "cached"))
                    raw = env.worker("worker1").get(*PR, "cached", "team-a")
                    assert obj["status"] == expected_status(adapter, manager_obj, raw, "worker1", "wl-c")
                    # creating an object the cache has never seen needs the manager: 503, nothing created
                    body = driver.clone(
                        {**manager_obj, "metadata": {**manager_obj["metadata"], "name": "unseen"}}, "wl-u"
                    )
                    with pytest.raises(ApiError) as info:
                        await w1.create(PIPELINERUNS.path("team-a"), body)
                    assert info.value.status == 503 and "from the manager" in info.value.message
                    assert worker_names(env, "worker1") == ["cached"]
                finally:
                    env.manager.faults.reachable()
                    await w1.close()
                # the cache reconnects and sees new objects again
                env.manager.create(pipelinerun("later"))
                await eventually(
                    lambda: metric(sidecar, "mkpolicy_sidecar_manager_cache_objects", policy="tekton-pipelinerun") == 2,
                    timeout=20,
                )
                assert await driver.sync_job("worker1", "team-a", "later", "wl-l") == "created"

        asyncio.run(scenario())


@pytest.mark.loopback_only("injects 409 conflicts (fault injection)")
def test_conflicts_are_retried_without_duplicates_or_lost_status(tmp_path: Path) -> None:
    adapter = adapter_for(TEKTON)
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar, kueue(env, sidecar) as driver:
                env.manager.create(pipelinerun("run-1"))
                # the worker answers 409 to the first create: relayed as is, Kueue retries
                env.worker("worker1").faults.fail(
                    409, verb="create", resource="pipelineruns", reason="AlreadyExists", message="injected conflict"
                )
                with pytest.raises(ApiStatusError) as info:
                    await driver.sync_job("worker1", "team-a", "run-1", "wl-1")
                assert info.value.code == 409 and info.value.message == "injected conflict"
                # two reconciles racing: one creates, the other gets AlreadyExists, nothing is duplicated
                outcomes = await asyncio.gather(
                    *(driver.sync_job("worker1", "team-a", "run-1", "wl-1") for _ in range(4)), return_exceptions=True
                )
                assert outcomes.count("created") == 1, outcomes
                assert all(
                    o in ("created", "unchanged") or (isinstance(o, ApiStatusError) and o.code == 409) for o in outcomes
                ), outcomes
                assert worker_names(env, "worker1") == ["run-1"]
                # the manager's status patch conflicts once: the retry writes it, nothing lost
                env.worker("worker1").patch(
                    *PR, "run-1", {"status": running_status(1)}, namespace="team-a", subresource="status"
                )
                env.manager.faults.fail(409, verb="patch", resource="pipelineruns", subresource="status")
                with pytest.raises(ApiStatusError):
                    await driver.sync_job("worker1", "team-a", "run-1", "wl-1")
                before = env.manager.get(*PR, "run-1", "team-a")
                assert await driver.sync_job("worker1", "team-a", "run-1", "wl-1") == "synced"
                raw = env.worker("worker1").get(*PR, "run-1", "team-a")
                assert env.manager.get(*PR, "run-1", "team-a")["status"] == expected_status(
                    adapter, before, raw, "worker1", "wl-1"
                )

        asyncio.run(scenario())


@pytest.mark.loopback_only("compacts the history on demand and ends watches (410 Gone)")
def test_expired_watches_resume(tmp_path: Path) -> None:
    """A client's 410 Gone passes unchanged (Kueue never watches from a resourceVersion, but an
    informer-style client does); it relists and resumes; the manager cache relists too."""
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with (
                running(
                    env.config(manager={"reads": "cache"}, wire=probes("tekton.dev")), policy_dir(tmp_path, TEKTON)
                ) as sidecar,
                kueue(env, sidecar) as driver,
            ):
                env.manager.create(pipelinerun("run-1"))
                await driver.sync_job("worker1", "team-a", "run-1", "wl-1")
                old_rv = str(env.worker("worker1").resource_version)
                env.worker("worker1").patch(
                    *PR, "run-1", {"status": running_status(1)}, namespace="team-a", subresource="status"
                )
                env.worker("worker1").compact()
                w1 = client(sidecar.kubeconfig("worker1"))
                selector = {"labelSelector": "kueue.x-k8s.io/multikueue-origin=multikueue"}
                with pytest.raises(Gone):
                    async for _ in w1.watch(
                        PIPELINERUNS.path(None), {**selector, "resourceVersion": old_rv}, timeout_seconds=5
                    ):
                        pass
                # relist through the sidecar, watch from there: later changes arrive
                listed = await w1.get(PIPELINERUNS.path(None))
                rv = listed["metadata"]["resourceVersion"]
                seen: list[str] = []

                async def watch() -> None:
                    async for event in w1.watch(
                        PIPELINERUNS.path(None), {**selector, "resourceVersion": rv}, timeout_seconds=5
                    ):
                        if event["type"] == "BOOKMARK":
                            continue
                        seen.append(event["object"]["status"]["conditions"][0]["message"])
                        return

                task = asyncio.create_task(watch())
                await eventually(lambda: env.worker("worker1").watch_count(resource="pipelineruns") == 1)
                env.worker("worker1").patch(
                    *PR, "run-1", {"status": running_status(2)}, namespace="team-a", subresource="status"
                )
                await asyncio.wait_for(task, 10)
                await w1.close()
                assert seen == ["step 2"]

                # the manager cache: its watch ends, changes and a compaction happen before it
                # re-watches -> 410 Gone -> it relists
                relists = metric(sidecar, "mkpolicy_sidecar_manager_cache_relists_total", policy="tekton-pipelinerun")
                env.manager.faults.delay(0.5, verb="watch", resource="pipelineruns", times=1)
                env.manager.faults.end_watches(resource="pipelineruns")
                env.manager.create(pipelinerun("run-2"))
                env.manager.compact()
                await eventually(
                    lambda: (
                        metric(sidecar, "mkpolicy_sidecar_manager_cache_relists_total", policy="tekton-pipelinerun")
                        > relists
                    )
                )
                env.manager.create(pipelinerun("run-3"))
                await eventually(
                    lambda: metric(sidecar, "mkpolicy_sidecar_manager_cache_objects", policy="tekton-pipelinerun") == 3
                )
                direct = metric(
                    sidecar, "mkpolicy_sidecar_manager_reads_total", policy="tekton-pipelinerun", source="direct"
                )
                assert await driver.sync_job("worker1", "team-a", "run-3", "wl-3") == "created"
                assert (
                    metric(
                        sidecar, "mkpolicy_sidecar_manager_reads_total", policy="tekton-pipelinerun", source="direct"
                    )
                    == direct
                )  # served from the relisted cache

        asyncio.run(scenario())


@pytest.mark.loopback_only("runs Kueue's model, which configures MultiKueue in kueue-system")
def test_sidecar_restarted_mid_watch_loses_no_status_update(tmp_path: Path) -> None:
    """Kueue (the model) watches the workers through the sidecar; the sidecar stops, the workers'
    jobs progress, the sidecar comes back on the same endpoints: Kueue reconnects (its backoff)
    and every job's last status reaches the manager, as the policy says."""
    adapter = adapter_for(TEKTON)
    with clusters(tmp_path) as env:
        ports = free_ports(3)
        config = env.config(
            listen={"basePort": 0},
            ops={"port": ports[2]},
            state={"dir": str(tmp_path / "state")},
            workers=[
                {"name": w, "port": p, "kubeconfig": {"file": str(env.kubeconfigs[w])}}
                for w, p in zip(("worker1", "worker2"), ports[:2], strict=True)
            ],
        )
        policies = policy_dir(tmp_path, TEKTON)
        mk = MultiKueueEnv(env.manager, dict(env.workers), env.ns)  # type: ignore[arg-type]

        async def scenario() -> None:
            async with running(config, policies) as first:
                kubeconfig = first.kubeconfig("worker1")
                mk.configure(sidecar_kubeconfigs(first))
                async with mk.kueue(time_scale=0.01) as model:
                    await model.wait_connected("worker1", "worker2")
                    workloads = {}
                    for i in range(3):
                        wl = mk.core.submit(env.manager.create(pipelinerun(f"run-{i}", env.ns)))
                        workloads[f"run-{i}"] = wl
                        await model.wait_for(lambda wl=wl: model.outcome_kinds(env.ns, wl).count("dispatched") == 2)
                        mk.worker_kueue["worker1"].admit(wl, env.ns)
                    await eventually(lambda: worker_names(env, "worker1") == ["run-0", "run-1", "run-2"])
                    builds = model.connection("worker1").builds
                    # stop the sidecar while Kueue watches through it; the worker keeps progressing
                    t0 = time.monotonic()
                    await first.stop()
                    assert time.monotonic() - t0 < 5
                    for step in (1, 2, 3):
                        for name in workloads:
                            env.worker("worker1").patch(
                                *PR, name, {"status": running_status(step)}, namespace=env.ns, subresource="status"
                            )
                    # Kueue lost the worker (its watches ended) and retries with backoff
                    await model.wait_for(lambda: model.connection("worker1").failed_attempts > 0, what="retrying")
                    # the same endpoints, CA and tokens come back
                    async with running(config, policies) as second:
                        assert second.kubeconfig("worker1") == kubeconfig
                        await model.wait_for(lambda: model.connection("worker1").builds > builds + 1, timeout=20)
                        for name in workloads:
                            await eventually(
                                lambda name=name: (
                                    (env.manager.get(*PR, name, env.ns).get("status") or {})
                                    .get("conditions", [{}])[0]
                                    .get("message")
                                    == "step 3"
                                ),
                                timeout=20,
                            )
                        for name, workload in workloads.items():
                            manager_obj = env.manager.get(*PR, name, env.ns)
                            raw = env.worker("worker1").get(*PR, name, env.ns)
                            assert manager_obj["status"] == expected_status(
                                adapter, manager_obj, raw, "worker1", workload
                            )
                        assert worker_names(env, "worker1") == ["run-0", "run-1", "run-2"]

        asyncio.run(scenario())


def _versioned_policy(version: str) -> str:
    return (
        (DATA / "tekton-policy.yaml")
        .read_text()
        .replace(
            '{"mkpolicy.io/dispatched-to": cluster}',
            f'{{"mkpolicy.io/dispatched-to": cluster, "policy-version": "{version}"}}',
        )
    )


def test_policy_reloaded_during_traffic(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "tekton.yaml").write_text(_versioned_policy("v1"))

        async def scenario() -> None:
            async with running(env.config(), policies) as sidecar, kueue(env, sidecar) as driver:
                first = sidecar.policies
                names = [f"run-{i:02d}" for i in range(24)]
                for name in names:
                    env.manager.create(pipelinerun(name, env.ns))
                swapped_at: list[int] = []

                async def traffic() -> None:
                    for i, name in enumerate(names):
                        assert await driver.sync_job("worker1", env.ns, name, f"wl-{i}") == "created"
                        if i == 8:
                            (policies / "tekton.yaml").write_text(_versioned_policy("v2"))
                        if not swapped_at and sidecar.policies is not first:
                            swapped_at.append(i)
                        await asyncio.sleep(0.03)  # the reload check runs every 0.1 s

                await asyncio.wait_for(traffic(), 60)
                assert swapped_at, "the new policy set became active during the traffic"
                versions = [
                    env.worker("worker1").get(*PR, n, env.ns)["metadata"]["annotations"].get("policy-version")
                    for n in names
                ]
                assert set(versions) == {"v1", "v2"}
                first_v2 = versions.index("v2")
                assert versions[first_v2:] == ["v2"] * (len(names) - first_v2)  # never back to the old set
                assert versions[:9] == ["v1"] * 9
                assert worker_names(env, "worker1") == names

        asyncio.run(scenario())


def test_invalid_policy_reload_keeps_the_last_good_set(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "tekton.yaml").write_text(_versioned_policy("v1"))

        async def scenario() -> None:
            async with running(env.config(), policies) as sidecar, kueue(env, sidecar) as driver:
                good = sidecar.policies
                (policies / "tekton.yaml").write_text(_versioned_policy("v2").replace("framework:", "framwork:"))
                await eventually(
                    lambda: metric(sidecar, "mkpolicy_sidecar_policy_reload_errors_total", reason="load") == 1
                )
                assert sidecar.policies is good
                ready, checks = sidecar.readiness()
                assert ready and any("rejected, previous set kept" in c for c in checks)
                env.manager.create(pipelinerun("run-1", env.ns))
                assert await driver.sync_job("worker1", env.ns, "run-1", "wl-1") == "created"
                annotations = env.worker("worker1").get(*PR, "run-1", env.ns)["metadata"]["annotations"]
                assert annotations["policy-version"] == "v1"
                # an expression that does not compile is rejected the same way
                (policies / "tekton.yaml").write_text(_versioned_policy("v2").replace('"policy-version"', "policy-"))
                await eventually(
                    lambda: metric(sidecar, "mkpolicy_sidecar_policy_reload_errors_total", reason="compile") == 1
                )
                assert sidecar.policies is good
                # fixed: the new set becomes active
                (policies / "tekton.yaml").write_text(_versioned_policy("v2"))
                await eventually(lambda: sidecar.policies is not good)
                env.manager.create(pipelinerun("run-2", env.ns))
                await driver.sync_job("worker1", env.ns, "run-2", "wl-2")
                annotations = env.worker("worker1").get(*PR, "run-2", env.ns)["metadata"]["annotations"]
                assert annotations["policy-version"] == "v2"

        asyncio.run(scenario())


HOSTILE = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: hostile}
spec:
  framework: PipelineRun.v1.tekton.dev
  variables:
    - name: s
      expression: "lists.range(10000).map(i, 'aaaaaaaaaa').join()"
  creation:
    patches:
      - type: JSONPatch
        jsonPatch:
          # strings.quote walks the string in Python at 0.1 cost unit per character: the
          # budget (1,000,000) runs out after ~0.5 s of CPU, long enough to see the loop free
          expression: |
            lists.range(1000).all(k, strings.quote(variables.s) != '') ? [] : []
"""


def test_hostile_expression_is_stopped_by_the_cost_budget(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "hostile.yaml").write_text(HOSTILE)
        env.worker("worker1").create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": env.ns}}
        )

        async def scenario() -> None:
            async with running(env.config(wire=probes("")), policies) as sidecar, kueue(env, sidecar) as driver:
                env.manager.create(pipelinerun("run-1", env.ns))
                create = asyncio.create_task(driver.sync_job("worker1", env.ns, "run-1", "wl-1"))
                # meanwhile other requests are served
                t0 = time.monotonic()
                passthrough = []
                w1 = client(sidecar.kubeconfig("worker1"))
                while not create.done():
                    await w1.get(f"/api/v1/namespaces/{env.ns}/configmaps/c")
                    passthrough.append(time.monotonic())
                    await asyncio.sleep(0.05)
                await w1.close()
                with pytest.raises(ApiStatusError) as info:
                    await create
                elapsed = time.monotonic() - t0
                assert info.value.code == 500
                message = info.value.message
                assert "policy hostile" in message and "creation patch #1" in message and "cost" in message
                assert elapsed < 30
                # the evaluation ran off the event loop: other requests were answered meanwhile (on the
                # loop, one at most would be, then nothing for the whole evaluation). No bound on the
                # gaps between them: on a loaded machine any one of them can stall.
                assert len(passthrough) >= 3, (elapsed, passthrough)
                assert worker_names(env, "worker1") == []  # nothing created, not even half
                assert (
                    metric(
                        sidecar,
                        "mkpolicy_sidecar_transform_errors_total",
                        cluster="worker1",
                        policy="hostile",
                        phase="create",
                    )
                    == 1
                )
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"http://127.0.0.1:{sidecar.ops_port}/healthz") as resp,
                ):
                    assert resp.status == 200

        asyncio.run(scenario())


@pytest.mark.loopback_only("needs a slow worker request in flight (fault injection)")
def test_graceful_shutdown_drains_requests_and_ends_watches_cleanly(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            sidecar_cm = running(env.config(wire=probes("")), policy_dir(tmp_path, TEKTON))
            sidecar = await sidecar_cm.__aenter__()
            try:
                async with kueue(env, sidecar) as driver:
                    env.manager.create(pipelinerun("run-1"))
                    await driver.sync_job("worker1", "team-a", "run-1", "wl-1")
                    watch_ended: list[str] = []

                    async def watch() -> None:
                        # Kueue's watch of the policy kind (no timeout), through the sidecar
                        async for _ in (await driver.watch("worker1")).events():
                            pass
                        watch_ended.append("clean")  # an error would raise instead

                    watch_task = asyncio.create_task(watch())
                    # a watch of another kind too (configmaps)
                    w1, w2 = client(sidecar.kubeconfig("worker1")), client(sidecar.kubeconfig("worker2"))
                    pass_watch = asyncio.create_task(
                        _drain(w2.watch("/api/v1/namespaces/team-a/configmaps", timeout_seconds=60))
                    )
                    await eventually(lambda: metric(sidecar, "mkpolicy_sidecar_active_watches", cluster="worker1") == 1)
                    await eventually(lambda: metric(sidecar, "mkpolicy_sidecar_active_watches", cluster="worker2") == 1)
                    # a slow request in flight when the shutdown starts
                    delay = env.worker("worker1").faults.delay(0.5, verb="get", resource="pipelineruns", times=1)
                    # (a full read, as in Kueue's SyncJob; Kueue's next request would meet the closed port)
                    slow = asyncio.create_task(w1.get(PIPELINERUNS.path("team-a", "run-1")))
                    await eventually(lambda: delay.hits == 1)  # held at the worker
                    t0 = time.monotonic()
                    stopping = asyncio.create_task(sidecar.stop())
                    await eventually(lambda: not sidecar.ready)  # /readyz fails while draining
                    assert (await slow)["metadata"]["name"] == "run-1"  # drained, answered
                    await asyncio.wait_for(watch_task, 5)
                    await asyncio.wait_for(pass_watch, 5)
                    await asyncio.wait_for(stopping, 5)
                    assert watch_ended == ["clean"]
                    assert time.monotonic() - t0 < 5  # the 0.5 s request drained; 10x for a busy machine
                    # no longer listening
                    with pytest.raises((aiohttp.ClientError, OSError)):
                        await w1.get("/api/v1/namespaces")
                    await w1.close()
                    await w2.close()
            finally:
                await sidecar_cm.__aexit__(None, None, None)

        asyncio.run(scenario())


async def _drain(events: Any) -> None:
    async for _ in events:
        pass
