"""End to end: Kueue's generic-adapter protocol through the sidecar, manager + two workers."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sidecar_harness import (
    DATA,
    PIPELINERUNS,
    POLICIES,
    WORKERS,
    adapter_for,
    client,
    clusters,
    kueue,
    metric,
    pipelinerun,
    policy_dir,
    probes,
    running,
    strip_server_fields,
)

import mkpolicy
from mkpolicy.kube.client import ApiError
from mkpolicy.sidecar import Sidecar
from mkpolicy.sidecar.transform import apply_merge_patch
from mkpolicy.testing import ApiServer
from mkpolicy.testing.kueue import METADATA_ACCEPT, ApiStatusError

pytestmark = pytest.mark.timeout(120)

TEKTON = POLICIES / "tekton-pipelinerun.yaml"


def ctx(workload: str, cluster: str, identifier: str = "annotation") -> mkpolicy.Context:
    return mkpolicy.Context(workload, "multikueue", cluster, None, identifier)  # type: ignore[arg-type]


def worker_status(step: int) -> dict[str, Any]:
    """What Tekton writes on the worker, step by step (with fields the policy leaves behind)."""
    status: dict[str, Any] = {
        "startTime": "2026-11-21T10:00:00Z",
        "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running"}],
        "pipelineSpec": {"tasks": [{"name": "build", "taskRef": {"name": "build"}}]},
        "provenance": {"featureFlags": {"enableAPIFields": "beta"}},
        "observedGeneration": 1,
    }
    if step >= 2:
        status["conditions"] = [{"type": "Succeeded", "status": "True", "reason": "Succeeded"}]
        status["completionTime"] = "2026-11-21T10:05:00Z"
        status["childReferences"] = [{"name": "run-build", "pipelineTaskName": "build", "kind": "TaskRun"}]
    return status


@pytest.mark.parametrize("identifier", ["annotation", "label"])
def test_dispatch_and_status_write_back(tmp_path: Path, identifier: str) -> None:
    """Creation on each worker equals the policy's create; the manager's status equals its sync."""
    adapter = adapter_for(TEKTON)
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with (
                running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar,
                kueue(env, sidecar, identifier) as driver,
            ):
                for i, cluster in enumerate(WORKERS):
                    name, workload = f"run-{i}", f"pipelinerun-run-{i}-1a2b3"
                    env.manager.create(pipelinerun(name, env.ns))
                    manager_obj = env.manager.get("tekton.dev/v1", "PipelineRun", name, env.ns)
                    assert await driver.sync_job(cluster, env.ns, name, workload) == "created"
                    worker = env.worker(cluster).get("tekton.dev/v1", "PipelineRun", name, env.ns)
                    expected = adapter.create(manager_obj, ctx(workload, cluster, identifier))
                    assert strip_server_fields(worker) == expected
                    assert "last-applied-configuration" not in str(worker["metadata"].get("annotations"))
                    assert "status" not in worker["spec"] and "managedBy" not in worker["spec"]
                    other = WORKERS[1 - i]
                    with pytest.raises(mkpolicy.MkpolicyError):
                        env.worker(other).get("tekton.dev/v1", "PipelineRun", name, env.ns)

                    for step in (1, 2):
                        env.worker(cluster).patch(
                            "tekton.dev/v1",
                            "PipelineRun",
                            name,
                            {"status": worker_status(step)},
                            namespace=env.ns,
                            subresource="status",
                        )
                        before = env.manager.get("tekton.dev/v1", "PipelineRun", name, env.ns)
                        remote = env.worker(cluster).get("tekton.dev/v1", "PipelineRun", name, env.ns)
                        assert await driver.sync_job(cluster, env.ns, name, workload) == "synced"
                        after = env.manager.get("tekton.dev/v1", "PipelineRun", name, env.ns)
                        patch = adapter.sync(before, remote, ctx(workload, cluster, identifier))
                        assert patch is not None
                        assert after["status"] == apply_merge_patch(before, patch)["status"]
                        assert "pipelineSpec" not in after["status"] and "provenance" not in after["status"]
                        assert after["spec"] == before["spec"]
                        # nothing changed: nothing is written
                        rv = after["metadata"]["resourceVersion"]
                        assert await driver.sync_job(cluster, env.ns, name, workload) == "unchanged"
                        rv_now = env.manager.get("tekton.dev/v1", "PipelineRun", name, env.ns)["metadata"]
                        assert rv_now["resourceVersion"] == rv
                    assert after["status"]["conditions"][0]["status"] == "True"

                    # Kueue's removal: ownership GET (metadata only, passed through), DELETE Background.
                    assert await driver.remove(cluster, env.ns, name)
                    assert env.worker(cluster).list("tekton.dev/v1", "PipelineRun", namespace=env.ns) == []
                    assert not await driver.remove(cluster, env.ns, name)
                assert (
                    metric(
                        sidecar,
                        "mkpolicy_sidecar_transforms_total",
                        cluster="worker1",
                        policy="tekton-pipelinerun",
                        phase="create",
                        result="ok",
                    )
                    == 1
                )

        asyncio.run(scenario())


def test_cluster_variable_and_derived_status(tmp_path: Path) -> None:
    """A policy using ``cluster`` and deriving status: each endpoint supplies its own worker name."""
    policy = DATA / "tekton-policy.yaml"
    adapter = adapter_for(policy)
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, policy)) as sidecar, kueue(env, sidecar) as driver:
                env.manager.create(pipelinerun("shared", env.ns))
                for cluster in WORKERS:
                    await driver.sync_job(cluster, env.ns, "shared", "wl-shared")
                    worker = env.worker(cluster).get("tekton.dev/v1", "PipelineRun", "shared", env.ns)
                    assert worker["metadata"]["annotations"]["mkpolicy.io/dispatched-to"] == cluster
                    assert "timeouts" not in worker["spec"]
                env.worker("worker2").patch(
                    "tekton.dev/v1",
                    "PipelineRun",
                    "shared",
                    {"status": worker_status(2)},
                    namespace=env.ns,
                    subresource="status",
                )
                manager_obj = env.manager.get("tekton.dev/v1", "PipelineRun", "shared", env.ns)
                remote = env.worker("worker2").get("tekton.dev/v1", "PipelineRun", "shared", env.ns)
                assert await driver.sync_job("worker2", env.ns, "shared", "wl-shared") == "synced"
                status = env.manager.get("tekton.dev/v1", "PipelineRun", "shared", env.ns)["status"]
                patch = adapter.sync(manager_obj, remote, ctx("wl-shared", "worker2"))
                assert status == apply_merge_patch(manager_obj, patch)["status"]
                assert status["results"] == [{"name": "cluster", "value": "worker2"}]

        asyncio.run(scenario())


@pytest.mark.loopback_only(
    "compares bytes with the worker's own answers, using its token and CA; on a live cluster "
    "a LIST's resourceVersion moves between the two requests"
)
def test_only_full_reads_of_a_policy_kind_are_transformed(tmp_path: Path) -> None:
    """LIST, WATCH and metadata-only reads of a policy kind pass through: Kueue reads no status from them.

    A full JSON GET carries the synced status; the same object listed, watched or read as
    PartialObjectMetadata (Kueue's ownership check) is the worker's, byte for byte.
    """
    adapter = adapter_for(TEKTON)
    with clusters(tmp_path) as env:
        w1 = env.worker("worker1")

        async def scenario() -> None:
            # LIST and a watch with resourceVersion are not Kueue's: widened for this comparison
            config = env.config(wire=probes("tekton.dev"))
            async with running(config, policy_dir(tmp_path, TEKTON)) as sidecar, kueue(env, sidecar) as driver:
                start_rv = w1.resource_version
                env.manager.create(pipelinerun("run-0", env.ns))
                await driver.sync_job("worker1", env.ns, "run-0", "wl-run-0")
                w1.patch(
                    "tekton.dev/v1",
                    "PipelineRun",
                    "run-0",
                    {"status": worker_status(2)},
                    namespace=env.ns,
                    subresource="status",
                )
                base = PIPELINERUNS.path(env.ns)
                metadata_only = {"Accept": METADATA_ACCEPT}  # Kueue's ownership check
                untouched = [
                    (base, None),
                    (f"{base}?watch=true&resourceVersion={start_rv}&timeoutSeconds=1", None),
                    (f"{base}/run-0", metadata_only),
                ]
                async with aiohttp.ClientSession(auto_decompress=False) as session:
                    for path, headers in untouched:
                        direct, via = await direct_and_via(session, w1, sidecar, path, headers)
                        assert via == direct, path
                        # The worker's own representation: the full object, or its metadata only.
                        whole = b"pipelineSpec" in direct[2]
                        assert whole != (b'"kind":"PartialObjectMetadata"' in direct[2]), path
                        assert whole == (headers is None), path
                    creds = sidecar.credentials
                    code, _, body = await fetch(
                        session,
                        sidecar.endpoint("worker1"),
                        creds.tokens["worker1"],
                        creds.ca.cert_pem,
                        f"{base}/run-0",
                    )
                assert code == 200
                obj = json.loads(body)
                manager_obj = env.manager.get("tekton.dev/v1", "PipelineRun", "run-0", env.ns)
                raw = w1.get("tekton.dev/v1", "PipelineRun", "run-0", env.ns)
                patch = adapter.sync(manager_obj, raw, ctx("wl-run-0", "worker1"))
                assert obj["status"] == apply_merge_patch(manager_obj, patch)["status"]
                assert "pipelineSpec" not in obj["status"]

        asyncio.run(scenario())


async def fetch(
    session: aiohttp.ClientSession,
    base: str,
    token: str,
    ca: bytes,
    path: str,
    headers: dict[str, str] | None = None,
) -> tuple[int, str | None, bytes]:
    """GET ``path`` from ``base``: status, Content-Type and the body's bytes as they came."""
    tls = ssl.create_default_context(cadata=ca.decode())
    async with session.get(
        base + path, headers={"Authorization": f"Bearer {token}", **(headers or {})}, ssl=tls
    ) as resp:
        return resp.status, resp.headers.get("Content-Type"), await resp.read()


async def direct_and_via(
    session: aiohttp.ClientSession,
    worker: ApiServer,
    sidecar: Sidecar,
    path: str,
    headers: dict[str, str] | None = None,
) -> list[tuple[int, str | None, bytes]]:
    """The same GET from ``worker`` itself and through the sidecar, side by side (a watch with
    ``timeoutSeconds`` lasts as long either way)."""
    creds = sidecar.credentials
    return await asyncio.gather(
        fetch(session, worker.url, worker.token, worker.ca_pem, path, headers),
        fetch(session, sidecar.endpoint(worker.name), creds.tokens[worker.name], creds.ca.cert_pem, path, headers),
    )


@pytest.mark.loopback_only(
    "compares bytes with the worker's own answers, using its token and CA; on a live cluster "
    "a LIST's resourceVersion moves between the two requests"
)
def test_passthrough_is_byte_identical(tmp_path: Path) -> None:
    """Other kinds (core, Kueue CRDs), LIST and WATCH: the same bytes as from the worker itself."""
    with clusters(tmp_path) as env:
        w1 = env.worker("worker1")
        start_rv = w1.resource_version
        for i in range(3):
            w1.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"cm-{i}", "namespace": "team-a"},
                    "data": {"k": "v" * (i * 1000)},
                }
            )
        w1.create(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": "wl-1", "namespace": "team-a"},
                "spec": {
                    "queueName": "q",
                    "podSets": [
                        {
                            "name": "main",
                            "count": 1,
                            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                        }
                    ],
                },
            }
        )

        async def scenario() -> None:
            async with running(env.config(wire=probes("")), policy_dir(tmp_path, TEKTON)) as sidecar:
                paths = [
                    "/api/v1/namespaces/team-a/configmaps/cm-2",
                    "/api/v1/namespaces/team-a/configmaps",
                    "/api/v1/namespaces/team-a/configmaps?labelSelector=x%3Dy",
                    "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/wl-1",
                    f"/api/v1/namespaces/team-a/configmaps?watch=true&resourceVersion={start_rv}&timeoutSeconds=1",
                    "/api/v1/namespaces/team-a/configmaps/absent",
                    "/apis/tekton.dev/v1",
                    "/version",
                ]
                async with aiohttp.ClientSession(auto_decompress=False) as session:
                    for path in paths:
                        direct, via = await direct_and_via(session, w1, sidecar, path)
                        assert via == direct, path
                        assert direct[2], path
                    # a protobuf request is not for the sidecar to judge: same answer as the worker's
                    proto = {"Accept": "application/vnd.kubernetes.protobuf"}
                    direct, via = await direct_and_via(
                        session, w1, sidecar, "/api/v1/namespaces/team-a/configmaps/cm-0", proto
                    )
                    assert via == direct

        asyncio.run(scenario())

    # the real kubernetes client works with the generated kubeconfig (sync, in a thread of its own)


