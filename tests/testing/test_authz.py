"""Authorization on the loopback server: RBAC over stored roles, 403s as kube-apiserver words them,
SelfSubjectAccessReview (allowed and denied), and kubectl's ``auth can-i`` as a real client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from mkpolicy.testing.apiserver import ApiServer

from .conftest import Raw

pytestmark = pytest.mark.loopback_only("RBAC of the loopback server's own authorizer model")

SA = "system:serviceaccount:kueue-system:kueue-controller-manager"
GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kueue-system")
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(
        "authz", bundled=["pipelineruns.tekton.dev"], namespaces=("default", "kueue-system", "team-a")
    ) as srv:
        srv.add_token("sa-token", user=SA, groups=GROUPS)
        srv.add_token("admin-2")
        yield srv


@pytest.fixture
def http(server: ApiServer) -> Iterator[Raw]:
    client = Raw(server)
    yield client
    client.close()


def grant(server: ApiServer) -> None:
    """What an operator applies: a ClusterRole for PipelineRuns, a Role naming one Secret."""
    rbac = "rbac.authorization.k8s.io/v1"
    sa = {"kind": "ServiceAccount", "name": "kueue-controller-manager", "namespace": "kueue-system"}
    server.create(
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": {"name": "runs"},
            "rules": [
                {"apiGroups": ["tekton.dev"], "resources": ["pipelineruns"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            ],
        }
    )
    server.create(
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "runs"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "runs"},
            "subjects": [sa],
        }
    )
    server.create(
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "secrets", "namespace": "kueue-system"},
            "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["east"], "verbs": ["get", "watch"]}
            ],
        }
    )
    # A subject without a namespace: the binding's namespace (rule.go appliesToUser).
    server.create({"apiVersion": rbac, "kind": "RoleBinding",
                   "metadata": {"name": "secrets", "namespace": "kueue-system"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secrets"},
                   "subjects": [{"kind": "ServiceAccount", "name": "kueue-controller-manager"}]})  # fmt: skip


def review(http: Raw, token: str, **attributes: Any) -> dict[str, Any]:
    spec = {"nonResourceAttributes": attributes} if "path" in attributes else {"resourceAttributes": attributes}
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec}
    reply = http.request("POST", SSAR, body, token=token)
    assert reply.status == 201, reply.data
    doc: dict[str, Any] = reply.json
    assert doc["kind"] == "SelfSubjectAccessReview" and doc["spec"] == spec
    return doc["status"]


def test_a_restricted_token_is_refused_as_kube_apiserver_words_it(server: ApiServer, http: Raw) -> None:
    reply = http.request("GET", "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns/run-1", token="sa-token")
    assert reply.status == 403
    assert reply.json["reason"] == "Forbidden"
    assert reply.json["message"] == (
        f'pipelineruns.tekton.dev "run-1" is forbidden: User "{SA}" cannot get resource "pipelineruns" '
        'in API group "tekton.dev" in the namespace "team-a"'
    )
    assert reply.json["details"] == {"name": "run-1", "group": "tekton.dev", "kind": "pipelineruns"}
    reply = http.request("GET", "/apis/tekton.dev/v1/pipelineruns", token="sa-token")
    assert reply.json["message"] == (
        f'pipelineruns.tekton.dev is forbidden: User "{SA}" cannot list resource "pipelineruns" '
        'in API group "tekton.dev" at the cluster scope'
    )
    # Discovery and the health endpoints stay open to every authenticated user.
    assert http.request("GET", "/apis", token="sa-token").status == 200
    assert http.request("GET", "/version", token="sa-token").status == 200
    # Unrestricted tokens are not affected.
    assert http.request("GET", "/api/v1/namespaces/kueue-system/secrets", token="admin-2").status == 200


def test_roles_and_bindings_grant_what_they_name(server: ApiServer, http: Raw) -> None:
    grant(server)
    server.create({"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "metadata": {"name": "r", "namespace":
                   "team-a"}, "spec": {"pipelineRef": {"name": "p"}}})  # fmt: skip
    server.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "east", "namespace": "kueue-system"}})
    assert http.request("GET", "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns/r", token="sa-token").status == 200
    secrets = "/api/v1/namespaces/kueue-system/secrets"
    assert http.request("GET", f"{secrets}/east", token="sa-token").status == 200
    assert http.request("GET", f"{secrets}/west", token="sa-token").status == 403
    assert http.request("GET", secrets, token="sa-token").status == 403  # a list names nothing
    # A watch selecting the name by field selector is a watch of that name (requestinfo.go).
    watch = f"{secrets}?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Deast"
    assert http.request("GET", watch, token="sa-token").status == 200
    other = f"{secrets}?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dwest"
    assert http.request("GET", other, token="sa-token").status == 403
    # The Role is in kueue-system only.
    assert http.request("GET", "/api/v1/namespaces/team-a/secrets/east", token="sa-token").status == 403


def test_self_subject_access_review_allowed_and_denied(server: ApiServer, http: Raw) -> None:
    grant(server)
    assert review(http, "sa-token", verb="get", group="tekton.dev", resource="pipelineruns") == {
        "allowed": True,
        "reason": 'RBAC: allowed by ClusterRoleBinding "runs" of ClusterRole "runs" to ServiceAccount '
        '"kueue-controller-manager/kueue-system"',
    }
    assert review(http, "sa-token", verb="watch", resource="secrets", namespace="kueue-system", name="east") == {
        "allowed": True,
        "reason": 'RBAC: allowed by RoleBinding "secrets/kueue-system" of Role "secrets" to ServiceAccount '
        '"kueue-controller-manager/kueue-system"',
    }
    assert review(http, "sa-token", verb="update", resource="secrets", namespace="kueue-system", name="east") == {
        "allowed": False
    }
    assert review(http, "sa-token", verb="get", group="tekton.dev", resource="pipelineruns", subresource="status") == {
        "allowed": False
    }
    assert review(http, "sa-token", verb="get", path="/apis")["allowed"] is True
    assert review(http, "admin-2", verb="delete", resource="secrets", namespace="kueue-system") == {"allowed": True}


def test_a_malformed_review_is_refused(http: Raw) -> None:
    both = {"spec": {"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"verb": "get", "path": "/"}}}
    reply = http.request("POST", SSAR, both)
    assert reply.status == 422
    assert "cannot be specified in combination with resourceAttributes" in reply.json["message"]
    reply = http.request("POST", SSAR, {"spec": {}})
    assert reply.status == 422
    assert "exactly one of nonResourceAttributes or resourceAttributes must be specified" in reply.json["message"]
    assert http.request("GET", SSAR).status == 405


def test_the_kubernetes_client_reviews_and_is_refused(server: ApiServer) -> None:
    """The ``kubernetes`` Python client's typed SelfSubjectAccessReview and its 403 (kubectl's
    ``auth can-i`` sends protobuf, which this server does not decode)."""
    grant(server)
    api = kubernetes.config.new_client_from_config_dict(server.kubeconfig_for("sa-token"))
    try:
        authz = kubernetes.client.AuthorizationV1Api(api)

        def can_i(verb: str, name: str) -> bool:
            attrs = kubernetes.client.V1ResourceAttributes(verb=verb, resource="secrets", namespace="kueue-system",
                                                           name=name)  # fmt: skip
            body = kubernetes.client.V1SelfSubjectAccessReview(
                spec=kubernetes.client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs)
            )
            return bool(authz.create_self_subject_access_review(body).status.allowed)

        assert can_i("get", "east") and not can_i("update", "east") and not can_i("get", "west")
        with pytest.raises(kubernetes.client.ApiException) as refused:
            kubernetes.client.CoreV1Api(api).list_namespaced_secret("kueue-system")
        assert refused.value.status == 403
    finally:
        api.close()
