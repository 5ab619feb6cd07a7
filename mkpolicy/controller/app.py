"""``mkpolicy controller``: the informers, the work queue, the workers, leader election and the
ops endpoints around the :class:`~mkpolicy.controller.reconciler.JobReconciler` of each policy.

Every instance watches (its caches stay warm); only the one holding the Lease reconciles.
A job is queued when it changes and when one of its Workloads changes (the Workload's
controller owner, or the job naming it as its prebuilt Workload).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from mkpolicy.controller.equivalence import controller_of, owner_key
from mkpolicy.controller.events import EventRecorder
from mkpolicy.controller.informer import Informer, key_of
from mkpolicy.controller.leader import LeaderElector
from mkpolicy.controller.metrics import ControllerMetrics
from mkpolicy.controller.ops import ops_app
from mkpolicy.controller.queue import WorkQueue
from mkpolicy.controller.reconciler import ControllerOptions, JobReconciler, Requeue, prebuilt_name
from mkpolicy.engine import Adapter
from mkpolicy.errors import MkpolicyError
from mkpolicy.jsonlogs import fields, plain_error
from mkpolicy.kube.client import KubeClient

log = logging.getLogger("mkpolicy.controller")

#: (policy name, namespace, job name)
JobKey = tuple[str, str, str]


class Controller:
    """The declarative integration of every policy with ``spec.integration``."""

    def __init__(
        self,
        adapters: Sequence[Adapter],
        client: KubeClient,
        *,
        identity: str,
        lease_namespace: str = "kueue-system",
        lease_name: str = "mkpolicy-controller",
        options: ControllerOptions | None = None,
        workers: int = 4,
        leader_election: bool = True,
        lease_seconds: float = 15.0,
        renew_deadline: float = 10.0,
        retry: float = 2.0,
    ) -> None:
        self.adapters = [a for a in adapters if a.integration is not None]
        if not self.adapters:
            raise MkpolicyError("no policy has spec.integration: mkpolicy controller has nothing to run")
        self.client = client
        self.identity = identity
        parents = frozenset(f"{a.gvk.api_version}/{a.gvk.kind}" for a in self.adapters)
        self.options = options or ControllerOptions()
        if not self.options.parent_kinds:
            self.options.parent_kinds = parents
        self.metrics = ControllerMetrics()
        self.recorder = EventRecorder(client, identity)
        self.queue: WorkQueue[JobKey] = WorkQueue()
        self.workers = workers
        self.elector = (
            LeaderElector(
                client,
                lease_namespace,
                lease_name,
                identity,
                lease_seconds=lease_seconds,
                renew_deadline=renew_deadline,
                retry=retry,
            )
            if leader_election
            else None
        )
        self.reconcilers: dict[str, JobReconciler] = {}
        self.job_informers: dict[str, Informer] = {}
        self.workloads: Informer | None = None
        self.flavors: Informer | None = None
        self.namespaces: Informer | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._runner: web.AppRunner | None = None
        self.ops_port: int | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self, ops_host: str = "127.0.0.1", ops_port: int | None = None) -> None:
        """Discover the kinds, start the caches, leader election, the workers and the ops server."""
        client = self.client
        workloads = await client.discover("kueue.x-k8s.io", "v1beta2", "Workload")
        self.workloads = Informer(client, workloads, index=owner_key)
        self.flavors = Informer(client, await client.discover("kueue.x-k8s.io", "v1beta2", "ResourceFlavor"))
        # Kueue reads each job's namespace (managedJobsNamespaceSelector): one watch instead of a GET each.
        self.namespaces = Informer(client, await client.discover("", "v1", "Namespace"))
        for adapter in self.adapters:
            gvk = adapter.gvk
            info = await client.discover(gvk.group, gvk.version, gvk.kind)
            jobs = Informer(client, info)
            jobs.handlers.append(self._job_handler(adapter.name))
            self.job_informers[adapter.name] = jobs
            self.reconcilers[adapter.name] = JobReconciler(
                adapter, jobs, self.workloads, self.flavors, self.namespaces, client, self.recorder, self.options
            )
        self.workloads.handlers.append(self._workload_changed)
        for informer in (self.workloads, self.flavors, self.namespaces, *self.job_informers.values()):
            informer.start()
        if ops_port is not None:
            await self._serve_ops(ops_host, ops_port)
        self._tasks.append(asyncio.create_task(self._lead(), name="controller-lead"))

    async def stop(self) -> None:
        """Stop the workers, release the lease, stop the caches and the ops server."""
        await self.queue.shutdown()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.elector is not None:
            await self.elector.release()
        informers = [*self.job_informers.values(), self.workloads, self.flavors, self.namespaces]
        for informer in informers:
            if informer is not None:
                await informer.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def synced(self, timeout: float = 30.0) -> None:
        """Wait until every cache has listed."""
        informers = [
            i for i in (self.workloads, self.flavors, self.namespaces, *self.job_informers.values()) if i is not None
        ]
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in informers)), timeout)

    def ready(self) -> tuple[bool, list[str]]:
        """Readiness: every cache listed (leading is not required: a standby is ready)."""
        checks = []
        informers = {
            "workloads": self.workloads,
            "resourceflavors": self.flavors,
            "namespaces": self.namespaces,
            **self.job_informers,
        }
        for name, informer in informers.items():
            ok = informer is not None and informer.synced.is_set()
            checks.append(f"{'ok' if ok else 'fail'} cache {name}" + ("" if ok else ": not listed yet"))
        lost = self.elector is not None and self.elector.lost.is_set()
        checks.append("fail lease: lost" if lost else "ok lease")
        return all(c.startswith("ok") for c in checks), checks

    async def _lead(self) -> None:
        if self.elector is not None:
            elector = asyncio.create_task(self.elector.run(), name="controller-lease")
            self._tasks.append(elector)
            await self.elector.leading.wait()
        self.metrics.leader.set(1)
        await self.synced(timeout=3600)
        for i in range(self.workers):
            self._tasks.append(asyncio.create_task(self._work(), name=f"controller-worker-{i}"))
        # Everything known is reconciled once on taking over (resyncing what the last leader left).
        for name, informer in self.job_informers.items():
            for job in informer.items():
                ns, job_name = key_of(job)
                self.queue.add((name, ns, job_name))

    # -- events -> keys --------------------------------------------------------------------------
    def _job_handler(self, policy: str) -> Any:
        def handler(old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            ns, name = key_of(new or old or {})
            self._enqueue((policy, ns, name))

        return handler

    def _workload_changed(self, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        wl = new or old or {}
        ns, wl_name = key_of(wl)
        owner = controller_of(wl)
        for policy, reconciler in self.reconcilers.items():
            if owner is not None:
                if owner.get("kind") == reconciler.kind:
                    self._enqueue((policy, ns, str(owner.get("name"))))
                continue
            for job in self.job_informers[policy].items(ns):
                if prebuilt_name(job, self.options.kueue) == wl_name:
                    self._enqueue((policy, ns, key_of(job)[1]))

    def _enqueue(self, key: JobKey) -> None:
        self.queue.add(key)
        self.metrics.queue_depth.set(len(self.queue))

    # -- workers ---------------------------------------------------------------------------------
    async def _work(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            policy, namespace, name = key
            started = time.perf_counter()
            outcome = "ok"
            try:
                await self.reconcilers[policy].reconcile(namespace, name)
                self.queue.forget(key)
            except asyncio.CancelledError:
                raise
            except Requeue as exc:
                outcome = "requeue"
                delay = self.queue.retry(key)
                log.info(
                    "requeued", extra=fields(policy=policy, job=f"{namespace}/{name}", why=str(exc), retry_in=delay)
                )
            except Exception as exc:  # an API error, a CEL error: retried with backoff, never fatal
                outcome = "error"
                delay = self.queue.retry(key)
                log.warning(
                    "reconcile failed",
                    extra=fields(policy=policy, job=f"{namespace}/{name}", error=plain_error(exc), retry_in=delay),
                )
            finally:
                self.queue.done(key)
                self.metrics.reconciles.labels(policy, outcome).inc()
                self.metrics.duration.labels(policy).observe(time.perf_counter() - started)
                self.metrics.queue_depth.set(len(self.queue))

    # -- ops -------------------------------------------------------------------------------------
    async def _serve_ops(self, host: str, port: int) -> None:
        app = ops_app(self.ready, self.metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.ops_port = sockets[0].getsockname()[1] if sockets else port
