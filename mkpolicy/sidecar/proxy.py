"""One worker endpoint: authenticate Kueue, transform what Kueue's adapter reads, pass the rest.

Kueue's generic adapter reads a worker's copy of a job through exactly two requests whose
bodies matter (see docs/architecture.md, "The wire"), and only those are transformed:

* ``create`` (POST) of a policy kind at the policy's version: the policy's ``create`` of
  the manager's object is sent, never Kueue's body; any failure answers a Kubernetes
  ``Status`` and nothing is created;
* a full JSON ``get`` of a policy kind at the policy's version (the object itself or its
  ``status`` subresource): the object comes back with ``status`` = what the policy's
  ``sync`` makes of the manager's status, so Kueue's "copy the whole status" writes that.

Everything else passes through byte-for-byte (:class:`~mkpolicy.sidecar.forward.Forwarder`):
metadata-only reads (Kueue's ownership check asks for ``PartialObjectMetadata``), tables,
LIST, WATCH (Kueue reads only labels from events), DELETE, other versions' reads, and
every other kind. Refusing any of them would break Kueue: a failed ownership check stops
the removal of worker copies, a failed watch drops the whole worker connection.
Refused: ``update``/``patch`` of a policy kind and writes of its other versions (Kueue
never sends them; forwarding them would bypass the policy), and writes before the first
policy set is active (it is not known yet which kinds are policy kinds).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import aiohttp

from mkpolicy.jsonvalues import dumps_kube, loads_kube
from mkpolicy.kube.client import ApiError
from mkpolicy.sidecar.endpoints import Credentials
from mkpolicy.sidecar.forward import Forwarder
from mkpolicy.sidecar.http1 import RequestHead
from mkpolicy.sidecar.listener import READ_TIMEOUT, Exchange
from mkpolicy.sidecar.logs import fields
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.paths import Target, decode_target, target_of
from mkpolicy.sidecar.policies import Entry, PolicySet
from mkpolicy.sidecar.relay import describe, ref, relay_error, respond_json
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.transform import Outcome, measure, rewrite_status, worker_copy
from mkpolicy.sidecar.upstream import Upstream, WorkerConnection

log = logging.getLogger("mkpolicy.sidecar.proxy")

T = TypeVar("T")

#: Largest request body of a policy kind read (bytes).
MAX_BODY = 16 * 1024 * 1024
#: Verbs that write (refused for policy kinds unless transformed, and before policies load).
_WRITES = frozenset({"create", "update", "patch"})


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

    def cached_manager_object(
        self, entry: Entry, namespace: str | None, name: str, *, count: bool = True
    ) -> dict[str, Any] | None:
        """The manager's object if the watch cache has it (never waits; do not modify it); counts a hit."""

    def inline(self, key: object, items: int = 1) -> bool:
        """Whether policy work on ``items`` objects for the adapter ``key`` runs on the event loop now."""

    def run_here(self, key: object, fn: Callable[..., T], *args: Any, items: int = 1) -> T:
        """Run policy work on the event loop (when :meth:`inline` says so)."""

    async def offload(self, key: object, fn: Callable[..., T], *args: Any, items: int = 1) -> T:
        """Run policy work on ``items`` objects for the adapter ``key`` (off the event loop unless proven fast)."""


def wants_object(head: RequestHead) -> bool:
    """Whether a GET asks for the object itself, not another representation of it.

    ``Accept`` media types with an ``as=`` parameter ask the API server for a
    ``PartialObjectMetadata`` (Kueue's ownership check) or a ``Table`` (kubectl); the
    server answers with one of those when it can, and they carry no status to rewrite.
    """
    accept = head.fields.get("accept", "")
    return not any(
        param.strip().lower().startswith("as=") for media in accept.split(",") for param in media.split(";")[1:]
    )


