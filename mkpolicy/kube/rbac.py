"""Permissions as Kubernetes' RBAC sees them: what a component needs, as rules and as access reviews.

A :class:`Permission` is one verb on one resource (optionally a subresource, a namespace,
named objects). The same list renders RBAC rules (``mkpolicy export rbac`` / ``export
deploy``) and the SelfSubjectAccessReviews that ``mkpolicy sidecar --check`` sends, so
what is installed and what is checked cannot drift apart.

Kueue's own requests for a kind it dispatches through its generic adapter
(``pkg/controller/admissionchecks/multikueue/externalframeworks/adapter.go`` in
sigs.k8s.io/kueue) are here too: on the manager it reads the job through its cache
(get, list, watch) and patches its status; on a worker it gets, creates, deletes, lists
and watches the copy (and reads it whole, status included).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: Kueue's verbs on a dispatched kind (and its status) in the manager cluster.
KUEUE_MANAGER_VERBS = ("get", "list", "watch", "patch", "update")
#: Kueue's verbs on the copies in a worker cluster; ``/status`` is read only.
KUEUE_WORKER_VERBS = ("create", "delete", "get", "list", "watch")
#: The order verbs are written in rules (reads, then writes).
_VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class Kind:
    """A kind's API group and resource name (its plural), as RBAC names it."""

    group: str
    resource: str


@dataclass(frozen=True)
class Permission:
    """One verb on one resource: cluster-wide (``namespace`` None: every namespace) or in a namespace.

    ``names``: only these objects (RBAC ``resourceNames``; empty: any). ``why`` says which
    code needs it; ``required`` False: the component works without it, with less (e.g.
    Kueue's version guessed instead of read).
    """

    verb: str
    group: str
    resource: str
    namespace: str | None = None
    names: tuple[str, ...] = ()
    why: str = ""
    required: bool = True

    def describe(self) -> str:
        """``get pipelineruns.tekton.dev`` / ``get secrets "w1" in kueue-system`` (for reports)."""
        resource = self.resource
        base, _, sub = resource.partition("/")
        qualified = f"{base}.{self.group}" if self.group else base
        if sub:
            qualified += f"/{sub}"
        text = f"{self.verb} {qualified}"
        if self.names:
            text += " " + ", ".join(f'"{n}"' for n in self.names)
        return text + (f" in namespace {self.namespace}" if self.namespace else " (all namespaces)")


def kueue_manager(kinds: Iterable[Kind]) -> list[Permission]:
    """What Kueue's service account needs on the manager for the dispatched kinds."""
    why = "Kueue's reads of the job and writes of its status"
    return [
        Permission(verb, kind.group, resource, why=why)
        for kind in kinds
        for resource in (kind.resource, f"{kind.resource}/status")
        for verb in KUEUE_MANAGER_VERBS
    ]


def kueue_worker(kinds: Iterable[Kind]) -> list[Permission]:
    """What the identity of a worker kubeconfig needs on the worker for the dispatched kinds."""
    why = "Kueue's copy on the worker (created, read and deleted through the sidecar)"
    out = [Permission(verb, kind.group, kind.resource, why=why) for kind in kinds for verb in KUEUE_WORKER_VERBS]
    out += [Permission("get", kind.group, f"{kind.resource}/status", why=why) for kind in kinds]
    return out


def rules(permissions: Iterable[Permission]) -> list[dict[str, Any]]:
    """RBAC PolicyRules granting ``permissions`` (all in one scope), merged where RBAC allows.

    Resources of one API group with the same verbs and the same ``resourceNames`` share
    a rule; groups and resources keep the order they first appear in.
    """
    verbs: dict[tuple[str, tuple[str, ...], str], set[str]] = {}
    for p in permissions:
        verbs.setdefault((p.group, p.names, p.resource), set()).add(p.verb)
    merged: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for (group, names, resource), found in verbs.items():
        ordered = tuple(sorted(found, key=lambda v: (_VERB_ORDER.index(v) if v in _VERB_ORDER else 99, v)))
        merged.setdefault((group, names, ordered), []).append(resource)
    out: list[dict[str, Any]] = []
    for (group, names, ordered), resources in merged.items():
        rule: dict[str, Any] = {"apiGroups": [group], "resources": resources}
        if names:
            rule["resourceNames"] = list(names)
        rule["verbs"] = list(ordered)
        out.append(rule)
    return out


def by_scope(permissions: Iterable[Permission]) -> dict[str | None, list[Permission]]:
    """The permissions by namespace (None: cluster-wide, a ClusterRole's), in first-seen order."""
    out: dict[str | None, list[Permission]] = {}
    for p in permissions:
        out.setdefault(p.namespace, []).append(p)
    return out


def access_reviews(permission: Permission) -> list[dict[str, Any]]:
    """The SelfSubjectAccessReviews (authorization.k8s.io/v1) that together check ``permission``:
    one per named object, or one for any object."""
    base, _, sub = permission.resource.partition("/")
    attributes: dict[str, Any] = {"verb": permission.verb, "group": permission.group, "resource": base}
    if sub:
        attributes["subresource"] = sub
    if permission.namespace:
        attributes["namespace"] = permission.namespace
    names: Sequence[str | None] = permission.names or (None,)
    out = []
    for name in names:
        spec = dict(attributes, name=name) if name else dict(attributes)
        out.append(
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": spec},
            }
        )
    return out
