"""Authorization: RBAC over the Roles and bindings the server stores, and SelfSubjectAccessReview.

The model (docs/apiserver.md, "Authorization"): the server's own token and tokens added
without a user are *unrestricted* (as kube-apiserver's ``system:masters``: everything is
allowed). A token added with a user (``ApiServer.add_token(t, user=..., groups=...)``) is
authorized as kube-apiserver's RBAC authorizer does it (``plugin/pkg/auth/authorizer/rbac/
rbac.go`` and ``pkg/registry/rbac/validation/rule.go`` in k8s.io/kubernetes): the rules of
every ClusterRoleBinding, and of every RoleBinding in the request's namespace, whose
subjects name the user (``User``), one of its groups (``Group``) or it as a service
account (``ServiceAccount``: ``system:serviceaccount:<ns>:<name>``) allow a request when
a rule matches its verb, API group, resource (``resource/subresource``, ``*/subresource``,
``*``) and, when the rule names some, the object's name. Every authenticated user also
has kube-apiserver's default ``system:discovery``, ``system:basic-user`` and
``system:public-info-viewer`` ClusterRoles (bootstrappolicy/policy.go). A denied request
is a 403 with kube-apiserver's message (``responsewriters/errors.go`` forbiddenMessage).

A LIST or WATCH whose field selector requires ``metadata.name=<name>`` is authorized for
that name, as ``endpoints/request/requestinfo.go`` sets it.

``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`` answers whether the
requesting token may do what the review's ``spec`` says (``pkg/registry/authorization/
selfsubjectaccessreview/rest.go``): ``status.allowed`` and ``status.reason``. No deny
rules exist in RBAC, so ``status.denied`` is never true.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mkpolicy.testing.apiserver import resources as R
from mkpolicy.testing.apiserver.errors import ApiError, Cause, invalid, invalid_value
from mkpolicy.testing.apiserver.routing import RequestInfo
from mkpolicy.testing.apiserver.storage import Store

#: kube-apiserver's default ClusterRoles bound to every authenticated user (bootstrappolicy/policy.go),
#: by the name of the role and of its ClusterRoleBinding.
AUTHENTICATED_ROLES: tuple[tuple[str, tuple[dict[str, Any], ...]], ...] = (
    ("system:discovery", ({
        "verbs": ["get"],
        "nonResourceURLs": ["/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*",
                            "/api", "/api/*", "/apis", "/apis/*"],
    },)),
    ("system:basic-user", (
        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
         "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
        {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]},
    )),
)  # fmt: skip
AUTHENTICATED = GROUP = "system:authenticated"
SSAR_GROUP = "authorization.k8s.io"
SSAR_RESOURCE = "selfsubjectaccessreviews"


@dataclass(frozen=True)
class User:
    """Who a restricted token authenticates as (``system:authenticated`` is always added)."""

    name: str
    groups: tuple[str, ...] = ()

    @property
    def all_groups(self) -> tuple[str, ...]:
        """The groups, with ``system:authenticated``."""
        return self.groups if AUTHENTICATED in self.groups else (*self.groups, AUTHENTICATED)


@dataclass(frozen=True)
class Attributes:
    """What a request does, as the authorizer sees it (``authorizer.AttributesRecord``)."""

    verb: str
    resource_request: bool = True
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @classmethod
    def of(cls, info: RequestInfo, query: Mapping[str, str]) -> Attributes:
        """The attributes of a parsed request (``query``: its query parameters)."""
        if info.kind != "resource":
            return cls(verb="get", resource_request=False, path=info.path)
        name = info.name
        if not name and info.verb in ("list", "watch"):
            name = _selected_name(query.get("fieldSelector", ""))
        namespace = info.namespace or (info.name if info.resource == "namespaces" else "")
        return cls(info.verb, True, info.group, info.resource, info.subresource, namespace, name)


def _selected_name(selector: str) -> str:
    """The name a field selector requires (``metadata.name=x`` / ``==``), as requestinfo.go reads it."""
    for term in selector.split(","):
        for op in ("==", "="):
            key, sep, value = term.partition(op)
            if sep and key.strip() == "metadata.name" and "!" not in key:
                return value.strip()
    return ""


def rule_allows(attrs: Attributes, rule: Mapping[str, Any]) -> bool:
    """rbac.go RuleAllows: verb, then API group, resource and name (or the non-resource URL)."""
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        return any(
            url == "*" or url == attrs.path or (url.endswith("*") and attrs.path.startswith(url.rstrip("*")))
            for url in rule.get("nonResourceURLs") or []
        )
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or []
    if not any(r in ("*", combined) or (attrs.subresource and r == f"*/{attrs.subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _applies(subject: Mapping[str, Any], user: User, namespace: str) -> bool:
    """rule.go appliesToUser."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.all_groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == f"system:serviceaccount:{sa_namespace}:{name}"
    return False