def test_kubernetes_client_through_generated_kubeconfig(tmp_path: Path) -> None:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    with clusters(tmp_path) as env:
        env.worker("worker1").create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hello", "namespace": env.ns}}
        )

        async def scenario() -> None:
            async with running(env.config(wire=probes("")), policy_dir(tmp_path, TEKTON)) as sidecar:
                kubeconfig = sidecar.kubeconfig("worker1")

                def use() -> list[str]:
                    api = k8s.CoreV1Api(k8s_config.new_client_from_config_dict(kubeconfig))
                    items = api.list_namespaced_config_map(env.ns).items
                    # kube-root-ca.crt: what a real cluster's root-ca-cert-publisher adds to every namespace
                    return [cm.metadata.name for cm in items if cm.metadata.name != "kube-root-ca.crt"]

                assert await asyncio.to_thread(use) == ["hello"]

        asyncio.run(scenario())


def test_refusals_create_nothing(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar, kueue(env, sidecar) as driver:
                w1 = client(sidecar.kubeconfig("worker1"))
                env.manager.create(pipelinerun("run-1", env.ns))
                body = driver.clone(env.manager.get("tekton.dev/v1", "PipelineRun", "run-1", env.ns), "wl-1")

                async def refused(code: int, coro: Any, text: str) -> None:
                    with pytest.raises(ApiError) as info:
                        await coro
                    assert info.value.status == code, info.value
                    assert text in info.value.message
                    assert info.value.body.get("kind") == "Status"

                # no origin label: not a MultiKueue copy
                bare = {**body, "metadata": {**body["metadata"], "labels": {}}}
                await refused(400, w1.create(PIPELINERUNS.path(env.ns), bare), "multikueue-origin")
                # the manager has no such object
                ghost = {**body, "metadata": {**body["metadata"], "name": "ghost"}}
                await refused(404, w1.create(PIPELINERUNS.path(env.ns), ghost), "manager cluster has no")
                # not managed by MultiKueue on the manager
                env.manager.create(pipelinerun("local", env.ns, managedBy="tekton.dev/pipeline"))
                local = {**body, "metadata": {**body["metadata"], "name": "local"}}
                await refused(403, w1.create(PIPELINERUNS.path(env.ns), local), "does not manage")
                # updates and patches of policy kinds bypass the policy (and Kueue sends none): refused
                await driver.sync_job("worker1", env.ns, "run-1", "wl-1")
                await refused(403, w1.patch(PIPELINERUNS.path(env.ns, "run-1"), {"spec": {"x": 1}}), "wire contract")
                obj = await w1.get(PIPELINERUNS.path(env.ns, "run-1"))
                await refused(403, w1.replace(PIPELINERUNS.path(env.ns, "run-1"), obj), "wire contract")
                # another version of the policy's resource: reads pass (Kueue's watch of it must not fail),
                # writes would bypass the policy
                other = f"/apis/tekton.dev/v1beta1/namespaces/{env.ns}/pipelineruns"
                assert (await w1.get(f"{other}/run-1"))["metadata"]["name"] == "run-1"
                old = {**body, "apiVersion": "tekton.dev/v1beta1", "metadata": {**body["metadata"], "name": "old"}}
                await refused(403, w1.create(other, old), "at version v1 only")
                # a wrong token
                bad = client(
                    {**sidecar.kubeconfig("worker1"), "users": [{"name": "worker1-kueue", "user": {"token": "x" * 43}}]}
                )
                try:
                    await refused(401, bad.get("/api/v1/namespaces"), "Unauthorized")
                finally:
                    await bad.close()
                    await w1.close()
                names = [
                    o["metadata"]["name"]
                    for o in env.worker("worker1").list("tekton.dev/v1", "PipelineRun", namespace=env.ns)
                ]
                assert names == ["run-1"]
                assert (
                    metric(
                        sidecar,
                        "mkpolicy_sidecar_requests_total",
                        cluster="worker1",
                        policy="tekton-pipelinerun",
                        verb="create",
                        code="403",
                    )
                    == 2  # not managed, and the other version
                )
                # every refused creation says why on the manager's object (the Workload when it is missing)
                await sidecar.events.flush()
                events = {
                    (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
                    for e in env.manager.list("v1", "Event", namespace=env.ns)
                }
                assert events == {
                    ("PipelineRun", "run-1", "BadRequest"),  # no origin label
                    ("Workload", "wl-1", "ManagerObjectMissing"),  # no manager object: on its Workload
                    ("PipelineRun", "local", "NotManaged"),
                    ("Workload", "wl-1", "VersionMismatch"),  # "old" exists at no version on the manager
                }, events

        asyncio.run(scenario())


def test_ops_endpoints(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with (
                running(env.config(manager={"reads": "cache"}), policy_dir(tmp_path, TEKTON)) as sidecar,
                kueue(env, sidecar) as driver,
            ):
                env.manager.create(pipelinerun("run-1", env.ns))
                await driver.sync_job("worker1", env.ns, "run-1", "wl-1")
                base = f"http://127.0.0.1:{sidecar.ops_port}"
                async with aiohttp.ClientSession() as session:
                    async with session.get(base + "/healthz") as resp:
                        assert resp.status == 200
                    async with session.get(base + "/readyz?verbose") as resp:
                        text = await resp.text()
                        assert resp.status == 200 and "ok cache tekton-pipelinerun" in text
                    async with session.get(base + "/metrics") as resp:
                        text = await resp.text()
                        assert resp.headers["Content-Type"].startswith("text/plain")
                for needle in (
                    'mkpolicy_sidecar_requests_total{cluster="worker1",code="201",policy="tekton-pipelinerun",verb="create"} 1.0',
                    'mkpolicy_sidecar_transform_duration_seconds_count{cluster="worker1",phase="create",policy="tekton-pipelinerun"} 1.0',
                    "mkpolicy_sidecar_policies 1.0",
                    'mkpolicy_sidecar_manager_cache_synced{policy="tekton-pipelinerun"} 1.0',
                ):
                    assert needle in text, needle
                assert sidecar.credentials.tokens["worker1"] not in text

        asyncio.run(scenario())


IGNORING = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: lenient}
spec:
  framework: PipelineRun.v1.tekton.dev
  failurePolicy: Ignore
  creation:
    patches:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "replace", path: "/spec/does/not/exist", value: 1}]'
      - type: ApplyConfiguration
        applyConfiguration:
          expression: 'Object{metadata: Object.metadata{annotations: {"applied": "yes"}}}'
