"""kubectl (client-go, a real Go client) against the loopback API server.

What Kueue's transport relies on, seen from the same client code: TLS with the CA as
data and a bearer token, HTTP/1.1, aggregated discovery, the JSON watch decoder, create
and delete (with its DeleteOptions body), raw reads, the PartialObjectMetadata Accept
(sent through ``kubectl proxy``, which forwards any header with client-go's transport),
and kube-apiserver's refusal of a non-structural CRD. Skipped when kubectl is absent.

The loopback server serves no OpenAPI documents: ``kubectl create`` runs with
``--validate=false`` (the server validates; kubectl then asks for fieldValidation=Ignore).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from mkpolicy.testing.apiserver import ApiServer
from mkpolicy.testing.kubectl import Kubectl, kubectl_path, requests_logged
from mkpolicy.testing.kueue import METADATA_ACCEPT

pytestmark = [
    pytest.mark.skipif(kubectl_path() is None, reason="kubectl is not installed"),
    pytest.mark.loopback_only("asserts the loopback server's answers to kubectl"),
    pytest.mark.timeout(120),
]


@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Iterator[Kubectl]:
    found = Kubectl.for_kubeconfig(apiserver.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)
    assert found is not None
    yield found


def pipelinerun(name: str) -> str:
    return yaml.safe_dump({"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
                           "metadata": {"name": name, "namespace": "default"},
                           "spec": {"pipelineRef": {"name": "build"}}})  # fmt: skip


def test_aggregated_discovery_and_tls(kubectl: Kubectl) -> None:
    """kubectl asks /api and /apis for apidiscovery.k8s.io/v2 and gets it, over TLS with a token."""
    proc = kubectl.run("api-resources", "-o", "name", verbose=True)
    names = proc.stdout.split()
    assert {"pipelineruns.tekton.dev", "workloads.kueue.x-k8s.io", "events", "events.events.k8s.io", "secrets"} <= set(
        names
    )
    discovery = [r for r in requests_logged(proc.stderr) if r.url.split("?")[0].endswith(("/api", "/apis"))]
    assert len(discovery) == 2
    for request in discovery:
        assert request.headers["Accept"].startswith(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        )
        assert request.headers["Authorization"] == "Bearer <masked>"
        assert request.status == 200
        assert (
            request.response_headers["Content-Type"]
            == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        )
    # No /apis/<group>/<version> round trips: aggregated discovery said it all.
    assert not any("/apis/tekton.dev" in r.url for r in requests_logged(proc.stderr))


def test_create_get_watch_delete(kubectl: Kubectl, apiserver: ApiServer) -> None:
    kubectl.run("create", "--validate=false", "-f", "-", input=pipelinerun("a"))
    assert kubectl.json("get", "pipelinerun", "a")["metadata"]["uid"]
    raw = kubectl.run("get", "--raw", "/apis/tekton.dev/v1/namespaces/default/pipelineruns/a").stdout
    assert json.loads(raw) == apiserver.get("tekton.dev/v1", "PipelineRun", "a", "default")
    with kubectl.watch("get", "pipelineruns", "-w", "--output-watch-events", "-o", "json") as events:
        first = next(events)
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "a")
        apiserver.patch("tekton.dev/v1", "PipelineRun", "a", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
        modified = next(events)
        assert (modified["type"], modified["object"]["metadata"]["labels"]) == ("MODIFIED", {"x": "1"})
        deleted = kubectl.run("delete", "pipelinerun", "a", verbose=True)
        assert next(events)["type"] == "DELETED"
    request = next(r for r in requests_logged(deleted.stderr) if r.method == "DELETE")
    assert json.loads(request.body) == {"propagationPolicy": "Background"}
    assert apiserver.list("tekton.dev/v1", "PipelineRun", namespace="default") == []


def test_partial_object_metadata_through_kubectl_proxy(kubectl: Kubectl, apiserver: ApiServer) -> None:
    """The Accept Kueue's ownership check sends, carried by client-go's transport (kubectl proxy)."""
    kubectl.run("create", "--validate=false", "-f", "-", input=pipelinerun("a"))
    with kubectl.proxy() as base:
        path = "/apis/tekton.dev/v1/namespaces/default/pipelineruns/a"
        request = urllib.request.Request(base + path, headers={"Accept": METADATA_ACCEPT})
        with urllib.request.urlopen(request, timeout=10) as resp:
            body = json.loads(resp.read())
    assert body["kind"] == "PartialObjectMetadata" and body["apiVersion"] == "meta.k8s.io/v1"
    assert body["metadata"] == apiserver.get("tekton.dev/v1", "PipelineRun", "a", "default")["metadata"]
    assert "spec" not in body


def test_a_non_structural_crd_is_refused(kubectl: Kubectl) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {}}}}}],
        },
    }  # fmt: skip
    proc = kubectl.run("create", "--validate=false", "-f", "-", input=yaml.safe_dump(crd), check=False)
    assert proc.returncode == 1
    assert (
        'The CustomResourceDefinition "widgets.example.com" is invalid: '
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: "
        "must not be empty for specified object fields"
    ) in proc.stderr


def test_events_both_apis(kubectl: Kubectl) -> None:
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"},
             "eventTime": "2026-11-21T10:00:00.000000Z", "reportingController": "mkpolicy.io/sidecar",
             "reportingInstance": "sidecar-0", "action": "Create", "reason": "Refused", "type": "Warning",
             "note": "refused by policy tekton", "regarding": {"kind": "PipelineRun", "name": "a", "namespace": "default"}}  # fmt: skip
    kubectl.run("create", "--validate=false", "-f", "-", input=yaml.safe_dump(event))
    core = kubectl.json("get", "events", "e")
    assert core["apiVersion"] == "v1" and core["message"] == "refused by policy tekton"
    assert kubectl.json("get", "events.events.k8s.io", "e")["note"] == "refused by policy tekton"
