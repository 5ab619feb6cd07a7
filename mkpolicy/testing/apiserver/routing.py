"""URL parsing: which verb, resource, namespace, name and subresource a request is about.

The URL layout is kube-apiserver's::

    /api/v1/<resource>[/<name>[/<subresource>]]                         core, cluster-wide
    /api/v1/namespaces/<ns>/<resource>[/<name>[/<subresource>]]         core, namespaced
    /apis/<group>/<version>/...                                          the same for a group
    /api/v1/namespaces/<name>[/status]                                   a Namespace itself
    /api/v1/watch/...                                                     legacy watch paths
    /api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>         discovery
    /version, /healthz, /livez, /readyz

The verb follows from the method, whether a name is given and ``?watch``:
get, list, watch, create, update, patch, delete, deletecollection.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from mkpolicy.testing.apiserver.errors import method_not_allowed, resource_not_found

RequestKind = Literal["resource", "discovery", "version", "health"]
HEALTH_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_TRUE = frozenset({"true", "1"})


@dataclass(frozen=True)
class RequestInfo:
    """A parsed request URL."""

    kind: RequestKind
    method: str
    path: str
    verb: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""
    #: For discovery: the path parts after the prefix (``("api",)``, ``("apis", "batch")``, ...).
    discovery: tuple[str, ...] = ()


def is_true(value: str | None) -> bool:
    """A boolean query parameter (``true``/``1``)."""
    return value is not None and value.lower() in _TRUE


def parse_request(method: str, raw_path: str, query: Mapping[str, str]) -> RequestInfo:
    """Parse a request line; 404 for URLs the API does not have, 405 for wrong methods."""
    return _parse(method, raw_path, is_true(query.get("watch")))


@functools.lru_cache(maxsize=4096)
def _parse(method: str, raw_path: str, watch_param: bool) -> RequestInfo:
    # Cached: clients repeat the same URLs (GETs of the same objects, list and watch loops).
    path = raw_path.rstrip("/") or "/"
    if path in HEALTH_PATHS:
        return RequestInfo("health", method, path, verb="get")
    if path == "/version":
        return RequestInfo("version", method, path, verb="get")
    parts = [unquote(p) for p in path.strip("/").split("/")] if path != "/" else []
    if not parts or parts[0] not in ("api", "apis"):
        raise resource_not_found(path)
    if parts[0] == "api":
        if len(parts) <= 2:
            return _discovery(method, path, tuple(parts))
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) <= 3:
            return _discovery(method, path, tuple(parts))
        group, version, rest = parts[1], parts[2], parts[3:]
    watch = False
    if rest[0] == "watch":
        watch, rest = True, rest[1:]
    namespace = ""
    # namespaces/<ns>/<resource>... is inside a namespace; namespaces/<name>[/status] is a Namespace.
    if len(rest) > 2 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3 or any(not p for p in rest):
        raise resource_not_found(path)
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    verb = _verb(method, path, bool(name), watch or watch_param)
    return RequestInfo("resource", method, path, verb, group, version, namespace, resource, name, subresource)


def _discovery(method: str, path: str, parts: tuple[str, ...]) -> RequestInfo:
    if method not in ("GET", "HEAD"):
        raise method_not_allowed(method, path)
    return RequestInfo("discovery", method, path, verb="get", discovery=parts)


def _verb(method: str, path: str, named: bool, watch: bool) -> str:
    if method in ("GET", "HEAD"):
        if watch:
            return "watch"
        return "get" if named else "list"
    if method == "POST" and not named:
        return "create"
    if method == "PUT" and named:
        return "update"
    if method == "PATCH" and named:
        return "patch"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    raise method_not_allowed(method, path)
