"""The shipped pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import kubernetes
import pytest
import yaml

from mkpolicy.testing.apiserver import ApiServer
from mkpolicy.testing.fixtures import MultiKueueClusters

from .conftest import pipelinerun


@pytest.mark.loopback_only("compares the servers' own URLs, tokens and CAs, and writes in namespace default")
def test_multikueue_clusters_are_separate_clusters(multikueue_clusters: MultiKueueClusters, tmp_path: Path) -> None:
    mk = multikueue_clusters
    assert list(mk.all) == ["manager", "worker1", "worker2"]
    urls = {s.url for s in mk.all.values()}
    tokens = {s.token for s in mk.all.values()}
    cas = {s.ca_pem for s in mk.all.values()}
    assert len(urls) == len(tokens) == len(cas) == 3
    paths = mk.write_kubeconfigs(tmp_path)
    clients = {name: kubernetes.config.new_client_from_config(str(path)) for name, path in paths.items()}
    custom = kubernetes.client.CustomObjectsApi(clients["worker1"])
    custom.create_namespaced_custom_object("tekton.dev", "v1", "default", "pipelineruns", pipelinerun("only-here"))
    for name, client in clients.items():
        items = kubernetes.client.CustomObjectsApi(client).list_namespaced_custom_object(
            "tekton.dev", "v1", "default", "pipelineruns"
        )["items"]
        assert [i["metadata"]["name"] for i in items] == (["only-here"] if name == "worker1" else [])
    # A token of one cluster does not open another.
    other = yaml.safe_load(paths["worker2"].read_text())
    other["users"][0]["user"]["token"] = mk.worker1.token
    try:
        kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config_dict(other)).list_namespace()
    except kubernetes.client.ApiException as exc:
        assert exc.status == 401
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("worker1's token was accepted by worker2")
    for client in clients.values():
        client.close()


@pytest.mark.loopback_only("checks the kubeconfig the loopback server writes (127.0.0.1, bearer token)")
def test_kubeconfig_has_kueues_accepted_shape(apiserver: ApiServer, tmp_path: Path) -> None:
    path = apiserver.write_kubeconfig(tmp_path / "kc.yaml", namespace="default")
    assert path.stat().st_mode & 0o777 == 0o600
    config = yaml.safe_load(path.read_text())
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == apiserver.url and cluster["server"].startswith("https://127.0.0.1:")
    assert "certificate-authority-data" in cluster and "certificate-authority" not in cluster
    user = config["users"][0]["user"]
    assert set(user) == {"token"}
    assert config["contexts"][0]["context"]["namespace"] == "default"


def test_apiserver_factory_options(apiserver_factory) -> None:
    plain = apiserver_factory("plain", bundled=False, tls=False, namespaces=("default", "team"))
    assert plain.url.startswith("http://")
    names = [n["metadata"]["name"] for n in plain.list("v1", "Namespace")]
    assert names == ["default", "team"]
    assert {rt.group for rt in plain.resource_types()} == {
        "",
        "apps",
        "batch",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "events.k8s.io",
        "rbac.authorization.k8s.io",
    }
