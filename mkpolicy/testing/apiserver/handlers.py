"""The HTTP layer: authentication, faults, request decoding, dispatch and responses.

One aiohttp low-level handler serves every URL (no router: the Kubernetes URL layout is
parsed by :mod:`.routing`). Bodies are JSON (``application/json``; YAML is accepted for
create and update); responses are JSON; errors are ``Status`` bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import random
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import web
from multidict import CIMultiDict, MultiMapping

import mkpolicy.yamldata as yamldata
from mkpolicy.errors import InputError
from mkpolicy.testing.apiserver import resources as R
from mkpolicy.testing.apiserver.authz import (
    SSAR_GROUP,
    SSAR_RESOURCE,
    Attributes,
    Authorizer,
    User,
    forbidden,
    self_subject_access_review,
)
from mkpolicy.testing.apiserver.discovery import VERSION_INFO, aggregated_discovery, discovery_document, etag
from mkpolicy.testing.apiserver.errors import (
    MAX_BODY_BYTES,
    ApiError,
    Cause,
    bad_request,
    forbidden_value,
    internal,
    invalid,
    invalid_value,
    method_not_allowed,
    resource_not_found,
    too_large,
    unauthorized,
    unsupported_media_type,
    unsupported_value,
)
from mkpolicy.testing.apiserver.faults import Decision, Faults, Match, Rule
from mkpolicy.testing.apiserver.jsonutil import dumps
from mkpolicy.testing.apiserver.negotiate import AGGREGATED_DISCOVERY, Endpoint, Negotiated, negotiate
from mkpolicy.testing.apiserver.operations import (
    Api,
    DeleteOptions,
    FieldValidation,
    ListOptions,
    ListResult,
    Target,
    WriteOptions,
    WriteResult,
)
from mkpolicy.testing.apiserver.resources import PropagationPolicy
from mkpolicy.testing.apiserver.routing import HEALTH_PATHS, RequestInfo, is_true, parse_request
from mkpolicy.testing.apiserver.selectors import (
    FieldRequirement,
    FieldSelector,
    parse_field_selector,
    parse_label_selector,
)
from mkpolicy.testing.apiserver.storage import Stored
from mkpolicy.testing.apiserver.watch import BOOKMARK, Encoder, Watch, WatchOptions, close_watch, open_watch

log = logging.getLogger("mkpolicy.testing.apiserver")

JSON = "application/json"
_YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})
_PROPAGATION = ("Foreground", "Background", "Orphan")


@dataclass
class Settings:
    """Knobs of the HTTP layer."""

    tokens: set[str]
    #: Tokens authorized by RBAC as these users (:mod:`.authz`); the others may do anything.
    users: dict[str, User] = field(default_factory=dict)
    server_address: str = ""
    max_body: int = MAX_BODY_BYTES
    #: Seconds between BOOKMARKs of a watch that allows them (kube-apiserver: a minute).
    bookmark_interval: float = 60.0
    #: A last BOOKMARK this many seconds before a watch's deadline (kube-apiserver: 2 s).
    bookmark_lead: float = 2.0
    #: kube-apiserver's --min-request-timeout: a watch without timeoutSeconds lasts [1, 2) times this.
    watch_timeout: float = 1800.0
    max_watch_queue: int = 100_000


def _json_response(body: bytes, status: int = 200, headers: CIMultiDict[str] | None = None) -> web.Response:
    return web.Response(body=body, status=status, content_type=JSON, headers=headers)


def error_response(err: ApiError) -> web.Response:
    """The ``Status`` response of ``err``."""
    headers = CIMultiDict(err.headers) if err.headers else None
    return _json_response(dumps(err.status()), err.code, headers)


def _encode(stored: Stored, t: Target, wanted: Negotiated) -> bytes:
    """``stored`` as the client asked: the object, or its ``PartialObjectMetadata``."""
    if wanted.transform == "PartialObjectMetadata":
        return stored.partial_json(wanted.version)
    return stored.json(t.api_version)


def _parse_json(data: bytes, what: str) -> Any:
    def reject(constant: str) -> Any:
        raise ValueError(f"{constant} is not valid JSON")

    try:
        return json.loads(data, parse_constant=reject)
    except json.JSONDecodeError as exc:
        raise bad_request(f"malformed JSON in the {what}: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"malformed JSON in the {what}: {exc}") from None
    except RecursionError:
        raise bad_request(f"the {what} nests too deeply") from None


class Handler:
    """The request handler of one server."""

    def __init__(self, api: Api, faults: Faults, settings: Settings) -> None:
        self.api = api
        self.faults = faults
        self.settings = settings
        self.watches: dict[Watch, RequestInfo] = {}
        self.authorizer = Authorizer(api.store)
        #: Set while the server plays dead in ``blackhole`` mode; requests wait on it.
        self.blackhole: asyncio.Event | None = None

    # -- entry point --------------------------------------------------------------------

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        try:
            if self.blackhole is not None:
                await self.blackhole.wait()
            return await self._handle(request)
        except ApiError as err:
            return error_response(err)
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception as exc:  # a bug of this server: answer 500 and say what happened
            log.exception("unhandled error serving %s %s", request.method, request.path)
            return error_response(internal(f"{type(exc).__name__}: {exc}"))

    def _authenticate(self, request: web.BaseRequest) -> str | None:
        """The bearer token of the request when it is one of the server's, else None."""
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        token = token.strip()
        return next((t for t in self.settings.tokens if hmac.compare_digest(token, t)), None)

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.rel_url.raw_path
        if path in HEALTH_PATHS:
            return web.Response(text="ok", content_type="text/plain")
        token = self._authenticate(request)
        if token is None:
            raise unauthorized()
        info = parse_request(request.method, path, request.rel_url.raw_query_string)
        user = self.settings.users.get(token)
        if user is not None:
            attrs = Attributes.of(info, request.query)
            if not self.authorizer.authorize(user, attrs)[0]:
                raise forbidden(user, attrs)
        decision = self.faults.decide(info)
        if decision is not None:
            if decision.delay:
                await asyncio.sleep(decision.delay)
            for rule in decision.holds:
                while not rule.released.is_set():  # (released from the test's thread)
                    await asyncio.sleep(0.005)
            if decision.fail is not None:
                raise decision.fail.error()
        accept = request.headers.get("Accept")
        if info.kind == "version":
            negotiate(accept, "other")
            response: web.StreamResponse = _json_response(dumps(VERSION_INFO))
        elif info.kind == "discovery":
            response = self._discovery(request, info, accept)
        elif (info.group, info.resource) == (SSAR_GROUP, SSAR_RESOURCE):
            response = await self._access_review(request, info, user)
        elif info.verb == "watch":
            return await self._watch(request, info, decision, negotiate(accept, "watch"))
        else:
            endpoint: Endpoint = "list" if info.verb in ("list", "deletecollection") else "get"
            response = await self._resource(request, info, negotiate(accept, endpoint))
        if decision is not None and decision.drop is not None:
            return await self._truncate(request, cast(web.Response, response), decision.drop)
        return response

    def _discovery(self, request: web.BaseRequest, info: RequestInfo, accept: str | None) -> web.StreamResponse:
        """A discovery document: aggregated at ``/api`` and ``/apis`` when ``Accept`` asks for it."""
        parts = info.discovery
        root = parts in (("api",), ("apis",))
        wanted = negotiate(accept, "discovery" if root else "other")
        if wanted.transform != "APIGroupDiscoveryList":
            doc = discovery_document(self.api.registry, parts, self.settings.server_address)
            return _json_response(dumps(doc))
        body = dumps(aggregated_discovery(self.api.registry, legacy=parts == ("api",)))
        tag = etag(body)
        headers = {"ETag": tag, "Vary": "Accept"}
        if request.headers.get("If-None-Match") == tag:
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, headers={**headers, "Content-Type": AGGREGATED_DISCOVERY})

    async def _access_review(self, request: web.BaseRequest, info: RequestInfo, user: User | None) -> web.Response:
        """A SelfSubjectAccessReview (created, never stored)."""
        if info.verb != "create" or info.namespace or info.subresource:
            raise method_not_allowed(info.method, info.path)
        review = self_subject_access_review(await self._body(request, allow_yaml=True), user, self.authorizer)
        return _json_response(dumps(review), 201)

    # -- resources ----------------------------------------------------------------------

    def _target(self, info: RequestInfo) -> Target:
        rt = self.api.registry.lookup(info.group, info.version, info.resource)
        if rt is None:
            raise resource_not_found(info.path)
        if info.namespace and not rt.namespaced:
            raise resource_not_found(info.path)
        if rt.namespaced and not info.namespace and info.name:
            raise resource_not_found(info.path)
        if rt.namespaced and not info.namespace and info.verb in ("create", "deletecollection"):
            raise method_not_allowed(info.method, info.path)
        if info.subresource:
            version = rt.version(info.version)
            if info.subresource != "status" or version is None or not version.status_subresource:
                raise resource_not_found(info.path)
            if info.verb not in ("get", "update", "patch"):
                raise method_not_allowed(info.method, info.path)
        return Target(rt, info.version, info.namespace, info.name, info.subresource)

    async def _resource(self, request: web.BaseRequest, info: RequestInfo, wanted: Negotiated) -> web.StreamResponse:
        t = self._target(info)
        verb = info.verb
        if verb == "get":
            return _json_response(_encode(self.api.get(t), t, wanted))
        if verb == "list":
            return self._list_response(t, self.api.list(t, self._list_options(t, request.query)), wanted)
        if verb in ("create", "update"):
            body = await self._body(request, allow_yaml=True)
            opts = self._write_options(request.query)
            result = self.api.create(t, body, opts) if verb == "create" else self.api.update(t, body, opts)
            return self._write_response(t, result, wanted)
        if verb == "patch":
            raw = await self._read(request)
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
            result = self.api.patch(t, content_type, raw, self._write_options(request.query))
            return self._write_response(t, result, wanted)
        raw = await self._read(request)
        body = _parse_json(raw, "request body") if raw.strip() else None
        dopts = self._delete_options(request.query, body)
        if verb == "delete":
            stored, gone = self.api.delete(t, dopts)
            if gone and t.rt.builtin and t.rt.key != R.NAMESPACES.key:
                return _json_response(dumps(self._success(t, stored)))
            return _json_response(_encode(stored, t, wanted))
        deleted = self.api.delete_collection(t, self._list_options(t, request.query), dopts)
        return self._list_response(t, ListResult(deleted, self.api.store.rv), wanted)

    @staticmethod
    def _success(t: Target, stored: Stored) -> dict[str, Any]:
        details: dict[str, Any] = {"name": stored.key[1]}
        if t.rt.group:
            details["group"] = t.rt.group
        details["kind"] = t.rt.plural
        details["uid"] = stored.meta.get("uid")
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _write_response(self, t: Target, result: WriteResult, wanted: Negotiated) -> web.Response:
        headers: CIMultiDict[str] = CIMultiDict()
        for text in result.warnings:
            headers.add("Warning", f"299 - {json.dumps(text)}")
        return _json_response(_encode(result.stored, t, wanted), 201 if result.created else 200, headers)

    def _list_response(self, t: Target, result: ListResult, wanted: Negotiated) -> web.Response:
        meta: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining is not None:
            meta["remainingItemCount"] = result.remaining
        if wanted.transform == "PartialObjectMetadataList":
            # handlers/response.go asPartialObjectMetadataList: every item a PartialObjectMetadata.
            kind, api_version = "PartialObjectMetadataList", f"meta.k8s.io/{wanted.version}"
            items = b",".join(s.partial_json(wanted.version) for s in result.items)
        else:
            kind, api_version = t.rt.list_kind, t.api_version
            items = b",".join(s.json(t.api_version, typed_list_item=t.rt.builtin) for s in result.items)
        head = dumps({"kind": kind, "apiVersion": api_version, "metadata": meta})
        return _json_response(head[:-1] + b',"items":[' + items + b"]}")

    # -- request decoding ---------------------------------------------------------------

    async def _read(self, request: web.BaseRequest) -> bytes:
        limit = self.settings.max_body
        length = request.content_length
        if length is not None and length > limit:
            raise too_large(limit)
        data = bytearray()
        while True:
            chunk = await request.content.read(256 * 1024)
            if not chunk:
                break
            data += chunk
            if len(data) > limit:
                raise too_large(limit)
        return bytes(data)

    async def _body(self, request: web.BaseRequest, *, allow_yaml: bool) -> Any:
        raw = await self._read(request)
        content_type = request.headers.get("Content-Type", JSON).split(";")[0].strip().lower() or JSON
        if content_type in _YAML_TYPES and allow_yaml:
            try:
                docs = yamldata.load_all(raw.decode("utf-8"), "request body")
            except UnicodeDecodeError:
                raise bad_request("the request body is not UTF-8 text") from None
            except InputError as exc:
                raise bad_request(f"{exc.message} in the request body ({exc.location.position()})") from None
            if len(docs) != 1:
                raise bad_request(f"expected one YAML document in the request body; found {len(docs)}")
            return docs[0]
        if content_type != JSON:
            raise unsupported_media_type(content_type, [JSON, "application/yaml"])
        if not raw.strip():
            raise bad_request("the request body is empty; expected a JSON object")
        return _parse_json(raw, "request body")

    @staticmethod
    def _write_options(query: MultiMapping[str]) -> WriteOptions:
        dry_run = query.getall("dryRun", [])
        for value in dry_run:
            if value and value != "All":
                raise bad_request(f'invalid dryRun value {value!r}: expected "All"')
        validation = query.get("fieldValidation", "") or "Warn"
        if validation not in ("Strict", "Warn", "Ignore"):
            raise bad_request(f'invalid fieldValidation {validation!r}: expected "Strict", "Warn" or "Ignore"')
        return WriteOptions(dry_run="All" in dry_run, field_validation=cast(FieldValidation, validation))

    def _list_options(self, t: Target, query: MultiMapping[str], name: str = "") -> ListOptions:
        version = t.rt.version(t.version)
        allowed = ["metadata.name", "metadata.namespace", *(version.selectable_fields if version else ())]
        fields = parse_field_selector(query.get("fieldSelector"), allowed)
        if name:
            fields = FieldSelector((*fields.requirements, FieldRequirement("metadata.name", name, True)))
        limit_text = query.get("limit", "") or "0"
        if not limit_text.isdigit():
            raise bad_request(f"invalid limit {limit_text!r}: expected a non-negative integer")
        rv = query.get("resourceVersion", "")
        rvm = query.get("resourceVersionMatch", "")
        cont = query.get("continue", "")
        causes: list[Cause] = []
        if rvm and rvm not in ("NotOlderThan", "Exact"):
            causes.append(unsupported_value("resourceVersionMatch", rvm, ["Exact", "NotOlderThan"]))
        elif rvm and not rv and "sendInitialEvents" not in query:
            # (A watch-list, sendInitialEvents with NotOlderThan, may leave resourceVersion unset.)
            causes.append(
                forbidden_value(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"
                )
            )
        elif rvm == "Exact" and rv == "0":
            causes.append(
                forbidden_value(
                    "resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'
                )
            )
        if cont and rv not in ("", "0"):
            causes.append(
                forbidden_value("resourceVersion", "specifying resource version is not allowed when using continue")
            )
        if causes:
            raise invalid("meta.k8s.io", "ListOptions", "", causes)
        return ListOptions(
            label_selector=parse_label_selector(query.get("labelSelector")),
            field_selector=fields,
            limit=int(limit_text),
            continue_token=cont,
            resource_version=rv,
            resource_version_match=rvm,
        )

    @staticmethod
    def _delete_options(query: MultiMapping[str], body: Any) -> DeleteOptions:
        opts = body if isinstance(body, dict) else {}
        if body is not None and not isinstance(body, dict):
            raise bad_request("the DeleteOptions body must be a JSON object")
        propagation = opts.get("propagationPolicy") or query.get("propagationPolicy") or None
        orphan: Any = opts.get("orphanDependents")
        if orphan is None and "orphanDependents" in query:
            orphan = is_true(query.get("orphanDependents"))
        causes: list[Cause] = []
        if propagation is not None and propagation not in _PROPAGATION:
            causes.append(unsupported_value("propagationPolicy", propagation, list(_PROPAGATION)))
        if propagation is not None and orphan is not None:
            causes.append(
                invalid_value(
                    "propagationPolicy", propagation, "orphanDependents and propagationPolicy cannot be both set"
                )
            )
        if causes:
            raise invalid("meta.k8s.io", "DeleteOptions", "", causes)
        if orphan is not None:
            propagation = "Orphan" if orphan else "Background"
        dry = opts.get("dryRun") or query.getall("dryRun", [])
        if not isinstance(dry, list) or any(v != "All" for v in dry):
            raise bad_request(f'invalid dryRun value {dry!r}: expected ["All"]')
        pre = opts.get("preconditions") or {}
        if not isinstance(pre, dict):
            raise bad_request("DeleteOptions.preconditions must be an object")
        return DeleteOptions(
            propagation=cast(PropagationPolicy | None, propagation),
            dry_run="All" in dry,
            uid=pre.get("uid"),
            resource_version=pre.get("resourceVersion"),
        )

    # -- watch --------------------------------------------------------------------------

    def _watch_options(self, query: MultiMapping[str], lopts: ListOptions) -> WatchOptions:
        text = query.get("timeoutSeconds", "")
        if text and not text.isdigit():
            raise bad_request(f"invalid timeoutSeconds {text!r}: expected a non-negative integer")
        # handlers/get.go ListResource: without timeoutSeconds a watch lasts
        # minRequestTimeout * [1, 2) (kube-apiserver's --min-request-timeout, 1800 s).
        timeout = float(text) if text and int(text) > 0 else self.settings.watch_timeout * (1.0 + random.random())
        initial = is_true(query.get("sendInitialEvents"))
        if "sendInitialEvents" in query and lopts.resource_version_match != "NotOlderThan":
            raise invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                [
                    forbidden_value(
                        "sendInitialEvents",
                        "sendInitialEvents is forbidden unless resourceVersionMatch is NotOlderThan",
                    )
                ],
            )
        return WatchOptions(
            timeout=timeout, bookmarks=is_true(query.get("allowWatchBookmarks")), send_initial_events=initial
        )

    async def _watch(
        self, request: web.BaseRequest, info: RequestInfo, decision: Decision | None, wanted: Negotiated
    ) -> web.StreamResponse:
        t = self._target(info)
        lopts = self._list_options(Target(t.rt, t.version, t.namespace), request.query, name=t.name)
        wopts = self._watch_options(request.query, lopts)
        partial = wanted.version if wanted.transform == "PartialObjectMetadata" else None
        encoder = Encoder(t, self.api.store, partial=partial)
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        resp.enable_chunked_encoding()
        try:
            watch = open_watch(self.api.store, t, lopts, wopts, self.settings.max_watch_queue)
        except ApiError as err:
            # Too old: kube-apiserver answers 200 and a single ERROR event carrying the Status.
            await resp.prepare(request)
            await resp.write(encoder.error(err.status()))
            await resp.write_eof()
            return resp
        limit: Rule | None = decision.limit_watch if decision is not None else None
        if limit is not None:
            watch.event_budget = limit.events
            watch.abort = limit.abort
        drop = decision.drop if decision is not None else None
        self.watches[watch] = info
        try:
            await resp.prepare(request)
            await self._pump(request, resp, watch, encoder, wopts, drop is not None)
        except ConnectionError:
            pass  # the client went away: nothing to finish
        finally:
            close_watch(self.api.store, watch)
            self.watches.pop(watch, None)
        return resp

    async def _pump(
        self,
        request: web.BaseRequest,
        resp: web.StreamResponse,
        watch: Watch,
        encoder: Encoder,
        wopts: WatchOptions,
        drop: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wopts.timeout

        def next_bookmark(now: float) -> float | None:
            # storage/cacher/cache_watcher.go nextBookmarkTime: roughly every bookmark interval
            # (defaultBookmarkFrequency, a minute), and once right before the deadline
            # (2 s before); none when that moment has passed.
            if not wopts.bookmarks:
                return None
            at = min(now + self.settings.bookmark_interval, deadline - self.settings.bookmark_lead)
            return at if at >= now else None

        bookmark_at = next_bookmark(loop.time())
        while True:
            if watch.queue and not (watch.closed and watch.abort):
                if self.blackhole is not None:
                    await self.blackhole.wait()
                chunks = []
                while watch.queue and (watch.event_budget is None or watch.event_budget > 0):
                    type_, stored = watch.queue.popleft()
                    chunks.append(encoder.event(type_, stored, initial_end=type_ == BOOKMARK))
                    if watch.event_budget is not None:
                        watch.event_budget -= 1
                if chunks:
                    await resp.write(b"".join(chunks))
                    if drop:
                        watch.end(abort=True)
            if watch.event_budget is not None and watch.event_budget <= 0:
                watch.end(abort=watch.abort)
            if watch.closed:
                break
            now = loop.time()
            if now >= deadline:
                break
            if bookmark_at is not None and now >= bookmark_at and not watch.queue and self.blackhole is None:
                # Sent whatever else flows on the stream: the cacher's dispatch loop schedules
                # bookmarks by time, not by idleness.
                await resp.write(encoder.event(BOOKMARK, None))
                bookmark_at = next_bookmark(loop.time())
                continue
            wait = deadline - now
            if bookmark_at is not None:
                wait = min(wait, max(0.0, bookmark_at - now))
            watch.wake.clear()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(watch.wake.wait(), wait)
        if watch.abort:
            if request.transport is not None:
                request.transport.abort()
            return
        await resp.write_eof()

    def end_watches(self, match: Match, abort: bool) -> int:
        """End the open watches that ``match`` selects; returns how many."""
        ended = 0
        for watch, info in list(self.watches.items()):
            if not watch.closed and match.matches(info):
                watch.end(abort=abort)
                ended += 1
        return ended

    # -- faults -------------------------------------------------------------------------

    async def _truncate(self, request: web.BaseRequest, response: web.Response, rule: Rule) -> web.StreamResponse:
        body = cast(bytes, response.body or b"")
        cut = rule.after_bytes if rule.after_bytes is not None else len(body) // 2
        stream = web.StreamResponse(status=response.status, headers={"Content-Type": JSON})
        stream.content_length = len(body)
        await stream.prepare(request)
        await stream.write(body[: min(cut, max(len(body) - 1, 0))])
        if request.transport is not None:
            request.transport.abort()
        # aiohttp's attempt to finish this response meets the closed connection and gives up quietly.
        return stream
