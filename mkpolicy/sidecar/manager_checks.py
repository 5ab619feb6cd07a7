"""What the manager cluster must provide for the wire, checked by ``--check`` and while the sidecar runs.

* **The policy kind's CRD keeps managedBy.** Stock Kueue reads ``.spec.managedBy``; a CRD
  that does not declare it (Argo's ``Workflow``, or a CRD replaced by an upgrade without
  ``mkpolicy export crd-patch``) prunes it, and Kueue never dispatches the job (its
  MultiKueue check says the owner is not managed by Kueue).
* **Kueue reaches the workers through the sidecar.** A MultiKueueCluster Secret holding a
  kubeconfig that is not the sidecar's (not wired, or rewritten while the sidecar was away)
  means Kueue talks to that worker directly: copies are created untransformed and, for a
  kind without a status subresource, Kueue's status patch answers 404 at every sync, so the
  manager Workload never finishes and holds its quota.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mkpolicy.engine import Adapter
from mkpolicy.kube.client import ApiError, KubeClient, ResourceInfo
from mkpolicy.kube.kubeconfig import KUBECONFIG_SECRET_KEY, KubeconfigError, parse_kubeconfig
from mkpolicy.kube.rest import resource_path
from mkpolicy.policy.model import check_pointer
from mkpolicy.sidecar.config import ConfigError, Worker
from mkpolicy.sidecar.wiring import decoded, is_ours, multikueue_secret, secret_path
from mkpolicy.structural.crdpatch import FIELD_MANAGER, field_state

#: The command that gives a CRD its managedBy field (docs/install.md, "Argo Workflows").
CRD_PATCH_COMMAND = (
    "kubectl get crd {crd} -o yaml | mkpolicy export crd-patch --policies <policies> --crd - | "
    f"kubectl apply --server-side --force-conflicts --field-manager={FIELD_MANAGER} -f -"
)


@dataclass(frozen=True)
class CrdReport:
    """What the manager's CRD of a policy's kind says: ``problem`` (an error), ``note`` (information)."""

    problem: str | None = None
    note: str | None = None


async def crd_report(client: KubeClient, adapter: Adapter, info: ResourceInfo) -> CrdReport:
    """Whether the manager's CRD of ``adapter``'s kind keeps its managedBy field, and how status is written.

    A kind not served by a CRD (built in, aggregated) has no report. Raises ApiError when the
    CRD cannot be read for another reason than its absence.
    """
    managed_by = adapter.policy.spec.managed_by
    name = f"{info.resource}.{info.group}"
    try:
        crd = await client.get(resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions", None, name))
    except ApiError as exc:
        if exc.status == 404:
            return CrdReport()
        raise
    problem = None
    if managed_by is not None:
        state = field_state(crd, info.version, check_pointer(managed_by.path))
        if state == "pruned":
            problem = (
                f"the manager's CRD {name} prunes {managed_by.path} ({info.version}): Kueue never sees the marker "
                f"and never dispatches a {info.kind}; give the CRD the field: {CRD_PATCH_COMMAND.format(crd=name)}"
            )
    note = None
    if adapter.sync_subresource == "none" or info.status_subresource is False:
        note = (
            f"{info.kind} has no status subresource: the sidecar hands Kueue the worker's objects without status "
            "and writes the policy's status to the manager's object itself; Kueue must reach every worker "
            "through the sidecar"
        )
    return CrdReport(problem, note)


Bypass = Literal["through", "bypassed", "unknown"]


async def bypass_state(
    client: KubeClient, worker: Worker, namespace: str, endpoints: frozenset[str]
) -> tuple[Bypass, str]:
    """Whether Kueue reaches ``worker`` through this sidecar: (state, why).

    ``bypassed`` when the MultiKueueCluster's Secret holds a kubeconfig that is not the
    sidecar's; ``unknown`` when there is no such Secret to read (no MultiKueueCluster yet, a
    ClusterProfile or Path one). Raises ApiError or OSError when the manager cannot be read.
    """
    try:
        name = await multikueue_secret(client, worker)
    except ConfigError as exc:
        return "unknown", exc.message
    except ApiError as exc:
        if exc.status == 404:
            return "unknown", f"no MultiKueueCluster {worker.name}"
        raise
    try:
        secret = await client.get(secret_path(namespace, name))
    except ApiError as exc:
        if exc.status == 404:
            return "unknown", f"no Secret {namespace}/{name}"
        raise
    data = decoded(secret, KUBECONFIG_SECRET_KEY)
    if data is None:
        return "unknown", f"Secret {namespace}/{name} holds no {KUBECONFIG_SECRET_KEY}"
    if is_ours(secret, data, endpoints):
        return "through", f"Secret {namespace}/{name} points at the sidecar"
    try:
        servers = sorted(
            str((c.get("cluster") or {}).get("server") or "")
            for c in parse_kubeconfig(data).get("clusters") or []
            if isinstance(c, dict)
        )
    except KubeconfigError:
        servers = []
    where = ", ".join(s for s in servers if s) or "no server"
    return "bypassed", (
        f"Kueue reaches worker {worker.name} directly: Secret {namespace}/{name} points at {where}, not at this "
        "sidecar (run the sidecar with --wire, or point the Secret at its endpoint)"
    )


__all__ = ["CRD_PATCH_COMMAND", "Bypass", "CrdReport", "bypass_state", "crd_report"]
