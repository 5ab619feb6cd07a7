"""--wire / --unwire of the MultiKueueCluster Secrets, and reading worker kubeconfigs from Secrets."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest
import yaml
from sidecar_harness import client, clusters

from mkpolicy.kube.kubeconfig import rest_config
from mkpolicy.kube.rest import TokenSource, in_cluster_config
from mkpolicy.sidecar.config import ConfigError, Worker
from mkpolicy.sidecar.wiring import (
    ORIGINAL_KEY,
    WIRED_ANNOTATION,
    multikueue_secret,
    real_kubeconfig,
    secret_path,
    unwire,
    wire,
)

pytestmark = pytest.mark.timeout(60)

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
                assert real_kubeconfig(secret, "kubeconfig") == original  # the sidecar reads the real one
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
                assert real_kubeconfig(created, "kubeconfig") is None  # no real kubeconfig behind it
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

        async def scenario() -> None:
            async with client(env.manager.kubeconfig()) as c:
                assert await multikueue_secret(c, worker("w1")) == "w1-kubeconfig"
                assert await multikueue_secret(c, worker("w1", wireSecret="explicit")) == "explicit"
                with pytest.raises(ConfigError, match="needs locationType Secret"):
                    await multikueue_secret(c, worker("by-path"))
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
def test_worker_kubeconfig_from_secret_is_held_to_kueue_rules(tmp_path: Path) -> None:
    from mkpolicy.kube.kubeconfig import KubeconfigError
    from mkpolicy.sidecar import Sidecar, config_from_dict

    with clusters(tmp_path) as env:
        bad = env.worker("worker1").kubeconfig()
        bad["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
        env.manager.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "w1-real", "namespace": "kueue-system"},
                "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(bad).encode()).decode()},
            }
        )
        config = config_from_dict(
            {
                "listen": {"basePort": 0},
                "ops": {"port": 0},
                "manager": {"kubeconfig": str(env.kubeconfigs["manager"])},
                "workers": [{"name": "worker1", "kubeconfig": {"secret": {"name": "w1-real"}}}],
            }
        )

        async def scenario() -> None:
            sidecar = Sidecar(config, str(tmp_path))
            with pytest.raises(KubeconfigError, match="insecure-skip-tls-verify is not allowed"):
                await sidecar.start()
            await sidecar.stop()

        asyncio.run(scenario())
        assert rest_config(env.worker("worker1").kubeconfig()).server == env.worker("worker1").url
