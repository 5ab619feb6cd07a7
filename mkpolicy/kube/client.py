"""A small asynchronous Kubernetes API client on aiohttp (JSON only).

Enough for what mkpolicy does against a cluster: discovery, get, list, watch, create,
patch, delete, with Kubernetes ``Status`` errors raised as :class:`ApiError`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from mkpolicy.errors import Location, MkpolicyError
from mkpolicy.kube.rest import RestConfig, RestConfigError, TokenSource, resource_path

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class ApiError(MkpolicyError):
    """The API server answered with an error (``status`` is the HTTP code, ``body`` its Status)."""

    def __init__(self, status: int, reason: str, message: str, body: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}", Location(where="kubernetes API"))
        self.status = status
        self.reason = reason
        self.body: dict[str, Any] = dict(body or {})

    @classmethod
    def from_response(cls, status: int, raw: bytes) -> ApiError:
        """Build from an HTTP error response (a Status body when the server sent one);
        410 is a :class:`Gone`."""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Status":
            return cls.from_status(status, body)
        text = raw[:200].decode("utf-8", "replace").strip()
        return (Gone if status == 410 else cls)(status, "", text or "(no body)")

    @classmethod
    def from_status(cls, status: int, body: Mapping[str, Any]) -> ApiError:
        """Build from a ``Status`` object (an error response, or a watch's ERROR event)."""
        reason, message = str(body.get("reason") or ""), str(body.get("message") or "")
        return (Gone if status == 410 else cls)(status, reason, message, body)


class Gone(ApiError):
    """410: the resourceVersion of a watch or list is too old (relist)."""


@dataclass(frozen=True)
class ResourceInfo:
    """A resource type as discovery names it."""

    group: str
    version: str
    kind: str
    resource: str
    namespaced: bool
    #: Whether discovery lists ``<resource>/status`` (None: not asked). Not part of equality.
    status_subresource: bool | None = field(default=None, compare=False)

    @property
    def api_version(self) -> str:
        """``group/version`` (``version`` for the core group)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path of the collection, an object or its subresource."""
        return resource_path(self.group, self.version, self.resource, namespace, name, subresource)


class KubeClient:
    """An async client for one API server. Use as ``async with KubeClient(cfg) as c``."""

    def __init__(self, config: RestConfig, *, timeout: float = 30.0, user_agent: str = "mkpolicy") -> None:
        self._timeout = timeout
        self._user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        #: Sessions of earlier configurations (requests and watches in flight end on them); closed by :meth:`close`.
        self._retired: list[aiohttp.ClientSession] = []
        self._configure(config)

    def reconfigure(self, config: RestConfig) -> None:
        """Use ``config`` from the next request on (a rotated CA, certificate or server); requests and
        watches in flight finish on the connections they have."""
        self._configure(config)
        if self._session is not None:
            self._retired.append(self._session)
            self._session = None

    def _configure(self, config: RestConfig) -> None:
        """Take ``config`` up (RestConfigError, and nothing changed, when it cannot be used)."""
        tokens = TokenSource(config)
        context = config.ssl_context()
        parts = urlsplit(config.server)
        proxy = config.proxy_url
        # The server URL without user info (that authenticates through :meth:`headers`).
        base = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        if proxy and urlsplit(proxy).scheme.lower() not in ("http", "https"):
            raise RestConfigError(
                f"proxy-url {proxy!r} of {base}: mkpolicy's API client reaches servers through http(s) proxies only"
            )
        self.config, self._tokens, self._ssl, self._base, self._proxy = config, tokens, context, base, proxy

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def session(self) -> aiohttp.ClientSession:
        """The underlying session (created on first use, in the running loop)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else False, limit=64)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)
            )
        return self._session

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Authentication and user-agent headers, plus ``extra``."""
        out = {"User-Agent": self._user_agent, **self._tokens.headers()}
        if extra:
            out.update(extra)
        return out

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` on this server."""
        return self._base + path

    async def close(self) -> None:
        """Close the connection pool."""
        retired, self._retired = self._retired, []
        for session in retired:
            await session.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Any:
        """Send one request; returns the decoded JSON body, raises :class:`ApiError` on an error status."""
        data = None if body is None else json.dumps(body).encode()
        headers = self.headers({"Accept": JSON})
        if data is not None:
            headers["Content-Type"] = content_type
        limit = aiohttp.ClientTimeout(total=timeout if timeout is not None else self._timeout)
        async with self.session().request(
            method,
            self.url(path),
            params=params,
            data=data,
            headers=headers,
            timeout=limit,
            ssl=self._ssl_arg(),
            proxy=self._proxy,
        ) as resp:
            raw = await resp.read()
            if resp.status >= 400:
                raise ApiError.from_response(resp.status, raw)
            return json.loads(raw) if raw else None

    def _ssl_arg(self) -> Any:
        return self._ssl if self._ssl is not None else False

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """GET ``path`` as JSON."""
        result: dict[str, Any] = await self.request("GET", path, params=params)
        return result

    async def create(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``obj`` to the collection ``path``."""
        result: dict[str, Any] = await self.request("POST", path, body=dict(obj))
        return result

    async def replace(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT ``obj`` at ``path``."""
        result: dict[str, Any] = await self.request("PUT", path, body=dict(obj))
        return result

    async def patch(self, path: str, patch: Any, content_type: str = MERGE_PATCH) -> dict[str, Any]:
        """PATCH ``path`` (JSON merge patch by default)."""
        result: dict[str, Any] = await self.request("PATCH", path, body=patch, content_type=content_type)
        return result

    async def delete(self, path: str, propagation: str | None = "Background") -> Any:
        """DELETE ``path`` with the given propagation policy."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation} if propagation else None
        return await self.request("DELETE", path, body=body)

    async def discover(self, group: str, version: str, kind: str) -> ResourceInfo:
        """The resource serving ``kind`` in ``group/version`` (raises ApiError 404 when there is none)."""
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        doc = await self.get(path)
        resources = doc.get("resources") or []
        names = {str(res.get("name", "")) for res in resources}
        for res in resources:
            name = str(res.get("name", ""))
            if res.get("kind") == kind and "/" not in name:
                return ResourceInfo(group, version, kind, name, bool(res.get("namespaced")), f"{name}/status" in names)
        gv = f"{group}/{version}" if group else version
        raise ApiError(404, "NotFound", f"the server has no resource of kind {kind} in {gv}")

    async def watch(
        self,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """The events of a WATCH on the collection ``path``, one dict per event.

        Raises :class:`Gone` when the server answers 410 (before or during the stream).
        """
        query = {"watch": "true", "allowWatchBookmarks": "true", **(params or {})}
        if timeout_seconds is not None:
            query["timeoutSeconds"] = str(timeout_seconds)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None)
        async with self.session().get(
            self.url(path),
            params=query,
            headers=self.headers({"Accept": JSON}),
            timeout=timeout,
            ssl=self._ssl_arg(),
            proxy=self._proxy,
        ) as resp:
            if resp.status >= 400:
                raw = await resp.read()
                raise ApiError.from_response(resp.status, raw)
            async for line in _lines(resp.content):
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise ApiError.from_status(int(status.get("code") or 500), status)
                yield event


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Non-empty lines of a newline-delimited stream (the last one may lack its newline)."""
    buf = b""
    while True:
        try:
            chunk = await stream.readany()
        except (aiohttp.ClientPayloadError, asyncio.IncompleteReadError):
            return
        if not chunk:
            break
        buf += chunk
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            line = buf[start:nl]
            start = nl + 1
            if line.strip():
                yield line
        buf = buf[start:]
    if buf.strip():
        yield buf
