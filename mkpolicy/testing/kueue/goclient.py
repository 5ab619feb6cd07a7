"""The client Kueue builds for a worker, byte for byte where the bytes matter.

Kueue (``multikueuecluster.go``, ``newClientWithWatch``) builds a controller-runtime
client (``client.NewWithWatch``, controller-runtime v0.24 in Kueue v0.19.2) on client-go
v0.36 from the worker's kubeconfig. What that puts on the wire, and what this module
sends the same way:

- **Requests per client kind** (``pkg/client/apiutil/apimachinery.go`` ``createRestConfig``,
  ``client-go/dynamic``, ``client-go/metadata``, ``client-go/rest/request.go``
  ``setAcceptHeader``): typed Kueue objects (Workloads) ``Accept: application/json, */*``;
  unstructured objects (every external framework) ``Accept: application/json``;
  metadata-only reads the ``PartialObjectMetadata`` Accept (:data:`METADATA_ACCEPT`).
  Bodies are JSON (``Content-Type: application/json``; merge patches
  ``application/merge-patch+json``); an unstructured body is encoded by Go's
  ``json.Encoder``: keys sorted, ``<``, ``>``, ``&`` escaped, a final newline
  (:func:`go_json`).
- **Query strings** are Go's ``url.Values.Encode``: keys sorted, values escaped by
  ``QueryEscape`` (a label selector goes out as ``kueue.x-k8s.io%2Fmultikueue-origin%3D...``).
- **Rate limits** (``rest/config.go``: ``DefaultQPS`` 5, ``DefaultBurst`` 10): every REST
  client — one per kind and client kind (typed, unstructured) plus one metadata client —
  has its own token bucket; watches are not rate-limited (``Request.Watch``).
- **Discovery** (controller-runtime ``apiutil/restmapper.go``, client-go
  ``discovery_client.go``): lazy, on the first request of a client: ``GET /api`` and
  ``GET /apis`` asking for aggregated discovery (:data:`DISCOVERY_ACCEPT`); against a
  server without it, ``GET /apis/<group>/<version>`` for each version used. A kind not
  served is a "no matches for kind" error. Never ``/version``.
- **User-Agent** ``manager/v0.0.0 (linux/amd64) kubernetes/$Format`` (client-go's
  ``DefaultKubernetesUserAgent`` in a binary named ``manager`` built without client-go's
  version stamps); ``Accept-Encoding: gzip`` (Go's transport); HTTP/1.1 (aiohttp offers
  no h2, nor does the sidecar).

Not reproduced: the JSON field order of typed objects (Go's struct order; this client
sorts keys), client-go's retries of 429/5xx with ``Retry-After`` (Kueue's work queue
retries instead, as it does here), HTTP/2.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import aiohttp
import yarl

from mkpolicy.testing.kueue.kubeconfig import RemoteConfig

JSON = "application/json"
TYPED_ACCEPT = "application/json, */*"
#: What controller-runtime asks for client-go's own (built-in) types: protobuf
#: (``pkg/client/apiutil/apimachinery.go`` ``createRestConfig``; client-go ``rest/request.go``).
PROTOBUF_ACCEPT = "application/vnd.kubernetes.protobuf, */*"
METADATA_ACCEPT = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)
METADATA_LIST_ACCEPT = METADATA_ACCEPT.replace("PartialObjectMetadata;", "PartialObjectMetadataList;")
DISCOVERY_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
MERGE_PATCH = "application/merge-patch+json"
USER_AGENT = "manager/v0.0.0 (linux/amd64) kubernetes/$Format"

#: ``builtin``: a typed client of a client-go scheme type (batch/v1 Job, Pod, StatefulSet), protobuf.
ClientKind = Literal["typed", "builtin", "unstructured", "metadata", "discovery"]


@dataclass(frozen=True)
class Gvk:
    """A group, version and kind."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """Kueue's adapter key: ``schema.GroupVersionKind.String()``."""
        return f"{self.api_version}, Kind={self.kind}"

    @classmethod
    def of(cls, api_version: str, kind: str) -> Gvk:
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)


WORKLOAD = Gvk("kueue.x-k8s.io", "v1beta2", "Workload")


