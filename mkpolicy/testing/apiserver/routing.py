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

The path is decoded as Kubernetes' Go server decodes it (:mod:`mkpolicy.kube.target`,
the same decoder the sidecar routes with): percent-decoded first, then split, so an
encoded ``%2F`` separates segments; ``?watch`` is a watch for any value but ``0`` and
``false``; a malformed escape is a 400.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from mkpolicy.kube.target import NAMESPACE_SUBRESOURCES, TargetError, go_bool, parse_query, split_path
from mkpolicy.kube.target import parse_target as decode_target
from mkpolicy.testing.apiserver.errors import bad_request, method_not_allowed, resource_not_found

RequestKind = Literal["resource", "discovery", "version", "health"]
HEALTH_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
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


def parse_request(method: str, raw_path: str, query: Mapping[str, str] | str) -> RequestInfo:
    """Parse a request line; 400 for a malformed escape, 404 for URLs the API does not have, 405 for wrong methods.

    ``query``: the raw query string (read as Go's ``url.ParseQuery`` does), or parsed parameters.
    """
    watch = parse_query(query).get("watch") if isinstance(query, str) else _values(query, "watch")
    try:
        decoded = decode_target(raw_path).path
    except TargetError as exc:
        raise bad_request(str(exc)) from None
    return _parse(method, decoded, go_bool(watch))


def _values(query: Mapping[str, str], key: str) -> list[str] | None:
    getall = getattr(query, "getall", None)
    if getall is not None:  # a multidict: every value, the first one decides
        found: list[str] = getall(key, [])
        return found or None
    value = query.get(key)
    return None if value is None else [value]


@functools.lru_cache(maxsize=4096)
def _parse(method: str, decoded: str, watch_param: bool) -> RequestInfo:
    # Cached: clients repeat the same URLs (GETs of the same objects, list and watch loops).
    parts = list(split_path(decoded))
    path = "/" + "/".join(parts)
    if path in HEALTH_PATHS:
        return RequestInfo("health", method, path, verb="get")
    if path == "/version":
        return RequestInfo("version", method, path, verb="get")
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
    if len(rest) > 2 and rest[0] == "namespaces" and rest[2] not in NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3 or any(not p for p in rest):
        raise resource_not_found(path)
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    # ?watch counts on collections only (requestinfo.go); /watch/ paths are watches whatever follows
    verb = _verb(method, path, bool(name), watch or (watch_param and not name))
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
