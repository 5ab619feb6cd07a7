"""Kubernetes REST paths: which resource, namespace, object and verb a request is for."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote


@dataclass(frozen=True)
class Target:
    """What a request path addresses.

    ``verb`` is the Kubernetes verb: get, list, watch, create, update, patch, delete,
    deletecollection (or the lower-cased HTTP method for anything else).
    """

    group: str
    version: str
    resource: str
    namespace: str | None
    name: str | None
    subresource: str | None
    verb: str


_VERBS_ON_OBJECT = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_VERBS_ON_COLLECTION = {"GET": "list", "POST": "create", "DELETE": "deletecollection"}


def parse_target(method: str, path: str, query: Mapping[str, str]) -> Target | None:
    """The resource a request addresses, or None for discovery, version and other paths.

    Handles ``/api/v1/...`` and ``/apis/{group}/{version}/...``, namespaced and cluster
    paths, subresources, ``?watch=true`` and the legacy ``/watch/`` prefix.
    """
    parts = [unquote(p) for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    legacy_watch = bool(rest) and rest[0] == "watch"
    if legacy_watch:
        rest = rest[1:]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    elif len(rest) in (1, 2) and rest[0] == "namespaces":
        # the namespaces resource itself (/api/v1/namespaces[/name])
        pass
    if not rest or len(rest) > 3:
        return None
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else None
    subresource = rest[2] if len(rest) == 3 else None
    watching = legacy_watch or query.get("watch", "").lower() in ("true", "1")
    method = method.upper()
    if watching and method == "GET":
        verb = "watch"
    elif name is None:
        verb = _VERBS_ON_COLLECTION.get(method, method.lower())
    else:
        verb = _VERBS_ON_OBJECT.get(method, method.lower())
    return Target(group, version, resource, namespace, name, subresource, verb)
