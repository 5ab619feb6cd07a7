"""CRUD semantics, driven through the real kubernetes client."""

from __future__ import annotations

import base64
import datetime as dt
import uuid

import kubernetes
import pytest
from kubernetes.client import ApiException

from mkpolicy.testing.apiserver import ApiError, ApiServer

from .conftest import Clients, pipelinerun, simple_crd

PR = ("tekton.dev", "v1", "default", "pipelineruns")


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_create_sets_system_fields(k8s: Clients, pr: tuple, namespace: str) -> None:
    created = k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    meta = created["metadata"]
    uuid.UUID(meta["uid"])
    stamp = dt.datetime.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    assert abs((dt.datetime.now(dt.UTC) - stamp).total_seconds()) < 5
    assert meta["generation"] == 1
    assert meta["namespace"] == namespace
    assert k8s.custom.get_namespaced_custom_object(*pr, "a") == created


def test_client_supplied_system_fields_are_replaced(k8s: Clients, pr: tuple, namespace: str) -> None:
    body = pipelinerun("a", namespace)
    body["metadata"].update(uid="not-a-uid", generation=7, creationTimestamp="2000-01-01T00:00:00Z")
    created = k8s.custom.create_namespaced_custom_object(*pr, body)
    assert created["metadata"]["uid"] != "not-a-uid"
    assert created["metadata"]["generation"] == 1
    assert created["metadata"]["creationTimestamp"] != "2000-01-01T00:00:00Z"


def test_resource_version_is_global_and_increasing(k8s: Clients, pr: tuple, namespace: str) -> None:
    versions = []
    for i in range(3):
        versions.append(rv(k8s.custom.create_namespaced_custom_object(*pr, pipelinerun(f"p{i}", namespace))))
        cm = k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": f"c{i}"}})
        versions.append(int(cm.metadata.resource_version))
    assert versions == sorted(versions)
    assert len(set(versions)) == len(versions)


def test_create_existing_name_is_409_already_exists(k8s: Clients, pr: tuple, namespace: str) -> None:
    k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    with pytest.raises(ApiException) as exc:
        k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    assert exc.value.status == 409
    assert '"reason":"AlreadyExists"' in exc.value.body
    assert 'pipelineruns.tekton.dev \\"a\\" already exists' in exc.value.body


def test_update_with_stale_resource_version_is_409_conflict(k8s: Clients, pr: tuple, namespace: str) -> None:
    first = k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    first["spec"]["params"] = [{"name": "x", "value": "1"}]
    second = k8s.custom.replace_namespaced_custom_object(*pr, "a", first)
    assert rv(second) > rv(first)
    first["spec"]["params"] = [{"name": "x", "value": "2"}]  # still carries the old resourceVersion
    with pytest.raises(ApiException) as exc:
        k8s.custom.replace_namespaced_custom_object(*pr, "a", first)
    assert exc.value.status == 409
    assert '"reason":"Conflict"' in exc.value.body
    assert "the object has been modified" in exc.value.body
    # Without a resourceVersion the update is unconditional.
    del first["metadata"]["resourceVersion"]
    third = k8s.custom.replace_namespaced_custom_object(*pr, "a", first)
    assert third["spec"]["params"][0]["value"] == "2"


def test_update_with_other_uid_is_409(k8s: Clients, pr: tuple, namespace: str) -> None:
    obj = k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    obj["metadata"]["uid"] = str(uuid.uuid4())
    with pytest.raises(ApiException) as exc:
        k8s.custom.replace_namespaced_custom_object(*pr, "a", obj)
    assert exc.value.status == 409 and "Precondition failed: UID in precondition" in exc.value.body


def test_update_of_missing_object_is_404(k8s: Clients, pr: tuple, namespace: str) -> None:
    with pytest.raises(ApiException) as exc:
        k8s.custom.replace_namespaced_custom_object(*pr, "ghost", pipelinerun("ghost", namespace))
    assert exc.value.status == 404


