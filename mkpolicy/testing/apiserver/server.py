"""``ApiServer``: start, stop, address, credentials, CRDs and direct object access.

A server runs its aiohttp loop either in a background thread (:meth:`ApiServer.start`,
for synchronous tests and tools) or in the caller's running loop
(:meth:`ApiServer.start_async`). Every public method may be called from any thread:
work on the store is handed to the server's loop.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import functools
import os
import secrets
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from mkpolicy.kube.certs import KeyPair, make_ca, make_serving_cert
from mkpolicy.kube.kubeconfig import make_kubeconfig, write_kubeconfig
from mkpolicy.testing.apiserver import resources as R
from mkpolicy.testing.apiserver.authz import User
from mkpolicy.testing.apiserver.crd import bundled_crds, load_crds
from mkpolicy.testing.apiserver.errors import MAX_BODY_BYTES, ApiError, bad_request, not_found
from mkpolicy.testing.apiserver.faults import Faults, Match, UnreachableMode
from mkpolicy.testing.apiserver.handlers import Handler, Settings
from mkpolicy.testing.apiserver.jsonutil import JsonObject, copy_json
from mkpolicy.testing.apiserver.operations import (
    Api,
    DeleteOptions,
    ListOptions,
    Target,
    WriteOptions,
)
from mkpolicy.testing.apiserver.patch import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH
from mkpolicy.testing.apiserver.resources import PropagationPolicy, Registry, ResourceType, split_api_version
from mkpolicy.testing.apiserver.selectors import parse_label_selector
from mkpolicy.testing.apiserver.storage import Store

if TYPE_CHECKING:
    from aiohttp import web

T = TypeVar("T")
CrdSource = str | os.PathLike[str] | Mapping[str, Any]

#: Namespaces every cluster starts with.
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_PATCH_TYPES = {"merge": MERGE_PATCH, "json": JSON_PATCH, "strategic": STRATEGIC_MERGE_PATCH}


class ApiServer:
    """A loopback Kubernetes API server (see :mod:`mkpolicy.testing.apiserver` for its limits).

    ::

        with ApiServer("worker1", bundled=True) as srv:        # TLS on 127.0.0.1:<ephemeral>
            client = srv.api_client()                           # a kubernetes.client.ApiClient
            srv.write_kubeconfig("worker1.kubeconfig")
            srv.faults.fail(500, verb="create")

    ``crds``: CRD files or dicts to serve; ``bundled``: True for every CRD shipped with
    mkpolicy (Kueue and Tekton), or a list of their names. ``history``: how many events
    per resource are kept for watch resumption and continue tokens. ``bookmark_interval``:
    seconds between the BOOKMARKs of a watch that allows them (kube-apiserver: 60), and
    ``bookmark_lead``: a last one that many seconds before the watch's deadline (2);
    ``watch_timeout``: kube-apiserver's ``--min-request-timeout`` (a watch that names no
    ``timeoutSeconds`` lasts between one and two times this).
    """

    def __init__(
        self,
        name: str = "loopback",
        *,
        crds: Iterable[CrdSource] = (),
        bundled: bool | Iterable[str] = False,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        tls: bool = True,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        history: int = 10_000,
        bookmark_interval: float = 60.0,
        bookmark_lead: float = 2.0,
        watch_timeout: float = 1800.0,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        if history < 1:
            raise ValueError(f"history must be at least 1, found {history}")
        self.name = name
        self.host = host
        self._port = port
        self.token = token or secrets.token_urlsafe(32)
        self.tls = tls
        self.registry = Registry()
        self.store = Store(history_limit=history)
        self.api = Api(self.registry, self.store)
        self.faults = Faults()
        self.settings = Settings(
            tokens={self.token},
            max_body=max_body,
            bookmark_interval=bookmark_interval,
            bookmark_lead=bookmark_lead,
            watch_timeout=watch_timeout,
        )
        self.ca: KeyPair | None = None
        self._cert: KeyPair | None = None
        if tls:
            self.ca = make_ca(f"mkpolicy-loopback-{name}-ca")
            self._cert = make_serving_cert(self.ca, [host, "localhost"], common_name=f"mkpolicy-loopback-{name}")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._thread: threading.Thread | None = None
        self._handler: Handler | None = None
        self._lowlevel: web.Server | None = None
        self._listener: asyncio.base_events.Server | None = None
        self._ssl: ssl.SSLContext | None = None
        self.faults.hooks.end_watches = self._end_watches
        self.faults.hooks.go_down = self._go_down
        self.faults.hooks.come_back = self._come_back
        for ns in namespaces:
            self.api.create(Target(R.NAMESPACES, "v1"), {"metadata": {"name": ns}})
        if bundled:
            for crd in bundled_crds(*(() if bundled is True else tuple(bundled))):
                self.register_crd(crd)
        for source in crds:
            self.register_crd(source)

    # -- address and credentials --------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port (known once started; fixed for the server's life)."""
        if not self._port:
            raise RuntimeError(f"API server {self.name!r} is not started: it has no port yet")
        return self._port

    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>`` (``http://`` when started with ``tls=False``)."""
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        """The PEM certificate of the CA that signed the serving certificate."""
        if self.ca is None:
            raise RuntimeError(f"API server {self.name!r} serves plain HTTP: it has no CA")
        return self.ca.cert_pem

    def add_token(self, token: str, *, user: str | None = None, groups: Iterable[str] = ()) -> None:
        """Accept ``token`` as well (e.g. one per client under test).

        Without ``user`` the token may do anything (as the server's own). With a ``user``
        (e.g. ``system:serviceaccount:kueue-system:kueue-controller-manager``) and its
        ``groups`` it is authorized by RBAC: the Roles and bindings stored in this server
        (:mod:`.authz`); a denied request is a 403 as kube-apiserver words it.
        """
        self.settings.tokens.add(token)
        if user is None:
            self.settings.users.pop(token, None)
        else:
            self.settings.users[token] = User(user, tuple(groups))

    def kubeconfig_for(self, token: str, *, cluster: str | None = None) -> dict[str, Any]:
        """A kubeconfig like :meth:`kubeconfig` that authenticates with ``token``."""
        if self.ca is None:
            raise RuntimeError("kubeconfig_for() needs TLS: Kueue-style kubeconfigs carry a CA")
        return make_kubeconfig(self.url, self.ca.cert_pem, token, cluster=cluster or self.name)

    def kubeconfig(self, *, cluster: str | None = None, namespace: str | None = None) -> dict[str, Any]:
        """A kubeconfig for this server: CA as data, bearer token (Kueue's accepted shape)."""
        if self.ca is None:
            raise RuntimeError("kubeconfig() needs TLS: Kueue-style kubeconfigs carry a CA")
        return make_kubeconfig(
            self.url, self.ca.cert_pem, self.token, cluster=cluster or self.name, namespace=namespace
        )

    def write_kubeconfig(self, path: str | os.PathLike[str], **kwargs: Any) -> Path:
        """Write :meth:`kubeconfig` to ``path`` (mode 0600); returns the path."""
        write_kubeconfig(os.fspath(path), self.kubeconfig(**kwargs))
        return Path(path)

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` configured for this server."""
        from kubernetes import config

        return config.new_client_from_config_dict(self.kubeconfig())  # type: ignore[no-untyped-call]

    # -- running ------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server has been started and not stopped."""
        return self._handler is not None

    def _ssl_context(self) -> ssl.SSLContext | None:
        if self._cert is None:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])
        with tempfile.TemporaryDirectory(prefix="mkpolicy-apiserver-") as tmp:
            cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            cert.write_bytes(self._cert.cert_pem)
            key.write_bytes(self._cert.key_pem)
            os.chmod(key, 0o600)
            ctx.load_cert_chain(cert, key)
        return ctx

    async def start_async(self) -> ApiServer:
        """Start serving in the running event loop; returns self."""
        from aiohttp import web

        if self._handler is not None:
            raise RuntimeError(f"API server {self.name!r} is already started")
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._handler = Handler(self.api, self.faults, self.settings)
        self._lowlevel = web.Server(self._handler, handler_cancellation=True, access_log=None)
        self._ssl = self._ssl_context()
        await self._listen()
        self.settings.server_address = f"{self.host}:{self.port}"
        return self

    async def _listen(self) -> None:
        assert self._loop is not None and self._lowlevel is not None
        self._listener = await self._loop.create_server(
            self._lowlevel, self.host, self._port, ssl=self._ssl, reuse_address=True, backlog=256
        )
        if not self._port:
            self._port = self._listener.sockets[0].getsockname()[1]

    async def stop_async(self) -> None:
        """Stop serving: end the watches, close the listener and every connection."""
        if self._handler is None:
            return
        handler, self._handler = self._handler, None
        if handler.blackhole is not None:
            handler.blackhole.set()
        handler.end_watches(Match(), abort=False)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._lowlevel is not None:
            await asyncio.sleep(0)  # let ended watches write their last chunk
            # close() wakes idle keep-alive connections, which shutdown() alone would wait out.
            self._lowlevel.pre_shutdown()
            await self._lowlevel.shutdown(1.0)
            self._lowlevel = None

    def start(self) -> ApiServer:
        """Start serving from a background thread (its own event loop); returns self."""
        if self._thread is not None or self._handler is not None:
            raise RuntimeError(f"API server {self.name!r} is already started")
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:
                ready.set_exception(exc)
                loop.close()
                return
            ready.set_result(None)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name=f"apiserver-{self.name}", daemon=True)
        self._thread.start()
        try:
            ready.result(timeout=30)
        except BaseException:
            self._thread.join(5)
            self._thread = None
            raise
        return self

    def stop(self) -> None:
        """Stop a server (thread mode; in async mode use ``await stop_async()``)."""
        if self._thread is None:
            if self._handler is not None:
                if self._in_loop():
                    raise RuntimeError("stop() would block the server's own loop: use 'await stop_async()'")
                assert self._loop is not None
                asyncio.run_coroutine_threadsafe(self.stop_async(), self._loop).result(30)
            return
        loop, thread = self._loop, self._thread
        assert loop is not None
        try:
            asyncio.run_coroutine_threadsafe(self.stop_async(), loop).result(30)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
            self._thread = None
            self._loop = None

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> ApiServer:
        return await self.start_async()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop_async()

    def _in_loop(self) -> bool:
        return self._loop_thread == threading.get_ident()

    def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the server's loop thread (directly when already there or not running)."""
        loop = self._loop
        if loop is None or self._handler is None or self._in_loop() or not loop.is_running():
            return fn()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return future.result(timeout=30)

    def watch_count(self, **match: str) -> int:
        """How many watches are open now (optionally only those matching, as in
        :meth:`Faults.fail`: ``resource=``, ``namespace=``, ...). Tests wait on it before writing."""
        criteria = Match(**match)

        def count() -> int:
            handler = self._handler
            if handler is None:
                return 0
            return sum(1 for w, info in handler.watches.items() if not w.closed and criteria.matches(info))

        return self._call(count)

    def wait_for_watches(self, count: int = 1, *, timeout: float = 5.0, **match: str) -> None:
        """Block until at least ``count`` matching watches are open (TimeoutError otherwise)."""
        import time

        deadline = time.monotonic() + timeout
        while self.watch_count(**match) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.watch_count(**match)} matching watches open after {timeout} s, expected {count}"
                )
            time.sleep(0.01)

    # -- faults that need the loop ------------------------------------------------------

    def _end_watches(self, match: Match, abort: bool) -> int:
        return self._call(lambda: self._handler.end_watches(match, abort) if self._handler else 0)

    def _go_down(self, mode: UnreachableMode) -> None:
        async def down() -> None:
            handler = self._handler
            if handler is None:
                raise RuntimeError(f"API server {self.name!r} is not running")
            if mode == "blackhole":
                if handler.blackhole is None:
                    handler.blackhole = asyncio.Event()
                return
            handler.end_watches(Match(), abort=True)
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            for conn in self._lowlevel.connections if self._lowlevel else []:
                if conn.transport is not None:
                    conn.transport.abort()

        self._run(down)

    def _come_back(self) -> None:
        async def back() -> None:
            handler = self._handler
            if handler is None:
                raise RuntimeError(f"API server {self.name!r} is not running")
            if handler.blackhole is not None:
                handler.blackhole.set()
                handler.blackhole = None
            if self._listener is None:
                await self._listen()

        self._run(back)

    def _run(self, coro_fn: Callable[[], Any]) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"API server {self.name!r} is not running")
        if self._in_loop():
            # Called from the loop itself (async tests): schedule, do not block.
            loop.create_task(coro_fn())
            return
        asyncio.run_coroutine_threadsafe(coro_fn(), loop).result(30)

    # -- resource types -----------------------------------------------------------------

    def register_crd(self, crd: CrdSource) -> list[ResourceType]:
        """Serve the CRD(s) of a file or a dict (created, or replaced when already there)."""
        docs = [dict(crd)] if isinstance(crd, Mapping) else load_crds(crd)
        out = []
        for doc in docs:
            out.append(self._call(functools.partial(self._store_crd, doc)))
        return out

    def _store_crd(self, crd: Mapping[str, Any]) -> ResourceType:
        body = _copy(dict(crd))
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        name = meta.get("name", "")
        t = Target(R.CRDS, "v1", "", name)
        existing = self.api.store.get(R.CRDS.key, ("", name))
        if existing is None:
            self.api.create(t, body)
        else:
            body["metadata"] = {**meta, "resourceVersion": existing.meta["resourceVersion"]}
            self.api.update(t, body)
        spec = body["spec"]
        rt = self.registry.get(spec["group"], spec["names"]["plural"])
        assert rt is not None
        return rt

    def resource_types(self) -> builtins.list[ResourceType]:
        """Every resource type served now."""
        return self._call(lambda: list(self.registry))

    # -- direct object access (no HTTP) -------------------------------------------------

    def _resolve(
        self,
        api_version: str,
        kind: str,
        name: str = "",
        namespace: str | None = None,
        *,
        namespace_required: bool = True,
    ) -> Target:
        group, version = split_api_version(api_version)
        rt = self.registry.by_kind(group, kind)
        if rt is None or rt.version(version) is None:
            raise not_found(group, kind.lower(), name or kind)
        if rt.namespaced and not namespace and namespace_required:
            raise bad_request(f"{kind} is namespaced: a namespace is required")
        return Target(rt, version, (namespace or "") if rt.namespaced else "", name)

    def create(self, obj: Mapping[str, Any], *, namespace: str | None = None) -> JsonObject:
        """Create ``obj`` (its apiVersion/kind pick the resource); returns the stored object."""
        body = _copy(dict(obj))
        ns = namespace or (body.get("metadata") or {}).get("namespace") or None

        def run() -> JsonObject:
            t = self._resolve(str(body.get("apiVersion", "")), str(body.get("kind", "")), namespace=ns)
            return _copy(self.api.create(t, body).stored.as_version(t.api_version))

        return self._call(run)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> JsonObject:
        """The stored object (a copy); raises ApiError 404 when absent."""

        def run() -> JsonObject:
            t = self._resolve(api_version, kind, name, namespace)
            return _copy(self.api.get(t).as_version(t.api_version))

        return self._call(run)

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, *, label_selector: str | None = None
    ) -> builtins.list[JsonObject]:
        """The objects of a kind (in ``namespace``, or all), optionally label-selected."""

        def run() -> builtins.list[JsonObject]:
            t = self._resolve(api_version, kind, namespace=namespace, namespace_required=False)
            opts = ListOptions(label_selector=parse_label_selector(label_selector))
            return [_copy(s.as_version(t.api_version)) for s in self.api.list(t, opts).items]

        return self._call(run)

    def update(self, obj: Mapping[str, Any], *, subresource: str = "") -> JsonObject:
        """Replace an object (or its status with ``subresource="status"``); 409 on a stale resourceVersion."""
        body = _copy(dict(obj))
        meta = body.get("metadata") or {}

        def run() -> JsonObject:
            base = self._resolve(str(body.get("apiVersion", "")), str(body.get("kind", "")), meta.get("name", ""),
                                 meta.get("namespace"))  # fmt: skip
            t = Target(base.rt, base.version, base.namespace, base.name, subresource)
            return _copy(self.api.update(t, body).stored.as_version(t.api_version))

        return self._call(run)

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str = "",
    ) -> JsonObject:
        """Patch an object; ``patch_type`` is ``merge``, ``json`` or ``strategic``."""
        if patch_type not in _PATCH_TYPES:
            raise ValueError(f"patch_type must be one of {', '.join(_PATCH_TYPES)}, found {patch_type!r}")
        import json

        raw = json.dumps(patch).encode()

        def run() -> JsonObject:
            base = self._resolve(api_version, kind, name, namespace)
            t = Target(base.rt, base.version, base.namespace, name, subresource)
            return _copy(
                self.api.patch(t, _PATCH_TYPES[patch_type], raw, WriteOptions()).stored.as_version(t.api_version)
            )

        return self._call(run)

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: PropagationPolicy | None = None,
    ) -> JsonObject | None:
        """Delete an object; returns its state while finalizers hold it, None once it is gone."""

        def run() -> JsonObject | None:
            t = self._resolve(api_version, kind, name, namespace)
            stored, gone = self.api.delete(t, DeleteOptions(propagation=propagation))
            return None if gone else _copy(stored.as_version(t.api_version))

        return self._call(run)

    @property
    def resource_version(self) -> int:
        """The newest resource version (every write increments it)."""
        return self.store.rv

    def compact(self) -> int:
        """Forget every resource's history, as an etcd compaction: watches resuming from an
        older resourceVersion (and continue tokens) now get 410 Expired. Returns the current version."""
        return self._call(self.store.compact)


__all__ = ["DEFAULT_NAMESPACES", "ApiError", "ApiServer"]


def _copy(value: Any) -> JsonObject:
    """A private deep copy of an object handed across the API boundary."""
    out: JsonObject = copy_json(value)
    return out
