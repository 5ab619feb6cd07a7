"""A request target decoded exactly as Kubernetes' Go API server decodes it.

The sidecar routes on this (which resource, which verb) and the loopback API server
serves from it, so both read a path the way a real kube-apiserver does:

* the path is percent-decoded first, then split on ``/`` (Go's ``net/url``
  ``unescape(s, encodePath)`` in ``net/url/url.go``, then ``splitPath`` in
  ``staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``): an encoded
  ``%2F`` *is* a separator, ``+`` stays ``+``, a malformed escape is a 400;
* the query is Go's ``url.ParseQuery`` (``net/url/url.go`` ``parseQuery``): pairs split
  on ``&``, a pair holding ``;`` is dropped, ``+`` is a space, a pair with a malformed
  escape is dropped; ``Request.URL.Query()`` ignores those errors, so does this;
* the verb is ``NewRequestInfo``'s (requestinfo.go): ``?watch`` on a collection GET is a
  watch for every value but ``0`` and ``false`` (any case), a bare ``?watch`` included
  (``Convert_Slice_string_To_bool`` in ``apimachinery/pkg/runtime/conversion.go``).

kube-apiserver dispatches ``/api`` and ``/apis`` to go-restful directly (no
``http.ServeMux``, so no path cleaning nor redirect: ``server/handler.go``'s director),
which is why a ``..`` segment or an empty one reaches the request-info resolver as a
part. :attr:`RequestTarget.ambiguous` names what a proxy in front of it must refuse,
because a component splitting the raw path would see another resource than the server.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

#: API prefixes of kube-apiserver (``APIPrefixes`` / ``GrouplessAPIPrefixes`` of its RequestInfoFactory).
API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_PREFIXES = frozenset({"api"})
#: Namespace subresources (requestinfo.go ``namespaceSubresources``).
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_HEX = frozenset("0123456789abcdefABCDEF")


class TargetError(ValueError):
    """A request target Go's server answers with 400 (a malformed escape, a control character)."""


@dataclass(frozen=True)
class RequestInfo:
    """What kube-apiserver's request-info resolver makes of a request (requestinfo.go)."""

    is_resource: bool
    verb: str
    prefix: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    name: str = ""
    subresource: str = ""
    #: The path parts from the resource on (``resource/name/subresource/...``).
    parts: tuple[str, ...] = ()


@dataclass(frozen=True)
class RequestTarget:
    """A request target (origin-form) as Go's server holds it."""

    #: The path, percent-decoded (Go's ``URL.Path``).
    path: str
    #: The query string as sent, without ``?`` (Go's ``URL.RawQuery``).
    raw_query: str
    #: The path's segments after decoding (requestinfo.go ``splitPath``).
    parts: tuple[str, ...]
    #: Why a proxy must not forward this path: an encoded ``/``, a ``.``/``..`` or empty segment.
    ambiguous: str | None

    @property
    def query(self) -> dict[str, list[str]]:
        """The query parameters as ``url.ParseQuery`` reads them."""
        return parse_query(self.raw_query)


def _unescape(text: str, plus_is_space: bool) -> str:
    """Go's ``unescape``: ``%XX`` decoded (bytes read as UTF-8); TargetError on a malformed escape."""
    if "%" not in text:
        return text.replace("+", " ") if plus_is_space else text
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "%":
            if i + 2 >= n or text[i + 1] not in _HEX or text[i + 2] not in _HEX:
                raise TargetError(f"invalid URL escape {text[i : i + 3]!r}")
            out.append(int(text[i + 1 : i + 3], 16))
            i += 3
            continue
        out += b" " if c == "+" and plus_is_space else c.encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")


def parse_query(raw: str) -> dict[str, list[str]]:
    """Go's ``url.ParseQuery``, errors ignored as ``URL.Query()`` does (bad pairs are dropped)."""
    values: dict[str, list[str]] = {}
    for pair in raw.split("&"):
        if not pair or ";" in pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key, value = _unescape(key, True), _unescape(value, True)
        except TargetError:
            continue
        values.setdefault(key, []).append(value)
    return values


def go_bool(values: list[str] | None) -> bool:
    """A boolean query parameter as apimachinery converts it: true unless absent, ``0`` or ``false``."""
    if not values:
        return False
    return values[0] != "0" and values[0].lower() != "false"


def split_path(path: str) -> tuple[str, ...]:
    """requestinfo.go ``splitPath``: the segments of ``path`` without leading and trailing ``/``."""
    path = path.strip("/")
    return tuple(path.split("/")) if path else ()


#: Paths up to this length are cached (clients repeat them); longer ones are parsed each time,
#: so that the cache holds at most ``4096 * CACHED_PATH`` bytes whatever clients send.
CACHED_PATH = 512


def _parse_path(raw_path: str) -> tuple[str, tuple[str, ...], str | None]:
    if len(raw_path) <= CACHED_PATH:
        return _parse_path_cached(raw_path)
    return _parse_path_uncached(raw_path)


def _parse_path_uncached(raw_path: str) -> tuple[str, tuple[str, ...], str | None]:
    if any(ord(c) < 0x21 or ord(c) > 0x7E for c in raw_path):
        raise TargetError("the request target holds a control, space or non-ASCII character")
    if not raw_path.startswith("/") or "#" in raw_path:
        raise TargetError(f"expected a request path starting with '/'; found {raw_path[:100]!r}")
    path = _unescape(raw_path, False)
    parts = split_path(path)
    ambiguous: str | None = None
    raw_parts = raw_path.strip("/").split("/") if raw_path.strip("/") else []  # "/": no segment
    if len(raw_parts) != len(parts):
        ambiguous = "an encoded '/' (%2F) in the path"
    elif raw_path != "/" and (raw_path.endswith("/") or "" in parts):
        ambiguous = "an empty path segment ('//' or a trailing '/')"
    elif "." in parts or ".." in parts:
        ambiguous = "a '.' or '..' path segment"
    return path, parts, ambiguous


# Cached: clients repeat the same paths (GETs of the same objects, list and watch loops).
_parse_path_cached = functools.lru_cache(maxsize=4096)(_parse_path_uncached)


def parse_target(target: str) -> RequestTarget:
    """Decode an origin-form request target (``/path?query``); TargetError where Go answers 400."""
    raw_path, _, raw_query = target.partition("?")
    if any(ord(c) < 0x21 or ord(c) > 0x7E for c in raw_query):
        raise TargetError("the request target holds a control, space or non-ASCII character")
    path, parts, ambiguous = _parse_path(raw_path)
    return RequestTarget(path, raw_query, parts, ambiguous)


def request_info(method: str, parts: tuple[str, ...], watch: list[str] | None = None) -> RequestInfo:
    """requestinfo.go ``NewRequestInfo`` on the path's ``parts`` (``watch``: the ``watch`` query values)."""
    verb = method.lower()
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return RequestInfo(False, verb)
    prefix, rest = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_PREFIXES:
        if len(rest) < 3:
            return RequestInfo(False, verb)
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            # Go returns an error with the request info as far as known; the request is refused
            return RequestInfo(True, "", prefix, group, version)
        verb, rest = rest[0], rest[1:]
    else:
        verb = _VERBS.get(method.upper(), "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if go_bool(watch) else "list"
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(True, verb, prefix, group, version, namespace, resource, name, subresource, rest)
