"""Leader election with a coordination.k8s.io/v1 Lease, as client-go's ``leaderelection``:
acquire when the Lease is free or expired (``renewTime + leaseDurationSeconds`` passed), renew
every ``retry`` seconds, step down when a renewal fails past the deadline. Writes carry the
Lease's resourceVersion, so two candidates never both win."""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
from typing import Any

from mkpolicy.jsonlogs import fields, plain_error
from mkpolicy.kube.client import ApiError, KubeClient

log = logging.getLogger("mkpolicy.controller.leader")


def _micro(now: _dt.datetime) -> str:
    """``metav1.MicroTime`` as it serialises."""
    return now.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> _dt.datetime | None:
    if not text:
        return None
    for pattern in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return _dt.datetime.strptime(text, pattern).replace(tzinfo=_dt.UTC)
        except ValueError:
            continue
    return None


class LeaderElector:
    """Holds the Lease ``namespace/name`` for ``identity`` while :attr:`leading` is set."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_seconds: float = 15.0,
        renew_deadline: float = 10.0,
        retry: float = 2.0,
    ) -> None:
        self.client = client
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_seconds, self.renew_deadline, self.retry = lease_seconds, renew_deadline, retry
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._last_renew: _dt.datetime | None = None

    async def run(self) -> None:
        """Acquire, then renew until cancelled or the lease is lost (:attr:`lost` is set)."""
        while not self.leading.is_set():
            if await self._try():
                self.leading.set()
                log.info("became the leader", extra=fields(lease=self.name, identity=self.identity))
                break
            await asyncio.sleep(self.retry)
        while True:
            await asyncio.sleep(self.retry)
            if await self._try():
                continue
            now = _dt.datetime.now(_dt.UTC)
            if self._last_renew is None or (now - self._last_renew).total_seconds() > self.renew_deadline:
                log.error("lost the lease", extra=fields(lease=self.name, identity=self.identity))
                self.leading.clear()
                self.lost.set()
                return

    async def release(self) -> None:
        """Give the Lease up (an empty holder), so another candidate need not wait for it to expire."""
        if not self.leading.is_set():
            return
        try:
            lease = await self.client.get(self.path)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = ""
                await self.client.replace(self.path, lease)
        except Exception as exc:
            log.warning("cannot release the lease", extra=fields(lease=self.name, error=plain_error(exc)))
        self.leading.clear()

    async def _try(self) -> bool:
        now = _dt.datetime.now(_dt.UTC)
        try:
            lease: dict[str, Any] | None = await self.client.get(self.path)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("cannot read the lease", extra=fields(lease=self.name, error=plain_error(exc)))
                return False
            lease = None
        except Exception as exc:
            log.warning("cannot read the lease", extra=fields(lease=self.name, error=plain_error(exc)))
            return False
        spec = dict((lease or {}).get("spec") or {})
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity:
            renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
            duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
            if renewed is not None and (now - renewed).total_seconds() < duration:
                return False
        new_spec = {
            **spec,
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_seconds),
            "renewTime": _micro(now),
        }
        if holder != self.identity:
            new_spec["acquireTime"] = _micro(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
        try:
            if lease is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": new_spec,
                }
                await self.client.create(self.collection, body)
            else:
                await self.client.replace(self.path, {**lease, "spec": new_spec})
        except ApiError as exc:
            if exc.status not in (409,):
                log.warning("cannot write the lease", extra=fields(lease=self.name, error=plain_error(exc)))
            return False
        except Exception as exc:
            log.warning("cannot write the lease", extra=fields(lease=self.name, error=plain_error(exc)))
            return False
        self._last_renew = now
        return True
