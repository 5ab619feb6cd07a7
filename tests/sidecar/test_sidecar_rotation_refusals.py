"""The sidecar where credentials rotate and creations fail: nothing untransformed, nothing in silence.

Scenarios on loopback clusters, driven request by request: a CBOR create, a pending policy
kind, a wired Secret rotated (and the sidecar restarted with --wire), a worker token rotated
in a kubeconfig file, workers isolated (one unwirable, one unreachable). The same failures
with Kueue's model running: test_sidecar_failures.py.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import cbor2
import pytest
import yaml
from sidecar_harness import (
    PIPELINERUNS,
    POLICIES,
    WORKLOADS,
    adapter_for,
    client,
    clusters,
    eventually,
    free_ports,
    kueue,
    metric,
    pipelinerun,
    policy_dir,
    running,
    strip_server_fields,
)

import mkpolicy
from mkpolicy.kube.client import ApiError
from mkpolicy.sidecar import Sidecar, workers
from mkpolicy.sidecar.wiring import DIGEST_ANNOTATION, ORIGINAL_KEY, WIRED_ANNOTATION, unwire

pytestmark = pytest.mark.timeout(120)

TEKTON = POLICIES / "tekton-pipelinerun.yaml"


def k8s_cbor(value: Any) -> bytes:
    """CBOR as Kubernetes encodes it: the self-described tag, strings as byte strings."""

    def strings_as_bytes(v: Any) -> Any:
        if isinstance(v, str):
            return v.encode()
        if isinstance(v, dict):
            return {k.encode(): strings_as_bytes(x) for k, x in v.items()}
        if isinstance(v, list):
            return [strings_as_bytes(x) for x in v]
        return v

    return cbor2.dumps(cbor2.CBORTag(55799, strings_as_bytes(value)))


def test_cbor_create_is_transformed_and_sent_as_json(tmp_path: Path) -> None:
    """client-go with its CBOR gates on: the body is decoded, the policy's copy goes to the worker as JSON."""
    adapter = adapter_for(TEKTON)
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar, kueue(env, sidecar) as driver:
                env.manager.create(pipelinerun("run-1", env.ns))
                manager_obj = env.manager.get("tekton.dev/v1", "PipelineRun", "run-1", env.ns)
                body = driver.clone(manager_obj, "wl-1")
                kubeconfig = sidecar.kubeconfig("worker1")
                ca = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
                headers = {
                    "Authorization": f"Bearer {kubeconfig['users'][0]['user']['token']}",
                    "Content-Type": "application/cbor",
                    "Accept": "application/cbor;q=1,application/json;q=0.9",
                }
                url = sidecar.endpoint("worker1") + PIPELINERUNS.path(env.ns)
                context = ssl.create_default_context(cadata=ca.decode())
                async with aiohttp.ClientSession() as session:
                    async with session.post(url, data=k8s_cbor(body), headers=headers, ssl=context) as resp:
                        assert resp.status == 201, await resp.text()
                        assert resp.headers["Content-Type"].startswith("application/json")
                    bad = k8s_cbor(body)[:-3]
                    async with session.post(url, data=bad, headers=headers, ssl=context) as resp:
                        assert resp.status == 400 and "not valid CBOR" in (await resp.json())["message"]
                worker = env.worker("worker1").get("tekton.dev/v1", "PipelineRun", "run-1", env.ns)
                ctx = mkpolicy.Context("wl-1", "multikueue", "worker1", None, "annotation")
                assert strip_server_fields(worker) == adapter.create(manager_obj, ctx)

        asyncio.run(scenario())


