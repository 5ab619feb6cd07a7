"""The control plane on real peers: etcd and kube-apiserver built from peers/, started and stopped for sure."""

from __future__ import annotations

from pathlib import Path

import pytest

from mkpolicy.testing.kubectl import Kubectl
from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.controlplane import KubeCluster
from mkpolicy.testing.peers.processes import PeerStartError

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(1800)]  # (a cold first run builds the peers)


def test_kube_apiserver_reports_its_release_version(real_kube: KubeCluster, tmp_path: Path) -> None:
    """The version ldflags are in: Kueue parses gitVersion as strict semver and exits on the default."""
    version = real_kube.connection.http.request("GET", "/version")
    assert version["gitVersion"] == build.KUBE_VERSION
    assert (version["major"], version["minor"]) == ("1", "36")
    kubectl = Kubectl.for_kubeconfig(real_kube.write_kubeconfig(tmp_path / "kube.kubeconfig"), tmp_path)
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    assert kubectl.run("auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}").stdout.count("system:masters")


def test_a_server_that_cannot_start_is_quoted(real_kube: KubeCluster) -> None:
    """A failed start names the component and quotes its log; the process is gone."""
    plane = real_kube.plane
    broken = KubeCluster(plane, "broken")
    broken.process.argv.append("--no-such-flag")
    with pytest.raises(PeerStartError) as info:
        broken.start(timeout=60)
    message = info.value.message
    assert message.startswith("kube-apiserver broken: exited while waiting for https://127.0.0.1:")
    assert "unknown flag: --no-such-flag" in message
    broken.stop()
    assert not broken.process.alive


def test_a_stopped_server_comes_back_with_its_objects(real_kube: KubeCluster) -> None:
    """Stopping keeps the data in etcd; the restarted server answers on the same address."""
    real_kube.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kept"}})
    url = real_kube.url
    real_kube.stop()
    real_kube.start()
    assert real_kube.url == url
    assert real_kube.admin.get("v1", "Namespace", "kept")["metadata"]["name"] == "kept"
