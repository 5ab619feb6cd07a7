"""Kubernetes' URL library: ``url``, ``isURL`` and the ``get*`` accessors.

A URL must be an absolute URI or an absolute path, as Go's ``url.ParseRequestURI``
(which Kubernetes uses) requires; its parts are those Go's ``url.Parse`` gives. The
parser below follows Go's algorithm: control characters, bad percent-escapes, bad
ports and IPv6 literals are errors; the query is split the way ``url.ParseQuery``
does (``&`` only, ``+`` is a space).
"""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import unquote_plus

from mkpolicy.cel.errors import EvalError, no_overload
from mkpolicy.cel.library import function
from mkpolicy.cel.values import OpaqueValue, register_type

URL_TYPE = register_type("kubernetes.URL")

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_PORT = re.compile(r"[0-9]*")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
# Characters Go leaves unescaped in a path.
_PATH_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~$&+,/:;=@")
# Characters Go accepts in an already-escaped path (validEncoded).
_PATH_VALID = _PATH_SAFE | frozenset("!'()*[]%")


class URL(OpaqueValue):
    """A parsed ``kubernetes.URL``."""

    __slots__ = ("host", "path", "raw_path", "raw_query", "scheme", "text")
    cel_type_name = "kubernetes.URL"

    def __init__(self, text: str, scheme: str, host: str, raw_path: str, raw_query: str) -> None:
        self.text = text
        self.scheme = scheme
        self.host = host
        self.raw_path = raw_path
        self.raw_query = raw_query

    def __eq__(self, other: object) -> bool:
        return isinstance(other, URL) and other.text == self.text

    def __hash__(self) -> int:
        return hash(("url", self.text))

    def __repr__(self) -> str:
        return f"url({self.text!r})"

    @property
    def hostname(self) -> str:
        """The host without port and without IPv6 brackets."""
        host = self.host
        if host.startswith("["):
            return host[1 : host.index("]")]
        i = host.rfind(":")
        return host[:i] if i >= 0 else host

    @property
    def port(self) -> str:
        """The port, or ""."""
        host = self.host
        if host.startswith("["):
            rest = host[host.index("]") + 1 :]
            return rest[1:] if rest.startswith(":") else ""
        i = host.rfind(":")
        return host[i + 1 :] if i >= 0 else ""

    def escaped_path(self) -> str:
        """Go's ``URL.EscapedPath``."""
        raw = self.raw_path
        if all(c in _PATH_VALID for c in raw):
            return raw
        decoded = _unescape(raw)
        return "".join(c if c in _PATH_SAFE else _percent(c) for c in decoded)

    def query(self) -> dict[str, list[str]]:
        """Go's ``url.ParseQuery`` (pairs that fail to decode are skipped)."""
        out: dict[str, list[str]] = {}
        for part in self.raw_query.split("&"):
            if not part or ";" in part:
                continue
            key, _, value = part.partition("=")
            if _PERCENT.search(key) or _PERCENT.search(value):
                continue
            out.setdefault(unquote_plus(key), []).append(unquote_plus(value))
        return out


def _percent(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8"))


def _unescape(text: str) -> str:
    if _PERCENT.search(text):
        raise ValueError("invalid URL escape")
    out = bytearray()
    i = 0
    raw = text.encode("utf-8")
    while i < len(raw):
        if raw[i] == 0x25:  # %
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", errors="replace")


def parse_url(text: str) -> URL:
    """Parse as Go's ``url.ParseRequestURI`` accepts and ``url.Parse`` splits."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError("net/url: invalid control character in URL")
    if text == "":
        raise ValueError("empty url")
    rest = text
    fragment_free, _, _ = rest.partition("#")
    scheme = ""
    m = _SCHEME.match(fragment_free)
    if m is not None and fragment_free[m.end() : m.end() + 1] == ":":
        scheme = m.group(0).lower()
        rest = fragment_free[m.end() + 1 :]
    elif fragment_free.startswith(":"):
        raise ValueError("missing protocol scheme")
    else:
        rest = fragment_free
    path_part, has_query, raw_query = rest.partition("?")
    if not has_query:
        raw_query = ""
    if not path_part.startswith("/"):
        # An absolute URI with an opaque part (mailto:x) passes ParseRequestURI only
        # with a scheme; relative references never do.
        if not scheme:
            raise ValueError("invalid URI for request")
        return URL(text, scheme, "", "", raw_query)
    host = ""
    if path_part.startswith("//") and scheme:
        authority, slash, path = path_part[2:].partition("/")
        path_part = slash + path
        userinfo, at, hostport = authority.rpartition("@")
        if not at:
            hostport = authority
        elif _PERCENT.search(userinfo):
            raise ValueError("invalid userinfo")
        host = _check_host(hostport)
    if _PERCENT.search(path_part):
        raise ValueError(f"invalid URL escape in path {path_part!r}")
    return URL(text, scheme, host, path_part, raw_query)


def _check_host(host: str) -> str:
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise ValueError("missing ']' in host")
        rest = host[end + 1 :]
        if rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:])):
            raise ValueError(f"invalid port {rest!r} after host")
        return host
    i = host.rfind(":")
    if i >= 0 and not _PORT.fullmatch(host[i + 1 :]):
        raise ValueError(f"invalid port {host[i:]!r} after host")
    if _PERCENT.search(host):
        raise ValueError("invalid URL escape in host")
    return host


def _cost(result: Any, value: Any) -> int:
    return max(1, math.ceil(len(value) * 0.1)) if type(value) is str else 1


@function("url", signatures=["(string) -> kubernetes.URL"], cost=_cost)
def to_url(value: Any) -> URL:
    if type(value) is not str:
        raise no_overload("url", value)
    try:
        return parse_url(value)
    except ValueError as exc:
        raise EvalError(f"URL parse error during conversion from string: {exc}") from None


@function("isURL", signatures=["(string) -> bool"], cost=_cost)
def is_url(value: Any) -> bool:
    if type(value) is not str:
        raise no_overload("isURL", value)
    try:
        parse_url(value)
    except ValueError:
        return False
    return True


def _url(name: str, value: Any) -> URL:
    if type(value) is not URL:
        raise no_overload(name, value)
    return value


@function("getScheme", signatures=["(kubernetes.URL) -> string"], receiver=True)
def get_scheme(value: Any) -> str:
    return _url("getScheme", value).scheme


@function("getHost", signatures=["(kubernetes.URL) -> string"], receiver=True)
def get_host(value: Any) -> str:
    return _url("getHost", value).host


@function("getHostname", signatures=["(kubernetes.URL) -> string"], receiver=True)
def get_hostname(value: Any) -> str:
    return _url("getHostname", value).hostname


@function("getPort", signatures=["(kubernetes.URL) -> string"], receiver=True)
def get_port(value: Any) -> str:
    return _url("getPort", value).port


@function("getEscapedPath", signatures=["(kubernetes.URL) -> string"], receiver=True)
def get_escaped_path(value: Any) -> str:
    return _url("getEscapedPath", value).escaped_path()


@function("getQuery", signatures=["(kubernetes.URL) -> map(string, list(string))"], receiver=True)
def get_query(value: Any) -> dict[str, list[str]]:
    return _url("getQuery", value).query()
