"""--wire / --unwire of the MultiKueueCluster Secrets, and reading worker kubeconfigs from Secrets."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest
import yaml
from sidecar_harness import WORKLOADS, client, clusters, eventually, metric, policy_dir, running

from mkpolicy.kube.rest import TokenSource, in_cluster_config
from mkpolicy.sidecar.config import ConfigError, Worker
from mkpolicy.sidecar.wiring import (
    ORIGINAL_KEY,
    WIRED_ANNOTATION,
    multikueue_secret,
    secret_path,
    split_secret,
    unwire,
    wire,
)

pytestmark = pytest.mark.timeout(60)

POLICIES = Path(__file__).resolve().parents[2] / "policies"

WIRED = "apiVersion: v1\nkind: Config\nclusters: []\n"


def worker(name: str, **extra: object) -> Worker:
    return Worker.model_validate({"name": name, "kubeconfig": {"file": "x"}, **extra})


@pytest.mark.loopback_only("writes Secrets in kueue-system, outside the test namespace")
def test_wire_unwire_round_trips(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        original = b"apiVersion: v1\nkind: Config\n# the real one\n"
        env.manager.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "w1-secret", "namespace": "kueue-system", "annotations": {"keep": "me"}},
                "data": {"kubeconfig": base64.b64encode(original).decode()},
            }
        )

        async def scenario() -> None:
            async with client(env.manager.kubeconfig()) as c:
                assert await wire(c, "kueue-system", "w1-secret", WIRED, "https://127.0.0.1:7443") == "updated"
                secret = await c.get(secret_path("kueue-system", "w1-secret"))
                assert base64.b64decode(secret["data"]["kubeconfig"]).decode() == WIRED
                assert base64.b64decode(secret["data"][ORIGINAL_KEY]) == original
                assert secret["metadata"]["annotations"][WIRED_ANNOTATION] == "updated"
                assert split_secret(secret, "kubeconfig") == (original, True)  # the sidecar reads the real one
                assert await wire(c, "kueue-system", "w1-secret", WIRED, "https://127.0.0.1:7443") == "unchanged"
                # wiring again with another kubeconfig (new tokens) keeps the original
                assert (
                    await wire(c, "kueue-system", "w1-secret", WIRED + "# v2\n", "https://127.0.0.1:7443") == "updated"
                )
                secret = await c.get(secret_path("kueue-system", "w1-secret"))
                assert base64.b64decode(secret["data"][ORIGINAL_KEY]) == original
                assert await unwire(c, "kueue-system", "w1-secret") == "restored"
                secret = await c.get(secret_path("kueue-system", "w1-secret"))
                assert base64.b64decode(secret["data"]["kubeconfig"]) == original
                assert ORIGINAL_KEY not in secret["data"]
                assert secret["metadata"]["annotations"] == {"keep": "me"}
                assert await unwire(c, "kueue-system", "w1-secret") == "unchanged"
                # a Secret wiring created is deleted again
                assert await wire(c, "kueue-system", "new-secret", WIRED, "https://127.0.0.1:7444") == "created"
                created = await c.get(secret_path("kueue-system", "new-secret"))
                assert split_secret(created, "kubeconfig") == (None, True)  # no real kubeconfig behind it
                assert await unwire(c, "kueue-system", "new-secret") == "deleted"
                assert await unwire(c, "kueue-system", "new-secret") == "absent"

        asyncio.run(scenario())


@pytest.mark.loopback_only("creates cluster-scoped MultiKueueClusters")
def test_multikueue_secret_resolution(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:
        env.manager.create(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": "w1"},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "w1-kubeconfig"}}},
            }
        )
        env.manager.create(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": "by-path"},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Path", "location": "/etc/w.kubeconfig"}}},
            }
        )
        env.manager.create(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": "by-profile"},
                "spec": {"clusterSource": {"clusterProfileRef": {"name": "gke-worker"}}},
            }
        )

        async def scenario() -> None:
            async with client(env.manager.kubeconfig()) as c:
                assert await multikueue_secret(c, worker("w1")) == "w1-kubeconfig"
                assert await multikueue_secret(c, worker("w1", wireSecret="explicit")) == "explicit"
                # Path: Kueue re-reads the file; the sidecar can write it (--kubeconfig-dir), not wire it
                with pytest.raises(
                    ConfigError, match="file '/etc/w.kubeconfig' in Kueue's container.*--kubeconfig-dir"
                ):
                    await multikueue_secret(c, worker("by-path"))
                # ClusterProfile: Kueue connects from the profile's status with an access plugin
                with pytest.raises(ConfigError, match="connects through ClusterProfile 'gke-worker'.*wireSecret"):
                    await multikueue_secret(c, worker("by-profile"))
                with pytest.raises(ConfigError, match="no MultiKueueCluster named 'ghost'"):
                    await multikueue_secret(c, worker("ghost"))

        asyncio.run(scenario())


def test_in_cluster_config_and_token_rotation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    (sa / "token").write_text("first\n")
    (sa / "namespace").write_text("kueue-system")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(Exception, match="not running in a Kubernetes pod"):
        in_cluster_config(str(sa))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    cfg = in_cluster_config(str(sa))
    assert cfg.server == "https://[fd00::1]:6443" and cfg.namespace == "kueue-system" and cfg.token is None
    tokens = TokenSource(cfg, recheck_seconds=0)
    assert tokens.headers() == {"Authorization": "Bearer first"}
    import os

    (sa / "token").write_text("second\n")
    os.utime(sa / "token", (1, 1))  # a different mtime, as the kubelet's atomic swap gives
    assert tokens.token() == "second"


@pytest.mark.loopback_only("writes a Secret in kueue-system, outside the test namespace")
def test_refused_worker_kubeconfig_is_isolated_and_a_rotation_fixes_it(tmp_path: Path) -> None:
    """A worker kubeconfig Kueue's rules refuse does not stop the sidecar: that worker's endpoint
    answers a Status naming the reason (and /readyz says so) while the other worker serves; when
    its Secret is rewritten with a good kubeconfig, the worker is served within the watch's latency."""
    from mkpolicy.kube.client import ApiError
    from mkpolicy.sidecar import Sidecar

    with clusters(tmp_path) as env:
        good = env.worker("worker1").kubeconfig()
        bad = env.worker("worker1").kubeconfig()
        bad["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True

        def secret_data(config: dict[str, object]) -> dict[str, str]:
            return {"kubeconfig": base64.b64encode(yaml.safe_dump(config).encode()).decode()}

        env.manager.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "w1-real", "namespace": "kueue-system"},
                "data": secret_data(bad),
            }
        )
        config = env.config(
            workers=[
                {"name": "worker1", "kubeconfig": {"secret": {"name": "w1-real"}}},
                {"name": "worker2", "kubeconfig": {"file": str(env.kubeconfigs["worker2"])}},
            ]
        )

        reads = env.manager.faults.delay(0, verb="get", resource="secrets", name="w1-real", times=None)

        async def scenario() -> None:
            async with running(config, policy_dir(tmp_path, POLICIES / "tekton-pipelinerun.yaml")) as sidecar:
                assert isinstance(sidecar, Sidecar)
                assert reads.hits == 1  # read once at start: its watch starts from that read's resourceVersion
                ready, checks = sidecar.readiness()
                assert ready, checks  # one refused worker: the others keep serving
                assert any(
                    c.startswith("warn worker worker1: refused: Secret kueue-system/w1-real key kubeconfig: ")
                    and "insecure-skip-tls-verify is not allowed" in c
                    for c in checks
                ), checks
                assert "ok worker worker2" in checks
                async with client(sidecar.kubeconfig("worker1")) as w1, client(sidecar.kubeconfig("worker2")) as w2:
                    with pytest.raises(ApiError) as info:
                        await w1.get(WORKLOADS)
                    assert info.value.status == 503 and "insecure-skip-tls-verify" in info.value.message
                    assert info.value.body.get("kind") == "Status"
                    assert (await w2.get(WORKLOADS))["kind"] == "WorkloadList"
                    # the Secret is rotated to a good kubeconfig (while its watch is re-opened: it
                    # resumes from the last resourceVersion seen): taken up, no restart, no read
                    env.manager.faults.end_watches(resource="secrets")
                    secret = env.manager.get("v1", "Secret", "w1-real", "kueue-system")
                    secret["data"] = secret_data(good)
                    env.manager.update(secret)
                    await eventually(lambda: sidecar.worker_problem("worker1") is None)
                    assert reads.hits == 1
                    assert (await w1.get(WORKLOADS))["kind"] == "WorkloadList"
                assert (
                    metric(sidecar, "mkpolicy_sidecar_worker_kubeconfig_reloads_total", cluster="worker1", result="ok")
                    == 1
                )
                assert metric(sidecar, "mkpolicy_sidecar_worker_up", cluster="worker1") == 1

        asyncio.run(scenario())