@pytest.mark.parametrize(
    ("change", "bumps"),
    [
        (lambda o: o["spec"].update(timeouts={"pipeline": "1h"}), True),
        (lambda o: o["metadata"].setdefault("labels", {}).update(a="b"), False),
        (lambda o: o["metadata"].setdefault("annotations", {}).update(a="b"), False),
        (lambda o: o.update(status={"conditions": []}), False),  # status is a subresource: ignored
    ],
    ids=["spec", "labels", "annotations", "status"],
)
def test_generation_bumps_only_on_spec_change(k8s: Clients, change, bumps: bool, pr: tuple, namespace: str) -> None:
    obj = k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    change(obj)
    updated = k8s.custom.replace_namespaced_custom_object(*pr, "a", obj)
    assert updated["metadata"]["generation"] == (2 if bumps else 1)


@pytest.mark.loopback_only("compares the server-wide resourceVersion, which moves all the time on a live cluster")
def test_noop_update_keeps_resource_version(k8s: Clients, apiserver: ApiServer) -> None:
    obj = k8s.custom.create_namespaced_custom_object(*PR, pipelinerun("a"))
    before = apiserver.resource_version
    again = k8s.custom.replace_namespaced_custom_object(*PR, "a", obj)
    assert again["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    patched = k8s.custom.patch_namespaced_custom_object(*PR, "a", {"spec": {"pipelineRef": {"name": "build"}}})
    assert patched["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert apiserver.resource_version == before


@pytest.mark.loopback_only(
    "writes status.startTime 'now', which a real cluster's schema validation (date-time) refuses"
)
def test_status_subresource_split(k8s: Clients) -> None:
    body = pipelinerun("a")
    body["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    created = k8s.custom.create_namespaced_custom_object(*PR, body)
    assert "status" not in created  # create drops status when it is a subresource
    status = {"conditions": [{"type": "Succeeded", "status": "Unknown"}]}
    created["status"] = status
    created["spec"]["timeouts"] = {"pipeline": "2h"}
    created["metadata"]["labels"] = {"ignored": "yes"}
    after = k8s.custom.replace_namespaced_custom_object_status(*PR, "a", created)
    assert after["status"] == status
    assert "timeouts" not in after["spec"]  # a status write changes nothing else
    assert "labels" not in after["metadata"]
    assert after["metadata"]["generation"] == 1
    after["status"] = {"conditions": []}
    main = k8s.custom.replace_namespaced_custom_object(*PR, "a", after)
    assert main["status"] == status  # a main write cannot change status
    patched = k8s.custom.patch_namespaced_custom_object_status(*PR, "a", {"status": {"startTime": "2026-01-02T03:04:05Z"}})
    assert patched["status"] == {**status, "startTime": "2026-01-02T03:04:05Z"}
    assert k8s.custom.get_namespaced_custom_object_status(*PR, "a")["status"] == patched["status"]


@pytest.mark.loopback_only("registers a CRD (cluster-scoped)")
def test_crd_without_status_subresource(apiserver: ApiServer, k8s: Clients) -> None:
    apiserver.register_crd(simple_crd(status=False))
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}, "status": {"a": 1}}
    created = k8s.custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", body)
    assert created["status"] == {"a": 1}
    assert created["spec"] == {"size": 1}  # schema default applied
    created["status"] = {"a": 2}
    updated = k8s.custom.replace_namespaced_custom_object("example.com", "v1", "default", "widgets", "w", created)
    assert updated["status"] == {"a": 2}
    assert updated["metadata"]["generation"] == 2  # without the subresource, status counts as spec
    with pytest.raises(ApiException) as exc:
        k8s.custom.get_namespaced_custom_object_status("example.com", "v1", "default", "widgets", "w")
    assert exc.value.status == 404


def test_merge_patch_and_json_patch(k8s: Clients, pr: tuple, namespace: str) -> None:
    body = pipelinerun("a", namespace)
    body["metadata"]["labels"] = {"keep": "1", "drop": "1"}
    k8s.custom.create_namespaced_custom_object(*pr, body)
    merged = k8s.custom.patch_namespaced_custom_object(
        *pr,
        "a",
        {"metadata": {"labels": {"drop": None, "new": "2"}}, "spec": {"params": [{"name": "p", "value": "v"}]}},
    )
    assert merged["metadata"]["labels"] == {"keep": "1", "new": "2"}
    assert merged["spec"]["params"] == [{"name": "p", "value": "v"}]
    ops = [
        {"op": "test", "path": "/metadata/labels/keep", "value": "1"},
        {"op": "add", "path": "/spec/params/-", "value": {"name": "q", "value": "w"}},
        {"op": "remove", "path": "/metadata/labels/new"},
    ]
    patched = k8s.custom.patch_namespaced_custom_object(*pr, "a", ops, _content_type="application/json-patch+json")
    assert [p["name"] for p in patched["spec"]["params"]] == ["p", "q"]
    assert patched["metadata"]["labels"] == {"keep": "1"}
    with pytest.raises(ApiException) as exc:  # a failing test op
        k8s.custom.patch_namespaced_custom_object(
            *pr,
            "a",
            [{"op": "test", "path": "/metadata/labels/keep", "value": "2"}],
            _content_type="application/json-patch+json",
        )
    assert exc.value.status == 422


def test_patch_with_stale_resource_version_is_409(k8s: Clients, pr: tuple, namespace: str) -> None:
    obj = k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    k8s.custom.patch_namespaced_custom_object(*pr, "a", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(ApiException) as exc:
        k8s.custom.patch_namespaced_custom_object(
            *pr, "a", {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"], "labels": {"a": "2"}}}
        )
    assert exc.value.status == 409


def test_strategic_merge_patch_merges_containers_by_name(k8s: Clients, namespace: str) -> None:
    job = {
        "metadata": {"name": "j"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}]},
                        {"name": "side", "image": "nginx"},
                    ],
                }
            }
        },
    }
    created = k8s.batch.create_namespaced_job(namespace, job)
    assert created.spec.parallelism == 1 and created.spec.completions == 1 and created.spec.backoff_limit == 6
    uid = created.metadata.uid
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert created.spec.template.metadata.labels["job-name"] == "j"
    patch = {
        "spec": {"suspend": True, "template": {"spec": {"containers": [
            {"name": "main", "env": [{"name": "B", "value": "2"}]},
            {"name": "side", "$patch": "delete"},
        ]}}}
    }  # fmt: skip
    patched = k8s.batch.patch_namespaced_job("j", namespace, patch)  # the client sends strategic merge
    containers = patched.spec.template.spec.containers
    assert [c.name for c in containers] == ["main"]
    assert containers[0].image == "busybox"
    assert [(e.name, e.value) for e in containers[0].env] == [("A", "1"), ("B", "2")]
    assert patched.spec.suspend is True
    assert patched.metadata.generation == 2


