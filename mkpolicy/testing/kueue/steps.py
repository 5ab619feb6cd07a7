"""Kueue's adapter steps one at a time, for tests that drive each step themselves.

:class:`~.model.Kueue` decides when to sync, remove and reconnect; :class:`KueueSteps`
lets a test take those steps itself, with the same clients and the same requests (the
ownership check first, from v0.17.6/v0.18.2/v0.19.0)::

    async with KueueSteps(manager_kubeconfig, {"worker1": sidecar.kubeconfig("worker1")}) as kueue:
        assert await kueue.sync_job("worker1", "team-a", "run", "wl-run") == "created"

Worker kubeconfigs are held to Kueue's rules (a refused one raises
:class:`~.kubeconfig.KubeconfigRefused`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from mkpolicy.testing.kueue import kubeconfig as kc
from mkpolicy.testing.kueue.adapter import ORIGIN_LABEL, GenericAdapter, SyncResult
from mkpolicy.testing.kueue.goclient import GoClient, Watch, Wire
from mkpolicy.testing.kueue.model import parse_framework
from mkpolicy.testing.kueue.versions import DEFAULT_VERSION, Identifier, KueueVersion


def _config(kubeconfig: Mapping[str, Any] | bytes, *, rules: bool) -> kc.RemoteConfig:
    if rules:
        return kc.load(kubeconfig if isinstance(kubeconfig, bytes) else yaml.safe_dump(dict(kubeconfig)).encode())
    return kc.rest_config(yaml.safe_load(kubeconfig) if isinstance(kubeconfig, bytes) else kubeconfig)


class KueueSteps:
    """The generic adapter's steps over Kueue's clients (one client per worker)."""

    def __init__(
        self,
        manager: Mapping[str, Any] | bytes,
        workers: Mapping[str, Mapping[str, Any] | bytes],
        *,
        framework: str = "PipelineRun.v1.tekton.dev",
        version: str = DEFAULT_VERSION,
        identifier: Identifier | None = None,
        origin: str = "multikueue",
        qps: float | None = 5.0,
    ) -> None:
        self.version = KueueVersion.parse(version)
        self.identifier: Identifier = identifier or self.version.default_identifier
        self.origin = origin
        self.wire = Wire()
        self.manager = GoClient(_config(manager, rules=False), "manager", self.wire, qps=None)
        self.workers = {
            name: GoClient(_config(config, rules=True), name, self.wire, qps=qps) for name, config in workers.items()
        }
        self.adapter = GenericAdapter(parse_framework(framework), self.version, self.identifier, origin)

    async def __aenter__(self) -> KueueSteps:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.manager.close()
        for client in self.workers.values():
            await client.close()

    async def sync_job(self, cluster: str, namespace: str, name: str, workload: str) -> SyncResult:
        """The ownership check (by version), then ``SyncJob``: created, synced or unchanged."""
        worker = self.workers[cluster]
        if self.version.ownership_check:
            await self.adapter.validate_ownership(worker, namespace, name)
        result, _ = await self.adapter.sync_job(self.manager, worker, namespace, name, workload)
        return result

    async def remove(self, cluster: str, namespace: str, name: str) -> bool:
        """``DeleteRemoteObjectIfOwned``: True when a DELETE went out and succeeded."""
        return await self.adapter.delete_remote_if_owned(self.workers[cluster], namespace, name)

    async def is_managed(self, namespace: str, name: str) -> tuple[bool, str]:
        """``IsJobManagedByKueue`` on the manager's object."""
        return await self.adapter.is_managed(self.manager, namespace, name)

    def clone(self, local: dict[str, Any], workload: str) -> dict[str, Any]:
        """The body Kueue POSTs for ``local`` (this version's clone, the MultiKueue markers)."""
        return self.adapter.creation_body(local, workload)

    async def watch(self, cluster: str) -> Watch:
        """Kueue's watch of the framework's kind on ``cluster``."""
        return await self.workers[cluster].watch(self.adapter.gvk, {ORIGIN_LABEL: self.origin}, "unstructured")
