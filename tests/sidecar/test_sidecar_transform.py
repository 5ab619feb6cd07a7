"""The transforms on the wire: worker copies on create, status rewriting on reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import mkpolicy
from mkpolicy.engine import ORIGIN_LABEL, PREBUILT_WORKLOAD_KEY
from mkpolicy.sidecar.paths import parse_target
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.transform import apply_merge_patch, context_of, rewrite_status, worker_copy

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def adapter() -> mkpolicy.Adapter:
    return mkpolicy.compile(mkpolicy.load(str(DATA / "tekton-policy.yaml"))[0])


def manager_run(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {
            "name": "run-1",
            "namespace": "team-a",
            "uid": "u-1",
            "resourceVersion": "7",
            "labels": {"x": "1"},
        },
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue", "pipelineRef": {"name": "p"}, **spec},
        "status": {"conditions": [{"type": "Succeeded", "status": "Unknown"}]},
    }


def kueue_body(identifier: str = "annotation") -> dict[str, Any]:
    """What Kueue's generic adapter POSTs: its own clone of the manager's object."""
    meta: dict[str, Any] = {"name": "run-1", "namespace": "team-a", "labels": {"x": "1", ORIGIN_LABEL: "multikueue"}}
    if identifier == "annotation":
        meta["annotations"] = {PREBUILT_WORKLOAD_KEY: "pipelinerun-run-1-abc"}
    else:
        meta["labels"][PREBUILT_WORKLOAD_KEY] = "pipelinerun-run-1-abc"
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": meta,
        "spec": {"pipelineRef": {"name": "p"}},
    }


@pytest.mark.parametrize("identifier", ["annotation", "label"])
def test_worker_copy_is_the_policys_create(adapter: mkpolicy.Adapter, identifier: str) -> None:
    manager = manager_run(timeouts={"pipeline": "1h"})
    worker, outcome = worker_copy(adapter, manager, kueue_body(identifier), "worker1")
    ctx = mkpolicy.Context("pipelinerun-run-1-abc", "multikueue", "worker1", None, identifier)  # type: ignore[arg-type]
    assert worker == adapter.create(manager, ctx)
    assert outcome.result == "ok"
    assert worker["metadata"]["annotations"]["mkpolicy.io/dispatched-to"] == "worker1"
    assert "timeouts" not in worker["spec"] and "managedBy" not in worker["spec"]
    assert "status" not in worker and "uid" not in worker["metadata"]


def test_worker_copy_refusals(adapter: mkpolicy.Adapter) -> None:
    body = kueue_body()
    del body["metadata"]["labels"][ORIGIN_LABEL]
    with pytest.raises(StatusError) as info:
        worker_copy(adapter, manager_run(), body, "worker1")
    assert info.value.code == 400 and ORIGIN_LABEL in info.value.message
    body = kueue_body()
    del body["metadata"]["annotations"]
    with pytest.raises(StatusError, match="prebuilt workload name"):
        worker_copy(adapter, manager_run(), body, "worker1")
    unmanaged = manager_run()
    unmanaged["spec"]["managedBy"] = "someone-else"
    with pytest.raises(StatusError) as info:
        worker_copy(adapter, unmanaged, kueue_body(), "worker1")
    assert info.value.code == 403 and "does not manage" in info.value.message


def test_failing_creation_patch_names_policy_and_patch() -> None:
    policy = mkpolicy.policy.loads(
        """
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: broken}
spec:
  framework: PipelineRun.v1.tekton.dev
  creation:
    patches:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "replace", path: "/spec/nothing/here", value: 1}]'