def test_pending_policy_kind_is_refused_and_not_ready(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A policy whose kind the manager does not serve: its copies cannot be transformed, so they are
    refused (never forwarded as Kueue made them, logged once) and /readyz is not ready until the
    kind appears."""
    with clusters(tmp_path) as env:
        policies = policy_dir(tmp_path, TEKTON)
        (policies / "widget.yaml").write_text(
            "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: widget}\n"
            "spec: {framework: Widget.v1.tekton.dev}\n"
        )

        async def scenario() -> None:
            sidecar = Sidecar(env.config(), str(policies))
            await sidecar.start()
            try:
                ready, checks = sidecar.readiness()
                assert not ready and any(c.startswith("fail pending widget (Widget.v1.tekton.dev)") for c in checks)
                async with client(sidecar.kubeconfig("worker1")) as w1:
                    widget = {
                        "apiVersion": "tekton.dev/v1",
                        "kind": "Widget",
                        "metadata": {
                            "name": "w",
                            "namespace": env.ns,
                            "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"},
                            "annotations": {"kueue.x-k8s.io/prebuilt-workload-name": "wl-w"},
                        },
                    }
                    with caplog.at_level(logging.WARNING, "mkpolicy.sidecar.proxy"), pytest.raises(ApiError) as info:
                        await w1.create(f"/apis/tekton.dev/v1/namespaces/{env.ns}/widgets", widget)
                    assert info.value.status == 503 and "widget (Widget.v1.tekton.dev)" in info.value.message
                    refusals = [r for r in caplog.records if r.name == "mkpolicy.sidecar.proxy"]
                    assert [(r.getMessage(), r.fields.get("reason")) for r in refusals] == [  # type: ignore[attr-defined]
                        ("creation refused", "PolicyPending")
                    ]
                    # other kinds of the group still pass (the worker answers them)
                    with pytest.raises(ApiError) as info:
                        await w1.create(f"/apis/tekton.dev/v1/namespaces/{env.ns}/taskruns", {"kind": "TaskRun"})
                    assert info.value.status == 404
                await sidecar.events.flush()
                events = env.manager.list("v1", "Event", namespace=env.ns)
                assert [(e["involvedObject"]["kind"], e["reason"]) for e in events] == [("Workload", "PolicyPending")]
            finally:
                await sidecar.stop()

        asyncio.run(scenario())


def kubeconfig_secret(name: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "kueue-system"},
        "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(config).encode()).decode()},
    }


def secret_kubeconfig(secret: dict[str, Any], key: str = "kubeconfig") -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(base64.b64decode(secret["data"][key]))
    return loaded


@pytest.mark.loopback_only("rotates worker tokens and rewrites Secrets in kueue-system")
def test_rotated_secret_is_rewired_and_a_restart_keeps_the_rotation(tmp_path: Path) -> None:
    """GitOps re-applies the MultiKueueCluster's Secret with a new token: the sidecar takes it as the
    worker's real kubeconfig, wires the Secret again within the watch's latency, and a restart with
    --wire keeps the rotated kubeconfig (never the stale saved one)."""
    with clusters(tmp_path) as env:
        worker = env.worker("worker1")
        old = worker.kubeconfig()
        env.manager.create(kubeconfig_secret("worker1-secret", old))
        env.manager.create(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": "worker1"},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "worker1-secret"}}},
            }
        )
        config = env.config(
            listen={"basePort": free_ports(1)[0]},  # the same endpoint across restarts
            workers=[{"name": "worker1", "kubeconfig": {"secret": {"name": "worker1-secret"}}}],
            state={"dir": str(tmp_path / "state")},
        )
        policies = policy_dir(tmp_path, TEKTON)

        async def scenario() -> None:
            async with running(config, policies) as sidecar:
                assert (await sidecar.wire()) == {"worker1": "updated"}
                wired = env.manager.get("v1", "Secret", "worker1-secret", "kueue-system")
                assert secret_kubeconfig(wired)["clusters"][0]["cluster"]["server"] == sidecar.endpoint("worker1")
                assert secret_kubeconfig(wired, ORIGINAL_KEY) == old
                # rotation: a new token on the worker, the Secret re-applied with it (the old one revoked)
                worker.add_token("rotated-token")
                new = {**old, "users": [{"name": old["users"][0]["name"], "user": {"token": "rotated-token"}}]}
                wired["data"]["kubeconfig"] = base64.b64encode(yaml.safe_dump(new).encode()).decode()
                env.manager.update(wired)

                def rewired() -> bool:
                    secret = env.manager.get("v1", "Secret", "worker1-secret", "kueue-system")
                    return secret_kubeconfig(secret)["clusters"][0]["cluster"]["server"] == sidecar.endpoint("worker1")

                await eventually(rewired)
                secret = env.manager.get("v1", "Secret", "worker1-secret", "kueue-system")
                assert secret_kubeconfig(secret, ORIGINAL_KEY) == new
                assert sidecar._links["worker1"].upstream.config.token == "rotated-token"
                async with client(sidecar.kubeconfig("worker1")) as w1:
                    assert (await w1.get(WORKLOADS))["kind"] == "WorkloadList"
            # a restart with --wire: the saved (rotated) kubeconfig stays the real one
            async with running(config, policies) as sidecar:
                assert sidecar._links["worker1"].upstream.config.token == "rotated-token"
                assert (await sidecar.wire()) == {"worker1": "unchanged"}
                secret = env.manager.get("v1", "Secret", "worker1-secret", "kueue-system")
                assert secret_kubeconfig(secret, ORIGINAL_KEY) == new
                assert secret["metadata"]["annotations"][WIRED_ANNOTATION] == "updated"
                assert DIGEST_ANNOTATION in secret["metadata"]["annotations"]
            # rotated while the sidecar was away: the next start takes the rotated one, wiring keeps it
            newer = {**old, "users": [{"name": old["users"][0]["name"], "user": {"token": "newer-token"}}]}
            worker.add_token("newer-token")
            secret = env.manager.get("v1", "Secret", "worker1-secret", "kueue-system")
            secret["data"]["kubeconfig"] = base64.b64encode(yaml.safe_dump(newer).encode()).decode()
            env.manager.update(secret)
            async with running(config, policies) as sidecar:
                assert sidecar._links["worker1"].upstream.config.token == "newer-token"
                assert (await sidecar.wire()) == {"worker1": "updated"}
                secret = env.manager.get("v1", "Secret", "worker1-secret", "kueue-system")
                assert secret_kubeconfig(secret, ORIGINAL_KEY) == newer
            # unwiring restores the newest real kubeconfig
            async with client(env.manager.kubeconfig()) as manager:
                assert await unwire(manager, "kueue-system", "worker1-secret") == "restored"
            secret = env.manager.get("v1", "Secret", "worker1-secret", "kueue-system")
            assert secret_kubeconfig(secret) == newer and ORIGINAL_KEY not in secret["data"]

        asyncio.run(scenario())


@pytest.mark.loopback_only("rotates a worker token")
def test_rotated_token_in_a_kubeconfig_file_is_taken_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A polled kubeconfig file is taken up when it changes; while not a byte of it changes it is
    not parsed again (it is read every reload interval)."""
    parses: list[bytes] = []
    parse = workers.parse_kubeconfig
    monkeypatch.setattr(workers, "parse_kubeconfig", lambda raw, *a: parses.append(raw) or parse(raw, *a))
    with clusters(tmp_path) as env:
        worker = env.worker("worker2")
        path = env.kubeconfigs["worker2"]

        async def scenario() -> None:
            async with (
                running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar,
                client(sidecar.kubeconfig("worker2")) as w2,
            ):
                assert (await w2.get(WORKLOADS))["kind"] == "WorkloadList"
                seen = parses.count(path.read_bytes())
                await asyncio.sleep(3 * sidecar.config.reload.interval_seconds)  # three polls, nothing changed
                assert parses.count(path.read_bytes()) == seen
                worker.add_token("file-rotated")
                config = yaml.safe_load(path.read_text())
                config["users"][0]["user"]["token"] = "file-rotated"
                path.write_text(yaml.safe_dump(config))
                await eventually(lambda: sidecar._links["worker2"].upstream.config.token == "file-rotated")
                assert (await w2.get(WORKLOADS))["kind"] == "WorkloadList"
                assert (
                    metric(sidecar, "mkpolicy_sidecar_worker_kubeconfig_reloads_total", cluster="worker2", result="ok")
                    == 1
                )

        asyncio.run(scenario())


def test_a_refused_kubeconfig_ends_the_watches_on_its_endpoint(tmp_path: Path) -> None:
    """Kueue keeps a worker Active while its watches last, and a wired Secret put back before Kueue
    read the refused kubeconfig changes nothing it compares: the watches open on a worker's endpoint
    end when its kubeconfig is refused (cleanly), so Kueue's reconnect meets the 503."""
    with clusters(tmp_path) as env:
        path = env.kubeconfigs["worker2"]

        async def scenario() -> None:
            async with (
                running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar,
                client(sidecar.kubeconfig("worker2")) as w2,
                client(sidecar.kubeconfig("worker1")) as w1,
            ):
                ended: list[str] = []

                async def watch(c: Any, name: str) -> None:
                    async for _ in c.watch(WORKLOADS):  # as Kueue watches: no timeout
                        pass
                    ended.append(name)  # an error would raise instead

                watches = [asyncio.create_task(watch(w2, "worker2")), asyncio.create_task(watch(w1, "worker1"))]
                for cluster in ("worker1", "worker2"):
                    await eventually(
                        lambda c=cluster: metric(sidecar, "mkpolicy_sidecar_active_watches", cluster=c) == 1
                    )
                config = yaml.safe_load(path.read_text())
                config["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
                path.write_text(yaml.safe_dump(config))
                await asyncio.wait_for(watches[0], 30)  # ended by the refusal (the watch has no timeout)
                assert ended == ["worker2"] and not watches[1].done()  # the other worker's watch lasts
                with pytest.raises(ApiError) as refused:
                    await w2.get(WORKLOADS)
                assert refused.value.status == 503 and "worker worker2 is not served" in refused.value.message
                watches[1].cancel()

        asyncio.run(scenario())


@pytest.mark.loopback_only("creates cluster-scoped MultiKueueClusters and wires Secrets in kueue-system")
def test_one_worker_unwirable_one_unreachable_the_other_serves(tmp_path: Path) -> None:
    """Workers are isolated: a ClusterProfile MultiKueueCluster cannot be wired (said, the other is
    wired); an unreachable worker answers 503 and shows in /readyz while the other one serves."""
    import socket

    with clusters(tmp_path) as env:
        env.manager.create(kubeconfig_secret("worker1-secret", env.worker("worker1").kubeconfig()))
        for name, source in (
            ("worker1", {"kubeConfig": {"locationType": "Secret", "location": "worker1-secret"}}),
            ("worker2", {"clusterProfileRef": {"name": "worker2-profile"}}),
        ):
            env.manager.create(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "MultiKueueCluster",
                    "metadata": {"name": name},
                    "spec": {"clusterSource": source},
                }
            )
        with socket.socket() as sock:  # a port nothing listens on
            sock.bind(("127.0.0.1", 0))
            closed = sock.getsockname()[1]
        unreachable = env.worker("worker2").kubeconfig()
        unreachable["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{closed}"
        (tmp_path / "w2.kubeconfig").write_text(yaml.safe_dump(unreachable))
        config = env.config(
            workers=[
                {"name": "worker1", "kubeconfig": {"secret": {"name": "worker1-secret"}}},
                {"name": "worker2", "kubeconfig": {"file": str(tmp_path / "w2.kubeconfig")}},
            ]
        )

        async def scenario() -> None:
            async with running(config, policy_dir(tmp_path, TEKTON)) as sidecar:
                wired = await sidecar.wire()
                assert wired["worker1"] == "updated"
                assert wired["worker2"].startswith("not wired: worker worker2: MultiKueueCluster worker2 connects ")
                async with (
                    client(sidecar.kubeconfig("worker1")) as w1,
                    client(sidecar.kubeconfig("worker2")) as w2,
                ):
                    assert metric(sidecar, "mkpolicy_sidecar_worker_up", cluster="worker2") == 1  # not tried yet
                    with pytest.raises(ApiError) as info:
                        await w2.get(WORKLOADS)
                    assert info.value.status == 503 and "unreachable" in info.value.message
                    assert (await w1.get(WORKLOADS))["kind"] == "WorkloadList"
                    assert metric(sidecar, "mkpolicy_sidecar_worker_up", cluster="worker2") == 0
                    assert metric(sidecar, "mkpolicy_sidecar_worker_up", cluster="worker1") == 1
                ready, checks = sidecar.readiness()
                assert ready, checks
                assert "ok worker worker1" in checks
                assert any(c.startswith("warn worker worker2: unreachable") for c in checks), checks
                assert any(c.startswith("warn wiring worker2: worker worker2: MultiKueueCluster") for c in checks)

        asyncio.run(scenario())


def test_a_rotated_manager_kubeconfig_is_taken_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manager's kubeconfig is followed as the workers' are: a rotated CA is used from the next read on;
    while not a byte of it changes, it is not parsed again."""
    from mkpolicy.kube.certs import make_ca
    from mkpolicy.sidecar import server

    parses: list[str] = []
    parse = server.manager_kubeconfig
    monkeypatch.setattr(server, "manager_kubeconfig", lambda config: parses.append("") or parse(config))

    with clusters(tmp_path) as env:
        path = env.kubeconfigs["manager"]
        good = yaml.safe_load(path.read_text())
        rotated = yaml.safe_load(path.read_text())
        other_ca = make_ca("another-ca").cert_pem
        rotated["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(other_ca).decode()

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar, kueue(env, sidecar) as driver:
                env.manager.create(pipelinerun("run-1", env.ns))
                await driver.sync_job("worker1", env.ns, "run-1", "wl-1")
                async with client(sidecar.kubeconfig("worker1")) as w1:

                    async def read() -> int:
                        try:
                            await w1.get(PIPELINERUNS.path(env.ns, "run-1"))
                        except ApiError as exc:
                            return exc.status
                        return 200

                    assert await read() == 200
                    await eventually(lambda: len(parses) >= 2)  # at start, and the first check of the follower
                    seen = len(parses)
                    await asyncio.sleep(10 * sidecar.config.reload.interval_seconds)
                    assert len(parses) == seen  # nothing changed: nothing parsed
                    path.write_text(yaml.safe_dump(rotated))  # the manager's CA as the sidecar now sees it
                    await eventually(
                        lambda: sidecar._manager is not None and sidecar._manager.config.ca_pem == other_ca
                    )
                    assert await read() == 503  # the manager's object cannot be read: nothing untransformed
                    path.write_text(yaml.safe_dump(good))
                    await eventually(
                        lambda: sidecar._manager is not None and sidecar._manager.config.ca_pem != other_ca
                    )
                    assert await read() == 200

        asyncio.run(scenario())
