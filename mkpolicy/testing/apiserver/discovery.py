"""Discovery documents: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>``, ``/version``.

These are the unaggregated (v1) discovery documents, which the ``kubernetes`` Python
client's dynamic client and kubectl (as a fallback) read. They change as CRDs come and go.
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
