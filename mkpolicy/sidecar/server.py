"""The sidecar process: worker endpoints, worker kubeconfigs, manager reads, policy reload, probes, shutdown.

``Sidecar(config, policies_dir)`` is started with ``await sidecar.start()`` and
stopped with ``await sidecar.stop()``; ``mkpolicy sidecar`` runs it until SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import aiohttp

from mkpolicy.errors import MkpolicyError
from mkpolicy.kube.client import ApiError, KubeClient, ResourceInfo
from mkpolicy.kube.kubeconfig import KubeconfigFiles, dump_kubeconfig, load_kubeconfig, rest_config
from mkpolicy.kube.rest import RestConfig, in_cluster_config
from mkpolicy.policy import GVK
from mkpolicy.sidecar.cache import ManagerCache, read_object
from mkpolicy.sidecar.config import ConfigError, SidecarConfig, Worker
from mkpolicy.sidecar.contract import Contract
from mkpolicy.sidecar.contract import build as build_contract
from mkpolicy.sidecar.endpoints import Credentials, certificate_hosts, endpoint_url, load_or_create
from mkpolicy.sidecar.events import EventRecorder
from mkpolicy.sidecar.execution import Evaluator
from mkpolicy.sidecar.kueueconfig import Finding, KueueInfo, policy_findings, port_findings, read_kueue, sidecar_ports
from mkpolicy.sidecar.listener import Listener
from mkpolicy.sidecar.logs import fields, plain_error
from mkpolicy.sidecar.mainstatus import Written, write_status
from mkpolicy.sidecar.manager_checks import bypass_state, crd_report
from mkpolicy.sidecar.managerread import ManagerReader, manager_reader
from mkpolicy.sidecar.metrics import Metrics
from mkpolicy.sidecar.ops import OpsServer
from mkpolicy.sidecar.policies import Entry, PolicySet, PolicyStore, ReloadError, holds_yaml
from mkpolicy.sidecar.proxy import WorkerEndpoint
from mkpolicy.sidecar.requestlog import RequestLog, open_request_log
from mkpolicy.sidecar.transform import measure
from mkpolicy.sidecar.wiring import UnwireResult, WireResult, multikueue_secret, unwire, wire
from mkpolicy.sidecar.workers import WorkerLink

log = logging.getLogger("mkpolicy.sidecar")

#: How the sidecar names itself to the manager's API server.
USER_AGENT = "mkpolicy-sidecar"
#: Seconds between two looks at what the manager must provide (:meth:`Sidecar.check_manager`), and
#: before the first one (``--wire`` points the Secrets here right after the start, then looks itself).
MANAGER_CHECK_INTERVAL = 30.0
MANAGER_CHECK_FIRST = 2.0

T = TypeVar("T")


class Sidecar:
    """mkpolicy on the wire between the Kueue manager and its workers."""

    def __init__(
        self,
        config: SidecarConfig,
        policies_dir: str,
        *,
        manager: RestConfig | None = None,
        transform_threads: int = 2,
    ) -> None:
        self.config = config
        self.policies_dir = policies_dir
        self.origin = config.origin
        self.metrics = Metrics()
        self.closing = False
        self.credentials: Credentials = load_or_create(
            config.state.dir,
            [w.name for w in config.workers],
            certificate_hosts(config.listen.address, config.listen.hosts),
        )
        self._manager_config = manager
        self._manager: KubeClient | None = None
        #: The manager's objects read live on transformed requests (None: through ``_manager``).
        self._reader: ManagerReader | None = None
        self._caches: dict[GVK, ManagerCache] = {}
        self.events = EventRecorder(lambda: self._manager, self.metrics)
        #: What the Kueue beside the sidecar is configured with (read at start).
        self.kueue: KueueInfo | None = None
        #: The request log (``logging.requestLog``), open while started.
        self.request_log: RequestLog | None = None
        self._findings: list[Finding] = []
        self._links: dict[str, WorkerLink] = {}
        #: Workers whose Secret --wire could not point at the sidecar, and why.
        self._wiring_problems: dict[str, str] = {}
        self._ops: OpsServer | None = None
        self._listeners: list[Listener] = []
        self._ports: dict[str, int] = {}
        self._ops_port = 0
        self._evaluator = Evaluator(transform_threads)
        self._store = PolicyStore(policies_dir, self._resolve, self.metrics, self._policies_changed)
        self._first_load: asyncio.Task[None] | None = None
        self._manager_follow: asyncio.Task[None] | None = None
        #: Why the manager's kubeconfig (or service account) could not be read again, or None.
        self._manager_problem: str | None = None
        self._manager_checks: asyncio.Task[None] | None = None
        #: Policies whose manager CRD prunes their managedBy field, and why; workers Kueue reaches directly.
        self.crd_problems: dict[str, str] = {}
        self.bypassed: dict[str, str] = {}
        self._started = False
        self._contract: Contract | None = None
        self._contract_key: tuple[object, object] = (None, None)

    # -- Hub (what the endpoints use) ------------------------------------------------------------
    @property
    def policies(self) -> PolicySet | None:
        """The active policy set."""
        return self._store.active

    @property
    def contract(self) -> Contract:
        """The wire contract for Kueue's configuration and the active policies (rebuilt when they change)."""
        key = (self.kueue, self._store.active)
        if self._contract is None or self._contract_key[0] is not key[0] or self._contract_key[1] is not key[1]:
            self._contract = build_contract(
                self.kueue, self._store.active, self.config.wire.allow, self.config.wire.allow_paths
            )
            self._contract_key = key
        return self._contract

    async def manager_object(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The manager's object for a policy kind: the watch cache, else a direct read."""
        found = self.cached_manager_object(entry, namespace, name)
        if found is not None:
            return found
        # No cache (manager.reads: direct, or a policy set being swapped in) or a miss. The object
        # read is not cached: the watch delivers it (a deleted object could otherwise linger).
        obj = await self._read(entry.info, namespace, name)
        self.metrics.cache_reads.labels(entry.name, "direct" if obj is not None else "absent").inc()
        return obj

    async def read_manager(self, info: ResourceInfo, namespace: str | None, name: str) -> dict[str, Any] | None:
        """An object of any kind read from the manager (None when absent or unreadable)."""
        try:
            return await self._read(info, namespace, name)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError):
            return None

    async def _read(self, info: ResourceInfo, namespace: str | None, name: str) -> dict[str, Any] | None:
        """``namespace/name`` read live from the manager (None when it does not exist)."""
        if self._reader is None:
            assert self._manager is not None
            return await read_object(self._manager, info, namespace, name)
        return await self._reader.get(info.path(namespace if info.namespaced else None, name))

    async def write_main_status(self, entry: Entry, worker: dict[str, Any], cluster: str) -> Written:
        """The policy's sync of ``worker`` written to the manager's main resource (:mod:`.mainstatus`)."""
        assert self._manager is not None
        return await write_status(self._manager, entry, worker, cluster, self.origin, self._measured)

    async def _measured(self, key: object, *args: Any) -> Any:
        return await self._evaluator.run(key, measure, *args)

    async def offload(self, key: object, fn: Callable[..., T], *args: Any) -> T:
        """Run policy work ``fn(*args)`` for the adapter ``key`` (inline when proven fast)."""
        return await self._evaluator.run(key, fn, *args)

    def inline(self, key: object) -> bool:
        """Whether policy work for the adapter ``key`` runs on the event loop now."""
        return self._evaluator.inline(key)

    def run_here(self, key: object, fn: Callable[..., T], *args: Any) -> T:
        """Run policy work ``fn(*args)`` on the event loop (when :meth:`inline` says so)."""
        return self._evaluator.run_here(key, fn, *args)

    def cached_manager_object(self, entry: Entry, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The manager's object from the watch cache only (None on a miss, or with manager.reads: direct);
        a hit is counted."""
        cache = self._caches.get(entry.adapter.gvk)
        if cache is None:
            return None
        obj = cache.get(namespace if entry.info.namespaced else None, name)
        if obj is not None:
            cache.count_hit()
        return obj

    def caches(self, entry: Entry) -> bool:
        """Whether the manager's objects of ``entry``'s kind are kept in a watch cache (``manager.reads: cache``)."""
        return entry.adapter.gvk in self._caches

    def worker_problem(self, cluster: str) -> str | None:
        """Why ``cluster``'s endpoint cannot serve, or None."""
        link = self._links.get(cluster)
        return link.problem if link is not None else f"unknown worker {cluster}"

    def worker_failed(self, cluster: str, message: str) -> None:
        """A request could not reach ``cluster`` (shown by /readyz for a while)."""
        link = self._links.get(cluster)
        if link is not None:
            link.failed(message)

    # -- information ------------------------------------------------------------------------------
    def port(self, worker: str) -> int:
        """The port ``worker``'s endpoint listens on (after start)."""
        return self._ports[worker]

    @property
    def ops_port(self) -> int:
        """The port of /healthz, /readyz and /metrics (after start)."""
        return self._ops_port

    def endpoint(self, worker: str) -> str:
        """``https://host:port`` of ``worker``'s endpoint."""
        return endpoint_url(self.config.listen.address, self.port(worker))

    def kubeconfig(self, worker: str) -> dict[str, Any]:
        """The kubeconfig Kueue uses for ``worker``: this sidecar's endpoint (passes Kueue's rules)."""
        return self.credentials.kubeconfig(worker, self.endpoint(worker))

    def readiness(self) -> tuple[bool, list[str]]:
        """(ready, checks): a policy set is active and none is pending, every manager cache synced (if
        any), not shutting down. ``warn`` lines (one worker refused or unreachable, what Kueue's
        configuration disagrees with) do not fail readiness: the other workers keep serving."""
        checks: list[str] = []
        active = self._store.active
        checks.append("ok policies" if active is not None else f"fail policies: {self._store.last_error or 'loading'}")
        if active is not None and self.config.manager.reads == "cache":  # direct reads: no cache to wait for
            names = {e.adapter.gvk: e.name for e in active.entries}
            for gvk, name in sorted(names.items()):
                cache = self._caches.get(gvk)
                synced = cache is not None and cache.synced.is_set()
                checks.append(f"ok cache {name}" if synced else f"fail cache {name}: not synced")
        if active is not None:
            # A pending policy's kind cannot be transformed: its creations are refused until the
            # manager serves it, and the sidecar is not ready meanwhile.
            checks.extend(f"fail pending {p}" for p in active.pending)
            checks.extend(f"ok skipped {p}" for p in active.skipped)
        checks.extend(link.readiness() for link in self._links.values())
        if self._manager_problem is not None:
            checks.append(f"fail manager: {self._manager_problem}")
        checks.extend(f"warn wiring {name}: {why}" for name, why in self._wiring_problems.items())
        checks.extend(f"warn crd {name}: {why}" for name, why in sorted(self.crd_problems.items()))
        checks.extend(f"warn bypass {name}: {why}" for name, why in sorted(self.bypassed.items()))
        if self.kueue is not None:
            checks.append(f"ok kueue: {self.kueue.describe()}")
        checks.extend(f"warn kueue: {f.message}" for f in self._findings if f.level != "info")
        if self._store.last_error and active is not None:
            checks.append(f"ok last-reload (rejected, previous set kept): {self._store.last_error.splitlines()[0]}")
        if self.closing:
            checks.append("fail shutdown: draining")
        elif not self._started:
            checks.append("fail start: the endpoints are not listening yet")
        return not any(c.startswith("fail") for c in checks), checks

    @property
    def ready(self) -> bool:
        """Whether /readyz answers 200."""
        return self.readiness()[0]

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect, load policies, listen. Raises ConfigError, KubeconfigError or ReloadError.

        A failed start leaves nothing running (connections closed, ports released).
        """
        if self._started:
            return
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise
        self._started = True
        cfg = self.config
        log.info(
            "sidecar started",
            extra=fields(
                endpoints={w.name: self.endpoint(w.name) for w in cfg.workers},
                ops=f"http://{cfg.ops.address}:{self._ops_port}",
                origin=self.origin,
            ),
        )

    async def _start(self) -> None:
        cfg = self.config
        if cfg.logging.request_log is not None:
            self.request_log = open_request_log(cfg.logging.request_log.file, cfg.logging.request_log.max_entries)
        manager_config = self._manager_config or manager_rest_config(cfg)
        self._manager = KubeClient(manager_config, user_agent=USER_AGENT)
        self._reader = manager_reader(manager_config, USER_AGENT)
        self.metrics.init_series([w.name for w in cfg.workers])
        self.kueue = await read_kueue(self._manager, cfg)
        self._store.kueue = self.kueue
        for worker in cfg.workers:
            link = WorkerLink(worker, cfg.manager.namespace, self.own_endpoints, self.metrics, cfg.limits)
            self._links[worker.name] = link
            await link.load(self._manager)  # a refused worker is served as refused, never aborts the start
        await self._start_ops()
        try:
            await self._store.reload(force=True)
        except ReloadError as exc:
            if exc.reason == "discovery":
                self._first_load = asyncio.create_task(self._retry_first_load(), name="policy-first-load")
            elif cfg.reload.interval_seconds > 0 and not holds_yaml(self._store.directory):
                # The policies ConfigMap volume is optional: before the ConfigMap exists the kubelet
                # mounts an empty directory and fills it once it does. Keep serving (writes are
                # answered 503 until a set is active) instead of crash-looping Kueue's pod.
                log.warning(
                    "no policies yet: waiting for the policies directory to fill",
                    extra=fields(directory=self._store.directory),
                )
            else:
                raise
        for worker, port in zip(cfg.workers, cfg.worker_ports(), strict=True):
            await self._start_endpoint(worker, port)
        interval = cfg.reload.interval_seconds
        for link in self._links.values():
            link.follow(self._manager, interval)
        self.events.start()
        self._store.start(interval)
        if self._manager_config is None and interval > 0:
            self._manager_follow = asyncio.create_task(self._follow_manager(interval), name="manager-kubeconfig")
        self._report_kueue(self._store.active)
        self._manager_checks = asyncio.create_task(self._check_manager_loop(), name="manager-checks")

    async def _check_manager_loop(self) -> None:
        await asyncio.sleep(MANAGER_CHECK_FIRST)
        while True:
            try:
                await self.check_manager()
            except Exception as exc:  # never let the loop die
                log.exception("manager checks failed", extra=fields(error=plain_error(exc)))
            await asyncio.sleep(MANAGER_CHECK_INTERVAL)

    async def check_manager(self) -> None:
        """Look at what the manager must provide (:mod:`.manager_checks`): each policy kind's CRD keeps
        its managedBy field, Kueue reaches each worker through this sidecar. Problems show in /readyz
        (``warn``: the other policies and workers keep serving), the metrics and the log."""
        manager, active = self._manager, self._store.active
        if manager is None:
            return
        crd: dict[str, str] = {}
        for entry in active.entries if active is not None else ():
            try:
                report = await crd_report(manager, entry.adapter, entry.info)
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError):
                continue  # unreadable now: the last answer stands until the next look
            self.metrics.crd_pruned.labels(entry.name).set(1 if report.problem else 0)
            if report.problem:
                crd[entry.name] = report.problem
        bypassed: dict[str, str] = {}
        for worker in self.config.workers:
            try:
                state, why = await bypass_state(manager, worker, self.config.manager.namespace, self.own_endpoints())
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError):
                continue
            self.metrics.bypassed.labels(worker.name).set(1 if state == "bypassed" else 0)
            if state == "bypassed":
                bypassed[worker.name] = why
        for name, why in crd.items():
            if self.crd_problems.get(name) != why:
                log.error("policy kind's CRD prunes managedBy", extra=fields(policy=name, error=why))
        for name, why in bypassed.items():
            if self.bypassed.get(name) != why:
                log.warning("Kueue bypasses the sidecar", extra=fields(cluster=name, error=why))
        self.crd_problems, self.bypassed = crd, bypassed

    def _report_kueue(self, active: PolicySet | None) -> None:
        """Log what Kueue's configuration says about the policies and the ports (and keep it for /readyz)."""
        assert self.kueue is not None
        policies = [(e.name, e.adapter.gvk) for e in active.entries] if active is not None else []
        stranded = [lost for lost, _ in active.stranded] if active is not None else []
        pending = list(active.pending_kinds) if active is not None else []
        findings = policy_findings(self.kueue, policies, stranded, pending)
        findings += port_findings(self.kueue, sidecar_ports(self.config))
        self._findings = findings
        log.info("kueue configuration", extra=fields(kueue=self.kueue.describe(), unread=self.kueue.unread))
        for finding in findings:
            (log.info if finding.level == "info" else log.warning)("kueue: " + finding.message)

    def own_endpoints(self) -> frozenset[str]:
        """The URLs of this sidecar's endpoints (a kubeconfig pointing there is not a worker's)."""
        address = self.config.listen.address
        ports = {p for p in self.config.worker_ports() if p} | set(self._ports.values())
        return frozenset(endpoint_url(address, p) for p in ports)

    async def _follow_manager(self, interval: float) -> None:
        """Read the manager's kubeconfig (or the service account's CA) again every ``interval`` seconds
        and take up a change (a rotated CA, client certificate, server) from the next request on, as
        worker kubeconfigs are followed."""
        path = self.config.manager.kubeconfig
        files = KubeconfigFiles(path) if path is not None else None
        while True:
            await asyncio.sleep(interval)
            snapshot = files.snapshot() if files is not None else None
            if files is not None and files.unchanged(snapshot):
                continue  # not a byte changed: nothing parsed
            try:
                config, data = manager_kubeconfig(self.config)
            except MkpolicyError as exc:
                if self._manager_problem is None:
                    log.warning("manager kubeconfig unreadable; the last one is kept", extra=fields(error=exc.message))
                self._manager_problem = exc.message
                continue
            self._manager_problem = None
            manager = self._manager
            if manager is not None and config != manager.config:
                try:
                    manager.reconfigure(config)
                except MkpolicyError as exc:
                    self._manager_problem = exc.message
                    continue
                await self._reconfigure_reader(config)
                log.info("manager kubeconfig changed; taken up", extra=fields(server=config.server))
            if files is not None:
                files.taken(snapshot, data)

    async def _reconfigure_reader(self, config: RestConfig) -> None:
        """The live reads follow the manager's new kubeconfig (through the API client when the pool cannot)."""
        if self._reader is None:
            self._reader = manager_reader(config, USER_AGENT)
            return
        try:
            self._reader.reconfigure(config)
        except ValueError:
            retired, self._reader = self._reader, None
            await retired.close()

    async def _retry_first_load(self) -> None:
        delay = 0.5
        while self._store.active is None:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
            try:
                await self._store.reload(force=True)
            except ReloadError:
                continue

    async def _start_ops(self) -> None:
        # the endpoints' listener and limits (bounded before anything is read too), on a thread of its
        # own: the probes are answered while the endpoints' loop is busy
        self._ops = OpsServer(self.readiness, self.metrics, self.config.limits)
        self._ops_port = await self._ops.start(self.config.ops.address, self.config.ops.port)

    async def _start_endpoint(self, worker: Worker, port: int) -> None:
        endpoint = WorkerEndpoint(self, self._links[worker.name].upstream)
        listener = Listener(endpoint.handle, self.credentials.server_context(), endpoint.fast, self.config.limits)
        self._ports[worker.name] = await listener.start(self.config.listen.address, port)
        self._listeners.append(listener)
        self._links[worker.name].on_refused = listener.end_streams

    async def stop(self) -> None:
        """Graceful shutdown: not ready, stop listening, end watches cleanly, drain requests, disconnect."""
        if self.closing and not self._started and self._manager is None:
            return
        self.closing = True
        log.info("sidecar stopping", extra=fields(grace_seconds=self.config.shutdown.grace_period_seconds))
        if self._first_load is not None:
            self._first_load.cancel()
        if self._manager_follow is not None:
            self._manager_follow.cancel()
        if self._manager_checks is not None:
            self._manager_checks.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._manager_checks
            self._manager_checks = None
        await self._store.stop()
        # Every endpoint stops listening and drains at once (watches end cleanly); the probes go last.
        grace = self.config.shutdown.grace_period_seconds
        await asyncio.gather(*(listener.close(grace) for listener in self._listeners))
        self._listeners.clear()
        if self._ops is not None:
            await self._ops.close(1.0)
            self._ops = None
        for cache in list(self._caches.values()):
            await cache.stop()
        self._caches.clear()
        for link in self._links.values():
            await link.stop()
        await self.events.stop()
        if self.request_log is not None:
            self.request_log.close()
            self.request_log = None
        if self._manager is not None:
            await self._manager.close()
            self._manager = None
        if self._reader is not None:
            await self._reader.close()
            self._reader = None
        self._evaluator.shutdown()
        self._started = False
        log.info("sidecar stopped")

    # -- policies and caches ---------------------------------------------------------------------
    async def _resolve(self, gvk: GVK) -> ResourceInfo:
        assert self._manager is not None
        return await self._manager.discover(gvk.group, gvk.version, gvk.kind)

    async def _policies_changed(self, new: PolicySet) -> None:
        assert self._manager is not None
        self.metrics.init_series(list(self._links), [e.name for e in new.entries])
        if self.kueue is not None and self._started:
            self._report_kueue(new)
        if self.config.manager.reads == "direct":
            return  # every read goes to the manager: no watch cache to keep (nor list and watch for)
        wanted = {e.adapter.gvk: e for e in new.entries}
        for gvk in [g for g in self._caches if g not in wanted]:
            await self._caches.pop(gvk).stop()
        for gvk, entry in wanted.items():
            if gvk not in self._caches:
                cache = ManagerCache(self._manager, entry.info, entry.name, self.metrics)
                cache.start()
                self._caches[gvk] = cache

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until /readyz would answer 200 (TimeoutError naming the failing checks)."""
        deadline = time.monotonic() + timeout
        while True:
            ready, checks = self.readiness()
            if ready:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("sidecar not ready: " + "; ".join(c for c in checks if not c.startswith("ok")))
            await asyncio.sleep(0.02)

    # -- wiring --------------------------------------------------------------------------------------
    async def wire(self) -> dict[str, WireResult | str]:
        """Point every worker's MultiKueueCluster Secret at this sidecar (after start), and keep it so.

        The Secrets are watched from then on: one rewritten by someone else (a rotation, GitOps)
        is wired again at once, its new kubeconfig kept as the worker's real one. A worker that
        cannot be wired (no MultiKueueCluster, a ClusterProfile or Path one) is reported and
        skipped; the others are wired.
        """
        assert self._manager is not None
        out: dict[str, WireResult | str] = {}
        for worker in self.config.workers:
            link = self._links[worker.name]
            try:
                secret = await multikueue_secret(self._manager, worker)
            except (ConfigError, ApiError, aiohttp.ClientError, OSError) as exc:
                message = plain_error(exc)
                self._wiring_problems[worker.name] = message
                log.error("cannot wire", extra=fields(cluster=worker.name, error=message))
                out[worker.name] = f"not wired: {message}"
                continue
            link.rewire = self._rewire
            if link.wired_secret != secret:  # (wire() again: the same Secret is watched once)
                link.wired_secret = secret
                link.follow_wired(self._manager, secret)
            result = await self._rewire(worker.name, secret)
            if result is not None:
                out[worker.name] = result
        await self.check_manager()  # the Secrets point here now: /readyz says so at once
        return out

    async def _rewire(self, worker: str, secret: str) -> WireResult | None:
        """Write this sidecar's kubeconfig for ``worker`` into ``secret`` (None when that failed: logged)."""
        assert self._manager is not None
        text = dump_kubeconfig(self.kubeconfig(worker))
        try:
            result = await wire(
                self._manager,
                self.config.manager.namespace,
                secret,
                text,
                self.endpoint(worker),
                self.own_endpoints(),
            )
        except (ApiError, aiohttp.ClientError, OSError) as exc:
            self._wiring_problems[worker] = f"cannot write Secret {secret}: {plain_error(exc)}"
            log.error("cannot wire", extra=fields(cluster=worker, secret=secret, error=plain_error(exc)))
            return None
        self._wiring_problems.pop(worker, None)
        return result


async def unwire_all(config: SidecarConfig, manager: RestConfig | None = None) -> dict[str, UnwireResult]:
    """Restore every worker's MultiKueueCluster Secret as it was before ``--wire``."""
    async with KubeClient(manager or manager_rest_config(config), user_agent=USER_AGENT) as client:
        out: dict[str, UnwireResult] = {}
        for worker in config.workers:
            secret = await multikueue_secret(client, worker)
            out[worker.name] = await unwire(client, config.manager.namespace, secret)
        return out


def manager_rest_config(config: SidecarConfig) -> RestConfig:
    """The manager connection: its kubeconfig file, or the pod's service account."""
    return manager_kubeconfig(config)[0]


def manager_kubeconfig(config: SidecarConfig) -> tuple[RestConfig, dict[str, Any]]:
    """The manager connection and the kubeconfig it is made from (empty: the pod's service account)."""
    path = config.manager.kubeconfig
    if path is None:
        return in_cluster_config(), {}
    data = load_kubeconfig(path)
    rest = rest_config(
        data, path, kueue_rules=False, base_dir=os.path.dirname(os.path.abspath(path)), context=config.manager.context
    )
    return rest, data
