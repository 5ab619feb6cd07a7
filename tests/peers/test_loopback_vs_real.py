"""The loopback API server held against a real kube-apiserver: the same requests, the same answers.

One scenario (STEPS) runs on both servers, in order: ConfigMaps and a custom resource with
a status subresource (create, get, update, patch, delete), 404/409/422 Status bodies, the
PartialObjectMetadata GET client-go sends, label selectors, validation errors from the
CRD's schema, and a watch from a resourceVersion. Answers are normalised (uids,
timestamps, resourceVersions' values and managedFields dropped) and compared step by
step; each remaining deviation is listed in docs/oracles.md and asserted exactly
(DEVIATIONS).
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import urllib3

from mkpolicy.kube.kubeconfig import rest_config
from mkpolicy.kube.rest import TokenSource
from mkpolicy.testing.apiserver import ApiServer
from mkpolicy.testing.kueue.goclient import METADATA_ACCEPT, METADATA_LIST_ACCEPT
from mkpolicy.testing.peers.controlplane import KubeCluster

pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(300)]

GROUP = "wire.mkpolicy.io"
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1},
                                    "color": {"type": "string", "enum": ["red", "blue"]},
                                },
                            },
                            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                        },
                    }
                },
            }
        ],
    },
}


class Raw:
    """Plain HTTP requests to one server (its kubeconfig's TLS and credentials)."""

    def __init__(self, kubeconfig: dict[str, Any]) -> None:
        self.rest = rest_config(kubeconfig, kueue_rules=False)
        self.tokens = TokenSource(self.rest)
        self.pool = urllib3.PoolManager(ssl_context=self.rest.ssl_context(), retries=False)

    def send(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str, bytes]:
        """Status code, media type and raw body."""
        sent = {"Accept": "application/json", **self.tokens.headers(), **(headers or {})}
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        resp = self.pool.request(method, self.rest.server + path, body=data, headers=sent, timeout=30.0)
        return resp.status, str(resp.headers.get("Content-Type", "")).split(";")[0], resp.data


@dataclass
class Step:
    """One request; ``body`` may read the answers so far (``{step name: decoded body}``)."""

    name: str
    method: str
    path: str
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    watch: bool = False


#: client-go's metadata Accept without its protobuf preference.
METADATA_JSON = METADATA_ACCEPT.split(",", 1)[1]
METADATA_LIST_JSON = METADATA_LIST_ACCEPT.split(",", 1)[1]
NS = "{ns}"
CM = f"/api/v1/namespaces/{NS}/configmaps"
WIDGETS = f"/apis/{GROUP}/v1/namespaces/{NS}/widgets"
MERGE = {"Content-Type": "application/merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}


def _cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": name}}, **extra}


def _widget(name: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def _rv(step: str) -> Callable[[dict[str, Any]], str]:
    return lambda answers: str(answers[step]["metadata"]["resourceVersion"])


def _with_rv(obj: dict[str, Any], step: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def body(answers: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        out["metadata"]["resourceVersion"] = _rv(step)(answers)
        return out

    return body


STEPS = [
    Step("create-configmap", "POST", CM, _cm("a", data={"k": "v"})),
    Step("create-configmap-b", "POST", CM, _cm("b", data={"k": "w"})),
    Step("create-exists", "POST", CM, _cm("a")),
    Step("create-bad-name", "POST", CM, _cm("Bad_Name")),
    Step("create-bad-label", "POST", CM, {**_cm("c"), "metadata": {"name": "c", "labels": {"a b": "x"}}}),
    Step("get", "GET", f"{CM}/a"),
    Step("get-missing", "GET", f"{CM}/nope"),
    Step("get-metadata", "GET", f"{CM}/a", headers={"Accept": METADATA_ACCEPT}),
    Step("get-metadata-json", "GET", f"{CM}/a", headers={"Accept": METADATA_JSON}),
    Step("list-metadata-json", "GET", f"{CM}?labelSelector=app%3Da", headers={"Accept": METADATA_LIST_JSON}),
    Step("list-selected", "GET", f"{CM}?labelSelector=app%3Db"),
    Step("list-set-selector", "GET", f"{CM}?labelSelector=app+in+%28a%2Cb%29"),
    Step("update", "PUT", f"{CM}/a", _with_rv(_cm("a", data={"k": "v2"}), "create-configmap")),
    Step("update-stale", "PUT", f"{CM}/a", _with_rv(_cm("a", data={"k": "v3"}), "create-configmap")),
    Step("merge-patch", "PATCH", f"{CM}/a", {"data": {"m": "1", "k": None}}, MERGE),
    Step("json-patch", "PATCH", f"{CM}/a", [{"op": "add", "path": "/data/j", "value": "2"}], JSON_PATCH),
    Step("json-patch-test-fails", "PATCH", f"{CM}/a", [{"op": "test", "path": "/data/j", "value": "x"}], JSON_PATCH),
    Step("json-patch-missing-path", "PATCH", f"{CM}/a", [{"op": "remove", "path": "/data/zz"}], JSON_PATCH),
    Step("patch-missing", "PATCH", f"{CM}/nope", {"data": {"m": "1"}}, MERGE),
    Step("create-widget", "POST", WIDGETS, _widget("w", {"size": 2, "color": "red"})),
    Step("create-widget-below-minimum", "POST", WIDGETS, _widget("bad", {"size": 0})),
    Step("create-widget-not-in-enum", "POST", WIDGETS, _widget("bad1", {"size": 1, "color": "green"})),
    Step("create-widget-missing-required", "POST", WIDGETS, _widget("bad2", {"color": "red"})),
    Step("create-widget-wrong-type", "POST", WIDGETS, _widget("bad3", {"size": "big"})),
    Step("widget-status", "PATCH", f"{WIDGETS}/w/status", {"spec": {"size": 9}, "status": {"phase": "Up"}}, MERGE),
    Step("widget-main-ignores-status", "PATCH", f"{WIDGETS}/w", {"spec": {"size": 3}, "status": {"phase": "Gone"}},
         MERGE),
    Step("widget-patch-invalid", "PATCH", f"{WIDGETS}/w", {"spec": {"size": -1}}, MERGE),
    Step("get-widget-metadata", "GET", f"{WIDGETS}/w", headers={"Accept": METADATA_ACCEPT}),
    Step("list-metadata", "GET", f"{CM}?labelSelector=app%3Da", headers={"Accept": METADATA_LIST_ACCEPT}),
    Step("list-field-selector", "GET", f"{CM}?fieldSelector=metadata.name%3Db"),
    Step("list-first-page", "GET", f"{CM}?limit=1"),
    Step("create-dry-run", "POST", f"{CM}?dryRun=All", _cm("dry")),
    Step("get-dry-run", "GET", f"{CM}/dry"),
    Step("create-in-missing-namespace", "POST", "/api/v1/namespaces/nope-ns/configmaps", _cm("x")),
    Step("create-malformed", "POST", CM, "{not json"),
    Step("post-to-named", "POST", f"{CM}/a", _cm("a")),
    Step("patch-unsupported-type", "PATCH", f"{CM}/a", {"data": {}}, {"Content-Type": "application/json"}),
    Step("configmap-status", "GET", f"{CM}/a/status"),
    Step("create-widget-strict-unknown", "POST", f"{WIDGETS}?fieldValidation=Strict",
         _widget("strict", {"size": 1, "bogus": 1})),
    Step("create-widget-pruned", "POST", WIDGETS, _widget("pruned", {"size": 1, "bogus": 1})),
    Step("widget-status-stale", "PUT", f"{WIDGETS}/w/status", _with_rv(_widget("w", {"size": 2}), "create-widget")),
    Step("delete-precondition-fails", "DELETE", f"{CM}/a", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                            "preconditions": {"uid": "not-the-uid"}}),
    Step("delete", "DELETE", f"{CM}/b"),
    Step("delete-missing", "DELETE", f"{CM}/b"),
    Step("watch-from-create", "GET", f"{CM}?watch=true&timeoutSeconds=1&resourceVersion={{rv:create-configmap}}",
         watch=True),
    Step("watch-selected", "GET",
         f"{CM}?watch=true&timeoutSeconds=1&labelSelector=app%3Db&resourceVersion={{rv:create-configmap}}", watch=True),
    Step("watch-metadata", "GET", f"{CM}?watch=true&timeoutSeconds=1&resourceVersion={{rv:create-configmap}}",
         headers={"Accept": METADATA_JSON}, watch=True),
]  # fmt: skip

Answer = tuple[int, str, Any]
#: Dropped wherever they appear in metadata: their values are the server's own.
VOLATILE = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "deletionTimestamp")


def normalize(value: Any) -> Any:
    """``value`` without the server's volatile metadata (a resourceVersion's presence is kept)."""
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: normalize(v) for k, v in value.items()}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for key in VOLATILE:
            if key in meta:
                meta[key] = "<set>"
        meta.pop("managedFields", None)
    if isinstance(meta, dict) and "continue" in meta:
        meta["continue"] = "<set>"
    details = out.get("details")
    if out.get("kind") == "Status" and isinstance(details, dict):
        details.pop("uid", None)
    return out


def _uids(value: Any, out: set[str]) -> set[str]:
    if isinstance(value, list):
        for v in value:
            _uids(v, out)
    elif isinstance(value, dict):
        meta = value.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("uid"), str):
            out.add(meta["uid"])
        for v in value.values():
            _uids(v, out)
    return out


def run(server: Raw, ns: str) -> dict[str, Answer]:
    """Every step's (status code, media type, normalised body) on ``server``; the uids of
    its objects read ``<uid>`` wherever they appear (a precondition's message)."""
    answers: dict[str, Any] = {}
    raw_answers: dict[str, tuple[int, str]] = {}
    for step in STEPS:
        path = step.path.replace(NS, ns)
        if "{rv:" in path:
            name = path.split("{rv:", 1)[1].split("}", 1)[0]
            path = path.replace(f"{{rv:{name}}}", _rv(name)(answers))
        body = step.body(answers) if callable(step.body) else step.body
        code, media, raw = server.send(step.method, path, body, step.headers)
        if media != "application/json":
            decoded: Any = f"<{'a body' if raw else 'no body'} in {media}>"
        elif step.watch:
            decoded = [json.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            decoded = json.loads(raw) if raw else None
        answers[step.name] = decoded
        raw_answers[step.name] = (code, media)
    text = json.dumps(answers)
    for uid in _uids(answers, set()):
        text = text.replace(uid, "<uid>")
    masked = json.loads(text)
    return {name: (*raw_answers[name], normalize(masked[name])) for name in answers}


@pytest.fixture(scope="module")
def answers(real_kube: KubeCluster) -> Iterator[dict[str, tuple[tuple[int, str, Any], tuple[int, str, Any]]]]:
    """Each step's answer from the real server and from the loopback server."""
    ns = f"wire-{secrets.token_hex(3)}"
    real_kube.install_crds([WIDGET_CRD])
    real_kube.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    with ApiServer("loopback", bundled=False) as loopback:
        loopback.register_crd(WIDGET_CRD)
        loopback.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        try:
            real = run(Raw(real_kube.kubeconfig()), ns)
            mine = run(Raw(loopback.kubeconfig()), ns)
            yield {name: (real[name], mine[name]) for name in real}
        finally:
            real_kube.admin.delete("v1", "Namespace", ns)


GENERIC_422 = "the server rejected our request due to an error in our request"


def _protobuf_preferred(real: Answer, mine: Answer) -> None:
    # kube-apiserver honours client-go's first choice, protobuf, for built-in and custom
    # resources alike; the loopback server speaks JSON only and takes the next choice.
    assert real == (200, "application/vnd.kubernetes.protobuf", "<a body in application/vnd.kubernetes.protobuf>")
    assert mine[:2] == (200, "application/json") and mine[2]["kind"].startswith("PartialObjectMetadata")


def _json_patch_reason_kept(real: Answer, mine: Answer) -> None:
    # kube-apiserver drops json-patch's reason (NewGenericServerResponse, handlers/patch.go);
    # the loopback server names the operation and why. Same code and reason.
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": "Invalid",
        "code": 422,
    }
    assert real == (422, "application/json", {**status, "message": GENERIC_422, "details": {}})
    assert mine[:2] == (422, "application/json") and mine[2] == {**status, "message": mine[2]["message"]}
    assert mine[2]["message"].startswith("json patch operation #0 (")


def _kube_says(message: str, *, details: bool) -> Callable[[Answer, Answer], None]:
    """kube-apiserver's generic ``message`` where the loopback server says more (same code and reason)."""

    def check(real: Answer, mine: Answer) -> None:
        code, media, status = real
        assert (code, media) == mine[:2] and status["message"] == message
        assert status["reason"] == mine[2]["reason"] and mine[2]["message"] != message
        assert ("details" in status) is details
        assert {k: v for k, v in status.items() if k not in ("message", "details")} == {
            k: v for k, v in mine[2].items() if k not in ("message", "details")
        }

    return check


def _served_path_named(real: Answer, mine: Answer) -> None:
    # Same Status, but the loopback server names the path no resource serves in a cause.
    assert real[2]["details"] == {}
    assert mine[2]["details"]["causes"][0]["message"].startswith("no resource is served at /api/v1/namespaces/")
    assert {**mine[2], "details": {}} == real[2] and mine[:2] == real[:2]


#: The documented deviations (docs/oracles.md, "The loopback API server"), each asserted exactly.
DEVIATIONS: dict[str, Callable[[Answer, Answer], None]] = {
    "get-metadata": _protobuf_preferred,
    "get-widget-metadata": _protobuf_preferred,
    "json-patch-test-fails": _json_patch_reason_kept,
    "json-patch-missing-path": _json_patch_reason_kept,
    "list-metadata": _protobuf_preferred,
    "create-malformed": _kube_says(
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse "
        "error: invalid character 'n' looking for beginning of object key string ({not json)",
        details=False,
    ),
    "post-to-named": _kube_says("the server does not allow this method on the requested resource", details=True),
    "patch-unsupported-type": _kube_says("415: Unsupported Media Type", details=True),
    "configmap-status": _served_path_named,
}


@pytest.mark.parametrize("step", [s.name for s in STEPS])
def test_loopback_answers_as_kube_apiserver(step: str, answers: dict[str, Any]) -> None:
    real, mine = answers[step]
    print(f"kube-apiserver: {json.dumps(real)}\nloopback:       {json.dumps(mine)}")
    if step in DEVIATIONS:
        DEVIATIONS[step](real, mine)
    else:
        assert mine == real


def test_the_scenario_shows_what_it_compares(answers: dict[str, Any]) -> None:
    # Guards against a comparison of nothing: the watch saw the writes, the lists found items.
    (code, _, events), _ = answers["watch-from-create"]
    assert code == 200
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"), ("MODIFIED", "a"), ("MODIFIED", "a"), ("MODIFIED", "a"), ("DELETED", "b")
    ]  # fmt: skip
    assert [i["metadata"]["name"] for i in answers["list-set-selector"][0][2]["items"]] == ["a", "b"]
