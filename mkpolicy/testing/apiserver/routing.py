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
from dataclasses import dataclass
from typing import Literal

from mkpolicy.kube.target import TargetError, go_bool, parse_query, request_info, split_path
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


def parse_request(method: str, raw_path: str, raw_query: str) -> RequestInfo:
    """Parse a request line; 400 for a malformed escape, 404 for URLs the API does not have, 405 for wrong methods.

    ``raw_query``: the query string as sent (read as Go's ``url.ParseQuery`` does).
    """
    try:
        decoded = decode_target(raw_path).path
    except TargetError as exc:
        raise bad_request(str(exc)) from None
    return _parse(method, decoded, go_bool(parse_query(raw_query).get("watch")))


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
    if len(parts) <= (2 if parts[0] == "api" else 3):
        return _discovery(method, path, tuple(parts))
    # the resource part is requestinfo.go's resolution, shared with the sidecar's routing
    info = request_info(method, tuple(parts), ["true"] if watch_param else None)
    if not info.resource or len(info.parts) > 3 or any(not p for p in info.parts):
        raise resource_not_found(path)
    verb = _verb(method, path, info.verb, bool(info.name))
    # requestinfo.go names a Namespace's own requests after it; the store keeps Namespaces cluster-wide
    own = info.resource == "namespaces" and info.namespace == info.name
    namespace = "" if own else info.namespace
    return RequestInfo(
        "resource",
        method,
        path,
        verb,
        info.group,
        info.version,
        namespace,
        info.resource,
        info.name,
        info.subresource,
    )


def _discovery(method: str, path: str, parts: tuple[str, ...]) -> RequestInfo:
    if method not in ("GET", "HEAD"):
        raise method_not_allowed(method, path)
    return RequestInfo("discovery", method, path, verb="get", discovery=parts)


def _verb(method: str, path: str, verb: str, named: bool) -> str:
    """The resolved verb, or 405 where kube-apiserver registers no handler for the method on that path."""
    allowed = {
        "get": method in ("GET", "HEAD"),
        "list": method in ("GET", "HEAD"),
        "watch": method in ("GET", "HEAD"),
        "create": not named,
        "update": named,
        "patch": named,
        "delete": True,
        "deletecollection": True,
    }
    if not allowed.get(verb, False):
        raise method_not_allowed(method, path)
    return verb
