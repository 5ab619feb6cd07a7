"""The Kueue model against loopback workers (no sidecar): what it sends, per Kueue version.

Each assertion names the Kueue behaviour it checks (mkpolicy/testing/kueue/* cite the Go
files): the requests on a worker's wire, the connection state, what happens to a workload.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from mkpolicy.testing.kueue import METADATA_ACCEPT, PROFILES, Kueue, Sent
from mkpolicy.testing.kueue.env import MultiKueueEnv, kubeconfig_bytes, loopback_multikueue
from mkpolicy.testing.kueue.goclient import ApiStatusError
from mkpolicy.testing.kueue.reconcile import condition
from mkpolicy.testing.kueue.simulate import DEACTIVATED

pytestmark = [pytest.mark.loopback_only("drives loopback clusters directly"), pytest.mark.timeout(60)]

NS = "team-a"
PR = ("tekton.dev/v1", "PipelineRun")
SCALE = 0.01  # Kueue seconds -> real seconds
WATCH_QUERY = "allowWatchBookmarks=true&labelSelector=kueue.x-k8s.io%2Fmultikueue-origin%3Dmultikueue&watch=true"


def lines(sent: list[Sent], *, since: int = 0, skip_watches: bool = True) -> list[str]:
    """``METHOD path`` of each request (watches and discovery left out)."""
    out = []
    for s in sent[since:]:
        if skip_watches and ("watch=true" in s.query or s.path in ("/api", "/apis")):
            continue
        out.append(f"{s.method} {s.path}")
    return out


def tekton_status(done: bool) -> dict[str, Any]:
    state = "True" if done else "Unknown"
    return {"conditions": [{"type": "Succeeded", "status": state, "reason": "Succeeded" if done else "Running"}],
            "startTime": "2026-11-21T10:00:00Z"}  # fmt: skip


async def dispatch(env: MultiKueueEnv, kueue: Kueue, name: str, to: str) -> str:
    """Submit a PipelineRun, wait for the remote Workloads, admit it on ``to``, wait for the copy."""
    job = env.manager.create(env.job(name))
    wl = env.core.submit(job)
    await kueue.wait_for(lambda: kueue.outcome_kinds(NS, wl).count("dispatched") == len(env.workers), what="dispatch")
    env.worker_kueue[to].admit(wl, NS)
    await kueue.wait_for(lambda: "created" in kueue.outcome_kinds(NS, wl), what="job created")
    env.worker_kueue[to].adopt(wl, NS, *PR)
    return wl


@pytest.mark.parametrize("version", list(PROFILES))
def test_lifecycle_on_the_wire(version: str) -> None:
    """Connect, dispatch, status write-back, finish, removal: the requests each worker gets."""
    with loopback_multikueue() as env:

        async def scenario() -> None:
            async with env.kueue(version=version, time_scale=SCALE, gc_interval=1e6) as kueue:
                ver = PROFILES[version]
                await kueue.wait_connected("worker1", "worker2")
                w1 = kueue.requests("worker1")
                # Connect: aggregated discovery, then one watch per kind, Workloads first, then the
                # default integration's (batch/job, in protobuf), then the external framework's.
                assert [(s.method, s.path) for s in w1[:2]] == [("GET", "/api"), ("GET", "/apis")]
                assert w1[0].headers["Accept"].startswith("application/json;g=apidiscovery.k8s.io;v=v2;")
                # (the open ones: on a busy machine a slow watch can time out and the client be rebuilt)
                watches = [s for s in w1 if s.query == WATCH_QUERY and s.ended is None]
                assert [(s.path, s.headers["Accept"]) for s in watches] == [
                    ("/apis/kueue.x-k8s.io/v1beta2/workloads", "application/json, */*"),
                    ("/apis/batch/v1/jobs", "application/vnd.kubernetes.protobuf, */*"),
                    ("/apis/tekton.dev/v1/pipelineruns", "application/json"),
                ]
                assert kueue.connection("worker1").active and kueue.connection("worker1").reason == "Active"

                mark1, mark2 = len(kueue.requests("worker1")), len(kueue.requests("worker2"))
                wl = await dispatch(env, kueue, "run", "worker1")
                pr = "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns"
                wls = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads"
                ownership = [f"GET {pr}/run"] if ver.ownership_check else []
                read_first = [f"GET {pr}/run"] if ver.reads_before_delete else []
                w1_lines = lines(kueue.requests("worker1"), since=mark1)
                # GET of the remote Workload, POST of it, GET again on the admission, then the job.
                assert w1_lines[:2] == [f"GET {wls}/{wl}", f"POST {wls}"]
                expected = [f"GET {wls}/{wl}", *ownership, f"GET {pr}/run", f"POST {pr}"]
                assert w1_lines[-len(expected) :] == expected
                # worker2 is not the admitting worker: its copy is removed (its job, never created, too).
                # v0.15 reads the job first, v0.17.6+ checks its ownership (metadata), v0.16 just DELETEs it.
                first = f"GET {pr}/run" if ownership or read_first else f"DELETE {pr}/run"
                expected = [f"GET {wls}/{wl}", first, f"DELETE {wls}/{wl}"]
                w2_lines = lines(kueue.requests("worker2"), since=mark2)
                assert w2_lines[-len(expected) :] == expected
                if ver.ownership_check:
                    meta_get = [s for s in kueue.requests("worker1") if s.headers["Accept"] == METADATA_ACCEPT]
                    assert meta_get and all(s.path == f"{pr}/run" and s.method == "GET" for s in meta_get)
                post = next(s for s in kueue.requests("worker1") if s.method == "POST" and s.path == pr)
                assert post.headers["Content-Type"] == "application/json"
                assert post.body is not None and post.body.endswith(b"\n")
                body = post.json()
                assert "managedBy" not in body["spec"]
                assert body["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
                where = "annotations" if ver.default_identifier == "annotation" else "labels"
                assert body["metadata"][where]["kueue.x-k8s.io/prebuilt-workload-name"] == wl
                if ver.generic_clone:
                    # (a zero creationTimestamp left out from 0.17: k8s.io/apimachinery v0.35's omitzero)
                    assert set(body["metadata"]) == {"labels", "name", "namespace", where}
                    assert "status" not in body
                else:
                    assert {"uid", "creationTimestamp", "generation"} <= set(body["metadata"])
                    assert "resourceVersion" not in body["metadata"]

                # Tekton runs it on worker1: the status flows back as a merge patch of /status.
                for done in (False, True):
                    env.workers["worker1"].patch(*PR, "run", {"status": tekton_status(done)}, namespace=NS,
                                                 subresource="status")  # fmt: skip
                    await kueue.wait_for(
                        lambda d=done: env.manager.get(*PR, "run", NS).get("status") == tekton_status(d),
                        what="status written back",
                    )
                patches = [
                    s for s in kueue.requests("manager") if s.method == "PATCH" and s.path.endswith("/run/status")
                ]
                assert patches and all(s.headers["Content-Type"] == "application/merge-patch+json" for s in patches)

                # The worker's Kueue finishes it: the manager's Workload finishes, the copies go.
                mark1 = len(kueue.requests("worker1"))
                env.worker_kueue["worker1"].finish(wl, NS)
                await kueue.wait_for(lambda: "finished" in kueue.outcome_kinds(NS, wl), what="finished")
                await kueue.wait_for(lambda: not env.workers["worker1"].list(*PR, namespace=NS), what="job deleted")
                await kueue.wait_for(
                    lambda: not env.workers["worker1"].list("kueue.x-k8s.io/v1beta2", "Workload", namespace=NS),
                    what="remote workload deleted",
                )
                deletes = [
                    s for s in kueue.requests("worker1")[mark1:] if s.method == "DELETE" and s.path == f"{pr}/run"
                ]
                # (A retry may DELETE again: the loopback server's garbage collector is immediate, so
                # the remote Workload, owned by the job, changed under Kueue's finalizer PUT: 409.)
                assert deletes and all(
                    json.loads(d.body or b"{}")
                    == {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
                    for d in deletes
                )
                assert f"PUT {wls}/{wl}" in lines(kueue.requests("worker1"), since=mark1)  # the finalizer released

                # Never sent for the generic adapter's kind: PUT, PATCH, its /status, LIST.
                for worker in ("worker1", "worker2"):
                    for s in kueue.requests(worker):
                        if "/pipelineruns" in s.path:
                            assert s.method in ("GET", "POST", "DELETE"), s.line()
                            assert not s.path.endswith("/status"), s.line()
                            assert (
                                s.method != "GET"
                                or s.path != "/apis/tekton.dev/v1/pipelineruns"
                                or "watch=true" in s.query
                            )

        asyncio.run(scenario())


@pytest.mark.parametrize("version", ["0.17.1", "0.19.2"])
def test_evicted_workload_holding_quota_is_dispatched_again(version: str) -> None:
    """Deactivated: worker1's copies go (their spec differs); evicted with its quota kept, the check
    Pending and no cluster: the inactive Workload is dispatched to both workers again, and the job
    synced to the earliest worker whose Kueue evicted it (``workload.go`` steps 5, 8, 4); the quota
    released: every copy goes."""
    with loopback_multikueue() as env:

        async def scenario() -> None:
            async with env.kueue(version=version, time_scale=SCALE, gc_interval=1e6) as kueue:
                await kueue.wait_connected("worker1", "worker2")
                wl = await dispatch(env, kueue, "run", "worker1")
                await kueue.wait_for(lambda: env.core.check_state(wl, NS) == "Ready", what="check Ready")

                def remote(worker: str) -> dict[str, Any] | None:
                    return next(
                        iter(env.workers[worker].list("kueue.x-k8s.io/v1beta2", "Workload", namespace=NS)), None
                    )

                env.core.deactivate(wl, NS)
                await kueue.wait_for(lambda: remote("worker1") is None and not env.workers["worker1"].list(*PR, namespace=NS),
                                     what="worker1's copies removed")  # fmt: skip
                env.core.evict(wl, NS, *DEACTIVATED)
                await kueue.wait_for(
                    lambda: all((r := remote(w)) and r["spec"]["active"] is False for w in ("worker1", "worker2")),
                    what="the inactive Workload on both workers",
                )
                assert env.core.check_state(wl, NS) == "Pending"
                assert (
                    condition(env.manager.get("kueue.x-k8s.io/v1beta2", "Workload", wl, NS), "QuotaReserved")["status"]
                    == "True"
                )  # type: ignore[index]
                env.worker_kueue["worker2"].evict(wl, NS, *DEACTIVATED)
                await kueue.wait_for(lambda: env.workers["worker2"].list(*PR, namespace=NS), what="the job on worker2")
                assert not env.workers["worker1"].list(*PR, namespace=NS)

                env.core.release_quota(wl, NS)
                for worker in ("worker1", "worker2"):
                    await kueue.wait_for(lambda w=worker: remote(w) is None and not env.workers[w].list(*PR, namespace=NS),  # type: ignore[misc]
                                         what=f"nothing left on {worker}")  # fmt: skip

        asyncio.run(scenario())


def test_eviction_redispatch_and_gc() -> None:
    """Evicted on the manager: the copies go; re-admitted: dispatched again; a workload deleted
    while Kueue was down: garbage-collected (ownership GET, DELETE Background, remote Workload)."""
    with loopback_multikueue() as env:

        async def scenario() -> None:
            async with env.kueue(time_scale=SCALE, gc_interval=1e6) as kueue:
                await kueue.wait_connected("worker1", "worker2")
                wl = await dispatch(env, kueue, "run", "worker1")
                env.core.evict(wl, NS)
                env.core.release_quota(wl, NS)  # the integration's part: the job stopped
                await kueue.wait_for(
                    lambda: (
                        not env.workers["worker1"].list(*PR, namespace=NS)
                        and not env.workers["worker1"].list("kueue.x-k8s.io/v1beta2", "Workload", namespace=NS)
                    ),
                    what="evicted copies gone",
                )
                env.core.admit(wl, NS)
                await kueue.wait_for(lambda: kueue.outcome_kinds(NS, wl).count("dispatched") == 4, what="re-dispatched")
                env.worker_kueue["worker2"].admit(wl, NS)
                await kueue.wait_for(lambda: env.workers["worker2"].list(*PR, namespace=NS), what="copy on worker2")
                env.worker_kueue["worker2"].adopt(wl, NS, *PR)
                await kueue.wait_for(lambda: env.core.check_state(wl, NS) == "Ready", what="check Ready")
                assert not env.workers["worker1"].list(*PR, namespace=NS)

            # Kueue is down while the workload is deleted; the next Kueue's GC cleans the worker.
            env.core.delete(wl, NS)
            async with env.kueue(time_scale=SCALE, gc_interval=1e6) as kueue:
                await kueue.wait_connected("worker1", "worker2")
                await kueue.gc()
                assert not env.workers["worker2"].list(*PR, namespace=NS)
                # Deleted; its resource-in-use finalizer is the worker's Kueue's to release.
                left = env.workers["worker2"].list("kueue.x-k8s.io/v1beta2", "Workload", namespace=NS)
                assert all(w["metadata"].get("deletionTimestamp") for w in left)
                w2 = lines(kueue.requests("worker2"))
                pr = "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns/run"
                assert w2 == [
                    "GET /apis/kueue.x-k8s.io/v1beta2/workloads",  # LIST of our origin's Workloads
                    f"GET {pr}",  # ownership (metadata only)
                    f"DELETE {pr}",
                    f"DELETE /apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads/{wl}",
                ]
                assert kueue.outcome_kinds(NS, wl) == ["gc"]

        asyncio.run(scenario())


@pytest.mark.parametrize(("version", "retry"), [("0.17.1", False), ("0.17.8", True), ("0.19.2", True)])
def test_a_remote_finished_out_of_sync(version: str, retry: bool) -> None:
    """The worker's jobframework finishes the prebuilt Workload ``OutOfSync``: from v0.17.8 (and
    v0.18.4, v0.19.0) a sync failure, the check Retry and nothing finished; before, the manager's
    Workload finished ``OutOfSync`` (the job stranded). tests/peers/test_multikueue_failures_real.py
    holds real Kueue v0.17.1 and v0.19.2 to the same."""
    with loopback_multikueue() as env:

        async def scenario() -> None:
            async with env.kueue(version=version, time_scale=SCALE, gc_interval=1e6) as kueue:
                await kueue.wait_connected("worker1", "worker2")
                wl = await dispatch(env, kueue, "run", "worker1")
                await kueue.wait_for(lambda: env.core.check_state(wl, NS) == "Ready", what="check Ready")
                env.worker_kueue["worker1"].finish(wl, NS, "OutOfSync", "The prebuilt workload is out of sync")
                local = ("kueue.x-k8s.io/v1beta2", "Workload", wl, NS)
                if retry:
                    await kueue.wait_for(lambda: env.core.check_state(wl, NS) == "Retry", what="check Retry")
                    [message] = [c["message"] for c in env.manager.get(*local)["status"]["admissionChecks"]]
                    assert message == ('Remote workload on worker cluster "worker1" is out of sync with its user '
                                       'job, resetting for re-dispatch, Previously: "Ready"')  # fmt: skip
                    assert "finished" not in kueue.outcome_kinds(NS, wl)
                else:
                    await kueue.wait_for(lambda: "finished" in kueue.outcome_kinds(NS, wl), what="finished")
                    finished = next(
                        c for c in env.manager.get(*local)["status"]["conditions"] if c["type"] == "Finished"
                    )
                    assert (finished["status"], finished["reason"]) == ("True", "OutOfSync")

        asyncio.run(scenario())


def test_one_refused_watch_fails_the_whole_worker() -> None:
    """A 403 on the PipelineRun watch: no watch stays open (Workloads neither), the cluster is
    not Active (ClientConnectionFailed, the server's message), retried with backoff."""
    with loopback_multikueue() as env:
        w1 = env.workers["worker1"]
        w1.faults.fail(403, verb="watch", resource="pipelineruns", times=2, message="pipelineruns is forbidden")

        async def scenario() -> None:
            async with env.kueue(time_scale=SCALE) as kueue:
                state = await kueue.wait_for(
                    lambda: kueue.connection("worker1").history and kueue.connection("worker1")
                )
                assert not state.active and state.reason == "ClientConnectionFailed"
                assert "403" in state.message and "pipelineruns is forbidden" in state.message
                await kueue.wait_connected("worker1", timeout=5)  # after 5 s, then 10 s (scaled)
                reasons = [(active, reason) for _, active, reason, _ in kueue.connection("worker1").history]
                assert reasons == [(False, "ClientConnectionFailed"), (True, "Active")]
                # Each attempt was a new client: discovery again, the Workload watch again.
                workload_watches = [
                    s for s in kueue.requests("worker1") if "workloads?" in s.url and "watch=true" in s.query
                ]
                assert len(workload_watches) == 3
                assert all(s.ended is not None for s in workload_watches[:2])
                assert w1.watch_count() == 3  # Workloads, batch/v1 Jobs (the default integration), PipelineRuns
                assert kueue.connection("worker2").active

        asyncio.run(scenario())


def test_a_watch_that_ends_rebuilds_the_client() -> None:
    with loopback_multikueue() as env:

        async def scenario() -> None:
            async with env.kueue(time_scale=SCALE) as kueue:
                await kueue.wait_connected("worker1")
                builds = kueue.connection("worker1").builds
                discovery = sum(s.path == "/apis" for s in kueue.requests("worker1"))
                env.workers["worker1"].faults.end_watches(resource="pipelineruns")
                await kueue.wait_for(lambda: kueue.connection("worker1").builds == builds + 1, what="rebuilt")
                # A new client: discovery again, every watch again (the Workload and Job ones were closed too).
                await kueue.wait_for(
                    lambda: sum(s.path == "/apis" for s in kueue.requests("worker1")) == discovery + 1, what="discovery"
                )
                await kueue.wait_for(lambda: env.workers["worker1"].watch_count() == 3, what="every watch again")
                watches = [s for s in kueue.requests("worker1") if "watch=true" in s.query]
                assert [s.ended is not None for s in watches] == [True, True, True, False, False, False]
                assert kueue.connection("worker1").active

        asyncio.run(scenario())


def test_a_rotated_secret_reconnects_at_once() -> None:
    """The Secret re-applied with another kubeconfig: Kueue reconnects right away, to it."""
    with loopback_multikueue(("worker1", "worker2", "spare")) as env:

        async def scenario() -> None:
            async with env.kueue(time_scale=SCALE) as kueue:
                await kueue.wait_connected("worker1")
                spare = env.workers["spare"]
                env.core.rotate_secret("worker1", kubeconfig_bytes(spare.kubeconfig(cluster="worker1")))
                await kueue.wait_for(lambda: spare.watch_count() == 3, what="watches on the new server")
                await kueue.wait_for(lambda: env.workers["worker1"].watch_count() == 0, what="old watches closed")
                assert kueue.connection("worker1").active

        asyncio.run(scenario())


@pytest.mark.parametrize(
    ("mutate", "reason", "message"),
    [
        (lambda k: k["users"][0]["user"].update(tokenFile="/tmp/t"), "InsecureKubeConfig", "tokenFile is not allowed"),
        (lambda k: k["clusters"][0]["cluster"].update({"insecure-skip-tls-verify": True}), "InsecureKubeConfig",
         "insecure TLS verification is not allowed for cluster worker1"),
        (lambda k: k["users"][0]["user"].update(exec={"command": "x", "apiVersion": "client.authentication.k8s.io/v1",
                                                       "interactiveMode": "Never"}),
         "InsecureKubeConfig", "exec plugins are not allowed"),
        (lambda k: k["users"][0]["user"].update(exec={"command": "x", "apiVersion": "client.authentication.k8s.io/v1"}),
         "InsecureKubeConfig",
         "invalid configuration: interactiveMode must be specified for worker1-user to use exec authentication plugin"),
    ],
)  # fmt: skip
def test_a_refused_kubeconfig_is_visible(mutate: Callable[[dict[str, Any]], None], reason: str, message: str) -> None:
    with loopback_multikueue(configure=False) as env:
        kubeconfigs = env.worker_kubeconfigs()
        bad = env.workers["worker1"].kubeconfig(cluster="worker1")
        mutate(bad)
        kubeconfigs["worker1"] = kubeconfig_bytes(bad)
        env.configure(kubeconfigs)

        async def scenario() -> None:
            async with env.kueue(time_scale=SCALE) as kueue:
                await kueue.wait_connected("worker2")
                state = await kueue.wait_for(
                    lambda: kueue.connection("worker1").history and kueue.connection("worker1")
                )
                assert (state.active, state.reason) == (False, reason)
                assert state.message == f"load client config failed: {message}"
                assert kueue.requests("worker1") == []

                def active() -> tuple[str, str] | None:
                    cluster = env.manager.get("kueue.x-k8s.io/v1beta2", "MultiKueueCluster", "worker1")
                    conditions = (cluster.get("status") or {}).get("conditions") or []
                    return next(((c["status"], c["reason"]) for c in conditions if c["type"] == "Active"), None)

                # the condition on the manager (its status PUT follows the state the model keeps)
                await kueue.wait_for(
                    lambda: active() == ("False", reason), what=f"Active False {reason} on the manager"
                )

        asyncio.run(scenario())


def test_status_writes_carry_the_read_resource_version() -> None:
    """The model's writes of the manager's Workload status are strict, as Kueue's
    (``pkg/workload/patching/patching.go``): based on a Workload changed since, refused (409);
    otherwise written, and the object written keeps the new ``resourceVersion`` for the next."""
    with loopback_multikueue() as env:

        async def scenario() -> None:
            async with env.kueue(time_scale=SCALE, gc_interval=1e6) as kueue:
                wl = env.core.submit(env.manager.create(env.job("strict")))
                local = env.manager.get("kueue.x-k8s.io/v1beta2", "Workload", wl, NS)
                env.core.evict(wl, NS)  # another controller's write
                with pytest.raises(ApiStatusError) as refused:
                    await kueue.patch_workload_status(local, {"nominatedClusterNames": ["worker1"]})
                assert refused.value.code == 409
                fresh = env.manager.get("kueue.x-k8s.io/v1beta2", "Workload", wl, NS)
                await kueue.patch_workload_status(fresh, {"nominatedClusterNames": ["worker1"]})
                await kueue.patch_workload_status(fresh, {"nominatedClusterNames": ["worker2"]})
                stored = env.manager.get("kueue.x-k8s.io/v1beta2", "Workload", wl, NS)
                assert stored["status"]["nominatedClusterNames"] == ["worker2"]
                assert stored["metadata"]["resourceVersion"] == fresh["metadata"]["resourceVersion"]

        asyncio.run(scenario())
