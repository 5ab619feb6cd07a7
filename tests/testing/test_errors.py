"""Bad input and error bodies: every case answers with a Kubernetes-shaped Status."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mkpolicy.testing.apiserver import ApiServer

from .conftest import Raw, pipelinerun

pytestmark = pytest.mark.loopback_only("the loopback server's own error paths and Status bodies, byte for byte")

CM = "/api/v1/namespaces/default/configmaps"
PRS = "/apis/tekton.dev/v1/namespaces/default/pipelineruns"


def cm(name: str = "c", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}


BIG = json.dumps({**cm("big"), "data": {"k": "x" * (3 * 1024 * 1024)}}).encode()
# "Billion laughs": 10**9 strings once expanded; refused before anything is expanded.
YAML_BOMB = (
    b"metadata: {name: bomb}\ndata:\n  a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + b"".join(f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n".encode() for i in range(1, 9))
)

# (id, method, path, body, extra request options, expected code, reason, text in the message)
CASES: list[tuple[str, str, str, Any, dict[str, Any], int, str, str]] = [
    ("malformed-json", "POST", CM, b'{"metadata": {"name": "x",}}', {}, 400, "BadRequest", "malformed JSON"),
    ("truncated-json", "POST", CM, b'{"metadata": {', {}, 400, "BadRequest", "line 1 column 15"),
    ("nan-json", "POST", CM, b'{"data": NaN}', {}, 400, "BadRequest", "NaN is not valid JSON"),
    ("empty-body", "POST", CM, b"", {}, 400, "BadRequest", "expected a JSON object"),
    ("array-body", "POST", CM, [cm()], {}, 400, "BadRequest", "must be a JSON object, found array"),
    ("api-version-mismatch", "POST", CM, {**cm(), "apiVersion": "v2"}, {}, 400, "BadRequest",
     "the API version in the data (v2) does not match the expected API version (v1)"),
    ("builtin-kind-mismatch", "POST", CM, {**cm(), "kind": "Secret"}, {}, 400, "BadRequest",
     "the kind in the data (Secret) does not match the expected kind (ConfigMap)"),
    ("cr-kind-mismatch", "POST", PRS, {**pipelinerun("p"), "kind": "TaskRun"}, {}, 422, "Invalid",
     'PipelineRun.tekton.dev "p" is invalid: kind: Invalid value: "TaskRun": must be PipelineRun'),
    ("cr-api-version-mismatch", "POST", PRS, {**pipelinerun("p"), "apiVersion": "tekton.dev/v1beta1"}, {}, 400,
     "BadRequest", "the API version in the data (tekton.dev/v1beta1) does not match the expected API version"),
    ("cr-missing-kind", "POST", PRS, {"apiVersion": "tekton.dev/v1", "metadata": {"name": "p"}}, {}, 400,
     "BadRequest", "Object 'Kind' is missing"),
    ("name-underscore", "POST", CM, cm("Bad_Name"), {}, 422, "Invalid", "a lowercase RFC 1123 subdomain"),
    ("name-leading-dash", "POST", CM, cm("-lead"), {}, 422, "Invalid", "metadata.name: Invalid value"),
    ("name-trailing-dot", "POST", CM, cm("trail."), {}, 422, "Invalid", "metadata.name: Invalid value"),
    ("name-empty-label", "POST", CM, cm("a..b"), {}, 422, "Invalid", "metadata.name: Invalid value"),
    ("name-too-long", "POST", CM, cm("a" * 254), {}, 422, "Invalid", "must be no more than 253 characters"),
    ("name-missing", "POST", CM, {"metadata": {}}, {}, 422, "Invalid",
     "metadata.name: Required value: name or generateName is required"),
    ("namespace-name-not-a-label", "POST", "/api/v1/namespaces", {"metadata": {"name": "a.b"}}, {}, 422,
     "Invalid", "a lowercase RFC 1123 label"),
    ("label-key-invalid", "POST", CM, cm(labels={"bad key": "v"}), {}, 422, "Invalid", "metadata.labels"),
    ("label-value-too-long", "POST", CM, cm(labels={"k": "v" * 64}), {}, 422, "Invalid",
     "must be no more than 63 characters"),
    ("label-value-not-string", "POST", CM, cm(labels={"k": 5}), {}, 400, "BadRequest",
     "metadata.labels.k: expected a string, found number"),
    ("metadata-not-object", "POST", CM, {"metadata": "x"}, {}, 400, "BadRequest",
     "metadata: expected an object, found string"),
    ("resource-version-on-create", "POST", CM, cm(resourceVersion="5"), {}, 400, "BadRequest",
     "resourceVersion should not be set on objects to be created"),
    ("namespace-mismatch", "POST", CM, cm(namespace="other"), {}, 400, "BadRequest",
     "the namespace of the provided object does not match the namespace sent on the request"),
    ("body-over-3mib", "POST", CM, BIG, {}, 413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"),
    ("unknown-group", "GET", "/apis/nothere.io/v1/things", None, {}, 404, "NotFound",
     "the server could not find the requested resource"),
    ("unknown-version", "GET", "/apis/tekton.dev/v9/namespaces/default/pipelineruns", None, {}, 404, "NotFound",
     "the server could not find the requested resource"),
    ("unknown-resource", "GET", "/api/v1/namespaces/default/pods", None, {}, 404, "NotFound",
     "the server could not find the requested resource"),
    ("unknown-subresource", "GET", CM + "/x/scale", None, {}, 404, "NotFound", "could not find"),
    ("not-an-api-path", "GET", "/metrics", None, {}, 404, "NotFound", "could not find"),
    ("cluster-resource-in-namespace", "GET", "/api/v1/namespaces/default/namespaces", None, {}, 404, "NotFound",
     "could not find"),
    ("missing-object", "GET", CM + "/ghost", None, {}, 404, "NotFound", 'configmaps "ghost" not found'),
    ("missing-custom-object", "GET", PRS + "/ghost", None, {}, 404, "NotFound",
     'pipelineruns.tekton.dev "ghost" not found'),
    ("no-token", "GET", CM, None, {"token": None}, 401, "Unauthorized", "Unauthorized"),
    ("wrong-token", "GET", CM, None, {"token": "guess"}, 401, "Unauthorized", "Unauthorized"),
    ("custom-resource-against-its-schema", "POST", PRS,
     {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "metadata": {"name": "p"},
      "spec": {"timeouts": 5}}, {}, 422, "Invalid",
     'PipelineRun.tekton.dev "p" is invalid: '
     'spec.timeouts: Invalid value: "integer": spec.timeouts in body must be of type object: "integer"'),
    ("yaml-bomb-body", "POST", CM, YAML_BOMB, {"content_type": "application/yaml"}, 400, "BadRequest",
     "the YAML stream expands to more than 2,000,000 nodes"),
    ("json-too-deep", "POST", CM, b'{"a":' * 100_000 + b"1" + b"}" * 100_000, {}, 400, "BadRequest",
     "the request body nests too deeply"),
    ("yaml-malformed-body", "POST", CM, b"data: [", {"content_type": "application/yaml"}, 400, "BadRequest",
     "malformed YAML"),
    ("text-body", "POST", CM, b"name: x", {"content_type": "text/plain"}, 415, "UnsupportedMediaType",
     "found text/plain"),
    ("protobuf-body", "POST", CM, b"\x00", {"content_type": "application/vnd.kubernetes.protobuf"}, 415,
     "UnsupportedMediaType", "application/vnd.kubernetes.protobuf"),
    ("protobuf-only-accept", "GET", CM, None, {"headers": {"Accept": "application/vnd.kubernetes.protobuf"}}, 406,
     "NotAcceptable", "application/json"),
    ("put-on-collection", "PUT", CM, cm(), {}, 405, "MethodNotAllowed", "does not allow this method"),
    ("post-on-object", "POST", CM + "/c", cm(), {}, 405, "MethodNotAllowed", "does not allow this method"),
    ("create-without-namespace", "POST", "/api/v1/configmaps", cm(), {}, 405, "MethodNotAllowed",
     "does not allow this method"),
    ("bad-dry-run", "POST", CM + "?dryRun=Some", cm(), {}, 400, "BadRequest", "invalid dryRun value"),
    ("bad-field-validation", "POST", CM + "?fieldValidation=Loose", cm(), {}, 400, "BadRequest",
     "invalid fieldValidation"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "body", "options", "code", "reason", "text"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_bad_request(raw: Raw, method: str, path: str, body: Any, options: dict[str, Any], code: int, reason: str,
                     text: str) -> None:  # fmt: skip
    reply = raw.request(method, path, body, **options)
    assert reply.status == code, reply.data[:500]
    assert reply.headers["Content-Type"] == "application/json"
    status = reply.json
    assert status["kind"] == "Status" and status["apiVersion"] == "v1" and status["status"] == "Failure"
    assert status["code"] == code and status["reason"] == reason
    assert text in status["message"], status["message"]


# Requests on an existing object (created first).
OBJECT_CASES: list[tuple[str, str, str, Any, dict[str, Any], int, str, str]] = [
    ("put-name-mismatch", "PUT", CM + "/c", cm("d"), {}, 400, "BadRequest",
     "the name of the object (d) does not match the name on the URL (c)"),
    ("merge-patch-not-object", "PATCH", CM + "/c", [1], {"content_type": "application/merge-patch+json"}, 400,
     "BadRequest", "merge patch: expected a JSON object, found array"),
    ("json-patch-not-list", "PATCH", CM + "/c", {"op": "add"}, {"content_type": "application/json-patch+json"},
     400, "BadRequest", "expected an array of operations"),
    ("json-patch-bad-op", "PATCH", CM + "/c", [{"op": "frobnicate", "path": "/x"}],
     {"content_type": "application/json-patch+json"}, 400, "BadRequest", "found 'frobnicate'"),
    ("json-patch-missing-path", "PATCH", CM + "/c", [{"op": "remove", "path": "/data/nothere"}],
     {"content_type": "application/json-patch+json"}, 422, "Invalid",
     "json patch operation #0 (remove '/data/nothere') does not apply: member 'data' not found"),
    ("patch-changes-kind", "PATCH", CM + "/c", {"kind": "Secret"}, {"content_type": "application/merge-patch+json"},
     400, "BadRequest", "the kind in the data (Secret)"),
    ("patch-malformed", "PATCH", CM + "/c", b"{", {"content_type": "application/merge-patch+json"}, 400,
     "BadRequest", "malformed patch body"),
    ("apply-patch", "PATCH", CM + "/c", b"kind: ConfigMap", {"content_type": "application/apply-patch+yaml"}, 415,
     "UnsupportedMediaType", "server-side apply is not implemented"),
    ("unknown-patch-type", "PATCH", CM + "/c", {}, {"content_type": "application/json"}, 415,
     "UnsupportedMediaType", "application/merge-patch+json"),
    ("status-of-configmap", "GET", CM + "/c/status", None, {}, 404, "NotFound", "could not find"),
    ("bad-propagation", "DELETE", CM + "/c", {"propagationPolicy": "Sideways"}, {}, 422, "Invalid",
     'propagationPolicy: Unsupported value: "Sideways"'),
    ("both-orphan-and-propagation", "DELETE", CM + "/c?orphanDependents=true", {"propagationPolicy": "Orphan"}, {},
     422, "Invalid", "cannot be both set"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "body", "options", "code", "reason", "text"),
    [c[1:] for c in OBJECT_CASES],
    ids=[c[0] for c in OBJECT_CASES],
)
def test_bad_request_on_object(raw: Raw, method: str, path: str, body: Any, options: dict[str, Any], code: int,
                               reason: str, text: str) -> None:  # fmt: skip
    assert raw.request("POST", CM, cm()).status == 201
    reply = raw.request(method, path, body, **options)
    assert reply.status == code, reply.data[:500]
    status = reply.json
    assert status["code"] == code and status["reason"] == reason
    assert text in status["message"], status["message"]


def test_yaml_bodies_are_accepted(raw: Raw) -> None:
    reply = raw.request("POST", CM, b"metadata:\n  name: from-yaml\ndata:\n  k: v\n", content_type="application/yaml")
    assert reply.status == 201 and reply.json["data"] == {"k": "v"}


def test_health_needs_no_token(raw: Raw) -> None:
    for path in ("/healthz", "/livez", "/readyz"):
        reply = raw.request("GET", path, token=None)
        assert (reply.status, reply.data) == (200, b"ok")


def test_body_just_under_the_limit_is_accepted(raw: Raw) -> None:
    body = {**cm("big"), "data": {"k": "x" * (900 * 1024)}}
    assert raw.request("POST", CM, body).status == 201


# Whole Status bodies, as snapshots: they must read like kube-apiserver's.
SNAPSHOTS = {
    "unauthorized": ("GET", CM, None, {"token": None}),
    "not-found-custom": ("GET", PRS + "/ghost", None, {}),
    "invalid-name": ("POST", CM, cm("Bad_Name", labels={"ok": "fine", "x": "bad value"}), {}),
    "too-large": ("POST", CM, BIG, {}),
    "already-exists": ("POST", PRS, pipelinerun("dup"), {}),
    "conflict": ("PUT", PRS + "/dup", {**pipelinerun("dup"), "metadata": {
        "name": "dup", "namespace": "default", "resourceVersion": "1"}}, {}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SNAPSHOTS))
def test_status_bodies(raw: Raw, apiserver: ApiServer, snapshot: Any, case: str) -> None:
    apiserver.create(pipelinerun("dup"))
    method, path, body, options = SNAPSHOTS[case]
    reply = raw.request(method, path, body, **options)
    assert reply.json == snapshot
    # kube-apiserver's key order, for clients and people that read raw bodies.
    assert reply.data.startswith(b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":')
