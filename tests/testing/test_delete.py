"""DELETE: finalizers, deletionTimestamp, propagation policies, garbage collection, namespaces."""

from __future__ import annotations

import kubernetes
import pytest
from kubernetes.client import ApiException, V1DeleteOptions

from mkpolicy.testing.apiserver import ApiServer

from .conftest import Clients, pipelinerun

PR = ("tekton.dev", "v1", "default", "pipelineruns")


def owned(name: str, owner: dict, *, block: bool = False, namespace: str = "default") -> dict:
    body = pipelinerun(name, namespace)
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            **({"blockOwnerDeletion": True} if block else {}),
        }
    ]
    return body


def names(k8s: Clients, pr: tuple = PR) -> list[str]:
    return [o["metadata"]["name"] for o in k8s.custom.list_namespaced_custom_object(*pr)["items"]]


def test_delete_returns_object_for_custom_resources_and_status_for_builtins(
    k8s: Clients, pr: tuple, namespace: str
) -> None:
    k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    gone = k8s.custom.delete_namespaced_custom_object(*pr, "a")
    assert gone["metadata"]["name"] == "a"
    k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    status = k8s.core.delete_namespaced_config_map("c", namespace)  # the client hands back the raw dict
    assert status["kind"] == "Status" and status["status"] == "Success"
    assert status["details"]["name"] == "c" and status["details"]["kind"] == "configmaps"
    with pytest.raises(ApiException) as exc:
        k8s.custom.delete_namespaced_custom_object(*pr, "a")
    assert exc.value.status == 404