"""


def test_failure_policy_ignore_skips_and_counts(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "lenient.yaml").write_text(IGNORING)

        async def scenario() -> None:
            async with running(env.config(), policies) as sidecar, kueue(env, sidecar) as driver:
                env.manager.create(pipelinerun("run-1", env.ns))
                assert await driver.sync_job("worker1", env.ns, "run-1", "wl-1") == "created"
                worker = env.worker("worker1").get("tekton.dev/v1", "PipelineRun", "run-1", env.ns)
                assert worker["metadata"]["annotations"]["applied"] == "yes"
                assert (
                    metric(
                        sidecar,
                        "mkpolicy_sidecar_ignored_patches_total",
                        cluster="worker1",
                        policy="lenient",
                        phase="create",
                    )
                    == 1
                )

        asyncio.run(scenario())


def test_direct_manager_reads(tmp_path: Path) -> None:
    """manager.reads: direct reads the manager's object on every transformed request."""
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            config = env.config(manager={"reads": "direct"})
            async with running(config, policy_dir(tmp_path, TEKTON)) as sidecar, kueue(env, sidecar) as driver:
                env.manager.create(pipelinerun("run-1", env.ns))
                assert await driver.sync_job("worker1", env.ns, "run-1", "wl-1") == "created"
                env.worker("worker1").patch(
                    "tekton.dev/v1",
                    "PipelineRun",
                    "run-1",
                    {"status": worker_status(2)},
                    namespace=env.ns,
                    subresource="status",
                )
                assert await driver.sync_job("worker1", env.ns, "run-1", "wl-1") == "synced"
                reads = {
                    source: metric(
                        sidecar, "mkpolicy_sidecar_manager_reads_total", policy="tekton-pipelinerun", source=source
                    )
                    for source in ("cache", "direct")
                }
                assert reads["cache"] == 0 and reads["direct"] == 2  # the create, the status read
                # no watch cache: nothing listed or watched on the manager, readiness waits for none
                assert sidecar._caches == {}
                assert metric(sidecar, "mkpolicy_sidecar_manager_cache_relists_total", policy="tekton-pipelinerun") == 0
                assert not any(c.startswith("ok cache") for c in sidecar.readiness()[1])

        asyncio.run(scenario())