def test_strategic_merge_patch_is_415_for_custom_resources(k8s: Clients, pr: tuple, namespace: str) -> None:
    k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("a", namespace))
    with pytest.raises(ApiException) as exc:
        k8s.custom.patch_namespaced_custom_object(
            *pr, "a", {"spec": {}}, _content_type="application/strategic-merge-patch+json"
        )
    assert exc.value.status == 415


def test_secret_string_data_and_immutable_configmap(k8s: Clients, namespace: str) -> None:
    secret = k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert secret.data == {"k": base64.b64encode(b"v").decode()}
    assert secret.type == "Opaque"
    k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}, "data": {"a": "1"}, "immutable": True})
    with pytest.raises(ApiException) as exc:
        k8s.core.patch_namespaced_config_map("c", namespace, {"data": {"a": "2"}})
    assert exc.value.status == 422 and "field is immutable" in exc.value.body


def test_generate_name(k8s: Clients, pr: tuple, namespace: str) -> None:
    body = pipelinerun("", namespace)
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "run-"
    names = {k8s.custom.create_namespaced_custom_object(*pr, body)["metadata"]["name"] for _ in range(3)}
    assert len(names) == 3 and all(n.startswith("run-") and len(n) == 9 for n in names)


@pytest.mark.loopback_only("compares the server-wide resourceVersion, which moves all the time on a live cluster")
def test_dry_run_changes_nothing(k8s: Clients, apiserver: ApiServer) -> None:
    before = apiserver.resource_version
    created = k8s.custom.create_namespaced_custom_object(*PR, pipelinerun("a"), dry_run="All")
    assert created["metadata"]["name"] == "a"
    assert apiserver.resource_version == before
    with pytest.raises(ApiException):
        k8s.custom.get_namespaced_custom_object(*PR, "a")