class WorkerEndpoint:
    """The request handler of one worker's endpoint."""

    def __init__(self, hub: Hub, upstream: Upstream) -> None:
        self.hub = hub
        self.upstream = upstream
        self.cluster = upstream.name
        self.forward = Forwarder(self, upstream)
        self.fast = self.forward.fast
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    # -- entry point ----------------------------------------------------------------------
    async def handle(self, exchange: Exchange) -> None:
        """Answer one request."""
        await self.answer_request(exchange, None)

    async def answer_request(self, exchange: Exchange, sent: WorkerConnection | None) -> None:
        """Answer ``exchange`` (one whose request the fast path sent on ``sent`` already: from its answer on)."""
        head = exchange.head
        path = head.target.partition("?")[0]
        target = self.target_of(head)
        verb = target.verb if target is not None else "nonresource"
        policy = ""
        code = 500
        if sent is None:
            self.hub.metrics.inflight.inc()  # (the fast path counted its own)
        try:
            entry = self.route(head, target)
            if entry is None or target is None:
                code = await self.forward.passthrough(exchange, target, sent)
            else:
                policy = entry.name
                if target.verb == "create":
                    code = await self._create(exchange, target, entry)
                else:
                    code = await self._get(exchange, entry, sent)
        except StatusError as exc:
            code = exc.code
            self.refuse(exchange, exc, policy, verb, path)
        except ConnectionError:
            code = 499  # the client went away
        finally:
            self.record(exchange, path, policy, verb, code)

    @staticmethod
    def target_of(head: RequestHead) -> Target | None:
        """The resource and verb a request addresses (None: discovery and other non-resource paths)."""
        return target_of(head.method, head.decoded if head.decoded is not None else decode_target(head.target))

    def route(self, head: RequestHead, target: Target | None) -> Entry | None:
        """The policy that transforms a request (None: pass-through); StatusError when it is refused."""
        if not self.hub.credentials.check_token(self.cluster, head.fields.get("authorization")):
            raise StatusError(401, "Unauthorized: expected the bearer token of this sidecar endpoint")
        if "upgrade" in head.fields or "upgrade" in head.fields.get("connection", "").lower():
            raise StatusError(400, "mkpolicy sidecar: connection upgrades (exec, attach, port-forward) are not proxied")
        if target is None:
            return None
        verb = target.verb
        policies = self.hub.policies
        if policies is None:
            if verb in _WRITES:
                raise StatusError(503, "mkpolicy sidecar: no policy set is active yet; retry shortly")
            return None
        entry = policies.lookup(target.group, target.resource)
        if entry is None:
            return None
        info = entry.info
        if target.version != info.version:
            if verb in _WRITES:
                raise StatusError(
                    403,
                    f"mkpolicy sidecar: policy {entry.name} covers {info.resource}.{info.group} at version "
                    f"{info.version} only; found a {verb} at {target.version} (Kueue's externalFrameworks "
                    "entry and the policy's framework must name the same version)",
                )
            return None
        if verb in ("update", "patch"):
            raise StatusError(
                403,
                f"mkpolicy sidecar: {verb} of {entry.adapter.gvk.kind} objects is not proxied (policy {entry.name}); "
                "Kueue only creates, reads, watches and deletes them",
            )
        if verb == "create" and target.subresource is None:
            return entry
        if verb == "get" and target.subresource in (None, "status") and wants_object(head):
            return entry
        return None

    def refuse(self, exchange: Exchange, exc: StatusError, policy: str, verb: str, path: str) -> None:
        """Answer a refusal (a Kubernetes ``Status``), logging server-side ones."""
        if exc.code >= 500 or exc.code == 403:
            log.warning(
                "request refused",
                extra=fields(
                    cluster=self.cluster, policy=policy, verb=verb, path=path, code=exc.code, error=exc.message
                ),
            )
        if not exchange.responded:
            exchange.respond_status(exc)

    def record(self, exchange: Exchange, path: str, policy: str, verb: str, code: int) -> None:
        """Count a request (and log it at debug level)."""
        metrics = self.hub.metrics
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
        elapsed = time.perf_counter() - exchange.started
        if verb != "watch":
            counters[1].observe(elapsed)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "request",
                extra=fields(
                    cluster=self.cluster,
                    policy=policy,
                    verb=verb,
                    method=exchange.head.method,
                    path=path,
                    code=code,
                    ms=round(elapsed * 1000, 2),
                ),
            )

    # -- policy kinds --------------------------------------------------------------------------
    async def _create(self, exchange: Exchange, target: Target, entry: Entry) -> int:
        adapter = entry.adapter
        gvk = adapter.gvk
        head = exchange.head
        ctype = head.fields.get("content-type", "application/json").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise StatusError(415, f"mkpolicy sidecar: expected an application/json body for {gvk.kind}; found {ctype}")
        try:
            body = loads_kube(await exchange.read_body(MAX_BODY))
        except ValueError as exc:
            raise StatusError(400, f"mkpolicy sidecar: the body is not JSON: {exc}") from None
        except RecursionError:
            raise StatusError(400, "mkpolicy sidecar: the body nests too deeply") from None
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
        try:
            data = dumps_kube(worker)
        except ValueError as exc:  # NaN or an infinity from the policy's arithmetic
            raise StatusError(500, f"mkpolicy sidecar: the worker copy cannot be written as JSON: {exc}") from None
        out = self.upstream.head(
            "POST",
            head.target,
            head.headers,
            reencoded=True,
            extra=(("Content-Type", "application/json"), ("Content-Length", str(len(data)))),
        )
        conn, resp = await self.forward.send("POST", out, data, None, READ_TIMEOUT)
        return await self._relay_object(exchange, conn, resp, entry, manager)

    async def _get(self, exchange: Exchange, entry: Entry, sent: WorkerConnection | None) -> int:
        head = exchange.head
        out = self.upstream.head(head.method, head.target, head.headers, reencoded=True)
        conn, resp = await self.forward.send(head.method, out, None, exchange, READ_TIMEOUT, sent)
        return await self._relay_object(exchange, conn, resp, entry, None)

    async def _relay_object(
        self,
        exchange: Exchange,
        conn: WorkerConnection,
        resp: Any,
        entry: Entry,
        manager: dict[str, Any] | None,
    ) -> int:
        """The worker's answer with the object rewritten by the policy's sync (errors relayed as sent).

        ``manager``: the manager's object when known (a create), else read for the object.
        """
        raw = await self.forward.answer(conn, resp)
        if resp.status >= 300:
            relay_error(exchange, resp, raw)
            return int(resp.status)
        try:
            doc = loads_kube(raw)
        except (ValueError, RecursionError):
            raise StatusError(
                502, f"mkpolicy sidecar: worker {self.cluster} sent a body that is not JSON (or nests too deeply)"
            ) from None
        if isinstance(doc, dict) and doc.get("kind") == entry.adapter.gvk.kind:
            if manager is None:
                meta = doc.get("metadata") or {}
                manager = await self._manager(entry, meta.get("namespace"), str(meta.get("name") or ""))
            doc = await self._timed(
                entry, "sync", rewrite_status, entry.adapter, doc, manager, self.cluster, self.hub.origin
            )
        respond_json(exchange, resp, doc)
        return int(resp.status)

    def rewrite_now(self, doc: Any, entry: Entry) -> tuple[bool, Any]:
        """(True, ``doc`` rewritten) when that needs no waiting: the manager object cached, the
        policy proven fast; else (False, None) and nothing done. StatusError as the slow path."""
        if not isinstance(doc, dict) or doc.get("kind") != entry.adapter.gvk.kind:
            return True, doc
        adapter = entry.adapter
        if not self.hub.inline(adapter):
            return False, None
        meta = doc.get("metadata") or {}
        manager = self.hub.cached_manager_object(entry, meta.get("namespace"), str(meta.get("name") or ""))
        if manager is None:
            return False, None
        obj, outcome, seconds = self.hub.run_here(
            adapter, measure, rewrite_status, adapter, doc, manager, self.cluster, self.hub.origin
        )
        return True, self._result(entry, "sync", obj, outcome, seconds)

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

    async def _timed(
        self, entry: Entry, phase: str, fn: Callable[..., tuple[dict[str, Any], Outcome]], *args: Any
    ) -> dict[str, Any]:
        obj, outcome, seconds = await self.hub.offload(entry.adapter, measure, fn, *args)
        return self._result(entry, phase, obj, outcome, seconds)

    def _result(self, entry: Entry, phase: str, obj: Any, outcome: Outcome, seconds: float) -> dict[str, Any]:
        """A transform's object, counted; its StatusError raised."""
        self._count(entry, phase, outcome, seconds)
        if isinstance(obj, StatusError):
            raise obj
        result: dict[str, Any] = obj
        return result

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
        if outcome.ignored:
            m.ignored_patches.labels(self.cluster, entry.name, phase).inc(len(outcome.ignored))
            for exc in outcome.ignored:
                log.warning(
                    "patch skipped (failurePolicy Ignore)",
                    extra=fields(cluster=self.cluster, policy=entry.name, error=exc.report()),
                )


__all__ = ["Hub", "WorkerEndpoint", "wants_object"]