def _describe(subject: Mapping[str, Any], namespace: str) -> str:
    """rule.go describeSubject."""
    if subject.get("kind") == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or namespace}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


class Authorizer:
    """RBAC over the objects of ``store``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _objects(self, rt: R.ResourceType, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        coll = self.store.collections.get(rt.key)
        if coll is None:
            return
        for (ns, _), stored in sorted(coll.objects.items()):
            if namespace is None or ns == namespace:
                yield stored.obj

    def _role_rules(self, ref: Mapping[str, Any], namespace: str) -> Sequence[Mapping[str, Any]]:
        if ref.get("kind") == "ClusterRole":
            stored = self.store.get(R.CLUSTERROLES.key, ("", str(ref.get("name"))))
        else:
            stored = self.store.get(R.ROLES.key, (namespace, str(ref.get("name"))))
        return stored.obj.get("rules") or [] if stored is not None else []

    def authorize(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason): rbac.go Authorize (the reason names the binding that allowed it)."""
        for role, role_rules in AUTHENTICATED_ROLES:
            if any(rule_allows(attrs, rule) for rule in role_rules):
                return True, f'RBAC: allowed by ClusterRoleBinding "{role}" of ClusterRole "{role}" to Group "{GROUP}"'
        for binding in self._objects(R.CLUSTERROLEBINDINGS):
            found = self._visit(binding, user, attrs, "")
            if found:
                return True, found
        if attrs.namespace:
            for binding in self._objects(R.ROLEBINDINGS, attrs.namespace):
                found = self._visit(binding, user, attrs, attrs.namespace)
                if found:
                    return True, found
        return False, ""

    def _visit(self, binding: Mapping[str, Any], user: User, attrs: Attributes, namespace: str) -> str:
        ref = binding.get("roleRef") or {}
        for subject in binding.get("subjects") or []:
            if not _applies(subject, user, namespace):
                continue
            if any(rule_allows(attrs, rule) for rule in self._role_rules(ref, namespace)):
                meta = binding.get("metadata") or {}
                where = f"{meta.get('name')}/{namespace}" if namespace else str(meta.get("name"))
                kind = "RoleBinding" if namespace else "ClusterRoleBinding"
                return (
                    f'RBAC: allowed by {kind} "{where}" of {ref.get("kind")} "{ref.get("name")}" to '
                    f"{_describe(subject, namespace)}"
                )
        return ""


def forbidden(user: User, attrs: Attributes) -> ApiError:
    """The 403 kube-apiserver answers (ForbiddenStatusError, apierrors.NewForbidden)."""
    if not attrs.resource_request:
        message = f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
        return ApiError(403, message)
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    why = f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}" {scope}'
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    details: dict[str, Any] = {"name": attrs.name} if attrs.name else {}
    if attrs.group:
        details["group"] = attrs.group
    details["kind"] = attrs.resource
    return ApiError(403, f"{subject} is forbidden: {why}", details=details)


def self_subject_access_review(body: Any, user: User | None, authorizer: Authorizer) -> dict[str, Any]:
    """selfsubjectaccessreview/rest.go Create: validate, authorize the spec's attributes as ``user``
    (None: unrestricted), answer the review with its status."""
    if not isinstance(body, dict):
        raise ApiError(400, f"not a SelfSubjectAccessReview: {json.dumps(body)[:200]}")
    spec = body.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    for field, value in (("resourceAttributes", resource), ("nonResourceAttributes", non_resource)):
        if value is not None and not isinstance(value, dict):
            raise ApiError(400, f"spec.{field}: expected an object, found {json.dumps(value)[:100]}")
    causes: list[Cause] = []
    if resource is not None and non_resource is not None:
        detail = "cannot be specified in combination with resourceAttributes"
        causes.append(invalid_value("spec.nonResourceAttributes", non_resource, detail))
    if resource is None and non_resource is None:
        detail = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        causes.append(invalid_value("spec.resourceAttributes", None, detail))
    metadata = body.get("metadata")
    meta = {k: v for k, v in metadata.items() if k != "managedFields"} if isinstance(metadata, dict) else {}
    if meta:
        causes.append(invalid_value("metadata", meta, "must be empty"))
    if causes:
        raise invalid(SSAR_GROUP, "SelfSubjectAccessReview", "", causes)
    if isinstance(resource, dict):
        attrs = Attributes(
            verb=str(resource.get("verb") or ""),
            group=str(resource.get("group") or ""),
            resource=str(resource.get("resource") or ""),
            subresource=str(resource.get("subresource") or ""),
            namespace=str(resource.get("namespace") or ""),
            name=str(resource.get("name") or ""),
        )
    else:
        assert isinstance(non_resource, dict)
        attrs = Attributes(
            verb=str(non_resource.get("verb") or ""), resource_request=False, path=str(non_resource.get("path") or "")
        )
    allowed, reason = (True, "") if user is None else authorizer.authorize(user, attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {},
        "spec": spec,
        "status": status,
    }
