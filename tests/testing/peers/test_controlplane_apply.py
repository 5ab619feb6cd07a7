"""``KubeCluster.apply``: create, else read and replace, again on a conflict (on the loopback API server,
whose faults stand in for a controller's write landing between the read and the replace)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from mkpolicy.testing import ApiServer
from mkpolicy.testing.apiserver import ApiError
from mkpolicy.testing.peers.controlplane import CONFLICT_RETRIES, AdminCluster, KubeCluster
from mkpolicy.testing.targets import ClusterSpec, Connection

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "quota", "namespace": "default"}}


@pytest.fixture
def cluster() -> Iterator[Any]:
    """What :meth:`KubeCluster.apply` uses of a cluster (its admin API), on a loopback API server."""
    server = ApiServer("peer")
    server.start()
    kubeconfig = server.kubeconfig()
    connection = Connection(ClusterSpec("peer", "", "peer", server.url, json.dumps(kubeconfig)))
    try:
        yield SimpleNamespace(admin=AdminCluster(connection, "default"), server=server)
    finally:
        connection.close()
        server.stop()


def apply(cluster: Any, data: dict[str, str]) -> dict[str, Any]:
    return KubeCluster.apply(cluster, {**CM, "data": data})


def test_creates_then_replaces(cluster: Any) -> None:
    assert apply(cluster, {"cpu": "1"})["data"] == {"cpu": "1"}
    assert apply(cluster, {"cpu": "2"})["data"] == {"cpu": "2"}
    assert cluster.admin.get("v1", "ConfigMap", "quota", "default")["data"] == {"cpu": "2"}


def test_a_conflict_reads_and_replaces_again(cluster: Any) -> None:
    apply(cluster, {"cpu": "1"})
    conflicts = cluster.server.faults.fail(409, verb="update", resource="configmaps", times=CONFLICT_RETRIES - 1)
    assert apply(cluster, {"cpu": "2"})["data"] == {"cpu": "2"}
    assert conflicts.hits == CONFLICT_RETRIES - 1


def test_conflicts_beyond_the_retries_are_raised(cluster: Any) -> None:
    apply(cluster, {"cpu": "1"})
    cluster.server.faults.fail(409, verb="update", resource="configmaps", times=CONFLICT_RETRIES)
    with pytest.raises(ApiError) as info:
        apply(cluster, {"cpu": "2"})
    assert info.value.code == 409
    assert cluster.admin.get("v1", "ConfigMap", "quota", "default")["data"] == {"cpu": "1"}


def test_other_errors_are_raised_at_once(cluster: Any) -> None:
    apply(cluster, {"cpu": "1"})
    refused = cluster.server.faults.fail(422, verb="update", resource="configmaps", times=None)
    with pytest.raises(ApiError) as info:
        apply(cluster, {"cpu": "2"})
    assert info.value.code == 422 and refused.hits == 1
