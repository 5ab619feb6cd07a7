"""Kueue's generic MultiKueue adapter, replayed against real API servers (docs/architecture.md, "The problem").

Stock Kueue cannot run here; this driver performs the same protocol over HTTP, so the
sidecar (or a worker directly) sees exactly the requests Kueue would send:

* ``sync_job``: read the manager's object; read the worker's; create the worker copy
  when absent (Kueue's generic clone: ``apiVersion``, ``kind``, ``metadata.{name,
  namespace, labels, annotations}``, ``spec`` without ``managedBy``, the origin label
  and the prebuilt-workload identifier), else copy the worker's whole ``status`` and
  send the JSON merge patch to the manager's ``status`` subresource (nothing when
  nothing changed);
* ``delete_remote``: delete the worker's copy with propagation ``Background``, never an
  object whose origin label is not ours;
* ``watch_remote``: the label-selected watch Kueue keeps on every worker, to reconcile;
* ``reconcile``: Kueue's loop for one worker — sync every job on every watch event,
  resume watches, relist after 410, retry errors.

It is written independently of the engine on purpose: tests compare what it produces
through the sidecar with what the policy engine says it should be.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from mkpolicy.kube.client import MERGE_PATCH, ApiError, Gone, KubeClient, ResourceInfo

ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
PREBUILT_WORKLOAD_KEY = "kueue.x-k8s.io/prebuilt-workload-name"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"

SyncResult = Literal["created", "synced", "unchanged"]


def merge_patch(original: Any, modified: Any) -> Any:
    """RFC 7386 patch from ``original`` to ``modified`` (as controller-runtime's MergeFrom computes it)."""
    if not isinstance(original, dict) or not isinstance(modified, dict):
        return modified
    patch: dict[str, Any] = {key: None for key in original if key not in modified}
    for key, value in modified.items():
        if key not in original:
            patch[key] = value
        elif original[key] != value:
            patch[key] = merge_patch(original[key], value)
    return patch


@dataclass
class GenericAdapter:
    """Kueue's generic adapter for one kind, between a manager and its workers."""

    manager: KubeClient
    workers: dict[str, KubeClient]
    info: ResourceInfo
    origin: str = "multikueue"
    identifier: Literal["annotation", "label"] = "annotation"

    def _path(self, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        return self.info.path(namespace if self.info.namespaced else None, name, sub)

    async def is_managed(self, namespace: str | None, name: str) -> tuple[bool, str]:
        """Kueue's check: ``.spec.managedBy`` of the manager's object."""
        obj = await self.manager.get(self._path(namespace, name))
        value = (obj.get("spec") or {}).get("managedBy") or ""
        if value != MULTIKUEUE_CONTROLLER:
            return False, f'Expecting .spec.managedBy to be "{MULTIKUEUE_CONTROLLER}" not "{value}"'
        return True, ""

    def clone(self, local: dict[str, Any], workload_name: str) -> dict[str, Any]:
        """The body Kueue POSTs to the worker."""
        meta = local.get("metadata") or {}
        new_meta: dict[str, Any] = {"name": meta.get("name")}
        if meta.get("namespace"):
            new_meta["namespace"] = meta["namespace"]
        labels = dict(meta.get("labels") or {})
        labels[ORIGIN_LABEL] = self.origin
        annotations = dict(meta.get("annotations") or {})
        if self.identifier == "label" and len(workload_name) <= 63:
            labels[PREBUILT_WORKLOAD_KEY] = workload_name
        else:
            annotations[PREBUILT_WORKLOAD_KEY] = workload_name
        new_meta["labels"] = labels
        if annotations:
            new_meta["annotations"] = annotations
        body: dict[str, Any] = {"apiVersion": local.get("apiVersion"), "kind": local.get("kind"), "metadata": new_meta}
        if "spec" in local:
            spec = copy.deepcopy(local["spec"])
            if isinstance(spec, dict):
                spec.pop("managedBy", None)
            body["spec"] = spec
        return body

    async def sync_job(self, cluster: str, namespace: str | None, name: str, workload_name: str) -> SyncResult:
        """One reconcile of Kueue's ``SyncJob``: create on the worker, or write its status back."""
        local = await self.manager.get(self._path(namespace, name))
        worker = self.workers[cluster]
        try:
            remote = await worker.get(self._path(namespace, name))
        except ApiError as exc:
            if exc.status != 404:
                raise
            await worker.create(self._path(namespace), self.clone(local, workload_name))
            return "created"
        original = copy.deepcopy(local)
        if isinstance(remote.get("status"), dict):
            local["status"] = remote["status"]
        if local == original:
            return "unchanged"
        patch = merge_patch(original, local)
        await self.manager.patch(self._path(namespace, name, "status"), patch, MERGE_PATCH)
        return "synced"

    async def delete_remote(self, cluster: str, namespace: str | None, name: str) -> bool:
        """Delete the worker's copy (Background); False when absent or not ours."""
        worker = self.workers[cluster]
        try:
            remote = await worker.get(self._path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        if ((remote.get("metadata") or {}).get("labels") or {}).get(ORIGIN_LABEL) != self.origin:
            return False
        try:
            await worker.delete(self._path(namespace, name), propagation="Background")
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def reconcile(
        self,
        cluster: str,
        jobs: Mapping[tuple[str, str], str],
        stop: asyncio.Event,
        on_result: Callable[[str, str, SyncResult | Exception], None] | None = None,
        retry_delay: float = 0.05,
    ) -> None:
        """Kueue's loop for one worker until ``stop``: sync every job, then on every watch event.

        ``jobs`` maps (namespace, name) to the prebuilt workload name. The watch is
        resumed from the last resourceVersion seen; after 410 Gone (or no version yet)
        every job is synced and a fresh watch starts. Errors (the worker or the
        sidecar unreachable, 409, 5xx) are retried, as Kueue's work queue does.
        """
        resource_version: str | None = None

        async def sync(namespace: str, name: str) -> None:
            while not stop.is_set():
                try:
                    result: SyncResult | Exception = await self.sync_job(
                        cluster, namespace, name, jobs[namespace, name]
                    )
                except (TimeoutError, ApiError, OSError, aiohttp.ClientError) as exc:
                    if on_result is not None:
                        on_result(namespace, name, exc)
                    await asyncio.sleep(retry_delay)
                    continue
                if on_result is not None:
                    on_result(namespace, name, result)
                return

        while not stop.is_set():
            try:
                if resource_version is None:
                    listed = await self.workers[cluster].get(
                        self._path(None), {"labelSelector": f"{ORIGIN_LABEL}={self.origin}"}
                    )
                    resource_version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
                    for namespace, name in list(jobs):
                        await sync(namespace, name)
                watch = self.watch_remote(cluster, resource_version, timeout_seconds=30)
                stopper = asyncio.ensure_future(stop.wait())
                try:
                    while True:
                        nxt = asyncio.ensure_future(anext(watch))
                        done, _ = await asyncio.wait({nxt, stopper}, return_when=asyncio.FIRST_COMPLETED)
                        if stopper in done:
                            nxt.cancel()
                            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                                await nxt
                            return
                        try:
                            event = nxt.result()
                        except StopAsyncIteration:
                            break
                        meta = (event.get("object") or {}).get("metadata") or {}
                        if meta.get("resourceVersion"):
                            resource_version = str(meta["resourceVersion"])
                        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                        if key in jobs and event.get("type") != "BOOKMARK":
                            await sync(*key)
                finally:
                    stopper.cancel()
                    await watch.aclose()
            except Gone:
                resource_version = None
            except (TimeoutError, ApiError, OSError, aiohttp.ClientError) as exc:
                if on_result is not None:
                    on_result("", "", exc)
                await asyncio.sleep(retry_delay)

    async def watch_remote(
        self, cluster: str, resource_version: str | None = None, timeout_seconds: int | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Kueue's watch on a worker: every event of objects carrying our origin label."""
        params = {"labelSelector": f"{ORIGIN_LABEL}={self.origin}"}
        if resource_version:
            params["resourceVersion"] = resource_version
        async for event in self.workers[cluster].watch(self._path(None), params, timeout_seconds=timeout_seconds):
            yield event