"""
    )[0]
    with pytest.raises(StatusError) as info:
        worker_copy(mkpolicy.compile(policy), manager_run(), kueue_body(), "worker1")
    assert info.value.code == 500
    assert "policy broken" in info.value.message and "creation patch #1" in info.value.message
    body = info.value.body()
    assert body["kind"] == "Status" and body["reason"] == "InternalError" and body["code"] == 500


def test_rewrite_status_is_the_manager_status_after_sync(adapter: mkpolicy.Adapter) -> None:
    manager = manager_run()
    worker, _ = worker_copy(adapter, manager, kueue_body(), "worker1")
    worker["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}], "startTime": "t0", "taskRuns": {}}
    out, outcome = rewrite_status(adapter, worker, manager, "worker1", "multikueue")
    ctx = context_of(worker, "worker1")
    assert ctx is not None
    patch = adapter.sync(manager, worker, ctx)
    assert out["status"] == apply_merge_patch(manager, patch)["status"]
    assert out["status"]["results"] == [{"name": "cluster", "value": "worker1"}] and "taskRuns" not in out["status"]
    assert outcome.result == "ok"
    assert {k: v for k, v in out.items() if k != "status"} == {k: v for k, v in worker.items() if k != "status"}
    assert worker["status"]["taskRuns"] == {}  # input untouched


def test_rewrite_status_when_nothing_is_to_be_written(adapter: mkpolicy.Adapter) -> None:
    manager = manager_run()
    worker, _ = worker_copy(adapter, manager, kueue_body(), "worker1")
    # another origin's copy: the manager's status as it is (Kueue then writes nothing)
    foreign = {**worker, "metadata": {**worker["metadata"], "labels": {ORIGIN_LABEL: "other"}}, "status": {"a": 1}}
    out, outcome = rewrite_status(adapter, foreign, manager, "worker1", "multikueue")
    assert out["status"] == manager["status"] and outcome.result == "not_ours"
    # the manager has no such object: no status at all
    out, outcome = rewrite_status(adapter, {**worker, "status": {"a": 1}}, None, "worker1", "multikueue")
    assert "status" not in out and outcome.result == "no_manager"
    # not managed by the policy
    unmanaged = manager_run()
    unmanaged["spec"]["managedBy"] = "x"
    out, outcome = rewrite_status(adapter, {**worker, "status": {"a": 1}}, unmanaged, "worker1", "multikueue")
    assert out["status"] == unmanaged["status"] and outcome.result == "not_managed"


def test_rewrite_status_error_strips_the_status() -> None:
    policy = mkpolicy.policy.loads(
        """
apiVersion: mkpolicy.io/v1alpha1
kind: FrameworkPolicy
metadata: {name: bad-sync}
spec:
  framework: PipelineRun.v1.tekton.dev
  sync:
    patches:
      - type: JSONPatch
        jsonPatch:
          expression: '[JSONPatch{op: "add", path: "/status", value: workerObject.status.missing.deeper}]'
