"""The Kueue model: MultiKueue's controllers on a manager, talking to workers as Kueue does.

:class:`Kueue` runs, in the caller's event loop, what Kueue's manager runs for MultiKueue
with external frameworks:

- the MultiKueueCluster reconciler (``multikueuecluster.go`` ``clustersReconciler``): for
  each cluster, its Secret's kubeconfig (re-read whenever the Secret or the cluster
  changes), held to Kueue's rules (:mod:`.kubeconfig`); a worker connection
  (:mod:`.remote`) rebuilt when the kubeconfig changes or a watch ends; the cluster's
  ``Active`` condition written back to the manager;
- the workload reconciler (:mod:`.reconcile`), woken by the manager's Workloads and by
  the workers' watch events (1 s batching, ``UpdatesBatchPeriod``);
- garbage collection every ``gcInterval`` (1 min).

Durations are Kueue's (retry 5 s..320 s, GC 1 min, worker lost 15 min, event batching
1 s) multiplied by ``time_scale`` so that tests run in seconds; client-go's rate limit
(5 QPS, burst 10) is divided by it.

Everything the model sends is in :attr:`Kueue.wire`; each worker's connection in
:meth:`Kueue.connection`; what happened to each workload in :attr:`Kueue.outcomes`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mkpolicy.testing.kueue import kubeconfig as kc
from mkpolicy.testing.kueue.adapter import GenericAdapter
from mkpolicy.testing.kueue.goclient import WORKLOAD, ApiStatusError, GoClient, Gvk, Sent, Wire
from mkpolicy.testing.kueue.queue import WorkQueue
from mkpolicy.testing.kueue.reconcile import Reconciler, condition, set_condition
from mkpolicy.testing.kueue.remote import BUILTIN_ADAPTERS, ConnectionState, RemoteClient
from mkpolicy.testing.kueue.versions import DEFAULT_VERSION, Identifier, KueueVersion

log = logging.getLogger("mkpolicy.testing.kueue")

MULTIKUEUE_CLUSTER = Gvk("kueue.x-k8s.io", "v1beta2", "MultiKueueCluster")
SECRET = Gvk("", "v1", "Secret")
#: ``defaultKubeConfigPathPrefix``: where Path kubeconfigs must be when the path validation gate is on.
KUBECONFIG_PATH_PREFIX = "/etc/multikueue/kubeconfigs"


def parse_framework(text: str) -> Gvk:
    """An ``externalFrameworks`` entry (``Kind.version.group``, e.g. ``PipelineRun.v1.tekton.dev``)."""
    kind, _, rest = text.partition(".")
    version, _, group = rest.partition(".")
    if not kind or not version or not group:
        raise ValueError(f"external framework {text!r}: expected Kind.version.group, e.g. PipelineRun.v1.tekton.dev")
    return Gvk(group, version, kind)


@dataclass
class Settings:
    """Kueue's Configuration and feature gates, as far as MultiKueue uses them."""

    version: KueueVersion
    origin: str = "multikueue"
    #: Kueue's namespace: where MultiKueueCluster Secrets are read.
    namespace: str = "kueue-system"
    #: ``WorkloadIdentifierAnnotations`` (None: the version's default; v0.17 and later).
    identifier: Identifier | None = None
    #: ``MultiKueueAllowInsecureKubeconfigs`` (v0.15-v0.18).
    allow_insecure_kubeconfigs: bool = False
    #: ``integrations.frameworks`` with a MultiKueue adapter of a built-in kind, each watched on
    #: every worker (Kueue's default: batch/job, ``apis/config/v1beta2/defaults.go``); see
    #: :data:`~.remote.BUILTIN_ADAPTERS`.
    integrations: tuple[str, ...] = ("batch/job",)
    #: Real seconds per Kueue second.
    time_scale: float = 1.0
    #: client-go's rate limit per REST client (None: 5 / time_scale).
    qps: float | None = None
    burst: int = 10
    #: Kueue seconds (scaled by time_scale when waited).
    gc_interval: float = 60.0
    worker_lost_timeout: float = 900.0
    events_batch_period: float = 1.0
    #: Real seconds a request may take.
    request_timeout: float = 30.0
    #: ``MultiKueueKubeConfigPathValidation`` (None: the version's default, on for main).
    path_validation: bool | None = None
    kubeconfig_path_prefix: str = KUBECONFIG_PATH_PREFIX


@dataclass(frozen=True)
class Outcome:
    """One thing that happened to a workload: ``kind`` is dispatched, created, synced,
    unchanged, ready, retry, rejected, finished, removed, gc or error."""

    kind: str
    cluster: str
    detail: Any
    at: float = field(default_factory=time.monotonic, compare=False)


