"""One worker connection: Kueue's ``remoteClient``
(``pkg/controller/admissionchecks/multikueue/multikueuecluster.go``, v0.19.2 and main).

``update_config`` is ``updateConfigAndRefreshWatchers``: nothing to do when the
kubeconfig is unchanged and the connection is up; otherwise every watch is stopped, the
client is **rebuilt** (new connections, new discovery), and the watches are opened one by
one — Workloads first, then every adapter's kind — each with ``allowWatchBookmarks``, the
origin label selector, no ``resourceVersion`` and no ``timeoutSeconds``. If any one
fails, the whole connection fails (Workloads too) and the next attempt waits
``retryAfter``: 5 s, doubling with each failure, at most 320 s (7 steps); a changed
kubeconfig resets the count. A watch that takes longer than ``establishBackoff``
(1 min, doubling to 10 min) to answer is a failure too.

When any watch ends (the server closed it, the connection broke), the client is marked
disconnected and the MultiKueueCluster is reconciled again, which rebuilds everything.
Events are read only for the key of the workload they concern (labels and annotations):
a Workload's own name, or an adapter object's prebuilt-workload identifier; BOOKMARKs and
ERROR events are ignored.

``run_gc`` is ``remoteClient.runGC``: LIST the worker's Workloads of our origin; each whose
manager Workload is gone (or being deleted) loses its owning job (through the adapter,
ownership-checked from v0.17.6) and then itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mkpolicy.testing.kueue.adapter import ORIGIN_LABEL, prebuilt_workload_name
from mkpolicy.testing.kueue.goclient import WORKLOAD, ApiStatusError, GoClient, Gvk, Watch
from mkpolicy.testing.kueue.kubeconfig import RemoteConfig

if TYPE_CHECKING:
    from mkpolicy.testing.kueue.model import Kueue

log = logging.getLogger("mkpolicy.testing.kueue")

RETRY_INCREMENT = 5.0
RETRY_MAX_STEPS = 7
ESTABLISH_INITIAL = 60.0
ESTABLISH_MAX = 600.0
#: The built-in kinds of the integrations whose MultiKueue adapters watch workers
#: (``pkg/controller/jobs/{job,pod,statefulset}/*_multikueue_adapter.go`` ``GVK()``): client-go
#: scheme types, so watched in protobuf. The other integrations' kinds are CRDs the model's
#: servers do not install.
BUILTIN_ADAPTERS: dict[str, Gvk] = {
    "batch/job": Gvk("batch", "v1", "Job"),
    "pod": Gvk("", "v1", "Pod"),
    "statefulset": Gvk("apps", "v1", "StatefulSet"),
}


def retry_after(failed: int) -> float:
    """``retryAfter``: 0, then 5 s * 2^(failures-1), at most 320 s (Kueue seconds)."""
    if failed == 0:
        return 0.0
    return float(RETRY_INCREMENT * 2 ** (min(failed, RETRY_MAX_STEPS) - 1))


def establish_timeout(attempt: int) -> float:
    """``establishBackoff.WaitTime(attempt)``: 1 min doubling to 10 min (Kueue seconds)."""
    return float(min(ESTABLISH_INITIAL * 2 ** max(attempt - 1, 0), ESTABLISH_MAX))


@dataclass
class ConnectionState:
    """A worker connection as the MultiKueueCluster's ``Active`` condition reports it."""

    active: bool = False
    reason: str = "NotConnected"
    message: str = "not connected yet"
    failed_attempts: int = 0
    #: Connections built so far (each a new client and new watches).
    builds: int = 0
    history: list[tuple[float, bool, str, str]] = field(default_factory=list)

    def set(self, active: bool, reason: str, message: str) -> None:
        if (active, reason, message) != (self.active, self.reason, self.message):
            self.history.append((time.monotonic(), active, reason, message))
        self.active, self.reason, self.message = active, reason, message