"""
    )[0]
    adapter = mkpolicy.compile(policy)
    worker = {**kueue_body(), "status": {"x": 1}}
    out, outcome = rewrite_status(adapter, worker, manager_run(), "worker1", "multikueue")
    assert "status" not in out and outcome.result == "error" and outcome.error
    assert "policy bad-sync" in outcome.error and "sync patch #1" in outcome.error
    assert worker["status"] == {"x": 1}  # input untouched


def test_generic_policy_copies_worker_status() -> None:
    policy = mkpolicy.policy.loads(
        "apiVersion: mkpolicy.io/v1alpha1\nkind: FrameworkPolicy\nmetadata: {name: g}\n"
        "spec: {framework: PipelineRun.v1.tekton.dev}\n"
    )[0]
    adapter = mkpolicy.compile(policy)
    worker = {**kueue_body(), "status": {"completionTime": "t1", "conditions": []}}
    out, _ = rewrite_status(adapter, worker, manager_run(), "worker1", "multikueue")
    assert out["status"] == worker["status"]
    out, outcome = rewrite_status(
        adapter, {**worker, "status": manager_run()["status"]}, manager_run(), "w", "multikueue"
    )
    assert outcome.result == "unchanged" and out["status"] == manager_run()["status"]


def test_apply_merge_patch() -> None:
    assert apply_merge_patch({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"b": None, "e": [1]}, "d": None}) == {
        "a": {"c": 2, "e": [1]}
    }
    assert apply_merge_patch({"a": 1}, {"a": {"b": None}}) == {"a": {}}


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        (
            "GET",
            "/apis/tekton.dev/v1/namespaces/a/pipelineruns/r",
            {},
            ("tekton.dev", "pipelineruns", "a", "r", None, "get"),
        ),
        (
            "GET",
            "/apis/tekton.dev/v1/namespaces/a/pipelineruns",
            {},
            ("tekton.dev", "pipelineruns", "a", None, None, "list"),
        ),
        (
            "GET",
            "/apis/tekton.dev/v1/pipelineruns",
            {"watch": "true"},
            ("tekton.dev", "pipelineruns", None, None, None, "watch"),
        ),
        (
            "GET",
            "/apis/tekton.dev/v1/watch/namespaces/a/pipelineruns",
            {},
            ("tekton.dev", "pipelineruns", "a", None, None, "watch"),
        ),
        (
            "POST",
            "/apis/tekton.dev/v1/namespaces/a/pipelineruns",
            {},
            ("tekton.dev", "pipelineruns", "a", None, None, "create"),
        ),
        (
            "PATCH",
            "/apis/tekton.dev/v1/namespaces/a/pipelineruns/r/status",
            {},
            ("tekton.dev", "pipelineruns", "a", "r", "status", "patch"),
        ),
        ("DELETE", "/api/v1/namespaces/a/configmaps/c", {}, ("", "configmaps", "a", "c", None, "delete")),
        ("GET", "/api/v1/namespaces", {}, ("", "namespaces", None, None, None, "list")),
        ("GET", "/api/v1/namespaces/a", {}, ("", "namespaces", None, "a", None, "get")),
    ],
)
def test_parse_target(method: str, path: str, query: dict[str, str], expected: tuple[Any, ...]) -> None:
    t = parse_target(method, path, query)
    assert t is not None
    assert (t.group, t.resource, t.namespace, t.name, t.subresource, t.verb) == expected


@pytest.mark.parametrize("path", ["/version", "/apis", "/apis/tekton.dev", "/api", "/openapi/v2", "/healthz"])
def test_non_resource_paths(path: str) -> None:
    assert parse_target("GET", path, {}) is None


# -- what is transformed: only what Kueue's adapter reads a body or status from ----------------------
METADATA_ONLY = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
RUNS = "/apis/tekton.dev/v1/namespaces/a/pipelineruns"


@pytest.mark.parametrize(
    ("method", "target", "accept", "active", "expected"),
    [
        ("POST", RUNS, "", True, "transform"),
        ("GET", f"{RUNS}/r", "application/json", True, "transform"),
        ("GET", f"{RUNS}/r", "", True, "transform"),
        # Kueue's ownership check (since 0.17.6/0.18.2/0.19.0): not the object
        ("GET", f"{RUNS}/r", METADATA_ONLY, True, "pass"),
        # kubectl's tables, a status read, LIST and deletecollection: Kueue sends none (the wire contract)
        ("GET", f"{RUNS}/r", TABLE, True, 403),
        ("GET", f"{RUNS}/r/status", "application/json", True, 403),
        ("GET", RUNS, "application/json", True, 403),
        ("DELETE", RUNS, "", True, 403),
        # Kueue reads only labels from watch events
        ("GET", f"{RUNS}?watch=true&labelSelector=x", "application/json", True, "pass"),
        ("GET", f"{RUNS}?watch=1", "application/json", True, "pass"),
        ("DELETE", f"{RUNS}/r", "", True, "pass"),
        # another version: reads pass (a refused watch drops Kueue's whole worker), writes are refused
        ("GET", "/apis/tekton.dev/v1beta1/namespaces/a/pipelineruns?watch=true", "", True, "pass"),
        ("GET", "/apis/tekton.dev/v1beta1/namespaces/a/pipelineruns/r", "", True, "pass"),
        # another version: routed to the policy, whose create refuses it (403) with an Event on the job
        ("POST", "/apis/tekton.dev/v1beta1/namespaces/a/pipelineruns", "", True, "transform"),
        ("PUT", f"{RUNS}/r", "", True, 403),
        ("PATCH", f"{RUNS}/r/status", "", True, 403),
        ("POST", "/api/v1/namespaces/a/configmaps", "", True, 403),
        ("GET", "/apis", "", True, "pass"),
        # no policy set yet: what may be a policy kind waits (its raw status must not reach Kueue)
        ("GET", f"{RUNS}?watch=true", "", False, 503),
        ("GET", f"{RUNS}/r", "", False, 503),
        ("POST", "/api/v1/namespaces/a/configmaps", "", False, 503),
    ],
)
def test_what_is_transformed(
    adapter: mkpolicy.Adapter, method: str, target: str, accept: str, active: bool, expected: str | int
) -> None:
    from mkpolicy.kube.client import ResourceInfo
    from mkpolicy.kube.rest import RestConfig
    from mkpolicy.sidecar.contract import build as build_contract
    from mkpolicy.sidecar.endpoints import load_or_create
    from mkpolicy.sidecar.http1 import parse_request_head
    from mkpolicy.sidecar.metrics import Metrics
    from mkpolicy.sidecar.policies import Entry, PolicySet
    from mkpolicy.sidecar.proxy import WorkerEndpoint
    from mkpolicy.sidecar.upstream import Upstream

    class Hub:
        metrics = Metrics()
        origin = "multikueue"
        credentials = load_or_create(None, ["w"], ["127.0.0.1"])
        entry = Entry(adapter, ResourceInfo("tekton.dev", "v1", "PipelineRun", "pipelineruns", True))
        policies = PolicySet((entry,), "t") if active else None
        kueue = None
        request_log = None
        contract = build_contract(None, policies)

        def worker_problem(self, cluster: str) -> None:
            return None

    endpoint = WorkerEndpoint(Hub(), Upstream("w", RestConfig(server="https://127.0.0.1:1")))  # type: ignore[arg-type]
    lines = [f"{method} {target} HTTP/1.1", "Host: x", f"Authorization: Bearer {Hub.credentials.tokens['w']}"]
    if accept:
        lines.append(f"Accept: {accept}")
    head = parse_request_head(("\r\n".join(lines) + "\r\n\r\n").encode())
    try:
        entry = endpoint.route(head, endpoint.target_of(head))
    except StatusError as exc:
        assert exc.code == expected, exc.message
        return
    assert ("transform" if entry is not None else "pass") == expected
