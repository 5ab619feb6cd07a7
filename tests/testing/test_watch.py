"""WATCH through kubernetes.watch.Watch and raw streams: events, resume, 410, bookmarks, timeouts."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client import ApiException

from mkpolicy.testing.apiserver import ApiServer

from .conftest import Clients, Raw, clients_for, pipelinerun

PR = ("tekton.dev", "v1", "default", "pipelineruns")


def cm(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


class Collector:
    """Runs watch.Watch().stream in a thread and collects (type, name, resourceVersion)."""

    def __init__(self, func: Callable[..., Any], *args: Any, expect: int, **kwargs: Any) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.w = watch.Watch()
        self.thread = threading.Thread(target=self._run, args=(func, args, kwargs, expect), daemon=True)
        self.thread.start()

    def _run(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], expect: int) -> None:
        try:
            for ev in self.w.stream(func, *args, **kwargs):
                obj = ev["object"]
                meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata.to_dict()
                self.events.append((ev["type"], meta["name"], meta["resource_version"] if "resource_version" in meta
                                    else meta["resourceVersion"]))  # fmt: skip
                if len(self.events) >= expect:
                    self.w.stop()
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    def wait(self, timeout: float = 10) -> list[tuple[str, str, str]]:
        assert self.done.wait(timeout), f"watch did not finish; got {self.events}"
        if self.error is not None:
            raise self.error
        return self.events


@pytest.mark.loopback_only("synchronizes on the loopback server's count of open watches")
def test_watch_from_now_sends_state_then_changes(apiserver: ApiServer, k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map("default", cm("a"))
    col = Collector(k8s.core.list_namespaced_config_map, "default", expect=4)
    apiserver.wait_for_watches(1, resource="configmaps")
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"x": "1"}})
    k8s.core.create_namespaced_config_map("default", cm("b"))
    deleted = k8s.core.delete_namespaced_config_map("a", "default")
    events = col.wait()
    assert [(t, n) for t, n, _ in events] == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    versions = [int(v) for _, _, v in events]
    assert versions == sorted(versions)
    assert versions[-1] > versions[-2]  # DELETED carries the deletion's resource version
    assert deleted["status"] == "Success"


def test_watch_resumes_from_a_resource_version(k8s: Clients, pr: tuple, namespace: str) -> None:
    k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("old", namespace))
    since = k8s.custom.list_namespaced_custom_object(*pr)["metadata"]["resourceVersion"]
    k8s.custom.create_namespaced_custom_object(*pr, pipelinerun("new", namespace))
    k8s.custom.patch_namespaced_custom_object(*pr, "old", {"metadata": {"labels": {"x": "y"}}})
    col = Collector(k8s.custom.list_namespaced_custom_object, *pr, resource_version=since, expect=2)
    assert [(t, n) for t, n, _ in col.wait()] == [("ADDED", "new"), ("MODIFIED", "old")]


@pytest.mark.loopback_only("compacts the history on demand (410 Gone)")
def test_watch_from_a_compacted_version_is_410(apiserver: ApiServer, k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map("default", cm("a"))
    since = k8s.core.list_namespaced_config_map("default").metadata.resource_version
    k8s.core.create_namespaced_config_map("default", cm("b"))
    apiserver.compact()
    col = Collector(k8s.core.list_namespaced_config_map, "default", resource_version=since, timeout_seconds=5, expect=1)
    with pytest.raises(ApiException) as exc:
        col.wait()
    assert exc.value.status == 410 and "Expired: too old resource version" in exc.value.reason


def test_history_limit_expires_old_versions(apiserver_factory: Callable[..., ApiServer], tmp_path) -> None:
    srv = apiserver_factory("small", history=3, bundled=False)
    k8s = clients_for(srv, tmp_path)
    k8s.core.create_namespaced_config_map("default", cm("a"))
    since = k8s.core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(3):
        k8s.core.patch_namespaced_config_map("a", "default", {"data": {"i": str(i)}})
    ok = Collector(k8s.core.list_namespaced_config_map, "default", resource_version=since, expect=3)
    assert [t for t, _, _ in ok.wait()] == ["MODIFIED"] * 3
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"i": "3"}})
    late = Collector(
        k8s.core.list_namespaced_config_map, "default", resource_version=since, timeout_seconds=5, expect=1
    )
    with pytest.raises(ApiException) as exc:
        late.wait()
    assert exc.value.status == 410


@pytest.mark.loopback_only("synchronizes on the loopback server's count of open watches")
def test_selector_transitions_become_added_and_deleted(apiserver: ApiServer, k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map("default", cm("a", app="db"))
    col = Collector(k8s.core.list_namespaced_config_map, "default", label_selector="app=web", expect=3)
    apiserver.wait_for_watches(1)
    k8s.core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"app": "web"}}})
    k8s.core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    left = k8s.core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"app": "db"}}})
    events = col.wait()
    assert [t for t, _, _ in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[-1][2] == left.metadata.resource_version


@pytest.mark.loopback_only("creates a namespace of its own (cluster-scoped)")
def test_watch_only_sees_its_namespace(apiserver: ApiServer, k8s: Clients) -> None:
    k8s.core.create_namespace({"metadata": {"name": "other"}})
    col = Collector(k8s.core.list_namespaced_config_map, "default", expect=1)
    apiserver.wait_for_watches(1, resource="configmaps")
    k8s.core.create_namespaced_config_map("other", cm("elsewhere"))
    k8s.core.create_namespaced_config_map("default", cm("here"))
    assert [n for _, n, _ in col.wait()] == ["here"]


@pytest.mark.loopback_only("ends open watches on demand (fault injection)")
def test_python_watch_resumes_after_the_server_ends_the_stream(apiserver: ApiServer, k8s: Clients) -> None:
    k8s.core.create_namespaced_config_map("default", cm("first"))
    col = Collector(k8s.core.list_namespaced_config_map, "default", expect=4)
    apiserver.wait_for_watches(1)
    k8s.core.create_namespaced_config_map("default", cm("second"))
    time.sleep(0.1)
    assert apiserver.faults.end_watches() == 1
    k8s.core.create_namespaced_config_map("default", cm("third"))  # while the client reconnects
    apiserver.wait_for_watches(1)
    k8s.core.create_namespaced_config_map("default", cm("fourth"))
    names = [n for _, n, _ in col.wait()]
    assert names == ["first", "second", "third", "fourth"]  # nothing lost, nothing twice


def stream_lines(raw: Raw, path: str) -> list[dict[str, Any]]:
    reply = raw.request("GET", path, timeout=10)
    assert reply.status == 200, reply.data
    assert reply.headers.get("Transfer-Encoding") == "chunked"
    return [json.loads(line) for line in reply.data.decode().splitlines()]


@pytest.mark.loopback_only("sets the server's bookmark interval; kube-apiserver's is a minute")
def test_bookmarks_and_timeout_end_the_stream_cleanly(apiserver_factory: Callable[..., ApiServer]) -> None:
    """Bookmarks every interval and one just before the deadline (cache_watcher.go nextBookmarkTime)."""
    srv = apiserver_factory("bm", bookmark_interval=0.3, bookmark_lead=0.1, bundled=False)
    raw = Raw(srv)
    srv.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}})
    start = time.monotonic()
    events = stream_lines(
        raw, "/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&timeoutSeconds=1"
    )
    assert 0.9 < time.monotonic() - start < 30  # the 1 s deadline ends it, not the client (generous bound)
    assert events[0]["type"] == "ADDED"
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    # at 0.3 s, 0.6 s and 0.9 s (1 s deadline - 0.1 s lead); one fewer when a late one passes 0.9 s
    assert len(bookmarks) in (2, 3)
    assert bookmarks[-1]["object"] == {
        "kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": str(srv.resource_version)},
    }  # fmt: skip
    raw.close()


@pytest.mark.loopback_only("sets the server's bookmark interval; kube-apiserver's is a minute")
def test_bookmarks_flow_between_events_and_not_without_asking(apiserver_factory: Callable[..., ApiServer]) -> None:
    """The bookmark clock runs whatever the traffic; no bookmark without allowWatchBookmarks,
    nor when the deadline is closer than the lead."""
    srv = apiserver_factory("bm", bookmark_interval=0.2, bookmark_lead=1.5, bundled=False)
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.wait(0.05):
            srv.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "default"}})
            i += 1

    base = "/api/v1/namespaces/default/configmaps?watch=1"
    queries = [f"{base}&allowWatchBookmarks=true&timeoutSeconds=2", f"{base}&timeoutSeconds=2",
               f"{base}&allowWatchBookmarks=true&timeoutSeconds=1"]  # fmt: skip
    raws = [Raw(srv) for _ in queries]
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(len(queries)) as pool:
            busy, unasked, short = pool.map(stream_lines, raws, queries)
    finally:
        stop.set()
        thread.join()
        for r in raws:
            r.close()
    assert sum(e["type"] == "BOOKMARK" for e in busy) in (2, 3)  # 0.2 s, 0.4 s, 0.5 s (2 s - 1.5 s lead)
    assert sum(e["type"] == "ADDED" for e in busy) >= 10
    assert not any(e["type"] == "BOOKMARK" for e in unasked)
    assert not any(e["type"] == "BOOKMARK" for e in short)


@pytest.mark.loopback_only(
    "sendInitialEvents needs kube-apiserver's WatchList feature, which not every cluster enables"
)
def test_send_initial_events_ends_with_an_annotated_bookmark(raw: Raw, apiserver: ApiServer) -> None:
    for name in ("a", "b"):
        apiserver.create(pipelinerun(name))
    events = stream_lines(
        raw,
        "/apis/tekton.dev/v1/namespaces/default/pipelineruns?watch=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&resourceVersion=&allowWatchBookmarks=true&timeoutSeconds=1",
    )
    assert [e["type"] for e in events[:3]] == ["ADDED", "ADDED", "BOOKMARK"]
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert events[0]["object"]["apiVersion"] == "tekton.dev/v1"


def test_watch_of_one_object_by_name(raw: Raw, apiserver: ApiServer, namespace: str) -> None:
    for name in ("a", "b"):
        apiserver.create(pipelinerun(name, namespace))
    events = stream_lines(raw, f"/apis/tekton.dev/v1/watch/namespaces/{namespace}/pipelineruns/b?timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]
    # ?watch counts on collections only (requestinfo.go): a named GET with it is a get
    reply = raw.request("GET", f"/apis/tekton.dev/v1/namespaces/{namespace}/pipelineruns/b?watch=1", timeout=10)
    assert reply.status == 200 and json.loads(reply.data)["metadata"]["name"] == "b"


@pytest.mark.loopback_only("uses the bundled Kueue v1beta2 Workload CRD, which real clusters need not serve")
def test_dynamic_client_watch(apiserver: ApiServer, k8s: Clients) -> None:
    workloads = k8s.dynamic().resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "wl"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1,
                                                     "template": {"spec": {"containers": []}}}]}}  # fmt: skip
    workloads.create(body=body, namespace="default")
    seen = [ev["type"] for ev in workloads.watch(namespace="default", timeout=1)]
    assert seen == ["ADDED"]


@pytest.mark.loopback_only("counts on a quiet server: resourceVersion + 100 is soon reached on a live cluster")
def test_watch_from_the_future_is_an_error_event(raw: Raw, apiserver: ApiServer) -> None:
    future = apiserver.resource_version + 100
    events = stream_lines(raw, f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={future}")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 504
    assert events[0]["object"]["message"].startswith(f"Too large resource version: {future}")