class Kueue:
    """Kueue's MultiKueue controllers for the external frameworks given.

    ::

        async with Kueue(manager_kubeconfig, ["PipelineRun.v1.tekton.dev"], version="0.19.2",
                         time_scale=0.01) as kueue:
            await kueue.wait_connected("worker1", "worker2")
    """

    def __init__(
        self,
        manager: Mapping[str, Any] | kc.RemoteConfig,
        frameworks: Iterable[str | Gvk],
        *,
        version: str | KueueVersion = DEFAULT_VERSION,
        **settings: Any,
    ) -> None:
        ver = version if isinstance(version, KueueVersion) else KueueVersion.parse(version)
        self.settings = Settings(ver, **settings)
        if self.settings.identifier == "annotation" and not ver.identifier_gate:
            raise ValueError(f"Kueue {ver.name} has no WorkloadIdentifierAnnotations gate: it writes the label")
        self.identifier: Identifier = self.settings.identifier or ver.default_identifier
        unknown = [i for i in self.settings.integrations if i not in BUILTIN_ADAPTERS]
        if unknown:
            raise ValueError(
                f"integrations: expected some of {', '.join(BUILTIN_ADAPTERS)}; found {', '.join(unknown)}"
            )
        manager_config = manager if isinstance(manager, kc.RemoteConfig) else kc.rest_config(manager)
        self.wire = Wire()
        # controller-runtime's GetConfig disables client-side rate limiting for the manager (QPS -1).
        self.manager = GoClient(manager_config, "manager", self.wire, qps=None, timeout=self.settings.request_timeout)
        self.adapters = [
            GenericAdapter(g if isinstance(g, Gvk) else parse_framework(g), ver, self.identifier, self.settings.origin)
            for g in frameworks
        ]
        self.remotes: dict[str, RemoteClient] = {}
        self.outcomes: dict[tuple[str, str], list[Outcome]] = {}
        self.reconciler = Reconciler(self)
        scale = self.settings.time_scale
        self.clusters_queue: WorkQueue[str] = WorkQueue(self._reconcile_cluster, scale=scale, name="multikueue_cluster")
        self.workloads_queue: WorkQueue[tuple[str, str]] = WorkQueue(
            self.reconciler.reconcile, scale=scale, name="multikueue_workload"
        )
        self._clusters: dict[str, dict[str, Any]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Kueue:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the controllers (informers on the manager, queues, GC)."""
        self.clusters_queue.start()
        self.workloads_queue.start()
        self._tasks = [
            asyncio.ensure_future(self._inform(MULTIKUEUE_CLUSTER, None, self._on_cluster)),
            asyncio.ensure_future(self._inform(SECRET, self.settings.namespace, self._on_secret)),
            asyncio.ensure_future(self._inform(WORKLOAD, None, self._on_workload)),
            asyncio.ensure_future(self._gc_loop()),
        ]
        self._started = True

    async def stop(self) -> None:
        """Stop everything and close every connection."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        await self.clusters_queue.stop()
        await self.workloads_queue.stop()
        for remote in self.remotes.values():
            await remote.close()
        await self.manager.close()

    # -- what tests look at -----------------------------------------------------------------

    def connection(self, cluster: str) -> ConnectionState:
        """The state of the connection to ``cluster`` (its MultiKueueCluster's ``Active`` condition)."""
        remote = self.remotes.get(cluster)
        return remote.state if remote is not None else ConnectionState()

    def requests(self, target: str) -> list[Sent]:
        """Every request sent to ``target`` (a worker, or ``manager``)."""
        return self.wire.to(target)

    def record(self, namespace: str, name: str, kind: str, cluster: str, detail: Any) -> None:
        self.outcomes.setdefault((namespace, name), []).append(Outcome(kind, cluster, detail))
        self.wire.touch()

    def outcome_kinds(self, namespace: str, name: str) -> list[str]:
        """The kinds of outcome of a workload, in order."""
        return [o.kind for o in self.outcomes.get((namespace, name), [])]

    async def wait_for(self, check: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
        """Wait until ``check()`` is truthy (re-checked after every request and outcome)."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"waited {timeout}s for {what or check!r}; last value {value!r}")
            waiter = self.wire.changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), min(remaining, 0.05))

    async def wait_connected(self, *clusters: str, timeout: float = 10.0) -> None:
        """Wait until every cluster named is Active."""
        await self.wait_for(lambda: all(self.connection(c).active for c in clusters), timeout, f"{clusters} active")

    def lost_since(self, cluster: str) -> float:
        """Kueue seconds since ``cluster`` was lost (0 when connected)."""
        remote = self.remotes.get(cluster)
        if remote is None or remote.lost_at is None:
            return 0.0
        return (time.monotonic() - remote.lost_at) / self.settings.time_scale

    # -- plumbing -----------------------------------------------------------------------

    def new_client(self, config: kc.RemoteConfig, cluster: str) -> GoClient:
        """A new client for a worker (each connection builds one)."""
        qps = self.settings.qps if self.settings.qps is not None else 5.0 / self.settings.time_scale
        return GoClient(config, cluster, self.wire, qps=qps, burst=self.settings.burst,
                        timeout=self.settings.request_timeout)  # fmt: skip

    def adapter_for(self, api_version: str, kind: str) -> GenericAdapter | None:
        """The adapter registered for ``apiVersion``/``kind`` (Kueue's adapter key)."""
        key = Gvk.of(api_version, kind)
        return next((a for a in self.adapters if a.gvk == key), None)

    async def queue_workload_event(self, namespace: str, name: str) -> None:
        """``queueWorkloadEvent``: a worker event for a workload the manager has is reconciled after 1 s."""
        try:
            await self.manager.get(WORKLOAD, namespace, name, "typed")
        except ApiStatusError:
            return
        self.workloads_queue.add_after((namespace, name), self.settings.events_batch_period)

    async def patch_workload_status(self, local: dict[str, Any], status: dict[str, Any]) -> None:
        """A status write of the manager's Workload (a merge patch; Kueue applies it server-side).

        Strict, as Kueue's are (``pkg/workload/patching/patching.go``: ``StrictApply`` by
        default puts the read ``resourceVersion`` in the patch): a write based on a Workload
        another controller has changed since is refused (409) and the reconcile runs again;
        ``local`` takes the written object's ``resourceVersion`` (controller-runtime updates
        the object it patched)."""
        meta = local["metadata"]
        patch: dict[str, Any] = {"status": status}
        if meta.get("resourceVersion"):
            patch["metadata"] = {"resourceVersion": meta["resourceVersion"]}
        written = await self.manager.patch_status(WORKLOAD, meta.get("namespace"), meta["name"], patch, "typed")
        meta["resourceVersion"] = (written.get("metadata") or {}).get("resourceVersion", meta.get("resourceVersion"))

    async def _local_exists(self, namespace: str, name: str) -> bool:
        try:
            wl = await self.manager.get(WORKLOAD, namespace, name, "typed")
        except ApiStatusError as exc:
            if exc.not_found:
                return False
            raise
        return not (wl.get("metadata") or {}).get("deletionTimestamp")

    async def _gc_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.gc_interval * self.settings.time_scale)
            await self.gc()

    async def gc(self) -> None:
        """One garbage collection pass now (as the GC loop runs every ``gc_interval``)."""
        for remote in list(self.remotes.values()):
            await remote.run_gc(self._local_exists)

    # -- informers on the manager -------------------------------------------------------

    async def _inform(
        self, gvk: Gvk, namespace: str | None, handler: Callable[[str, dict[str, Any]], Awaitable[None]]
    ) -> None:
        """A reflector: LIST, then WATCH from the list's version; relist after 410 or an error."""
        while True:
            try:
                path = await self.manager.path(gvk, namespace)
                _, _, raw = await self.manager.request("GET", path, kind="typed", gvk=gvk, accept="application/json")
                listed = json.loads(raw)
                for obj in listed.get("items") or []:
                    await handler("ADDED", obj)
                rv = str((listed.get("metadata") or {}).get("resourceVersion") or "")
                while True:
                    watch = await self.manager.watch(gvk, {}, "typed", namespace=namespace, resource_version=rv)
                    async for event in watch.events():
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            raise ApiStatusError(
                                int(obj.get("code") or 500), str(obj.get("reason")), str(obj.get("message"))
                            )
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        if event.get("type") != "BOOKMARK":
                            await handler(str(event.get("type")), obj)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a relist heals it
                log.debug("manager informer of %s: %s; relisting", gvk.kind, exc)
                await asyncio.sleep(0.05)

    async def _on_cluster(self, kind: str, obj: dict[str, Any]) -> None:
        name = str(obj["metadata"]["name"])
        old = self._clusters.get(name)
        if kind == "DELETED":
            self._clusters.pop(name, None)
        else:
            self._clusters[name] = obj
        if (
            kind != "MODIFIED"
            or old is None
            or old["metadata"].get("generation") != obj["metadata"].get("generation")
            or obj["metadata"].get("deletionTimestamp")
        ):
            self.clusters_queue.add(name)

    async def _on_secret(self, kind: str, obj: dict[str, Any]) -> None:
        # secretHandler: every MultiKueueCluster using this Secret is reconciled.
        secret = str(obj["metadata"]["name"])
        for name, cluster in list(self._clusters.items()):
            source = ((cluster.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
            if source.get("locationType", "Secret") == "Secret" and source.get("location") == secret:
                self.clusters_queue.add(name)

    async def _on_workload(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = (str(meta.get("namespace") or ""), str(meta["name"]))
        if kind == "DELETED":
            self.reconciler.deleted[key] = obj
        self.workloads_queue.add(key)

    # -- the MultiKueueCluster reconciler ---------------------------------------------------

    def _remote(self, name: str) -> RemoteClient:
        remote = self.remotes.get(name)
        if remote is None:
            remote = self.remotes[name] = RemoteClient(self, name)
        return remote

    async def _reconcile_cluster(self, name: str) -> float | None:
        try:
            cluster = await self.manager.get(MULTIKUEUE_CLUSTER, None, name, "typed")
        except ApiStatusError as exc:
            if not exc.not_found:
                raise
            cluster = None
        if cluster is None or cluster["metadata"].get("deletionTimestamp"):
            remote = self.remotes.pop(name, None)
            if remote is not None:
                await remote.close()
            return None
        try:
            config = await self._load_client_config(cluster)
        except kc.KubeconfigRefused as exc:
            remote = self._remote(name)
            await remote.stop_watchers()
            remote.disconnect()
            await self._set_active(cluster, False, exc.reason, f"load client config failed: {exc.message}")
            if exc.reason == "BadKubeConfig" and "not found" in exc.message:
                return None  # reconciled again when the Secret appears
            raise
        remote = self._remote(name)
        retry, error = await remote.update_config(config)
        if error is not None:
            await remote.stop_watchers()
            remote.disconnect()
            message = error
            if self.settings.version.name == "main" and remote.failed_attempts:
                nxt = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + (retry or 0)))
                message += f"; connection attempts: {remote.failed_attempts}, next connection attempt: {nxt}"
            await self._set_active(cluster, False, "ClientConnectionFailed", message)
            return retry
        if retry is not None:
            return retry
        await self._set_active(cluster, True, "Active", "Connected")
        return None

    async def _load_client_config(self, cluster: dict[str, Any]) -> kc.RemoteConfig:
        """``loadClientConfig``: the kubeconfig of a Secret or a Path; ClusterProfiles need a gate."""
        source = (cluster.get("spec") or {}).get("clusterSource") or {}
        allow = self.settings.allow_insecure_kubeconfigs and self.settings.version.insecure_kubeconfig_gate
        if source.get("clusterProfileRef"):
            raise kc.KubeconfigRefused(
                "MultiKueueClusterProfileFeatureDisabled", "MultiKueueClusterProfile feature gate is disabled"
            )
        ref = source.get("kubeConfig") or {}
        location = str(ref.get("location") or "")
        if ref.get("locationType", "Secret") == "Path":
            return self._load_path(location, allow)
        try:
            secret = await self.manager.get(SECRET, self.settings.namespace, location, "typed")
        except ApiStatusError as exc:
            if not exc.not_found:
                raise
            secret = None
        return kc.for_secret(secret, location, allow_insecure=allow)

    def _load_path(self, location: str, allow: bool) -> kc.RemoteConfig:
        validate = self.settings.path_validation
        if validate is None:
            validate = self.settings.version.name == "main"
        if validate:
            resolved = os.path.realpath(location)
            prefix = os.path.realpath(self.settings.kubeconfig_path_prefix) + os.sep
            if not os.path.isabs(location) or not (resolved + os.sep).startswith(prefix):
                raise kc.KubeconfigRefused(
                    "BadKubeConfig", f"kubeconfig path is not under the allowed prefix: {location!r} is not under "
                    f"{self.settings.kubeconfig_path_prefix!r}",
                )  # fmt: skip
        try:
            with open(location, "rb") as fh:
                raw = fh.read()
        except OSError as exc:
            raise kc.KubeconfigRefused("BadKubeConfig", f"open {location}: {exc.strerror or exc}") from None
        return kc.load(raw, allow_insecure=allow)

    async def _set_active(self, cluster: dict[str, Any], active: bool, reason: str, message: str) -> None:
        """``updateStatus``: the ``Active`` condition, written when it changes."""
        name = str(cluster["metadata"]["name"])
        self._remote(name).state.set(active, reason, message)
        current = condition(cluster, "Active") or {}
        status = "True" if active else "False"
        if (current.get("status"), current.get("reason"), current.get("message")) == (status, reason, message):
            return
        conditions = (cluster.get("status") or {}).get("conditions") or []
        generation = cluster["metadata"].get("generation", 0)
        updated = set_condition(conditions, "Active", status, reason, message, generation)
        cluster = {**cluster, "status": {**(cluster.get("status") or {}), "conditions": updated}}
        try:
            await self.manager.update(MULTIKUEUE_CLUSTER, cluster, "typed", sub="status")
        except ApiStatusError as exc:
            log.debug("MultiKueueCluster %s status: %s", name, exc)


def secret_for(name: str, namespace: str, kubeconfig: bytes) -> dict[str, Any]:
    """A MultiKueueCluster kubeconfig Secret."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"kubeconfig": base64.b64encode(kubeconfig).decode()},
    }
