"""One worker endpoint: authenticate Kueue, transform what Kueue's adapter reads, pass the rest.

Kueue's generic adapter reads a worker's copy of a job through exactly two requests whose
bodies matter (see docs/architecture.md, "The wire"), and only those are transformed:

* ``create`` (POST) of a policy kind at the policy's version: the policy's ``create`` of
  the manager's object is sent, never Kueue's body; any failure answers a Kubernetes
  ``Status`` and nothing is created;
* a full JSON ``get`` of a policy kind at the policy's version: the object comes back
  with ``status`` = what the policy's ``sync`` makes of the manager's status, so Kueue's
  "copy the whole status" writes that.

First of all, after the token: the wire contract (:mod:`mkpolicy.sidecar.contract`) refuses
every request Kueue does not send a worker (403), a GET or HEAD with a body (400), before
anything reaches the worker. Of what it allows, everything else passes through
byte-for-byte (:class:`~mkpolicy.sidecar.forward.Forwarder`):
metadata-only reads (Kueue's ownership check asks for ``PartialObjectMetadata``), WATCH
(Kueue reads only labels from events), DELETE, other versions' reads, and the other kinds
Kueue uses (and whatever ``wire.allow`` widens the contract to). Refusing any of them
would break Kueue: a failed ownership check stops the removal of worker copies, a failed
watch drops the whole worker connection.
Refused: ``update``/``patch`` of a policy kind and writes of its other versions (Kueue
never sends them; forwarding them would bypass the policy), writes before the first
policy set is active (it is not known yet which kinds are policy kinds), creations of a
pending policy's kind (the manager does not serve it yet: it cannot be transformed),
creations of a kind Kueue dispatches while the policy meant for it is not active (a
stranded kind: a typo in either name), and every request on the endpoint of a worker
whose kubeconfig is refused.

Every refused creation, every copy the worker refuses and every failing status
write-back is logged, counted (``mkpolicy_sidecar_refusals_total``) and recorded as a
Kubernetes Event on the manager's object (the Workload when the object is missing), so
that a job Kueue keeps retrying says why.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

import aiohttp

from mkpolicy.engine.generic import MAX_LABEL_VALUE, PREBUILT_WORKLOAD_KEY
from mkpolicy.jsonvalues import dumps_kube, loads_kube
from mkpolicy.kube.client import ApiError, ResourceInfo
from mkpolicy.sidecar.bodies import decode_body
from mkpolicy.sidecar.contract import Contract, ContractRefusal
from mkpolicy.sidecar.endpoints import Credentials
from mkpolicy.sidecar.events import EventRecorder, ObjectRef
from mkpolicy.sidecar.forward import Forwarder
from mkpolicy.sidecar.http1 import RequestHead
from mkpolicy.sidecar.kueueconfig import KueueInfo, Stranded
from mkpolicy.sidecar.listener import READ_TIMEOUT, Exchange
from mkpolicy.sidecar.logs import fields, plain_error
from mkpolicy.sidecar.mainstatus import ATTEMPTS, Written, without_status
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.paths import Target, target_of
from mkpolicy.sidecar.policies import Entry, PolicySet
from mkpolicy.sidecar.relay import ref, relay_error, respond_json
from mkpolicy.sidecar.requestlog import RequestLog
from mkpolicy.sidecar.status import StatusError
from mkpolicy.sidecar.transform import Outcome, context_of, measure, rewrite_status, worker_copy
from mkpolicy.sidecar.upstream import Upstream, WorkerConnection

log = logging.getLogger("mkpolicy.sidecar.proxy")

T = TypeVar("T")

#: Largest request body of a policy kind read (bytes).
MAX_BODY = 16 * 1024 * 1024
#: Verbs that write (refused for policy kinds unless transformed, and before policies load).
_WRITES = frozenset({"create", "update", "patch"})


class Refusal(StatusError):
    """A refusal already counted, logged and recorded as an Event (:meth:`WorkerEndpoint._refusal`):
    answered without being logged again."""


class Hub(Protocol):
    """What a worker endpoint needs from the sidecar."""

    metrics: Metrics
    origin: str
    credentials: Credentials
    events: EventRecorder
    #: The request log (``logging.requestLog``), or None.
    request_log: RequestLog | None

    @property
    def kueue(self) -> KueueInfo | None:
        """What the Kueue beside the sidecar is configured with (None: not read)."""

    @property
    def contract(self) -> Contract:
        """The wire contract in force (:mod:`mkpolicy.sidecar.contract`)."""

    def worker_problem(self, cluster: str) -> str | None:
        """Why ``cluster``'s endpoint cannot serve (its kubeconfig refused or unreadable), or None."""

    def worker_failed(self, cluster: str, message: str) -> None:
        """The worker could not be reached (or broke off) while answering a request."""

    @property
    def policies(self) -> PolicySet | None:
        """The active policy set (None before the first one loads)."""

    async def manager_object(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The manager's object (cache or direct read); None when absent, ApiError/OSError when unreadable."""

    async def read_manager(self, info: ResourceInfo, namespace: str | None, name: str) -> dict[str, Any] | None:
        """An object of any kind read from the manager (None when absent or unreadable)."""

    def cached_manager_object(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The manager's object if the watch cache has it (never waits; do not modify it); counts a hit."""

    def caches(self, entry: Entry) -> bool:
        """Whether the manager's objects of ``entry``'s kind are kept in a watch cache (``manager.reads: cache``)."""

    async def write_main_status(self, entry: Entry, worker: dict[str, Any], cluster: str) -> Written:
        """The policy's sync of ``worker`` written to the manager's main resource (a kind without a
        status subresource); StatusError 503 when the manager cannot be reached."""

    def inline(self, key: object) -> bool:
        """Whether policy work for the adapter ``key`` runs on the event loop now."""

    def run_here(self, key: object, fn: Callable[..., T], *args: Any) -> T:
        """Run policy work on the event loop (when :meth:`inline` says so)."""

    async def offload(self, key: object, fn: Callable[..., T], *args: Any) -> T:
        """Run policy work for the adapter ``key`` (off the event loop unless proven fast)."""


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
        self._identifier_warned: set[tuple[str, str]] = set()
        self._copies = KnownCopies()
        #: manager reads started ahead of the worker's answer (held: the loop keeps only weak references)
        self._reads: set[asyncio.Task[dict[str, Any] | None]] = set()

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
            request_log = self.hub.request_log
            if request_log is not None:
                if verb == "watch":  # a stream: logged as it starts
                    request_log.write(self.cluster, head, None, None, exchange.started)
                elif head.framing != "none":
                    exchange.tap = []
        try:
            entry = self.route(head, target)
            exchange.conn.authenticated()
            if target is not None and entry is None and self.pending_create(target):
                code = await self._create_unresolved(exchange, target)
            elif entry is None or target is None:
                code = await self._passthrough(exchange, target, sent)
            else:
                policy = entry.name
                if target.verb == "create":
                    code = await self._create(exchange, target, entry)
                else:
                    code = await self._get(exchange, entry, sent)
        except StatusError as exc:
            code = exc.code
            if isinstance(exc, ContractRefusal):
                self.hub.metrics.refusals.labels(self.cluster, "", "WireContract").inc()
                exchange.close_after = exchange.close_after or exc.close
            self.refuse(exchange, exc, policy, verb, path)
        except ConnectionError:
            code = 499  # the client went away
        finally:
            self.record(exchange, path, policy, verb, code)

    @staticmethod
    def target_of(head: RequestHead) -> Target | None:
        """The resource and verb a request addresses (None: discovery and other non-resource paths)."""
        return target_of(head.method, head.decoded)

    def route(self, head: RequestHead, target: Target | None) -> Entry | None:
        """The policy that transforms a request (None: pass-through); StatusError when it is refused.

        A create of a policy kind at another version than the policy's comes back with the
        policy too: :meth:`_create` refuses it once it knows which job it is (an Event on it).
        """
        if not self.hub.credentials.check_token(self.cluster, head.fields.get("authorization")):
            raise StatusError(401, "Unauthorized: expected the bearer token of this sidecar endpoint")
        if "upgrade" in head.fields or "upgrade" in head.fields.get("connection", "").lower():
            raise StatusError(400, "mkpolicy sidecar: connection upgrades (exec, attach, port-forward) are not proxied")
        rule = self.hub.contract.check(head, target)  # what Kueue does not send never passes
        problem = self.hub.worker_problem(self.cluster)
        if problem is not None:
            raise StatusError(503, f"mkpolicy sidecar: worker {self.cluster} is not served: {problem}")
        if target is None:
            return None
        verb = target.verb
        policies = self.hub.policies
        if policies is None:
            if verb in _WRITES:
                raise StatusError(503, "mkpolicy sidecar: no policy set is active yet; retry shortly")
            if rule is not None and rule.category == "external" and verb == "get" and wants_object(head):
                # it may be a policy kind: its raw status must not reach Kueue (which copies it)
                raise StatusError(
                    503, "mkpolicy sidecar: no policy set is active yet (this kind may be a policy's); retry shortly"
                )
            return None
        entry = policies.lookup(target.group, target.resource)
        if entry is None:
            return None
        info = entry.info
        if target.version != info.version:
            if verb == "create" and target.subresource is None:
                return entry
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

    def pending_create(self, target: Target) -> bool:
        """Whether a create may be of a pending policy's kind (its resource is not known yet)."""
        policies = self.hub.policies
        return (
            target.verb == "create"
            and target.subresource is None
            and policies is not None
            and policies.pending_in(target.group)
        )

    def refuse(self, exchange: Exchange, exc: StatusError, policy: str, verb: str, path: str) -> None:
        """Answer a refusal (a Kubernetes ``Status``), logging server-side ones (once)."""
        if (exc.code >= 500 or exc.code == 403) and not isinstance(exc, Refusal):
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
        request_log = self.hub.request_log
        if request_log is not None and verb != "watch":
            tap = exchange.tap
            request_log.write(self.cluster, exchange.head, code, b"".join(tap) if tap else None, exchange.started)
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
    async def _body(self, exchange: Exchange, kind: str) -> dict[str, Any]:
        """The request body as a JSON object (JSON or CBOR); StatusError when it is none."""
        head = exchange.head
        body = await decode_body(await exchange.read_body(MAX_BODY), head.fields.get("content-type"))
        if not isinstance(body, dict):
            raise StatusError(400, f"mkpolicy sidecar: expected a {kind} object; found a JSON {_json_type(body)}")
        return body

    async def _create(self, exchange: Exchange, target: Target, entry: Entry) -> int:
        adapter = entry.adapter
        gvk = adapter.gvk
        head = exchange.head
        try:
            body = await self._body(exchange, gvk.kind)
        except StatusError as exc:
            self._refused(entry.name, "BadRequest", None, exc.message)
            raise
        meta: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
        name = meta.get("name")
        namespace = target.namespace
        ctx = context_of(body, self.cluster)
        workload = ctx.workload_name if ctx is not None else ""
        if target.version != entry.info.version:
            # Kueue's externalFrameworks names another version than the policy: its copies cannot
            # be transformed (the policy's patches are written for its version). Reads pass.
            manager = await self._manager_or_none(entry, namespace, str(name or ""))
            message = (
                f"policy {entry.name} covers {entry.info.resource}.{entry.info.group} at version "
                f"{entry.info.version} only; Kueue created a copy at {target.version} for {self.cluster}: make "
                "Kueue's multiKueue.externalFrameworks entry and the policy's framework name the same version "
                "(mkpolicy sidecar --check reports it)"
            )
            where = self._ref(entry, manager, namespace, name, workload)
            raise self._refusal(entry.name, "VersionMismatch", where, message, 403)
        if body.get("apiVersion") != gvk.api_version or body.get("kind") != gvk.kind:
            message = (
                f"expected apiVersion {gvk.api_version!r} and kind {gvk.kind!r}; "
                f"found {body.get('apiVersion')!r}, {body.get('kind')!r}"
            )
            raise self._refusal(entry.name, "BadRequest", None, message, 400)
        if not isinstance(name, str) or not name:
            message = f"{gvk.kind} objects need metadata.name (generateName is not supported)"
            raise self._refusal(entry.name, "BadRequest", None, message, 400)
        if entry.info.namespaced and meta.get("namespace") not in (None, namespace):
            message = f"metadata.namespace {meta.get('namespace')!r} differs from the path's {namespace!r}"
            raise self._refusal(entry.name, "BadRequest", None, message, 400)
        self._check_identifier(entry, body, workload)
        manager = await self._manager(entry, namespace, name)
        if manager is None:
            message = (
                f"the manager cluster has no {gvk.kind} {ref(namespace, name)}; policy {entry.name} builds "
                f"the copy for {self.cluster} from it"
            )
            where = self._ref(entry, None, namespace, name, workload)
            details = {"name": name, "group": gvk.group, "kind": entry.info.resource}
            raise self._refusal(entry.name, "ManagerObjectMissing", where, message, 404, details=details)
        obj, outcome, seconds = await self.hub.offload(
            entry.adapter, measure, worker_copy, entry.adapter, manager, body, self.cluster
        )
        if isinstance(obj, StatusError):
            self._count(entry, "create", outcome, seconds)
            why = {403: "NotManaged", 400: "BadRequest"}.get(obj.code, "CreationFailed")
            self._refused(entry.name, why, self._ref(entry, manager, namespace, name, workload), obj.message)
            raise Refusal(obj.code, obj.message, obj.reason, obj.details)
        try:
            data = dumps_kube(obj)
        except ValueError as exc:  # NaN or an infinity from the policy's arithmetic
            message = f"the worker copy cannot be written as JSON: {exc}"
            where = self._ref(entry, manager, namespace, name, workload)
            raise self._refusal(entry.name, "CreationFailed", where, message, 500) from None
        out = self.upstream.head(
            "POST",
            head.target,
            head.headers,
            reencoded=True,
            extra=(("Content-Type", "application/json"), ("Content-Length", str(len(data)))),
        )
        conn, resp = await self._send("POST", out, data, None)
        if resp.status >= 400 and resp.status != 409:  # 409: Kueue's create raced one that exists
            raw = await self._answer(conn, resp)
            message = (
                f"{self.cluster} refused the copy made by policy {entry.name}: {resp.status} {_status_message(raw)}"
            )
            outcome.result = "error"  # the transform ran, but no copy exists: an error, not "ok"
            self._count(entry, "create", outcome, seconds)
            self._refused(entry.name, "WorkerRefused", self._ref(entry, manager, namespace, name, workload), message)
            relay_error(exchange, resp, raw)
            return int(resp.status)
        self._count(entry, "create", outcome, seconds)
        return await self._relay_object(exchange, conn, resp, entry, manager, (namespace, name))

    async def _create_unresolved(self, exchange: Exchange, target: Target) -> int:
        """A create in the group of a pending policy or stranded kind: refused when it is of that kind,
        else passed on."""
        head = exchange.head
        raw = await exchange.read_body(MAX_BODY)
        policies = self.hub.policies
        kind = ""
        try:
            body = await decode_body(raw, head.fields.get("content-type"))
            kind = str(body.get("kind") or "") if isinstance(body, dict) else ""
        except StatusError:
            body = None  # not ours to judge: the worker answers it
        stranded = policies.stranded_kind(target.group, kind) if policies is not None and kind else None
        if stranded is not None:
            assert isinstance(body, dict)
            await self._refuse_stranded(target, body, *stranded)
        pending = policies.pending_policy(target.group, kind) if policies is not None and kind else None
        if pending is not None:
            assert isinstance(body, dict)
            meta = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
            ctx = context_of(body, self.cluster)
            policy, gvk = pending
            message = (
                f"policy {policy} ({gvk}): the manager cluster does not serve this kind, so a copy for "
                f"{self.cluster} cannot be transformed (the sidecar looks the kind up again at each reload check)"
            )
            workload = ctx.workload_name if ctx is not None else ""
            ref_ = _workload_ref(self.hub.kueue, target.namespace or "", workload) if workload else None
            raise self._refusal(
                policy, "PolicyPending", ref_, message, 503, details={"name": str(meta.get("name") or "")}
            )
        extra = [("Content-Length", str(len(raw)))]
        if "content-type" in head.fields:
            extra.append(("Content-Type", head.fields["content-type"]))
        out = self.upstream.head(head.method, head.target, head.headers, reencoded=True, extra=tuple(extra))
        conn, resp = await self._send(head.method, out, raw, None)
        answer = await self._answer(conn, resp)
        relay_error(exchange, resp, answer)
        return int(resp.status)

    async def _refuse_stranded(
        self, target: Target, body: dict[str, Any], lost: Stranded, info: ResourceInfo | None
    ) -> None:
        """Refuse a copy of a kind Kueue dispatches while the policy meant for it is not active (Event on the job)."""
        meta = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
        name = str(meta.get("name") or "")
        ctx = context_of(body, self.cluster)
        workload = ctx.workload_name if ctx is not None else ""
        job = await self.hub.read_manager(info, target.namespace, name) if info is not None and name else None
        about = ObjectRef.of(job) if job is not None else None
        if about is None and workload:
            about = _workload_ref(self.hub.kueue, target.namespace or "", workload)
        message = (
            f"{lost.describe()}; the copy for {self.cluster} would go untransformed, so it is refused: make the "
            "policy's framework and Kueue's entry name the same kind (mkpolicy sidecar --check reports it)"
        )
        raise self._refusal(lost.policy, "PolicyNotActive", about, message, 503, details={"name": name})

    async def _get(self, exchange: Exchange, entry: Entry, sent: WorkerConnection | None) -> int:
        head = exchange.head
        addressed = self._addressed(head)
        reading = None
        if (entry.name, *addressed) in self._copies and not self.hub.caches(entry):
            # A copy the worker has: the manager's object is read while the worker answers, one
            # round trip instead of two on Kueue's status write-back path. Kueue's adapter reads
            # it first too (v0.19.2 externalframeworks/adapter.go SyncJob: the local object, then
            # the remote one), so it is no staler than Kueue's own. Not for a copy not known to
            # exist: Kueue's GET before each creation is answered 404, and the read would be wasted.
            reading = self._background(self._manager(entry, *addressed))
        out = self.upstream.head(head.method, head.target, head.headers, reencoded=True)
        conn, resp = await self._send(head.method, out, None, exchange, sent)
        return await self._relay_object(exchange, conn, resp, entry, None, addressed, reading)

    def _background(self, read: Coroutine[Any, Any, dict[str, Any] | None]) -> asyncio.Task[dict[str, Any] | None]:
        """``read`` started now, held until done, its failure kept for whoever awaits it (else dropped)."""
        task = asyncio.ensure_future(read)
        self._reads.add(task)
        task.add_done_callback(_settled)
        task.add_done_callback(self._reads.discard)
        return task

    # -- the worker (through the transport, its failures noted for /readyz) -------------------------
    async def _send(
        self,
        method: str,
        head: bytes,
        body: bytes | None,
        exchange: Exchange | None,
        sent: WorkerConnection | None = None,
    ) -> tuple[WorkerConnection, Any]:
        try:
            return await self.forward.send(method, head, body, exchange, READ_TIMEOUT, sent)
        except StatusError as exc:
            self._worker_failed(exc)
            raise

    def _worker_failed(self, exc: StatusError) -> None:
        """Note a failure on the worker's side for /readyz (a client's own errors, such as a
        malformed body, and the sidecar's 429s are not the worker's)."""
        if exc.code in (502, 503, 504):
            self.hub.worker_failed(self.cluster, exc.message)

    async def _answer(self, conn: WorkerConnection, resp: Any) -> bytes:
        try:
            return await self.forward.answer(conn, resp)
        except StatusError as exc:
            self._worker_failed(exc)
            raise

    async def _passthrough(self, exchange: Exchange, target: Target | None, sent: WorkerConnection | None) -> int:
        try:
            return await self.forward.passthrough(exchange, target, sent)
        except StatusError as exc:
            self._worker_failed(exc)
            raise

    async def _relay_object(
        self,
        exchange: Exchange,
        conn: WorkerConnection,
        resp: Any,
        entry: Entry,
        manager: dict[str, Any] | None,
        addressed: tuple[str | None, str],
        reading: asyncio.Task[dict[str, Any] | None] | None = None,
    ) -> int:
        """The worker's answer with the object rewritten by the policy's sync (errors relayed as sent).

        ``manager``: the manager's object when known (a create), else ``reading``'s (a read of it
        started with the request), else read for the object; ``addressed``: the namespace and
        name the request was for (the worker must answer that object).
        """
        raw = await self._answer(conn, resp)
        self._copies.note((entry.name, *addressed), resp.status)
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
            self._check_addressed(doc, entry, addressed)
            if manager is None:
                manager = await (reading if reading is not None else self._manager(entry, *addressed))
            worker = doc
            obj, outcome, seconds = await self.hub.offload(
                entry.adapter, measure, rewrite_status, entry.adapter, doc, manager, self.cluster, self.hub.origin
            )
            doc = self._synced(entry, doc, manager, obj, outcome, seconds, addressed[0])
            if entry.main_status:  # no status subresource: mkpolicy writes the status, Kueue gets none
                if outcome.result == "ok":
                    await self._write_main_status(entry, worker)
                doc = without_status(doc)
        respond_json(exchange, resp, doc)
        return int(resp.status)

    def rewrite_now(self, doc: Any, entry: Entry, head: RequestHead) -> tuple[bool, Any]:
        """(True, ``doc`` rewritten) when that needs no waiting: the manager object cached, the
        policy proven fast; else (False, None) and nothing done. StatusError as the slow path."""
        if not isinstance(doc, dict) or doc.get("kind") != entry.adapter.gvk.kind:
            return True, doc
        adapter = entry.adapter
        if not self.hub.inline(adapter):
            return False, None
        addressed = self._addressed(head)
        self._check_addressed(doc, entry, addressed)
        manager = self.hub.cached_manager_object(entry, addressed[0], addressed[1])
        if manager is None:
            return False, None
        obj, outcome, seconds = self.hub.run_here(
            adapter, measure, rewrite_status, adapter, doc, manager, self.cluster, self.hub.origin
        )
        if entry.main_status:
            if outcome.result == "ok":
                return False, None  # a status to write to the manager: the coroutine writes it
            return True, without_status(self._synced(entry, doc, manager, obj, outcome, seconds, addressed[0]))
        return True, self._synced(entry, doc, manager, obj, outcome, seconds, addressed[0])

    def _addressed(self, head: RequestHead) -> tuple[str | None, str]:
        """The namespace and name a read addresses."""
        target = self.target_of(head)
        return (target.namespace, target.name or "") if target is not None else (None, "")

    def _check_addressed(self, doc: dict[str, Any], entry: Entry, addressed: tuple[str | None, str]) -> None:
        """StatusError 502 unless the worker answered the object the request addressed (a worker
        answering another one must not have another namespace's manager object read, or an Event
        recorded there)."""
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        namespace = meta.get("namespace") if entry.info.namespaced else None
        if meta.get("name") != addressed[1] or (entry.info.namespaced and namespace != addressed[0]):
            raise StatusError(
                502,
                f"mkpolicy sidecar: worker {self.cluster} answered {ref(namespace, str(meta.get('name'))[:253])} "
                f"for {ref(addressed[0], addressed[1])}",
            )

    def _synced(
        self,
        entry: Entry,
        doc: dict[str, Any],
        manager: Any,
        obj: dict[str, Any],
        outcome: Outcome,
        seconds: float,
        namespace: str | None,
    ) -> dict[str, Any]:
        """The object rewritten by the policy's sync (:func:`rewrite_status`, which never raises),
        counted; a failed sync said on the job.

        A sync patch that fails (``failurePolicy: Fail``) leaves the status out of the answer:
        Kueue copies nothing, so nothing is written, and the read itself succeeds. Failing it
        instead would stop Kueue for good: it finishes a workload only after a successful
        ``SyncJob`` (workload.go, "Finish the local workload when the remote workload is finished").
        """
        self._count(entry, "sync", outcome, seconds)
        if outcome.result == "error":
            meta = doc.get("metadata") or {}
            ctx = context_of(doc, self.cluster)
            where = self._ref(entry, manager, namespace, meta.get("name"), ctx.workload_name if ctx else "")
            message = f"the status from {self.cluster} is not written: {_bare(outcome.error or 'the sync failed')}"
            self._refused(entry.name, "SyncFailed", where, message)
        return obj

    async def _write_main_status(self, entry: Entry, worker: dict[str, Any]) -> None:
        """The policy's sync of ``worker`` written to the manager's main resource (:mod:`.mainstatus`):
        counted; a refusal recorded as an Event (Kueue's read goes on); StatusError 503 when the
        manager cannot be reached (Kueue retries)."""
        try:
            written = await self.hub.write_main_status(entry, worker, self.cluster)
        except StatusError:
            self.hub.metrics.status_writes.labels(self.cluster, entry.name, "error").inc()
            self.hub.metrics.upstream_errors.labels("manager", "write").inc()
            raise
        self.hub.metrics.status_writes.labels(self.cluster, entry.name, written.result).inc()
        if written.result in ("refused", "conflict"):
            meta = worker.get("metadata") or {}
            ctx = context_of(worker, self.cluster)
            where = self._ref(
                entry, written.manager, meta.get("namespace"), meta.get("name"), ctx.workload_name if ctx else ""
            )
            why = written.message or f"the object kept changing ({ATTEMPTS} conflicts)"
            message = f"the status from {self.cluster} is not written to the manager's object: {why}"
            self._refused(entry.name, "StatusWriteRefused", where, message)

    # -- manager objects and transforms ------------------------------------------------------------
    async def _manager(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            return await self.hub.manager_object(entry, namespace, name)
        except (TimeoutError, ApiError, aiohttp.ClientError, OSError) as exc:
            self.hub.metrics.upstream_errors.labels("manager", "read").inc()
            raise StatusError(
                503,
                f"mkpolicy sidecar: cannot read {entry.adapter.gvk.kind} {ref(namespace, name)} "
                f"from the manager: {plain_error(exc)}",
            ) from None

    async def _manager_or_none(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The manager's object for an Event, None when it cannot be had."""
        if not name:
            return None
        try:
            return await self._manager(entry, namespace, name)
        except StatusError:
            return None

    def _ref(
        self, entry: Entry, manager: dict[str, Any] | None, namespace: Any, name: Any, workload: str
    ) -> ObjectRef | None:
        """What an Event is about: the manager's object, else its Workload, else the object by name."""
        if manager is not None:
            found = ObjectRef.of(manager)
            gvk = entry.adapter.gvk
            return ObjectRef(
                found.api_version or gvk.api_version, found.kind or gvk.kind, found.namespace, found.name, found.uid
            )
        if workload:
            return _workload_ref(self.hub.kueue, str(namespace or ""), workload)
        if isinstance(name, str) and name:
            gvk = entry.adapter.gvk
            return ObjectRef(gvk.api_version, gvk.kind, str(namespace or ""), name)
        return None

    def _refused(self, policy: str, reason: str, about: ObjectRef | None, message: str) -> None:
        """A refusal: counted, logged, and recorded as an Event on ``about`` (when known)."""
        self.hub.metrics.refusals.labels(self.cluster, policy, reason).inc()
        log.warning(
            "creation refused" if reason not in ("SyncFailed", "StatusWriteRefused") else "status write-back refused",
            extra=fields(
                cluster=self.cluster,
                policy=policy,
                reason=reason,
                object=f"{about.kind} {ref(about.namespace, about.name)}" if about is not None else "",
                error=message,
            ),
        )
        if about is not None:
            self.hub.events.record(about, "Warning", reason, f"mkpolicy: {_bare(message)}")

    def _refusal(
        self,
        policy: str,
        reason: str,
        about: ObjectRef | None,
        message: str,
        code: int,
        *,
        status_reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> Refusal:
        """:meth:`_refused`, and the Status that answers it (to raise)."""
        self._refused(policy, reason, about, message)
        return Refusal(code, f"mkpolicy sidecar: {message}", status_reason, details)

    def _check_identifier(self, entry: Entry, body: dict[str, Any], workload: str) -> None:
        """Kueue writes the workload name where its version says; a label longer than 63 characters
        (Kueue before 0.18.5/0.19.1 with WorkloadIdentifierAnnotations off) can never be created."""
        labels = (body.get("metadata") or {}).get("labels") or {}
        if isinstance(labels, dict) and len(str(labels.get(PREBUILT_WORKLOAD_KEY) or "")) > MAX_LABEL_VALUE:
            message = (
                f"the workload name {workload!r} is longer than {MAX_LABEL_VALUE} characters, and this Kueue writes "
                f"it as the label {PREBUILT_WORKLOAD_KEY} (WorkloadIdentifierAnnotations off, before Kueue 0.18.5 "
                "and 0.19.1): no worker accepts such a label; turn the gate on or upgrade Kueue"
            )
            raise self._refusal(entry.name, "CreationFailed", None, message, 422, status_reason="Invalid")
        kueue = self.hub.kueue
        expected = kueue.identifier() if kueue is not None else None
        found = "label" if isinstance(labels, dict) and PREBUILT_WORKLOAD_KEY in labels else "annotation"
        if kueue is not None and expected is not None and (expected == "annotation") != (found == "annotation"):
            key = (entry.name, found)
            if key not in self._identifier_warned:
                self._identifier_warned.add(key)
                log.warning(
                    "Kueue writes the workload identifier elsewhere than its configuration says",
                    extra=fields(
                        cluster=self.cluster, policy=entry.name, found=found, expected=expected, kueue=kueue.describe()
                    ),
                )

    def _count(self, entry: Entry, phase: str, outcome: Outcome, seconds: float) -> None:
        """Count a transform and its duration."""
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


class KnownCopies:
    """The copies of policy kinds a worker was last seen to have, by (policy, namespace, name).

    Learned from the worker's answers to the transformed requests (a copy created or read:
    present; a 404: absent), the least recently seen forgotten beyond ``limit`` (about 300
    bytes each: a worker's running jobs, within a few hundred KiB per worker; a forgotten
    copy is read in turn, as an unknown one). A copy deleted meanwhile costs one manager
    read whose answer is not used.
    """

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._seen: OrderedDict[tuple[str, str | None, str], None] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._seen

    def note(self, key: tuple[str, str | None, str], status: int) -> None:
        """Record what the worker's answer ``status`` to a read or create of ``key`` says of the copy."""
        if status == 404:
            self._seen.pop(key, None)
        elif status < 300 or status == 409:  # (409: Kueue's create met the copy)
            self._seen[key] = None
            self._seen.move_to_end(key)
            if len(self._seen) > self.limit:
                self._seen.popitem(last=False)


def _settled(task: asyncio.Task[Any]) -> None:
    """Mark a background read's failure as seen: a read left unused (a worker's 404) is not an error."""
    if not task.cancelled():
        task.exception()


def _bare(message: str) -> str:
    """``message`` without the ``mkpolicy:`` prefix a Status message carries (an Event adds its own)."""
    for prefix in ("mkpolicy: ", "mkpolicy sidecar: "):
        message = message.removeprefix(prefix)
    return message


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")


def _status_message(raw: bytes) -> str:
    """The message of a Kubernetes Status body (the body's start otherwise)."""
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("message"), str):
        return str(doc["message"])
    return raw[:300].decode("utf-8", "replace").strip() or "(no body)"


def _workload_ref(kueue: KueueInfo | None, namespace: str, name: str) -> ObjectRef:
    """Kueue's Workload ``namespace/name`` (v1beta2 from Kueue 0.15 on)."""
    version = "v1beta1" if kueue is not None and kueue.version is not None and kueue.version < (0, 15, 0) else "v1beta2"
    return ObjectRef(f"kueue.x-k8s.io/{version}", "Workload", namespace, name)


__all__ = ["Hub", "Refusal", "WorkerEndpoint", "wants_object"]
