"""``mkpolicy sidecar --check``: the RBAC the sidecar and Kueue need, verified with SelfSubjectAccessReviews.

On the manager, as the identity ``--check`` connects with (in the pod: Kueue's service
account, which the sidecar shares): Kueue's reads and status writes of every policy kind
(:func:`mkpolicy.kube.rbac.kueue_manager`) and the sidecar's own
(:mod:`mkpolicy.sidecar.permissions`); what ``--wire`` needs is checked too and reported
as a warning (``--check`` cannot know whether the sidecar runs with it). On every worker,
as its kubeconfig's identity: what Kueue's requests through the sidecar need
(:func:`mkpolicy.kube.rbac.kueue_worker`).

Each review asks kube-apiserver's authorizer exactly what a request would
(``pkg/registry/authorization/selfsubjectaccessreview/rest.go``): a denied one is a
permission missing, reported with the cluster, the verb and the resource.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

import aiohttp

from mkpolicy.kube.client import ApiError, KubeClient
from mkpolicy.kube.rbac import Kind, Permission, access_reviews, kueue_manager, kueue_worker
from mkpolicy.kube.rest import RestConfig
from mkpolicy.policy import GVK
from mkpolicy.sidecar.config import ConfigError, SidecarConfig
from mkpolicy.sidecar.kueueconfig import Finding
from mkpolicy.sidecar.logs import plain_error
from mkpolicy.sidecar.permissions import sidecar_manager, sidecar_wiring, wire_secret_name
from mkpolicy.sidecar.wiring import multikueue_secret

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass(frozen=True)
class Denied:
    """A permission a cluster's identity lacks (``permission.names``: the one name reviewed)."""

    cluster: str
    permission: Permission
    wiring: bool = False

    def finding(self) -> Finding:
        """An error when the sidecar or Kueue cannot work without it, else a warning."""
        p = self.permission
        level: Literal["error", "warning"] = "error" if p.required and not self.wiring else "warning"
        return Finding(level, f"rbac {self.cluster}: cannot {p.describe()}: needed for {p.why}")


async def denied(client: KubeClient, cluster: str, permissions: Iterable[Permission]) -> list[Denied]:
    """The permissions ``client``'s identity lacks, one :class:`Denied` per object name reviewed.

    A permission needed for several reasons (Kueue's and the sidecar's) is reviewed once,
    with every reason."""
    merged: dict[tuple[str, str, str, str | None, tuple[str, ...]], Permission] = {}
    for p in permissions:
        key = (p.verb, p.group, p.resource, p.namespace, p.names)
        known = merged.get(key)
        if known is None:
            merged[key] = p
        elif p.why not in known.why.split("; "):
            merged[key] = replace(known, why=f"{known.why}; {p.why}", required=known.required or p.required)
    out = []
    for permission in merged.values():
        for review, name in zip(access_reviews(permission), permission.names or (None,), strict=True):
            answer = await client.create(REVIEWS, review)
            if not (answer.get("status") or {}).get("allowed"):
                out.append(Denied(cluster, replace(permission, names=(name,) if name else ())))
    return out


async def resolve_kinds(manager: KubeClient, gvks: Iterable[GVK]) -> tuple[list[Kind], list[Finding]]:
    """The policy kinds' resources from the manager's discovery (a kind it does not serve is left out:
    ``--check`` reports it pending elsewhere)."""
    kinds, findings = [], []
    for gvk in gvks:
        try:
            info = await manager.discover(gvk.group, gvk.version, gvk.kind)
        except ApiError as exc:
            if exc.status != 404:
                findings.append(Finding("warning", f"rbac manager: cannot look {gvk} up: {exc.message}"))
            continue
        kinds.append(Kind(info.group, info.resource))
    return kinds, findings


async def check_access(
    config: SidecarConfig, manager: RestConfig, workers: dict[str, RestConfig], gvks: Iterable[GVK]
) -> list[Finding]:
    """Review every permission on the manager and on each worker in ``workers`` (name -> its real
    kubeconfig); print an ``rbac <cluster>: ok`` line for each cluster that has them all.
    Returns one finding per missing permission, or why a cluster was not checked."""
    findings: list[Finding] = []
    try:
        async with KubeClient(manager, user_agent="mkpolicy-sidecar-check", timeout=10) as client:
            kinds, found = await resolve_kinds(client, gvks)
            findings += found
            needed = kueue_manager(kinds) + sidecar_manager(config, kinds)
            missing = await denied(client, "manager", needed)
            wiring = await denied(client, "manager", sidecar_wiring(config, await _wired_secrets(client, config)))
            missing += [replace(d, wiring=True) for d in wiring]
    except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
        return [Finding("warning", f"rbac manager: not checked: {plain_error(exc)}")]
    findings += [d.finding() for d in missing]
    if not missing:
        print(f"rbac manager: ok ({len(kinds)} policy kind(s): Kueue's, the sidecar's and --wire's permissions)")
    for name, rest in workers.items():
        try:
            async with KubeClient(rest, user_agent="mkpolicy-sidecar-check", timeout=10) as client:
                worker_missing = await denied(client, name, kueue_worker(kinds))
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            findings.append(Finding("warning", f"rbac {name}: not checked: {plain_error(exc)}"))
            continue
        findings += [d.finding() for d in worker_missing]
        if not worker_missing:
            print(f"rbac {name}: ok ({len(kinds)} policy kind(s): Kueue's permissions on the copies)")
    return findings


async def _wired_secrets(manager: KubeClient, config: SidecarConfig) -> list[str]:
    """The Secrets ``--wire`` would rewrite: the ones the MultiKueueClusters name (read as
    ``--wire`` reads them), else what the configuration tells."""
    out = []
    for worker in config.workers:
        try:
            out.append(await multikueue_secret(manager, worker))
        except (ConfigError, ApiError, aiohttp.ClientError, OSError, TimeoutError):
            # no MultiKueueCluster yet, or one --wire cannot use (--wire says why)
            name = wire_secret_name(worker)
            if name:
                out.append(name)
    return out
