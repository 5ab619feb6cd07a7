"""One worker endpoint: authenticate Kueue, transform policy kinds, pass everything else through.

Per request (DESIGN.md §3):

* not a policy kind: streamed to the worker and back byte-for-byte (watches included);
* ``create`` of a policy kind: the policy's ``create`` of the manager's object is sent,
  never Kueue's body; any failure answers a Kubernetes ``Status`` and nothing is created;
* ``get``/``list``/``watch`` (and delete responses): objects come back with
  ``status`` = what the policy's ``sync`` makes of the manager's status;
* ``update``/``patch`` of a policy kind, or another version of its resource: refused
  (Kueue never sends them; forwarding them would bypass the policy).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import aiohttp
from aiohttp import web
from yarl import URL

from mkpolicy.kube.client import ApiError
from mkpolicy.sidecar.endpoints import Credentials
from mkpolicy.sidecar.logs import fields
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.paths import Target, parse_target
from mkpolicy.sidecar.policies import Entry, PolicySet
from mkpolicy.sidecar.relay import copy_response, describe, finish, pump, ref, status_response
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.transform import Outcome, measure, rewrite_batch, worker_copy
from mkpolicy.sidecar.upstream import HOP_BY_HOP, Upstream

log = logging.getLogger("mkpolicy.sidecar.proxy")

T = TypeVar("T")

#: Read timeout for requests that are not watches (seconds without a byte from the worker).
READ_TIMEOUT = 60.0
#: Headers of a worker response not copied onto a re-encoded (transformed) body.
_REENCODED = HOP_BY_HOP | {"content-type", "content-encoding"}
#: Look-ups of manager objects run concurrently at most this many at a time.
_LOOKUPS = 16
#: Pass-through answers up to this size (with a Content-Length) are relayed in one write.
_BUFFERED = 1024 * 1024


class Hub(Protocol):
    """What a worker endpoint needs from the sidecar."""

    metrics: Metrics
    origin: str
    credentials: Credentials

    @property
    def policies(self) -> PolicySet | None:
        """The active policy set (None before the first one loads)."""

    async def manager_object(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The manager's object (cache or direct read); None when absent, ApiError/OSError when unreadable."""

    def cached_manager_object(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The manager's object if the watch cache has it (never waits; do not modify it)."""

    async def offload(self, key: object, fn: Callable[..., T], *args: Any) -> T:
        """Run policy work for the adapter ``key`` (off the event loop unless proven fast)."""

    def watch_opened(self, cluster: str, response: aiohttp.ClientResponse) -> None:
        """A watch started (shutdown closes it cleanly)."""

    def watch_closed(self, cluster: str, response: aiohttp.ClientResponse) -> None:
        """A watch ended."""


class WorkerEndpoint:
    """The request handler of one worker's endpoint."""

    def __init__(self, hub: Hub, upstream: Upstream) -> None:
        self.hub = hub
        self.upstream = upstream
        self.cluster = upstream.name
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    # -- entry point ----------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one request."""
        start = time.perf_counter()
        target = parse_target(request.method, request.path, request.query)
        verb = target.verb if target is not None else "nonresource"
        policy = ""
        metrics = self.hub.metrics
        metrics.inflight.inc()
        code = 500
        try:
            if not self.hub.credentials.check_token(self.cluster, request.headers.get("Authorization")):
                raise StatusError(401, "Unauthorized: expected the bearer token of this sidecar endpoint")
            if "upgrade" in request.headers.get("Connection", "").lower():
                raise StatusError(
                    400, "mkpolicy sidecar: connection upgrades (exec, attach, port-forward) are not proxied"
                )
            policies = self.hub.policies
            if policies is None:
                raise StatusError(503, "mkpolicy sidecar: no policy set is active yet; retry shortly")
            entry = policies.lookup(target.group, target.resource) if target is not None else None
            if entry is None or target is None:
                response = await self._passthrough(request, target, start)
            else:
                policy = entry.name
                response = await self._transformed(request, target, entry, start)
            code = response.status
            return response
        except StatusError as exc:
            code = exc.code
            if exc.code >= 500 or exc.code == 403:
                log.warning(
                    "request refused",
                    extra=fields(
                        cluster=self.cluster,
                        policy=policy,
                        verb=verb,
                        path=request.path,
                        code=exc.code,
                        error=exc.message,
                    ),
                )
            return status_response(exc)
        finally:
            metrics.inflight.dec()
            key = (policy, verb, code)
            counters = self._request_children.get(key)
            if counters is None:
                counters = (
                    metrics.requests.labels(self.cluster, policy, verb, str(code)),
                    metrics.request_seconds.labels(self.cluster, policy, verb),
                )
                self._request_children[key] = counters
            counters[0].inc()
            elapsed = time.perf_counter() - start
            if verb != "watch":
                counters[1].observe(elapsed)
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "request",
                    extra=fields(
                        cluster=self.cluster,
                        policy=policy,
                        verb=verb,
                        method=request.method,
                        path=request.path,
                        code=code,
                        ms=round(elapsed * 1000, 2),
                    ),
                )

    # -- pass-through -----------------------------------------------------------------------
    async def _passthrough(self, request: web.Request, target: Target | None, start: float) -> web.StreamResponse:
        watching = target is not None and target.verb == "watch"
        body = await request.read() if request.body_exists else None
        headers = self.upstream.headers(request.headers)  # type: ignore[arg-type]
        up = await self._send(request.method, request.raw_path, headers, body, watching)
        try:
            length = up.content_length
            if not watching and length is not None and length <= _BUFFERED and request.method != "HEAD":
                # a small, complete answer: relayed in one write (same bytes, fewer syscalls)
                try:
                    raw = await up.read()
                except (TimeoutError, aiohttp.ClientError) as exc:
                    self.hub.metrics.upstream_errors.labels(self.cluster, "read").inc()
                    raise StatusError(
                        503, f"mkpolicy sidecar: worker {self.cluster} broke off: {describe(exc)}"
                    ) from None
                return copy_response(up, raw)
            response = web.StreamResponse(status=up.status, reason=up.reason)
            for key, value in up.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    response.headers.add(key, value)
            if length is not None and not watching and request.method != "HEAD":
                response.content_length = up.content_length
            await response.prepare(request)
            if watching:
                self.hub.metrics.request_seconds.labels(self.cluster, "", "watch").observe(time.perf_counter() - start)
                self.hub.watch_opened(self.cluster, up)
                self.hub.metrics.active_watches.labels(self.cluster).inc()
            try:
                complete = await pump(up, response, self._relay_chunk)
            finally:
                if watching:
                    self.hub.watch_closed(self.cluster, up)
                    self.hub.metrics.active_watches.labels(self.cluster).dec()
            await finish(request, response, complete or watching)
            return response
        finally:
            up.release()

    @staticmethod
    async def _relay_chunk(chunk: bytes) -> bytes:
        return chunk

    async def _send(
        self, method: str, raw_path: str, headers: Any, body: bytes | None, watching: bool
    ) -> aiohttp.ClientResponse:
        """Send a request to the worker; StatusError 503 when it cannot be reached."""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None if watching else READ_TIMEOUT)
        try:
            return await self.upstream.session.request(
                method,
                URL(self.upstream.url(raw_path), encoded=True),
                headers=headers,
                data=body,
                allow_redirects=False,
                timeout=timeout,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            reason = "timeout" if isinstance(exc, asyncio.TimeoutError) else "connect"
            self.hub.metrics.upstream_errors.labels(self.cluster, reason).inc()
            raise StatusError(503, f"mkpolicy sidecar: worker {self.cluster} is unreachable: {describe(exc)}") from None

    # -- policy kinds --------------------------------------------------------------------------
    async def _transformed(
        self, request: web.Request, target: Target, entry: Entry, start: float
    ) -> web.StreamResponse:
        gvk = entry.adapter.gvk
        if target.version != entry.info.version:
            raise StatusError(
                403,
                f"mkpolicy sidecar: policy {entry.name} covers {entry.info.resource}.{entry.info.group} "
                f"at version {entry.info.version} only; found a request for {target.version}",
            )
        verb = target.verb
        if verb == "create" and target.subresource is None:
            return await self._create(request, target, entry)
        if verb in ("update", "patch"):
            raise StatusError(
                403,
                f"mkpolicy sidecar: {verb} of {gvk.kind} objects is not proxied (policy {entry.name}); "
                "Kueue only creates, reads, watches and deletes them",
            )
        if verb == "watch":
            return await self._watch(request, entry, start)
        if verb in ("get", "list", "delete", "deletecollection"):
            return await self._read(request, target, entry)
        raise StatusError(
            405, f"mkpolicy sidecar: {request.method} {target.verb} is not supported for policy kind {gvk.kind}"
        )

    async def _create(self, request: web.Request, target: Target, entry: Entry) -> web.StreamResponse:
        adapter = entry.adapter
        gvk = adapter.gvk
        ctype = request.headers.get("Content-Type", "application/json").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise StatusError(415, f"mkpolicy sidecar: expected an application/json body for {gvk.kind}; found {ctype}")
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            raise StatusError(400, f"mkpolicy sidecar: the body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise StatusError(400, f"mkpolicy sidecar: expected a {gvk.kind} object; found {type(body).__name__}")
        if body.get("apiVersion") != gvk.api_version or body.get("kind") != gvk.kind:
            raise StatusError(
                400,
                f"mkpolicy sidecar: expected apiVersion {gvk.api_version!r} and kind {gvk.kind!r}; "
                f"found {body.get('apiVersion')!r}, {body.get('kind')!r}",
            )
        meta: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise StatusError(
                400, f"mkpolicy sidecar: {gvk.kind} objects need metadata.name (generateName is not supported)"
            )
        namespace = target.namespace
        if entry.info.namespaced and meta.get("namespace") not in (None, namespace):
            raise StatusError(
                400,
                f"mkpolicy sidecar: metadata.namespace {meta.get('namespace')!r} differs from the path's {namespace!r}",
            )
        manager = await self._manager(entry, namespace, name)
        if manager is None:
            raise StatusError(
                404,
                f"mkpolicy sidecar: the manager cluster has no {gvk.kind} {ref(namespace, name)}; "
                f"policy {entry.name} builds worker copies from it",
                details={"name": name, "group": gvk.group, "kind": entry.info.resource},
            )
        worker = await self._timed(entry, "create", worker_copy, entry.adapter, manager, body, self.cluster)
        headers = self.upstream.headers(request.headers, force_json=True)  # type: ignore[arg-type]
        headers["Content-Type"] = "application/json"
        up = await self._send("POST", request.raw_path, headers, json.dumps(worker).encode(), False)
        return await self._relay_objects(up, entry, manager_hint=manager, strict=False)

    async def _read(self, request: web.Request, target: Target, entry: Entry) -> web.StreamResponse:
        body = await request.read() if request.body_exists else None
        headers = self.upstream.headers(request.headers, force_json=True)  # type: ignore[arg-type]
        up = await self._send(request.method, request.raw_path, headers, body, False)
        strict = target.verb in ("get", "list")
        return await self._relay_objects(up, entry, manager_hint=None, strict=strict)

    async def _relay_objects(
        self, up: aiohttp.ClientResponse, entry: Entry, *, manager_hint: dict[str, Any] | None, strict: bool
    ) -> web.StreamResponse:
        """The worker's answer with every object of the policy kind rewritten (errors relayed as sent)."""
        try:
            try:
                raw = await up.read()
            except (TimeoutError, aiohttp.ClientError) as exc:
                self.hub.metrics.upstream_errors.labels(self.cluster, "read").inc()
                raise StatusError(503, f"mkpolicy sidecar: worker {self.cluster} broke off: {describe(exc)}") from None
            if up.status >= 300:
                return copy_response(up, raw)
            try:
                doc = json.loads(raw)
            except ValueError:
                raise StatusError(
                    502, f"mkpolicy sidecar: worker {self.cluster} sent a body that is not JSON"
                ) from None
            doc = await self._rewrite_document(doc, entry, manager_hint, strict)
            response = web.Response(status=up.status, body=json.dumps(doc, separators=(",", ":")).encode())
            for key, value in up.headers.items():
                if key.lower() not in _REENCODED:
                    response.headers.add(key, value)
            response.content_type = "application/json"
            return response
        finally:
            up.release()

    async def _rewrite_document(self, doc: Any, entry: Entry, manager_hint: dict[str, Any] | None, strict: bool) -> Any:
        gvk = entry.adapter.gvk
        if not isinstance(doc, dict):
            return doc
        if doc.get("kind") == gvk.kind:
            objects = [doc]
        elif doc.get("kind") == f"{gvk.kind}List" or (
            isinstance(doc.get("items"), list) and doc.get("kind") != "Status"
        ):
            objects = [o for o in doc.get("items") or [] if isinstance(o, dict)]
        else:
            return doc
        managers = await self._managers(entry, objects, manager_hint)
        results = await self._timed_batch(entry, "sync", objects, managers, strict)
        if objects and objects[0] is doc:
            return results[0]
        doc = dict(doc)
        doc["items"] = results
        return doc

    # -- watches ---------------------------------------------------------------------------------
    async def _watch(self, request: web.Request, entry: Entry, start: float) -> web.StreamResponse:
        headers = self.upstream.headers(request.headers, force_json=True)  # type: ignore[arg-type]
        up = await self._send("GET", request.raw_path, headers, None, True)
        if up.status != 200:
            return await self._relay_objects(up, entry, manager_hint=None, strict=False)
        metrics = self.hub.metrics
        try:
            response = web.StreamResponse(status=200)
            for key, value in up.headers.items():
                if key.lower() not in _REENCODED:
                    response.headers.add(key, value)
            response.content_type = "application/json"
            await response.prepare(request)
            metrics.request_seconds.labels(self.cluster, entry.name, "watch").observe(time.perf_counter() - start)
            self.hub.watch_opened(self.cluster, up)
            metrics.active_watches.labels(self.cluster).inc()
            pending = b""

            async def relay(chunk: bytes) -> bytes:
                nonlocal pending
                pending += chunk
                cut = pending.rfind(b"\n")
                if cut < 0:
                    return b""
                lines, pending = pending[: cut + 1], pending[cut + 1 :]
                return await self._rewrite_events(lines, entry)

            try:
                complete = await pump(up, response, relay)
                if complete and pending.strip():  # a last event without its newline; a broken one is dropped
                    await response.write(await self._rewrite_events(pending + b"\n", entry))
            except ConnectionResetError:
                pass
            finally:
                self.hub.watch_closed(self.cluster, up)
                metrics.active_watches.labels(self.cluster).dec()
            # the worker ended the watch (or shutdown closed it): end ours cleanly, the client re-watches
            await finish(request, response, True)
            return response
        finally:
            up.release()

    async def _rewrite_events(self, lines: bytes, entry: Entry) -> bytes:
        events: list[tuple[bytes, dict[str, Any] | None]] = []
        for line in lines.split(b"\n"):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                events.append((line, None))
                continue
            obj = event.get("object") if isinstance(event, dict) else None
            if (
                isinstance(obj, dict)
                and event.get("type") in ("ADDED", "MODIFIED", "DELETED")
                and obj.get("kind", entry.adapter.gvk.kind) == entry.adapter.gvk.kind
            ):
                events.append((line, event))
            else:
                events.append((line, None))
        objects = [e["object"] for _, e in events if e is not None]
        if objects:
            managers = await self._managers(entry, objects, None)
            rewritten = iter(await self._timed_batch(entry, "sync", objects, managers, False))
            self.hub.metrics.watch_events.labels(self.cluster, entry.name).inc(len(objects))
        out = []
        for line, event in events:
            if event is None:
                out.append(line)
            else:
                new = {"type": event["type"], "object": next(rewritten)}
                out.append(json.dumps(new, separators=(",", ":")).encode())
        return b"\n".join(out) + b"\n" if out else b""

    # -- manager objects and transforms ------------------------------------------------------------
    async def _manager(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            return await self.hub.manager_object(entry, namespace, name)
        except (TimeoutError, ApiError, aiohttp.ClientError, OSError) as exc:
            self.hub.metrics.upstream_errors.labels("manager", "read").inc()
            raise StatusError(
                503,
                f"mkpolicy sidecar: cannot read {entry.adapter.gvk.kind} {ref(namespace, name)} "
                f"from the manager: {describe(exc)}",
            ) from None

    async def _managers(
        self, entry: Entry, objects: list[dict[str, Any]], hint: dict[str, Any] | None
    ) -> list[dict[str, Any] | Exception | None]:
        """The manager's object for each worker object (an exception where it could not be read).

        The watch cache answers without waiting; misses are read from the manager,
        at most ``_LOOKUPS`` at a time.
        """
        if hint is not None:
            return [hint for _ in objects]
        found: list[dict[str, Any] | Exception | None] = []
        missing: list[int] = []
        for i, obj in enumerate(objects):
            meta = obj.get("metadata") or {}
            cached = self.hub.cached_manager_object(entry, meta.get("namespace"), str(meta.get("name") or ""))
            found.append(cached)
            if cached is None:
                missing.append(i)
        if not missing:
            return found
        limit = asyncio.Semaphore(_LOOKUPS)

        async def one(obj: dict[str, Any]) -> dict[str, Any] | Exception | None:
            meta = obj.get("metadata") or {}
            async with limit:
                try:
                    return await self._manager(entry, meta.get("namespace"), str(meta.get("name") or ""))
                except StatusError as exc:
                    return exc

        for i, value in zip(missing, await asyncio.gather(*(one(objects[i]) for i in missing)), strict=True):
            found[i] = value
        return found

    async def _timed(
        self, entry: Entry, phase: str, fn: Callable[..., tuple[dict[str, Any], Outcome]], *args: Any
    ) -> dict[str, Any]:
        obj, outcome, seconds = await self.hub.offload(entry.adapter, measure, fn, *args)
        self._count(entry, phase, outcome, seconds)
        if isinstance(obj, StatusError):
            raise obj
        result: dict[str, Any] = obj
        return result

    async def _timed_batch(
        self, entry: Entry, phase: str, objects: list[dict[str, Any]], managers: list[Any], strict: bool
    ) -> list[dict[str, Any]]:
        for manager in managers:
            if isinstance(manager, StatusError) and strict:
                raise manager
        results = await self.hub.offload(
            entry.adapter, rewrite_batch, entry.adapter, objects, managers, self.cluster, self.hub.origin, strict
        )
        out = []
        for obj, outcome, seconds in results:
            self._count(entry, phase, outcome, seconds)
            if isinstance(obj, StatusError):
                raise obj
            out.append(obj)
        return out

    def _count(self, entry: Entry, phase: str, outcome: Outcome, seconds: float) -> None:
        m = self.hub.metrics
        key = (entry.name, phase, outcome.result)
        children = self._children.get(key)
        if children is None:
            children = (
                m.transforms.labels(self.cluster, entry.name, phase, outcome.result),
                m.transform_seconds.labels(self.cluster, entry.name, phase),
            )
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)
        if outcome.result == "error":
            m.transform_errors.labels(self.cluster, entry.name, phase).inc()
            if outcome.error:
                log.warning(
                    "status write-back withheld",
                    extra=fields(cluster=self.cluster, policy=entry.name, error=outcome.error),
                )
        if outcome.ignored:
            m.ignored_patches.labels(self.cluster, entry.name, phase).inc(len(outcome.ignored))
            for exc in outcome.ignored:
                log.warning(
                    "patch skipped (failurePolicy Ignore)",
                    extra=fields(cluster=self.cluster, policy=entry.name, error=exc.report()),
                )


__all__ = ["Hub", "WorkerEndpoint"]