def test_an_unreadable_kubeconfig_file_is_refused_with_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker's kubeconfig file that cannot be read: refused with the system's reason (once, not
    overwritten by a vaguer one); a readable one is taken up at the next read."""
    import logging

    from mkpolicy.kube.certs import make_ca
    from mkpolicy.kube.kubeconfig import dump_kubeconfig, make_kubeconfig
    from mkpolicy.sidecar.metrics import Metrics
    from mkpolicy.sidecar.workers import WorkerLink

    path = tmp_path / "w1.kubeconfig"
    link = WorkerLink(
        Worker.model_validate({"name": "w1", "kubeconfig": {"file": str(path)}}), "kueue-system", frozenset, Metrics()
    )

    async def scenario() -> None:
        try:
            with caplog.at_level(logging.ERROR, "mkpolicy.sidecar.workers"):
                await link.load(None)
            assert link.problem == f"cannot read {path}: No such file or directory"
            assert [r.getMessage() for r in caplog.records] == ["worker refused"]
            assert link.readiness() == f"warn worker w1: refused: cannot read {path}: No such file or directory"
            path.write_text(dump_kubeconfig(make_kubeconfig("https://10.0.0.1:6443", make_ca("ca").cert_pem, "t")))
            await link.load(None)
            assert link.problem is None and link.upstream.config.token == "t"
        finally:
            await link.stop()

    asyncio.run(scenario())