def test_finalizers_hold_the_object_until_removed(
    k8s: Clients, apiserver: ApiServer, pr: tuple, namespace: str
) -> None:
    body = pipelinerun("a", namespace)
    body["metadata"]["finalizers"] = ["example.com/cleanup"]
    k8s.custom.create_namespaced_custom_object(*pr, body)
    pending = k8s.custom.delete_namespaced_custom_object(*pr, "a")
    assert pending["metadata"]["deletionTimestamp"]
    assert pending["metadata"]["deletionGracePeriodSeconds"] == 0
    assert pending["metadata"]["generation"] == 2
    current = k8s.custom.get_namespaced_custom_object(*pr, "a")
    assert current["metadata"]["deletionTimestamp"] == pending["metadata"]["deletionTimestamp"]
    # No new finalizers once deleting.
    with pytest.raises(ApiException) as exc:
        k8s.custom.patch_namespaced_custom_object(
            *pr, "a", {"metadata": {"finalizers": ["example.com/cleanup", "example.com/more"]}}
        )
    assert exc.value.status == 422 and "no new finalizers can be added" in exc.value.body
    # Deleting again changes nothing.
    again = k8s.custom.delete_namespaced_custom_object(*pr, "a")
    assert again["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
    k8s.custom.patch_namespaced_custom_object(*pr, "a", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        k8s.custom.get_namespaced_custom_object(*pr, "a")
    assert gone.value.status == 404


def test_delete_preconditions(k8s: Clients, pr: tuple, namespace: str) -> None:
    obj = k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    for pre in ({"uid": "other"}, {"resourceVersion": "1"}):
        with pytest.raises(ApiException) as exc:
            k8s.custom.delete_namespaced_custom_object(*pr, "a", body=V1DeleteOptions(preconditions=pre))
        assert exc.value.status == 409 and "in the precondition" in exc.value.body and "does not match" in exc.value.body
    k8s.custom.delete_namespaced_custom_object(
        *pr, "a", body=V1DeleteOptions(preconditions={"uid": obj["metadata"]["uid"]})
    )
    assert names(k8s, pr) == []


@pytest.mark.loopback_only("garbage collection is immediate on the loopback server, eventual on a real cluster")
def test_background_propagation_deletes_dependents(k8s: Clients) -> None:
    owner = k8s.custom.create_namespaced_custom_object(*PR, pipelinerun("owner"))
    child = k8s.custom.create_namespaced_custom_object(*PR, owned("child", owner))
    k8s.custom.create_namespaced_custom_object(*PR, owned("grandchild", child))
    k8s.custom.create_namespaced_custom_object(*PR, pipelinerun("bystander"))
    k8s.custom.delete_namespaced_custom_object(*PR, "owner", propagation_policy="Background")
    assert names(k8s) == ["bystander"]


@pytest.mark.loopback_only("garbage collection is immediate on the loopback server, eventual on a real cluster")
def test_dependent_with_another_live_owner_only_loses_the_reference(k8s: Clients) -> None:
    a = k8s.custom.create_namespaced_custom_object(*PR, pipelinerun("a"))
    b = k8s.custom.create_namespaced_custom_object(*PR, pipelinerun("b"))
    body = owned("shared", a)
    body["metadata"]["ownerReferences"].append(owned("x", b)["metadata"]["ownerReferences"][0])
    k8s.custom.create_namespaced_custom_object(*PR, body)
    k8s.custom.delete_namespaced_custom_object(*PR, "a")
    shared = k8s.custom.get_namespaced_custom_object(*PR, "shared")
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["b"]


@pytest.mark.loopback_only("garbage collection is immediate on the loopback server, eventual on a real cluster")
def test_orphan_propagation_keeps_dependents_without_the_reference(k8s: Clients) -> None:
    owner = k8s.custom.create_namespaced_custom_object(*PR, pipelinerun("owner"))
    k8s.custom.create_namespaced_custom_object(*PR, owned("child", owner))
    k8s.custom.delete_namespaced_custom_object(*PR, "owner", body=V1DeleteOptions(propagation_policy="Orphan"))
    assert names(k8s) == ["child"]
    assert "ownerReferences" not in k8s.custom.get_namespaced_custom_object(*PR, "child")["metadata"]


@pytest.mark.loopback_only("garbage collection is immediate on the loopback server, eventual on a real cluster")
def test_foreground_waits_for_blocking_dependents(k8s: Clients) -> None:
    owner = k8s.custom.create_namespaced_custom_object(*PR, pipelinerun("owner"))
    child = owned("child", owner, block=True)
    child["metadata"]["finalizers"] = ["example.com/slow"]
    k8s.custom.create_namespaced_custom_object(*PR, child)
    pending = k8s.custom.delete_namespaced_custom_object(*PR, "owner", propagation_policy="Foreground")
    assert "foregroundDeletion" in pending["metadata"]["finalizers"]
    # The dependent is being deleted but its finalizer holds it, so the owner waits.
    assert k8s.custom.get_namespaced_custom_object(*PR, "child")["metadata"]["deletionTimestamp"]
    assert k8s.custom.get_namespaced_custom_object(*PR, "owner")["metadata"]["finalizers"] == ["foregroundDeletion"]
    k8s.custom.patch_namespaced_custom_object(*PR, "child", {"metadata": {"finalizers": None}})
    assert names(k8s) == []


def test_job_default_propagation_is_orphan(apiserver: ApiServer, k8s: Clients, pr: tuple, namespace: str) -> None:
    job = k8s.batch.create_namespaced_job(
        namespace,
        {"metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                                   "containers": [{"name": "c", "image": "i"}]}}}},
    )  # fmt: skip
    owner = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": job.metadata.uid}}
    k8s.custom.create_namespaced_custom_object(*pr, owned("child", owner, namespace=namespace))
    k8s.batch.delete_namespaced_job("j", namespace)
    assert names(k8s, pr) == ["child"]


@pytest.mark.loopback_only("creates and deletes a namespace of its own (cluster-scoped)")
def test_namespace_deletion_terminates_then_removes(k8s: Clients) -> None:
    k8s.core.create_namespace({"metadata": {"name": "team"}})
    ns = k8s.core.read_namespace("team")
    assert ns.status.phase == "Active" and ns.spec.finalizers == ["kubernetes"]
    assert ns.metadata.labels == {"kubernetes.io/metadata.name": "team"}
    held = pipelinerun("held", namespace="team")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    k8s.custom.create_namespaced_custom_object("tekton.dev", "v1", "team", "pipelineruns", held)
    k8s.core.create_namespaced_config_map("team", {"metadata": {"name": "c"}})
    k8s.core.delete_namespace("team")
    ns = k8s.core.read_namespace("team")
    assert ns.status.phase == "Terminating" and ns.metadata.deletion_timestamp
    assert k8s.core.list_namespaced_config_map("team").items == []
    with pytest.raises(ApiException) as exc:
        k8s.core.create_namespaced_config_map("team", {"metadata": {"name": "late"}})
    assert exc.value.status == 403 and "being terminated" in exc.value.body
    k8s.custom.patch_namespaced_custom_object(
        "tekton.dev", "v1", "team", "pipelineruns", "held", {"metadata": {"finalizers": None}}
    )
    with pytest.raises(ApiException) as gone:
        k8s.core.read_namespace("team")
    assert gone.value.status == 404


@pytest.mark.loopback_only(
    "expects the namespace's only ConfigMaps to be its own; a real one also holds kube-root-ca.crt"
)
def test_delete_collection_with_selector(k8s: Clients) -> None:
    for name, tier in (("a", "web"), ("b", "web"), ("c", "db")):
        k8s.core.create_namespaced_config_map("default", {"metadata": {"name": name, "labels": {"tier": tier}}})
    k8s.core.delete_collection_namespaced_config_map("default", label_selector="tier=web")
    assert [c.metadata.name for c in k8s.core.list_namespaced_config_map("default").items] == ["c"]


@pytest.mark.loopback_only("deletes a CRD (cluster-scoped)")
def test_deleting_a_crd_stops_serving_it(k8s: Clients, apiserver: ApiServer) -> None:
    k8s.custom.create_namespaced_custom_object(*PR, pipelinerun("a"))
    kubernetes.client.ApiextensionsV1Api(k8s.api).delete_custom_resource_definition("pipelineruns.tekton.dev")
    with pytest.raises(ApiException) as exc:
        k8s.custom.list_namespaced_custom_object(*PR)
    assert exc.value.status == 404
    groups = {g.name for g in kubernetes.client.ApisApi(k8s.api).get_api_versions().groups}
    assert "tekton.dev" not in groups and "kueue.x-k8s.io" in groups
    assert not any(r == ("tekton.dev", "pipelineruns") for r, _ in apiserver.store.by_uid.values())