class RemoteClient:
    """Kueue's connection to one worker."""

    def __init__(self, model: Kueue, cluster: str) -> None:
        self.model = model
        self.cluster = cluster
        self.config: RemoteConfig | None = None
        self.client: GoClient | None = None
        self.connected = False
        self.failed_attempts = 0
        self.retry_at = 0.0
        self.state = ConnectionState()
        self._watches: list[Watch] = []
        self._consumers: list[asyncio.Task[None]] = []
        self._generation = 0
        #: When the connection was lost (``connectionState.disconnectedSince``; from creation until first connected).
        self.lost_at: float | None = time.monotonic()

    # -- connection ---------------------------------------------------------------------

    def _now(self) -> float:
        return time.monotonic()

    def _increase_failed(self) -> float:
        self.failed_attempts += 1
        self.state.failed_attempts = self.failed_attempts
        delay = retry_after(self.failed_attempts)
        self.retry_at = self._now() + delay * self.model.settings.time_scale
        return delay

    def _reset_failed(self) -> None:
        self.failed_attempts = 0
        self.state.failed_attempts = 0
        self.retry_at = 0.0

    async def update_config(self, config: RemoteConfig) -> tuple[float | None, str | None]:
        """``updateConfigAndRefreshWatchers``: (retry after, in Kueue seconds; error message)."""
        changed = self.config is None or self.config.source != config.source or self.config != config
        if not changed and self.connected:
            return None, None
        await self.stop_watchers()
        if changed:
            self.config = config
            self._reset_failed()
        if not self.connected:
            wait = (self.retry_at - self._now()) / self.model.settings.time_scale
            if wait > 0:
                return wait, None
        self._generation += 1
        client = self.model.new_client(config, self.cluster)
        self.client = client
        self.state.builds += 1
        # Workloads first, then each adapter's kind (cmd/kueue/main.go: the enabled integrations'
        # built-in adapters, then the external frameworks)
        watchers: list[tuple[Gvk, str]] = [(WORKLOAD, "typed")]
        watchers += [(BUILTIN_ADAPTERS[i], "builtin") for i in self.model.settings.integrations]
        watchers += [(a.gvk, "unstructured") for a in self.model.adapters]
        for gvk, kind in watchers:
            timeout = establish_timeout(self.failed_attempts + 1) * self.model.settings.time_scale
            try:
                watch = await asyncio.wait_for(
                    client.watch(gvk, {ORIGIN_LABEL: self.model.settings.origin}, kind),  # type: ignore[arg-type]
                    timeout,
                )
            except TimeoutError:
                await self._close_opened()
                return self._increase_failed(), "watch establishment timed out"
            except ApiStatusError as exc:
                await self._close_opened()
                return self._increase_failed(), str(exc)
            self._watches.append(watch)
        self.connected = True
        self.lost_at = None
        for watch, (gvk, _) in zip(self._watches, watchers, strict=True):
            self._consumers.append(asyncio.ensure_future(self._consume(watch, gvk, self._generation)))
        self._reset_failed()
        return None, None

    async def _close_opened(self) -> None:
        for watch in self._watches:
            watch.close()
        self._watches.clear()

    async def stop_watchers(self) -> None:
        """``StopWatchers``: end every watch (and the client's connections)."""
        consumers, self._consumers = self._consumers, []
        for task in consumers:
            task.cancel()
        for task in consumers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._close_opened()

    def disconnect(self) -> None:
        """``markDisconnected`` (``disconnectCluster``): the first loss is kept."""
        self.connected = False
        if self.lost_at is None:
            self.lost_at = time.monotonic()

    async def close(self) -> None:
        await self.stop_watchers()
        self.connected = False
        if self.client is not None:
            await self.client.close()

    async def _consume(self, watch: Watch, gvk: Gvk, generation: int) -> None:
        builtin = gvk in BUILTIN_ADAPTERS.values()  # its jobs are not modelled: only its end matters
        async for event in watch.events():
            if builtin:
                continue
            kind = event.get("type")
            if kind in ("BOOKMARK", "ERROR"):
                continue
            obj = event.get("object") or {}
            namespace = str((obj.get("metadata") or {}).get("namespace") or "")
            if gvk == WORKLOAD:
                name = str((obj.get("metadata") or {}).get("name") or "")
            else:
                name = prebuilt_workload_name(obj, self.model.settings.version, self.model.identifier)
            if name:
                await self.model.queue_workload_event(namespace, name)
        if generation == self._generation and self.connected:
            # The watch ended by itself: the connection is lost; reconcile the cluster.
            self.disconnect()
            log.info("worker %s: a watch of %s ended; reconnecting", self.cluster, gvk.kind)
            self.model.clusters_queue.add(self.cluster)

    # -- garbage collection ---------------------------------------------------------------

    async def run_gc(self, local_exists: Callable[[str, str], Awaitable[bool]]) -> None:
        """``runGC``: remove the worker's Workloads (and their jobs) whose manager Workload is gone."""
        if not self.connected or self.client is None:
            return
        client = self.client
        try:
            remote_wls = await client.list(WORKLOAD, {ORIGIN_LABEL: self.model.settings.origin}, "typed")
        except ApiStatusError as exc:
            log.info("worker %s: GC cannot list workloads: %s", self.cluster, exc)
            return
        for wl in remote_wls:
            meta: dict[str, Any] = wl.get("metadata") or {}
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            try:
                if await local_exists(namespace, name):
                    continue
            except ApiStatusError:
                continue
            owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
            if owner is not None:
                adapter = self.model.adapter_for(str(owner.get("apiVersion")), str(owner.get("kind")))
                if adapter is not None:
                    with contextlib.suppress(ApiStatusError):
                        await adapter.delete_remote_if_owned(client, namespace, str(owner.get("name")))
            with contextlib.suppress(ApiStatusError):
                await client.delete(WORKLOAD, namespace, name, "typed")
            self.model.record(namespace, name, "gc", self.cluster, "remote workload garbage-collected")