REFUSED_BY_THE_WORKER = """\
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: careless}
spec:
  framework: PipelineRun.v1.tekton.dev
  creation:
    patches:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "add", path: "/spec/timeouts", value: 3600}]'
"""


@pytest.mark.loopback_only("the bundled Tekton CRD types spec.timeouts; a real Tekton answers through its webhook")
def test_a_worker_copy_the_worker_refuses(tmp_path: Path) -> None:
    """The worker's schema refuses the policy's copy: Kueue gets the 422 as sent, nothing is created."""
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path)
        (policies / "careless.yaml").write_text(REFUSED_BY_THE_WORKER)

        async def scenario() -> None:
            async with running(env.config(), policies) as sidecar, kueue(env, sidecar) as driver:
                env.manager.create(pipelinerun("run-1", env.ns))
                with pytest.raises(ApiStatusError) as info:
                    await driver.sync_job("worker1", env.ns, "run-1", "wl-1")
                assert info.value.code == 422
                assert 'spec.timeouts: Invalid value: "integer"' in info.value.message
                assert env.worker("worker1").list("tekton.dev/v1", "PipelineRun", namespace=env.ns) == []
                assert (
                    metric(
                        sidecar,
                        "mkpolicy_sidecar_requests_total",
                        cluster="worker1",
                        policy="careless",
                        verb="create",
                        code="422",
                    )
                    == 1
                )
                # counted as an error, not as a transform that went well, and said on the job
                labels = {"cluster": "worker1", "policy": "careless", "phase": "create"}
                assert metric(sidecar, "mkpolicy_sidecar_transforms_total", **labels, result="error") == 1
                assert metric(sidecar, "mkpolicy_sidecar_transforms_total", **labels, result="ok") == 0
                assert (
                    metric(
                        sidecar,
                        "mkpolicy_sidecar_refusals_total",
                        cluster="worker1",
                        policy="careless",
                        reason="WorkerRefused",
                    )
                    == 1
                )
                await sidecar.events.flush()
                [event] = env.manager.list("v1", "Event", namespace=env.ns)
                assert (event["involvedObject"]["name"], event["reason"], event["type"]) == (
                    "run-1",
                    "WorkerRefused",
                    "Warning",
                )
                assert event["message"].startswith("mkpolicy: worker1 refused the copy made by policy careless: 422 ")
                assert 'spec.timeouts: Invalid value: "integer"' in event["message"]

        asyncio.run(scenario())