def go_json(value: Any, *, newline: bool = True) -> bytes:
    """``value`` as Go's ``json.Encoder`` writes a map: sorted keys, HTML characters escaped."""
    text = json.dumps(_go_numbers(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return (text + ("\n" if newline else "")).encode("utf-8")


def _go_numbers(value: Any) -> Any:
    # Go writes an integral float64 without a fraction ("2", not "2.0").
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: _go_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_numbers(v) for v in value]
    return value


def query_string(params: Mapping[str, str]) -> str:
    """Go's ``url.Values.Encode``: sorted keys, ``QueryEscape``d values."""
    return "&".join(f"{quote(k, safe='')}={quote(v, safe='').replace('%20', '+')}" for k, v in sorted(params.items()))


class ApiStatusError(Exception):
    """A non-2xx answer (``apierrors.StatusError``), or a transport failure (``code`` 0)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}" if code else message)
        self.code = code
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        """``apierrors.IsNotFound``."""
        return self.code == 404 or self.reason == "NotFound"

    @classmethod
    def from_body(cls, code: int, raw: bytes) -> ApiStatusError:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Status":
            return cls(code, str(body.get("reason") or ""), str(body.get("message") or ""))
        return cls(code, "", raw[:200].decode("utf-8", "replace") or f"the server answered {code}")


class DiscoveryError(ApiStatusError):
    """Discovery failed (controller-runtime ``pkg/client/apiutil/restmapper.go``: "failed to get
    server groups: %w"). client-go's discovery reads answers with ``Result.Raw()``, which never
    decodes a ``Status`` body: a non-2xx answer is ``newUnstructuredResponseError``
    (``rest/request.go``), i.e. apimachinery's ``NewGenericServerResponse``
    (``pkg/api/errors/errors.go``, v0.36.2) with the server's message "unknown" for a JSON body
    and no resource: the code's generic text, the server's own message lost."""

    def __init__(self, cause: ApiStatusError) -> None:
        message = cause.message if cause.code == 0 else generic_server_response(cause.code)
        super().__init__(cause.code, cause.reason, f"failed to get server groups: {message}")

    def __str__(self) -> str:
        return self.message


#: ``NewGenericServerResponse``'s text per status code (the ones that ignore the server's message).
_GENERIC = {
    409: "the server reported a conflict",
    404: "the server could not find the requested resource",
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    405: "the server does not allow this method on the requested resource",
    406: "the server was unable to respond with a content type that the client supports",
    422: "the server rejected our request due to an error in our request",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be processing the request",
    429: "the server has received too many requests and has asked us to try again later",
}


def generic_server_response(code: int, server_message: str = "unknown") -> str:
    """``NewGenericServerResponse``'s message for ``code`` (no resource named)."""
    if code in _GENERIC:
        return _GENERIC[code]
    if code in (403, 415):
        return server_message
    if code >= 500:
        return f'an error on the server ("{server_message}") has prevented the request from succeeding'
    return f"the server responded with the status code {code} but did not return more information"


class NoKindMatch(ApiStatusError):
    """``meta.NoKindMatchError``: the server does not serve the kind."""

    def __init__(self, gvk: Gvk) -> None:
        super().__init__(0, "", f'no matches for kind "{gvk.kind}" in version "{gvk.api_version}"')


@dataclass
class Sent:
    """One request as it went out, and how it ended."""

    target: str
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes | None
    at: float
    status: int | None = None
    error: str | None = None
    #: For a watch: when it ended (None while open).
    ended: float | None = None

    @property
    def url(self) -> str:
        return self.path + (f"?{self.query}" if self.query else "")

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def line(self) -> str:
        """``METHOD path?query -> status`` (a compact, stable summary)."""
        return f"{self.method} {self.url} -> {self.status if self.status is not None else self.error}"


@dataclass
class Wire:
    """Every request the model sent, in order; waiters are woken on each new one."""

    sent: list[Sent] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, record: Sent) -> None:
        self.sent.append(record)
        self.touch()

    def touch(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def to(self, target: str) -> list[Sent]:
        """The requests sent to ``target`` (a worker's name, or ``manager``)."""
        return [s for s in self.sent if s.target == target]


class TokenBucket:
    """``flowcontrol.NewTokenBucketRateLimiter``: ``burst`` tokens, refilled at ``qps``; a
    request waits for its token (golang.org/x/time/rate ``Wait``)."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()

    async def wait(self) -> float:
        """Take a token; returns how long it waited for it."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        delay = -self._tokens / self.qps
        await self._sleep(delay)
        return delay


def ssl_context(config: RemoteConfig) -> ssl.SSLContext | None:
    """client-go's TLS config: the CA (or the system roots), the client certificate."""
    if not config.server.lower().startswith("https://"):
        return None
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if config.ca_pem:
        ctx.load_verify_locations(cadata=config.ca_pem.decode("ascii", "replace"))
    if config.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if config.client_cert_pem and config.client_key_pem:
        with tempfile.TemporaryDirectory(prefix="kueue-model-tls-") as tmp:
            cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert.write_bytes(config.client_cert_pem)
            key.write_bytes(config.client_key_pem)
            key.chmod(0o600)
            ctx.load_cert_chain(str(cert), str(key))
    return ctx


@dataclass(frozen=True)
class Resource:
    """What the REST mapper knows of a kind."""

    plural: str
    namespaced: bool


class GoClient:
    """One controller-runtime client for one API server (rebuilt by Kueue on every reconnect)."""

    def __init__(
        self,
        config: RemoteConfig,
        target: str,
        wire: Wire,
        *,
        qps: float | None = 5.0,
        burst: int = 10,
        timeout: float = 30.0,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.target = target
        self.wire = wire
        self.qps = qps
        self.burst = burst
        self.timeout = timeout
        self._limiters: dict[tuple[ClientKind, Gvk | None], TokenBucket] = {}
        self._ssl = ssl_context(config)
        self._session: aiohttp.ClientSession | None = None
        self._resources: dict[Gvk, Resource] | None = None
        self._aggregated = False
        self._discovery = asyncio.Lock()  # the REST mapper's mutex: one discovery at a time
        self._on_close = on_close

    # -- plumbing ---------------------------------------------------------------------

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else False, limit=100)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                auto_decompress=True,
                skip_auto_headers={"User-Agent", "Accept-Encoding", "Accept", "Content-Type"},
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _limiter(self, kind: ClientKind, gvk: Gvk | None) -> TokenBucket | None:
        if kind == "discovery" or self.qps is None:
            return None
        key = (kind, None if kind == "metadata" else gvk)
        bucket = self._limiters.get(key)
        if bucket is None:
            bucket = self._limiters[key] = TokenBucket(self.qps, self.burst)
        return bucket

    def _headers(self, accept: str, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": USER_AGENT, "Accept-Encoding": "gzip"}
        if content_type:
            headers["Content-Type"] = content_type
        if self.config.token:
            headers["Authorization"] = f"Bearer {self.config.token}"
        return headers

    def _request_kwargs(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.config.proxy_url:
            extra["proxy"] = self.config.proxy_url
        if self.config.tls_server_name:
            extra["server_hostname"] = self.config.tls_server_name
        return extra

    async def request(
        self,
        method: str,
        path: str,
        *,
        kind: ClientKind,
        gvk: Gvk | None = None,
        accept: str,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request (after its rate limiter); returns status, headers and body.

        Raises :class:`ApiStatusError` for a non-2xx answer (code 0 when nothing came back).
        """
        limiter = self._limiter(kind, gvk)
        if limiter is not None:
            await limiter.wait()
        headers = self._headers(accept, content_type if body is not None else None)
        record, url = self._send(method, path, query_string(params or {}), headers, body)
        try:
            async with self.session().request(
                method, url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=self.timeout),
                **self._request_kwargs(),
            ) as resp:  # fmt: skip
                raw = await resp.read()
                record.status = resp.status
                self.wire.touch()
                if resp.status >= 300:
                    raise ApiStatusError.from_body(resp.status, raw)
                return resp.status, dict(resp.headers), raw
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise self._failed(record, exc) from None

    def _send(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes | None
    ) -> tuple[Sent, yarl.URL]:
        """The request recorded on the wire (without its credentials), and its URL."""
        record = Sent(self.target, method, path, query, {k: v for k, v in headers.items() if k != "Authorization"},
                      body, time.monotonic())  # fmt: skip
        self.wire.add(record)
        return record, yarl.URL(self.config.server + path + (f"?{query}" if query else ""), encoded=True)

    def _failed(self, record: Sent, exc: BaseException) -> ApiStatusError:
        """A transport failure: recorded, and the error Kueue sees (code 0)."""
        record.error = f"{type(exc).__name__}: {exc}"
        self.wire.touch()
        return ApiStatusError(0, "", record.error)

    # -- discovery --------------------------------------------------------------------

    async def resource(self, gvk: Gvk) -> Resource:
        """The REST mapping of ``gvk`` (discovery on first use); :class:`NoKindMatch` when not served."""
        async with self._discovery:
            if self._resources is None:
                await self._discover()
            assert self._resources is not None
            found = self._resources.get(gvk)
            if found is None and not self._aggregated:
                found = await self._discover_version(gvk)
        if found is None:
            raise NoKindMatch(gvk)
        return found

    async def _discover(self) -> None:
        resources: dict[Gvk, Resource] = {}
        aggregated = True
        for path in ("/api", "/apis"):
            try:
                _, headers, raw = await self.request("GET", path, kind="discovery", accept=DISCOVERY_ACCEPT)
            except ApiStatusError as exc:
                raise DiscoveryError(exc) from None
            content_type = headers.get("Content-Type", "")
            if "as=APIGroupDiscoveryList" not in content_type:
                aggregated = False
                continue
            for group in json.loads(raw).get("items") or []:
                name = (group.get("metadata") or {}).get("name") or ""
                for version in group.get("versions") or []:
                    for res in version.get("resources") or []:
                        kind = (res.get("responseKind") or {}).get("kind") or ""
                        resources[Gvk(name, version.get("version", ""), kind)] = Resource(
                            res.get("resource", ""), res.get("scope") == "Namespaced"
                        )
        self._resources = resources if aggregated else {}
        self._aggregated = aggregated

    async def _discover_version(self, gvk: Gvk) -> Resource | None:
        path = f"/apis/{gvk.group}/{gvk.version}" if gvk.group else f"/api/{gvk.version}"
        try:
            _, _, raw = await self.request("GET", path, kind="discovery", accept=TYPED_ACCEPT)
        except ApiStatusError as exc:
            if exc.not_found:
                return None
            raise
        assert self._resources is not None
        for res in json.loads(raw).get("resources") or []:
            if "/" not in res.get("name", ""):
                self._resources[Gvk(gvk.group, gvk.version, res.get("kind", ""))] = Resource(
                    res["name"], bool(res.get("namespaced"))
                )
        return self._resources.get(gvk)

    async def path(self, gvk: Gvk, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        """The REST path of a collection, an object or its subresource."""
        res = await self.resource(gvk)
        out = f"/apis/{gvk.group}/{gvk.version}" if gvk.group else f"/api/{gvk.version}"
        if res.namespaced and namespace:
            out += f"/namespaces/{namespace}"
        out += f"/{res.plural}"
        if name:
            out += f"/{name}" + (f"/{sub}" if sub else "")
        return out

    # -- verbs ------------------------------------------------------------------------

    @staticmethod
    def _accept(kind: ClientKind) -> str:
        accepts = {"typed": TYPED_ACCEPT, "builtin": PROTOBUF_ACCEPT, "unstructured": JSON, "metadata": METADATA_ACCEPT}
        return accepts.get(kind, JSON)

    async def get(self, gvk: Gvk, namespace: str | None, name: str, kind: ClientKind) -> dict[str, Any]:
        """``client.Get``: typed, unstructured, or metadata-only (``PartialObjectMetadata``)."""
        path = await self.path(gvk, namespace, name)
        _, _, raw = await self.request("GET", path, kind=kind, gvk=gvk, accept=self._accept(kind))
        result: dict[str, Any] = json.loads(raw)
        return result

    async def create(self, gvk: Gvk, namespace: str | None, obj: Mapping[str, Any], kind: ClientKind) -> dict[str, Any]:
        """``client.Create``: POST the object (no dryRun, no fieldManager)."""
        path = await self.path(gvk, namespace)
        _, _, raw = await self.request(
            "POST", path, kind=kind, gvk=gvk, accept=self._accept(kind), body=go_json(obj), content_type=JSON
        )
        result: dict[str, Any] = json.loads(raw)
        return result

    async def update(
        self, gvk: Gvk, obj: Mapping[str, Any], kind: ClientKind, sub: str | None = None
    ) -> dict[str, Any]:
        """``client.Update`` (``client.Status().Update`` with ``sub="status"``): PUT the object."""
        meta = obj.get("metadata") or {}
        path = await self.path(gvk, meta.get("namespace"), meta.get("name"), sub)
        _, _, raw = await self.request(
            "PUT", path, kind=kind, gvk=gvk, accept=self._accept(kind), body=go_json(obj), content_type=JSON
        )
        result: dict[str, Any] = json.loads(raw)
        return result

    async def patch_status(
        self, gvk: Gvk, namespace: str | None, name: str, patch: Mapping[str, Any], kind: ClientKind
    ) -> dict[str, Any]:
        """``client.Status().Patch`` with a JSON merge patch."""
        path = await self.path(gvk, namespace, name, "status")
        _, _, raw = await self.request(
            "PATCH", path, kind=kind, gvk=gvk, accept=self._accept(kind), body=go_json(patch, newline=False),
            content_type=MERGE_PATCH,
        )  # fmt: skip
        result: dict[str, Any] = json.loads(raw)
        return result

    async def delete(
        self, gvk: Gvk, namespace: str | None, name: str, kind: ClientKind, propagation: str | None = None
    ) -> None:
        """``client.Delete``: DELETE with a ``DeleteOptions`` body (the propagation policy, if any)."""
        path = await self.path(gvk, namespace, name)
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            options["propagationPolicy"] = propagation
        body = json.dumps(options, separators=(",", ":")).encode() + b"\n"
        await self.request("DELETE", path, kind=kind, gvk=gvk, accept=self._accept(kind), body=body, content_type=JSON)

    async def list(self, gvk: Gvk, labels: Mapping[str, str], kind: ClientKind) -> list[dict[str, Any]]:
        """``client.List`` with ``MatchingLabels`` (all namespaces)."""
        path = await self.path(gvk, None)
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        _, _, raw = await self.request(
            "GET", path, kind=kind, gvk=gvk, accept=self._accept(kind), params={"labelSelector": selector}
        )
        items: list[dict[str, Any]] = json.loads(raw).get("items") or []
        return items

    async def watch(
        self,
        gvk: Gvk,
        labels: Mapping[str, str],
        kind: ClientKind,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> Watch:
        """``client.Watch`` with ``MatchingLabels`` and ``AllowWatchBookmarks`` (Kueue's: no
        resourceVersion, no timeout); returns once the server has answered."""
        path = await self.path(gvk, namespace)
        params = {"allowWatchBookmarks": "true", "watch": "true"}
        if labels:
            params["labelSelector"] = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        if resource_version:
            params["resourceVersion"] = resource_version
        headers = self._headers(self._accept(kind), None)
        record, url = self._send("GET", path, query_string(params), headers, None)
        try:
            resp = await self.session().get(
                url, headers=headers, timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None),
                **self._request_kwargs(),
            )  # fmt: skip
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            record.ended = time.monotonic()
            raise self._failed(record, exc) from None
        record.status = resp.status
        self.wire.touch()
        if resp.status >= 300:
            raw = await resp.read()
            resp.release()
            record.ended = time.monotonic()
            raise ApiStatusError.from_body(resp.status, raw)
        return Watch(resp, record, self.wire)


class Watch:
    """An open watch: its events (``{"type", "object"}``) until the stream ends."""

    def __init__(self, resp: aiohttp.ClientResponse, record: Sent, wire: Wire) -> None:
        self._resp = resp
        self.record = record
        self._wire = wire

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """Decoded events (client-go's json.Framer: JSON values back to back). A protobuf stream
        (a real API server's answer to a built-in kind's watch) is read to its end, its events
        not decoded: the model has no use for them."""
        decoder = json.JSONDecoder()
        buf = ""
        protobuf = self._resp.content_type.startswith("application/vnd.kubernetes.protobuf")
        try:
            while True:
                try:
                    chunk = await self._resp.content.readany()
                except (aiohttp.ClientError, OSError, asyncio.IncompleteReadError):
                    return
                if not chunk:
                    return
                if protobuf:
                    continue
                buf += chunk.decode("utf-8", "replace")
                while True:
                    stripped = buf.lstrip()
                    if not stripped:
                        buf = ""
                        break
                    try:
                        event, end = decoder.raw_decode(stripped)
                    except ValueError:
                        buf = stripped
                        break
                    buf = stripped[end:]
                    if isinstance(event, dict):
                        yield event
        finally:
            self.close()

    def close(self) -> None:
        if self.record.ended is None:
            self.record.ended = time.monotonic()
            self._wire.touch()
        self._resp.close()