def test_unknown_fields_are_pruned_with_warning_or_rejected(k8s: Clients, raw, namespace: str) -> None:
    body = pipelinerun("a", namespace, bogus=1)
    body["metadata"]["extra"] = "x"
    reply = raw.request("POST", f"/apis/tekton.dev/v1/namespaces/{namespace}/pipelineruns", body)
    assert reply.status == 201
    assert "bogus" not in reply.json["spec"] and "extra" not in reply.json["metadata"]
    assert 'unknown field \\"spec.bogus\\"' in reply.headers["Warning"]
    body["metadata"]["name"] = "b"
    strict = raw.request(
        "POST", f"/apis/tekton.dev/v1/namespaces/{namespace}/pipelineruns?fieldValidation=Strict", body
    )
    assert strict.status == 400
    assert strict.json["message"] == (
        'PipelineRun in version "v1" cannot be handled as a PipelineRun: '
        'strict decoding error: unknown field "metadata.extra", unknown field "spec.bogus"'
    )


@pytest.mark.loopback_only("registers a CRD (cluster-scoped)")
def test_served_versions_share_storage(apiserver: ApiServer, k8s: Clients) -> None:
    apiserver.register_crd(simple_crd(versions=("v2", "v1")))
    body = {"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"color": "red"}}
    k8s.custom.create_namespaced_custom_object("example.com", "v2", "default", "widgets", body)
    old = k8s.custom.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w")
    assert old["apiVersion"] == "example.com/v1"
    assert old["spec"]["color"] == "red"


@pytest.mark.loopback_only("writes outside the test namespace (to one that does not exist)")
def test_create_in_missing_namespace_is_404(k8s: Clients) -> None:
    with pytest.raises(ApiException) as exc:
        k8s.custom.create_namespaced_custom_object(
            "tekton.dev", "v1", "nowhere", "pipelineruns", pipelinerun("a", namespace="nowhere")
        )
    assert exc.value.status == 404 and 'namespaces \\"nowhere\\" not found' in exc.value.body


def test_direct_python_api_matches_http(apiserver: ApiServer, k8s: Clients, pr: tuple, namespace: str) -> None:
    created = apiserver.create(pipelinerun("direct", namespace))
    assert k8s.custom.get_namespaced_custom_object(*pr, "direct") == created
    status = {"status": {"startTime": "2025-01-01T00:00:00Z", "unknownToTheSchema": 1}}
    patched = apiserver.patch("tekton.dev/v1", "PipelineRun", "direct", status, namespace=namespace,
                              subresource="status")  # fmt: skip
    assert patched["status"] == {"startTime": "2025-01-01T00:00:00Z"}  # pruned, as kube-apiserver prunes
    assert [o["metadata"]["name"] for o in apiserver.list("tekton.dev/v1", "PipelineRun", namespace)] == ["direct"]
    # a version the CRD does not serve: 404 for a list as for a get, as kube-apiserver answers
    with pytest.raises(ApiError) as get_unserved:
        apiserver.get("tekton.dev/v9", "PipelineRun", "direct", namespace)
    with pytest.raises(ApiError) as list_unserved:
        apiserver.list("tekton.dev/v9", "PipelineRun", namespace)
    assert (get_unserved.value.code, list_unserved.value.code) == (404, 404)
    assert apiserver.delete("tekton.dev/v1", "PipelineRun", "direct", namespace) is None
    with pytest.raises(kubernetes.client.ApiException):
        k8s.custom.get_namespaced_custom_object(*pr, "direct")
