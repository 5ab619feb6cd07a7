"""Resource types: what the server serves, and the registry that maps URLs to them.

A :class:`ResourceType` is one API resource (``configmaps``, ``workloads.kueue.x-k8s.io``)
with its served versions. Objects are stored once per resource, in the storage version;
serving them under another version only rewrites ``apiVersion``, which is what a CRD
with conversion strategy ``None`` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

NameRule = Literal["subdomain", "label"]
PropagationPolicy = Literal["Background", "Foreground", "Orphan"]

#: Verbs every resource serves (discovery lists them).
RESOURCE_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
#: Verbs of the ``status`` subresource.
STATUS_VERBS = ("get", "patch", "update")


@dataclass(frozen=True)
class Version:
    """One served version of a resource."""

    name: str
    #: ``status`` is a subresource: main writes keep the stored status, ``/status`` writes only status.
    status_subresource: bool = False
    #: The ``openAPIV3Schema`` (CRDs only): unknown fields are pruned and defaults applied from it.
    schema: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    #: Field-selector labels beyond ``metadata.name``/``metadata.namespace`` (dotted paths).
    selectable_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResourceType:
    """An API resource and the rules the server applies to its objects."""

    group: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    versions: tuple[Version, ...]
    storage_version: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: A built-in (typed) kind: list items carry no apiVersion/kind, a missing apiVersion/kind
    #: in a body is defaulted from the URL, DELETE answers with a ``Status``, and
    #: strategic merge patch is accepted.
    builtin: bool = False
    #: ``metadata.generation`` is kept and bumped when anything outside metadata (and
    #: outside status, when it is a subresource) changes.
    tracks_generation: bool = True
    name_rule: NameRule = "subdomain"
    #: The propagation policy of a DELETE that names none (batch/v1 Jobs: Orphan).
    default_propagation: PropagationPolicy = "Background"
    #: Another resource whose objects these are, served converted (events.k8s.io/v1 Events
    #: are core Events): its ``(group, plural)`` and its stored ``apiVersion``.
    stored_in: tuple[str, str, str] | None = None

    @property
    def key(self) -> tuple[str, str]:
        """``(group, plural)`` of the storage: shared by every version (and by a resource
        served from another's objects)."""
        return self.stored_in[:2] if self.stored_in else (self.group, self.plural)

    @property
    def served_key(self) -> tuple[str, str]:
        """``(group, plural)`` as URLs and discovery name it."""
        return (self.group, self.plural)

    @property
    def stored_api_version(self) -> str:
        """The ``apiVersion`` objects are stored with."""
        return self.stored_in[2] if self.stored_in else self.api_version(self.storage_version)

    @property
    def group_resource(self) -> str:
        """``plural`` for the core group, ``plural.group`` otherwise."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def list_kind(self) -> str:
        """The kind of a list response."""
        return f"{self.kind}List"

    def version(self, name: str) -> Version | None:
        """The served version called ``name``, or None."""
        for v in self.versions:
            if v.name == name:
                return v
        return None

    def api_version(self, version: str) -> str:
        """``v1`` for the core group, ``group/version`` otherwise."""
        return f"{self.group}/{version}" if self.group else version


_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(name: str) -> tuple[int, int, int, str]:
    """Sort key of Kubernetes version names: v2 < v1 < v1beta2 < v1beta1 < v1alpha1 < other."""
    m = _KUBE_VERSION.match(name)
    if m is None:
        return (3, 0, 0, name)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor, "")


def _builtin(
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    status: bool = False,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    generation: bool = False,
    name_rule: NameRule = "subdomain",
    selectable: tuple[str, ...] = (),
    propagation: PropagationPolicy = "Background",
    stored_in: tuple[str, str, str] | None = None,
) -> ResourceType:
    return ResourceType(
        group=group,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        versions=(Version(version, status_subresource=status, selectable_fields=selectable),),
        storage_version=version,
        short_names=short_names,
        categories=categories,
        builtin=True,
        tracks_generation=generation,
        name_rule=name_rule,
        default_propagation=propagation,
        stored_in=stored_in,
    )


NAMESPACES = _builtin(
    "", "v1", "Namespace", "namespaces", namespaced=False, status=True, short_names=("ns",),
    name_rule="label", selectable=("status.phase",),
)  # fmt: skip
CONFIGMAPS = _builtin("", "v1", "ConfigMap", "configmaps", short_names=("cm",))
SECRETS = _builtin("", "v1", "Secret", "secrets", selectable=("type",))
LEASES = _builtin("coordination.k8s.io", "v1", "Lease", "leases")
DEPLOYMENTS = _builtin("apps", "v1", "Deployment", "deployments", status=True, generation=True, short_names=("deploy",))
JOBS = _builtin(
    "batch", "v1", "Job", "jobs", status=True, categories=("all",), generation=True,
    selectable=("status.successful",), propagation="Orphan",
)  # fmt: skip
CRDS = _builtin(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
    namespaced=False, status=True, short_names=("crd", "crds"), categories=("api-extensions",), generation=True,
)  # fmt: skip
#: core/v1 Events (pkg/registry/core/event: field selectors of GetAttrs).
EVENTS = _builtin(
    "", "v1", "Event", "events", short_names=("ev",),
    selectable=(
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
        "reportingComponent", "source", "type",
    ),
)  # fmt: skip
#: events.k8s.io/v1 Events: the same objects, other field names (see :mod:`.conversion`).
EVENTS_V1 = _builtin("events.k8s.io", "v1", "Event", "events", short_names=("ev",), stored_in=("", "events", "v1"))

#: RBAC (rbac.authorization.k8s.io/v1): what restricted tokens may do (:mod:`.authz`).
ROLES = _builtin("rbac.authorization.k8s.io", "v1", "Role", "roles")
CLUSTERROLES = _builtin("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False)
ROLEBINDINGS = _builtin("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings")
CLUSTERROLEBINDINGS = _builtin(
    "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False
)

#: The kinds every server serves.
BUILTINS: tuple[ResourceType, ...] = (
    NAMESPACES, CONFIGMAPS, SECRETS, EVENTS, EVENTS_V1, LEASES, DEPLOYMENTS, JOBS, CRDS,
    ROLES, CLUSTERROLES, ROLEBINDINGS, CLUSTERROLEBINDINGS,
)  # fmt: skip


class Registry:
    """The resource types a server serves, looked up by URL or by group/kind.

    Only the server's event-loop thread changes a registry once the server runs.
    """

    def __init__(self, types: tuple[ResourceType, ...] = BUILTINS) -> None:
        self._by_key: dict[tuple[str, str], ResourceType] = {}
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        """Serve ``rt`` (replacing the type with the same group and plural)."""
        self._by_key[rt.served_key] = rt

    def remove(self, key: tuple[str, str]) -> ResourceType | None:
        """Stop serving the resource ``(group, plural)``; returns what was removed."""
        return self._by_key.pop(key, None)

    def get(self, group: str, plural: str) -> ResourceType | None:
        """The type of ``plural`` in ``group`` (any version), or None."""
        return self._by_key.get((group, plural))

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at ``group/version/plural``, or None."""
        rt = self._by_key.get((group, plural))
        if rt is None or rt.version(version) is None:
            return None
        return rt

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        """The type of ``kind`` in ``group``, or None."""
        for rt in self._by_key.values():
            if rt.group == group and rt.kind == kind:
                return rt
        return None

    def groups(self) -> dict[str, list[str]]:
        """``group -> served versions`` (by Kubernetes version priority)."""
        out: dict[str, set[str]] = {}
        for rt in self._by_key.values():
            out.setdefault(rt.group, set()).update(v.name for v in rt.versions)
        return {g: sorted(vs, key=version_priority) for g, vs in sorted(out.items())}

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        """Every type served at ``group/version``, by plural."""
        return sorted(
            (rt for rt in self._by_key.values() if rt.group == group and rt.version(version) is not None),
            key=lambda rt: rt.plural,
        )

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_key.values()))


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"batch/v1"`` -> ``("batch", "v1")``; ``"v1"`` -> ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version
