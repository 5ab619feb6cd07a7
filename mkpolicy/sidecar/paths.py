"""Kubernetes REST paths: which resource, namespace, object and verb a request is for.

Decoded as kube-apiserver decodes them (:mod:`mkpolicy.kube.target`): percent-decoding
first, then splitting, the verb from ``NewRequestInfo``'s rules. A path that a component
splitting before decoding would read differently (an encoded ``/``, ``.``/``..`` or empty
segments) never gets here: the listener refuses it with a 400
(:func:`mkpolicy.sidecar.http1.parse_request_head`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from mkpolicy.kube.target import RequestTarget, TargetError, request_info
from mkpolicy.kube.target import parse_target as decode_target


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
    #: The ``dryRun`` values (Go's ``url.ParseQuery``: every value, in order).
    dry_run: tuple[str, ...] = ()
    #: The ``fieldManager`` (the first value, as apimachinery converts a string parameter).
    field_manager: str | None = None


def target_of(method: str, decoded: RequestTarget) -> Target | None:
    """The resource a decoded request target addresses, or None for discovery and other paths.

    Cached for targets up to :data:`CACHED_TARGET` characters: clients repeat the same requests
    (GETs of the same objects, list and watch loops); longer ones (which no Kubernetes client
    sends) are not kept, so the cache stays small whatever clients send.
    """
    if len(decoded.path) + len(decoded.raw_query) <= CACHED_TARGET:
        return _target_cached(method, decoded)
    return _target(method, decoded)


#: Targets (path and query) up to this length are cached.
CACHED_TARGET = 1024


def _target(method: str, decoded: RequestTarget) -> Target | None:
    query = decoded.query
    info = request_info(method, decoded.parts, query.get("watch"))
    if not info.is_resource or not info.resource:
        return None
    # a Namespace itself (/api/v1/namespaces/<name>[/status]) is cluster-scoped
    namespace = info.namespace if info.namespace and info.resource != "namespaces" else None
    managers = query.get("fieldManager")
    return Target(
        info.group,
        info.version,
        info.resource,
        namespace,
        info.name or None,
        info.subresource or None,
        info.verb or method.lower(),
        tuple(query.get("dryRun", ())),
        managers[0] if managers else None,
    )


_target_cached = functools.lru_cache(maxsize=4096)(_target)


def parse_target(method: str, path: str, query: Mapping[str, str]) -> Target | None:
    """The resource a raw request path addresses, or None for discovery, version and other paths.

    ``query``: the parameters (one value each). ValueError (:class:`TargetError`) for a
    path Go's server refuses.
    """
    raw_query = "&".join(f"{k}={v}" if v else k for k, v in query.items())
    return target_of(method, decode_target(f"{path}?{raw_query}" if raw_query else path))


__all__ = ["Target", "TargetError", "decode_target", "parse_target", "target_of"]
