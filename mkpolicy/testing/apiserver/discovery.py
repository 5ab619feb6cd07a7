"""Discovery documents: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>``, ``/version``.

Two forms, as kube-apiserver serves them:

- the unaggregated (v1) documents, which the ``kubernetes`` Python client's dynamic client
  reads, and which every client falls back to;
- aggregated discovery (``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList``) at ``/api``
  and ``/apis``, for a client whose ``Accept`` asks for it as client-go's discovery client
  does (``k8s.io/client-go/discovery/discovery_client.go``, ``acceptDiscoveryFormats``):
  every group, version and resource in one document
  (``k8s.io/apiserver/pkg/endpoints/discovery/aggregated/handler.go``), with an ``ETag``.

They change as CRDs come and go.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from mkpolicy.testing.apiserver.errors import resource_not_found
from mkpolicy.testing.apiserver.resources import RESOURCE_VERBS, STATUS_VERBS, Registry, ResourceType

#: What ``/version`` reports (a Kubernetes minor the project's clients know).
VERSION_INFO = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0+mkpolicy-loopback",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "n/a (mkpolicy loopback API server, Python)",
    "compiler": "cpython",
    "platform": "linux/amd64",
}


def _group_version(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": f"{group}/{version}" if group else version, "version": version}


def _storage_hash(rt: ResourceType) -> str:
    digest = hashlib.sha256(f"{rt.group}/{rt.storage_version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def api_versions(server_address: str) -> dict[str, Any]:
    """``/api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "versions": [_group_version(name, v) for v in versions],
        "preferredVersion": _group_version(name, versions[0]),
    }


def api_group_list(registry: Registry) -> dict[str, Any]:
    """``/apis``: every named group with its versions (preferred first)."""
    groups = [_group(g, vs) for g, vs in registry.groups().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any]:
    """``/apis/<group>``; 404 for an unknown group."""
    versions = registry.groups().get(group)
    if not group or not versions:
        raise resource_not_found(f"/apis/{group}")
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any]:
    """``/api/v1`` or ``/apis/<group>/<version>``; 404 when nothing is served there."""
    types = registry.in_group_version(group, version)
    if not types:
        raise resource_not_found(f"/apis/{group}/{version}" if group else f"/api/{version}")
    resources: list[dict[str, Any]] = []
    for rt in types:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(RESOURCE_VERBS),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        entry["storageVersionHash"] = _storage_hash(rt)
        resources.append(entry)
        v = rt.version(version)
        if v is not None and v.status_subresource:
            resources.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": list(STATUS_VERBS),
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def discovery_document(registry: Registry, parts: tuple[str, ...], server_address: str) -> dict[str, Any]:
    """The document at ``/`` + ``/``.join(parts) (parts from :class:`~.routing.RequestInfo`)."""
    if parts == ("api",):
        return api_versions(server_address)
    if len(parts) == 2 and parts[0] == "api":
        return resource_list(registry, "", parts[1])
    if parts == ("apis",):
        return api_group_list(registry)
    if len(parts) == 2:
        return api_group(registry, parts[1])
    return resource_list(registry, parts[1], parts[2])


def _discovery_kind(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "version": version, "kind": kind}


def _resource_discovery(rt: ResourceType, version: str) -> dict[str, Any]:
    """One ``APIResourceDiscovery`` (fields in the Go type's order)."""
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": _discovery_kind(rt.group, version, rt.kind),
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(RESOURCE_VERBS),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    v = rt.version(version)
    if v is not None and v.status_subresource:
        entry["subresources"] = [
            {
                "subresource": "status",
                "responseKind": _discovery_kind(rt.group, version, rt.kind),
                "verbs": list(STATUS_VERBS),
            }
        ]
    return entry


def aggregated_discovery(registry: Registry, legacy: bool) -> dict[str, Any]:
    """``/api`` (``legacy``: the core group) or ``/apis`` (every named group) as an
    ``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList``."""
    items: list[dict[str, Any]] = []
    for group, versions in registry.groups().items():
        if bool(group) == legacy:
            continue
        meta: dict[str, Any] = {"name": group} if group else {}
        meta["creationTimestamp"] = None
        items.append(
            {
                "metadata": meta,
                "versions": [
                    {
                        "version": version,
                        "resources": [
                            _resource_discovery(rt, version) for rt in registry.in_group_version(group, version)
                        ],
                        "freshness": "Current",
                    }
                    for version in versions
                ],
            }
        )
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}


def etag(body: bytes) -> str:
    """The quoted ``ETag`` of a discovery document (a hash of its bytes)."""
    return '"' + hashlib.sha512(body).hexdigest()[:32] + '"'
