"""RBAC documents for ``mkpolicy export rbac`` and ``export deploy``: Kueue's roles, the sidecar's own.

The rules come from permission lists (:mod:`mkpolicy.kube.rbac`, :mod:`mkpolicy.sidecar.permissions`),
the same lists ``mkpolicy sidecar --check`` verifies with SelfSubjectAccessReviews.
"""

from __future__ import annotations

from typing import Any

from mkpolicy.kube.rbac import Kind, Permission, by_scope, rules
from mkpolicy.lint.export import LABELS
from mkpolicy.sidecar.config import SidecarConfig
from mkpolicy.sidecar.permissions import sidecar_cluster, sidecar_manager, sidecar_wiring

RBAC_API = "rbac.authorization.k8s.io/v1"
#: Kueue's service account (its release manifests and its Helm chart with release name ``kueue``).
KUEUE_SERVICE_ACCOUNT = "kueue-controller-manager"


def roles(name: str, component: str, permissions: list[Permission]) -> list[dict[str, Any]]:
    """A ClusterRole for the cluster-wide permissions and a Role per namespace, all called ``name``."""
    out = []
    for namespace, scoped in by_scope(permissions).items():
        meta: dict[str, Any] = {"name": name}
        if namespace is not None:
            meta["namespace"] = namespace
        meta["labels"] = {**LABELS, "app.kubernetes.io/component": component}
        kind = "ClusterRole" if namespace is None else "Role"
        out.append({"apiVersion": RBAC_API, "kind": kind, "metadata": meta, "rules": rules(scoped)})
    return out


def bindings(role_documents: list[dict[str, Any]], subject: dict[str, str]) -> list[dict[str, Any]]:
    """A (Cluster)RoleBinding of each role to ``subject``, named like the role."""
    out = []
    for role in role_documents:
        meta = {k: v for k, v in role["metadata"].items() if k in ("name", "namespace", "labels")}
        out.append(
            {
                "apiVersion": RBAC_API,
                "kind": f"{role['kind']}Binding",
                "metadata": meta,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": meta["name"]},
                "subjects": [subject],
            }
        )
    return out


def service_account(name: str, namespace: str) -> dict[str, str]:
    """A ServiceAccount subject."""
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def sidecar_roles(
    config: SidecarConfig | None, kinds: list[Kind], prefix: str = "mkpolicy", wiring: bool = True
) -> list[dict[str, Any]]:
    """The sidecar's own roles on the manager: ``<prefix>-sidecar`` (ClusterRole and, with a
    configuration, a Role in its namespace) and ``<prefix>-sidecar-wiring`` (``--wire``).

    Without a configuration only the cluster-wide part is known (``manager.reads: direct``).
    """
    if config is None:
        return roles(f"{prefix}-sidecar", "sidecar", sidecar_cluster(kinds))
    out = roles(f"{prefix}-sidecar", "sidecar", sidecar_manager(config, kinds))
    if wiring:
        out += roles(f"{prefix}-sidecar-wiring", "sidecar", sidecar_wiring(config))
    return out
