"""The wire contract: the request shapes Kueue sends a worker, as data; everything else is refused.

The sidecar's endpoint token is the worker's identity, so the sidecar forwards only what
Kueue's Go code sends a worker (Kueue v0.19.2, controller-runtime v0.24, client-go v0.36),
for the Kueue version and configuration it runs beside:

* **Workloads** (``kueue.x-k8s.io``, v1beta2 from Kueue 0.15, v1beta1 before):
  ``pkg/controller/admissionchecks/multikueue/multikueuecluster.go`` (``establishWatch``:
  a watch with ``allowWatchBookmarks`` and the origin label selector, no resourceVersion;
  ``runGC``: a LIST by the origin label), ``workload.go`` (Get, Create, Update, Status().Update,
  Delete of remote Workloads) and ``pkg/workload/patching/patching.go`` (``patchStatus``:
  server-side apply of ``/status`` with ``fieldManager`` and ``force``, or a merge patch
  with ``WorkloadRequestUseMergePatch``);
* **each adapter's kind** — the enabled integrations' built-in adapters
  (``pkg/controller/jobs/*/*_multikueue_adapter.go``), the external frameworks
  (``externalframeworks/adapter.go``) and the policy kinds: a watch as for Workloads, a GET
  (the full object, and the ``PartialObjectMetadata`` ownership check of
  ``pkg/controller/jobframework/utils.go`` ``ValidateRemoteObjectOwnership``), a POST, a
  DELETE with ``DeleteOptions`` (``propagationPolicy: Background``); a merge PATCH only for
  the batch/job and Ray adapters (elastic jobs: ``job_multikueue_adapter.go``
  ``syncElasticJob``, ``ray_multikueue_adapter.go``);
* **ClusterQueues and LocalQueues** with ``MultiKueueManagerQuotaAutomation`` (alpha, off):
  a controller-runtime cache (``multikueuecluster.go`` ``newClientWithWatch``), i.e.
  client-go reflectors' LIST and WATCH (``tools/cache/reflector.go``);
* **discovery**: ``GET /api`` and ``/apis`` (aggregated), ``/api/v1`` and
  ``/apis/<group>/<version>`` of the contract's groups (controller-runtime
  ``client/apiutil/restmapper.go``, client-go ``discovery/discovery_client.go``). Never
  ``/version``.

Accept headers are client-go's (``rest/request.go`` ``setAcceptHeader``: the content type
and ``*/*``; protobuf for built-in kinds, controller-runtime ``client/apiutil/apimachinery.go``
``createRestConfig``; ``PartialObjectMetadata`` for metadata reads; CBOR with client-go's
CBOR gates). A body is allowed only where Kueue sends one; a GET or HEAD with a body is a
400 (a proxy that forwarded it could have the body read as the next request). Anything
else answers a Kubernetes ``Status`` 403 naming the rule that refused it. The
SidecarConfig's ``wire.allow`` widens the contract, explicitly.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

from mkpolicy.policy import GVK
from mkpolicy.sidecar.config import AllowPath, AllowRule
from mkpolicy.sidecar.http1 import RequestHead
from mkpolicy.sidecar.kueueconfig import NATIVE_ADAPTERS, KueueInfo
from mkpolicy.sidecar.paths import Target
from mkpolicy.sidecar.policies import PolicySet
from mkpolicy.sidecar.status import StatusError

#: Media types Kueue's clients accept for objects (JSON, protobuf for built-in kinds, CBOR).
OBJECT_MEDIA = frozenset({"application/json", "application/vnd.kubernetes.protobuf", "application/cbor", "*/*"})
#: ... and for the ownership check (``PartialObjectMetadata``, JSON or protobuf).
METADATA_MEDIA = frozenset(
    {"application/json;as=PartialObjectMetadata", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata"}
)
#: Discovery (aggregated ``APIGroupDiscoveryList``, or the legacy documents).
DISCOVERY_MEDIA = frozenset({"application/json", "application/json;as=APIGroupDiscoveryList", "*/*"})
#: Bodies of creations and updates.
OBJECT_BODIES = frozenset({"application/json", "application/vnd.kubernetes.protobuf", "application/cbor"})
MERGE_PATCH = frozenset({"application/merge-patch+json"})
#: Server-side apply (controller-runtime ``client.Apply``; CBOR with client-go's CBOR gates,
#: apimachinery pkg/types/patch.go) or a merge patch (``WorkloadRequestUseMergePatch``).
STATUS_PATCH = frozenset(
    {"application/apply-patch+yaml", "application/apply-patch+cbor", "application/merge-patch+json"}
)
#: What a watch asks for (``client.Watch`` with ``MatchingLabels`` and ``AllowWatchBookmarks``).
WATCH_QUERY = frozenset({"watch", "allowWatchBookmarks", "labelSelector"})
#: A client-go reflector's LIST and WATCH (the controller-runtime cache of the queue kinds).
INFORMER_QUERY = frozenset(
    {
        "watch",
        "allowWatchBookmarks",
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
    }
)
#: The HTTP method of each Kubernetes verb.
METHODS = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETE",
}

#: Resource (plural) of each built-in adapter's kind (the kinds' CRDs and the core API).
NATIVE_RESOURCES: dict[GVK, str] = {
    GVK("batch", "v1", "Job"): "jobs",
    GVK("jobset.x-k8s.io", "v1alpha2", "JobSet"): "jobsets",
    GVK("kubeflow.org", "v2beta1", "MPIJob"): "mpijobs",
    GVK("kubeflow.org", "v1", "PyTorchJob"): "pytorchjobs",
    GVK("kubeflow.org", "v1", "TFJob"): "tfjobs",
    GVK("kubeflow.org", "v1", "XGBoostJob"): "xgboostjobs",
    GVK("kubeflow.org", "v1", "PaddleJob"): "paddlejobs",
    GVK("kubeflow.org", "v1", "JAXJob"): "jaxjobs",
    GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob"): "trainjobs",
    GVK("ray.io", "v1", "RayJob"): "rayjobs",
    GVK("ray.io", "v1", "RayCluster"): "rayclusters",
    GVK("ray.io", "v1", "RayService"): "rayservices",
    GVK("workload.codeflare.dev", "v1beta2", "AppWrapper"): "appwrappers",
    GVK("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"): "leaderworkersets",
    GVK("apps", "v1", "StatefulSet"): "statefulsets",
    GVK("", "v1", "Pod"): "pods",
}
#: Integrations whose adapter also merge-patches the worker's copy (elastic jobs).
PATCHING_INTEGRATIONS = frozenset({"batch/job", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice"})


@dataclass(frozen=True)
class Shape:
    """One request shape: a verb on a (sub)resource, its query parameters, Accept and body types."""

    verb: str
    subresource: str | None
    query: frozenset[str]
    accept: frozenset[str]
    #: Media types of a body; empty: no body.
    bodies: frozenset[str]
    #: Where Kueue sends it (a file of Kueue's repository).
    source: str
    #: HTTP methods (empty: the verb's own, :data:`METHODS`).
    methods: frozenset[str] = frozenset()

    def allows(self, method: str) -> bool:
        """Whether ``method`` may carry this shape's verb."""
        return method in self.methods if self.methods else method == METHODS[self.verb]


@dataclass(frozen=True)
class Rule:
    """A shape bound to a resource: what one request must match to be forwarded."""

    #: Names the rule in refusals and in ``--check`` (e.g. ``Workloads: watch``).
    name: str
    group: str
    #: "*": every resource of the group.
    resource: str
    #: None: any version.
    versions: frozenset[str] | None
    shape: Shape
    #: What the rule is for: workload, integration, external, policy, pending, queue or allow.
    category: str = "allow"

    @property
    def family(self) -> str:
        """The rules' common name (``Workloads``, ``policy <name>``, ``integration batch/job``...)."""
        return self.name.partition(":")[0]

    def describe(self) -> str:
        """One line: method, path pattern, parameters, Accept and bodies."""
        s = self.shape
        path = f"/apis/{self.group}" if self.group else "/api"
        versions = ",".join(sorted(self.versions)) if self.versions is not None else "*"
        sub = f"/{{name}}/{s.subresource}" if s.subresource else ("/{name}" if s.verb in _NAMED else "")
        query = ",".join(sorted(s.query)) or "-"
        body = ",".join(sorted(s.bodies)) or "none"
        methods = "|".join(sorted(s.methods)) if s.methods else METHODS[s.verb]
        return f"{methods} {path}/{versions}/[namespaces/{{ns}}/]{self.resource}{sub}  query={query}  body={body}"


_NAMED = frozenset({"get", "update", "patch", "delete"})


def _shape(
    verb: str,
    source: str,
    *,
    sub: str | None = None,
    query: Iterable[str] = (),
    accept: frozenset[str] = OBJECT_MEDIA,
    bodies: frozenset[str] = frozenset(),
) -> Shape:
    return Shape(verb, sub, frozenset(query), accept, bodies, source)


_MK = "pkg/controller/admissionchecks/multikueue/"
#: Kueue's remote Workloads.
WORKLOAD_SHAPES = (
    _shape("watch", _MK + "multikueuecluster.go establishWatch", query=WATCH_QUERY),
    _shape("list", _MK + "multikueuecluster.go runGC", query={"labelSelector"}),
    _shape("get", _MK + "workload.go (remote workloads read)"),
    _shape("create", _MK + "workload.go (the remote Workload)", bodies=OBJECT_BODIES),
    _shape("update", _MK + "workload.go (finalizers, labels)", bodies=OBJECT_BODIES),
    _shape("update", _MK + "workload.go (Status().Update)", sub="status", bodies=OBJECT_BODIES),
    _shape(
        "patch",
        "pkg/workload/patching/patching.go patchStatus",
        sub="status",
        query={"fieldManager", "force"},
        bodies=STATUS_PATCH,
    ),
    _shape("delete", _MK + "workload.go (remote workload removed)", bodies=OBJECT_BODIES),
)
#: A MultiKueue adapter's kind (built-in, external framework or policy kind).
ADAPTER_SHAPES = (
    _shape("watch", _MK + "multikueuecluster.go establishWatch", query=WATCH_QUERY),
    _shape(
        "get",
        "pkg/controller/jobframework/utils.go ValidateRemoteObjectOwnership; the adapter's SyncJob",
        accept=OBJECT_MEDIA | METADATA_MEDIA,
    ),
    _shape(
        "create",
        "the adapter's SyncJob (externalframeworks/adapter.go, jobs/*_multikueue_adapter.go)",
        bodies=OBJECT_BODIES,
    ),
    _shape("delete", "the adapter's DeleteRemoteObject (PropagationPolicy Background)", bodies=OBJECT_BODIES),
)
#: The elastic-job merge patch of the batch/job and Ray adapters.
PATCH_SHAPE = _shape(
    "patch",
    "pkg/controller/jobs/job/job_multikueue_adapter.go syncElasticJob; jobs/ray/ray_multikueue_adapter.go",
    bodies=MERGE_PATCH,
)
#: The controller-runtime cache of ClusterQueues and LocalQueues (MultiKueueManagerQuotaAutomation).
QUEUE_SHAPES = (
    _shape("list", _MK + "multikueuecluster.go newClientWithWatch (client-go reflector)", query=INFORMER_QUERY),
    _shape("watch", _MK + "multikueuecluster.go newClientWithWatch (client-go reflector)", query=INFORMER_QUERY),
)
#: Discovery's parameters: client-go's ``timeout`` (rest/request.go, when the REST config sets one).
DISCOVERY_QUERY = frozenset({"timeout"})
DISCOVERY_SOURCE = "controller-runtime client/apiutil/restmapper.go; client-go discovery/discovery_client.go"


class ContractRefusal(StatusError):
    """A request outside the contract: answered before anything is sent to the worker.

    ``close``: the connection is closed after the answer (its body is never read).
    """

    def __init__(self, code: int, message: str, *, close: bool = False) -> None:
        super().__init__(code, message, None, {"retryAfterSeconds": 1} if code == 503 else None)
        self.close = close


def guess_resource(kind: str) -> str:
    """apimachinery's ``meta.UnsafeGuessKindToResource`` (pkg/api/meta/restmapper.go): the plural of a kind."""
    name = kind.lower()
    if name.endswith("endpoints"):
        return name
    if name.endswith("s"):
        return name + "es"
    if name.endswith("y"):
        return name[:-1] + "ies"
    return name + "s"


def _media(value: str) -> tuple[str, ...]:
    """The media ranges of an Accept or Content-Type value: ``type/subtype`` plus ``;as=X`` when asked.

    Cached for values up to :data:`CACHED_MEDIA` characters: a client repeats the few it sends
    (parsing them was half of a request's contract check); longer ones are not kept, so the
    cache stays small whatever clients send.
    """
    return _media_cached(value) if len(value) <= CACHED_MEDIA else _parse_media(value)


#: Accept and Content-Type values up to this length are cached.
CACHED_MEDIA = 512


def _parse_media(value: str) -> tuple[str, ...]:
    out = []
    for part in value.split(","):
        pieces = [p.strip() for p in part.split(";")]
        base = pieces[0].lower()
        if not base:
            continue
        as_ = next((p[3:].strip() for p in pieces[1:] if p.lower().startswith("as=")), "")
        out.append(f"{base};as={as_}" if as_ else base)
    return tuple(out)


_media_cached = functools.lru_cache(maxsize=256)(_parse_media)


def _allowed_media(found: tuple[str, ...], allowed: frozenset[str]) -> str | None:
    """The first media type not allowed (None: all are)."""
    if "*" in allowed:
        return None
    return next((m for m in found if m not in allowed), None)


@dataclass(frozen=True)
class Contract:
    """The request shapes forwarded to workers (built by :func:`build`)."""

    rules: tuple[Rule, ...]
    #: Groups (and their versions) whose legacy discovery documents may be read.
    discovery: frozenset[tuple[str, str]]
    #: What the contract was derived from (one line).
    basis: str
    #: Other non-resource paths allowed (``wire.allowPaths``): path (a trailing ``*``: a prefix) -> methods.
    paths: tuple[tuple[str, frozenset[str]], ...] = ()
    #: Built before the first policy set is active: kinds not known yet are answered 503, not 403.
    provisional: bool = False
    _index: dict[tuple[str, str], tuple[Rule, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # checked on every request: the rules of a (group, resource), "*" resources included
        index: dict[tuple[str, str], list[Rule]] = {}
        for rule in self.rules:
            index.setdefault((rule.group, rule.resource), []).append(rule)
        object.__setattr__(self, "_index", {k: tuple(v) for k, v in index.items()})

    @property
    def kueue_watches(self) -> tuple[str, ...]:
        """The rules' families Kueue watches (Workloads, each integration's and policy's kind, the queue kinds):
        ``multikueuecluster.go`` ``setConfig`` opens one watch for Workloads and one per adapter that is a
        ``MultiKueueWatcher``; the queue kinds' cache one each. ``wire.allow`` widenings do not count."""
        return tuple(sorted({r.family for r in self.rules if r.shape.verb == "watch" and r.category != "allow"}))

    def check(self, head: RequestHead, target: Target | None) -> Rule | None:
        """The rule a request matches (None: discovery or another allowed path); :class:`ContractRefusal`
        when the contract does not allow it."""
        method = head.method
        body = head.framing == "chunked" or (head.framing == "length" and head.length > 0)
        if body and (method in ("GET", "HEAD") or (target is not None and target.verb in ("get", "list", "watch"))):
            raise ContractRefusal(
                400,
                f"mkpolicy sidecar: a {method} with a body is refused (no Kubernetes read carries one; "
                "the body could be read as another request)",
                close=True,
            )
        if target is None:
            self._check_discovery(head)
            return None
        index = self._index
        candidates = [
            r
            for r in index.get((target.group, target.resource), ()) + index.get((target.group, "*"), ())
            if (r.versions is None or target.version in r.versions)
            and (r.shape.subresource == target.subresource or r.shape.subresource == "*")
        ]
        if not candidates and self.provisional:
            raise ContractRefusal(
                503,
                f"mkpolicy sidecar: no policy set is active yet, so it is not known whether {_describe(target)} is "
                "a policy kind; retry shortly",
            )
        if not candidates:
            raise ContractRefusal(
                403, f"mkpolicy sidecar: wire contract: {_describe(target)} is not a resource Kueue uses; refused"
            )
        verbs = [r for r in candidates if r.shape.verb == target.verb and r.shape.allows(method)]
        if not verbs:
            sent = sorted({r.shape.verb for r in candidates})
            raise ContractRefusal(
                403,
                f"mkpolicy sidecar: wire contract: {method} ({target.verb}) of {_describe(target)} is refused: "
                f"Kueue sends only {', '.join(sent)} of it (wire contract rules {candidates[0].family!r})",
            )
        problems = []
        for rule in verbs:
            problem = self._mismatch(rule, head, target, body)
            if not problem:
                return rule
            problems.append(problem)
        problem = problems[0]  # Kueue's own rule's (widenings come after it)
        raise ContractRefusal(403, f"mkpolicy sidecar: wire contract: {target.verb} of {_describe(target)}: {problem}")

    @staticmethod
    def _mismatch(rule: Rule, head: RequestHead, target: Target, body: bool) -> str:
        """Why ``head`` does not fit ``rule`` ("" when it does)."""
        shape = rule.shape
        if "*" not in shape.query:
            extra = sorted(set(head.decoded.query) - shape.query)
            if extra:
                allowed = ", ".join(sorted(shape.query)) or "none"
                return f"query parameter {extra[0]!r} is not sent by Kueue (rule {rule.name} allows {allowed})"
        accept = head.fields.get("accept")
        if accept is not None:
            wrong = _allowed_media(_media(accept), shape.accept)
            if wrong is not None:
                return f"Accept {wrong!r} is not asked by Kueue (rule {rule.name})"
        if body:
            if not shape.bodies:
                return f"a body is refused (rule {rule.name} takes none)"
            kind = _media(head.fields.get("content-type", ""))
            wrong = _allowed_media(kind or ("(none)",), shape.bodies)
            if wrong is not None:
                return f"Content-Type {wrong!r} is refused (rule {rule.name} takes {', '.join(sorted(shape.bodies))})"
        return ""

    def _check_discovery(self, head: RequestHead) -> None:
        parts = head.decoded.parts
        path = head.decoded.path
        allowed = (
            head.method == "GET"
            and set(head.decoded.query) <= DISCOVERY_QUERY
            and (
                parts in (("api",), ("apis",), ("api", "v1"))
                or (len(parts) == 3 and parts[0] == "apis" and (parts[1], parts[2]) in self.discovery)
            )
        )
        if not allowed and not head.decoded.raw_query:
            allowed = any(
                head.method in methods and (path == p or (p.endswith("*") and path.startswith(p[:-1])))
                for p, methods in self.paths
            )
            if allowed:
                return
        if not allowed:
            raise ContractRefusal(
                403,
                f"mkpolicy sidecar: wire contract: {head.method} {path or '/'} is refused: of the paths that are not "
                "resources, Kueue reads only discovery (GET /api, /apis, /api/v1, /apis/<group>/<version>)",
            )
        accept = head.fields.get("accept")
        wrong = _allowed_media(_media(accept), DISCOVERY_MEDIA) if accept is not None else None
        if wrong is not None:
            raise ContractRefusal(
                403, f"mkpolicy sidecar: wire contract: discovery: Accept {wrong!r} is not asked by Kueue"
            )

    def lines(self) -> list[str]:
        """The contract in force, one rule a line (``mkpolicy sidecar --check``)."""
        out = [f"wire contract ({self.basis}):"]
        width = max((len(r.name) for r in self.rules), default=0)
        out += [f"  {r.name:<{width}}  {r.describe()}" for r in self.rules]
        groups = ", ".join(f"{g or 'core'}/{v}" for g, v in sorted(self.discovery))
        out.append(f"  discovery: GET /api, /apis, /api/v1; /apis/<group>/<version> of {groups}")
        out += [f"  wire.allowPaths: {'|'.join(sorted(m))} {p}" for p, m in self.paths]
        return out


def _describe(target: Target) -> str:
    gv = f"{target.group}/{target.version}" if target.group else target.version
    sub = f"/{target.subresource}" if target.subresource else ""
    return f"{target.resource}{sub} ({gv})"


def _rules(
    category: str, name: str, group: str, resource: str, versions: frozenset[str] | None, shapes: Iterable[Shape]
) -> list[Rule]:
    out = []
    for shape in shapes:
        label = shape.verb + (f" {shape.subresource}" if shape.subresource else "")
        out.append(Rule(f"{name}: {label}", group, resource, versions, shape, category))
    return out


def workload_versions(kueue: KueueInfo | None) -> frozenset[str]:
    """The Workload API versions this Kueue uses (v1beta2 from 0.15; both when its version is unknown)."""
    version = kueue.version if kueue is not None else None
    if version is None:
        return frozenset({"v1beta1", "v1beta2"})
    return frozenset({"v1beta1"} if version < (0, 15, 0) else {"v1beta2"})


def allow_rule(index: int, rule: AllowRule) -> list[Rule]:
    """The rules of one ``wire.allow`` entry."""
    shapes = [
        Shape(
            verb,
            rule.subresource,
            frozenset(rule.query),
            (OBJECT_MEDIA | METADATA_MEDIA | frozenset(m.replace(" ", "") for m in rule.accept)),
            frozenset(m.replace(" ", "") for m in rule.content_types),
            f"SidecarConfig wire.allow[{index}]: {rule.reason}",
            frozenset({METHODS[verb], "HEAD"}) if verb in ("get", "list") else frozenset(),
        )
        for verb in rule.verbs
    ]
    versions = frozenset(rule.versions) if rule.versions is not None else None
    return _rules("allow", f"wire.allow[{index}]", rule.group, rule.resource, versions, shapes)


def build(
    kueue: KueueInfo | None,
    policies: PolicySet | None,
    allow: Iterable[AllowRule] = (),
    paths: Iterable[AllowPath] = (),
) -> Contract:
    """The contract for this Kueue (version, integrations, external frameworks, gates) and these policies.

    What is not known counts as possible: with Kueue's Configuration unread, every built-in
    integration's kind; with its version unknown, both Workload versions.
    """
    rules: list[Rule] = []
    discovery: set[tuple[str, str]] = set()
    versions = workload_versions(kueue)
    rules += _rules("workload", "Workloads", "kueue.x-k8s.io", "workloads", versions, WORKLOAD_SHAPES)
    discovery |= {("kueue.x-k8s.io", v) for v in versions}
    policy_kinds: dict[tuple[str, str], str] = {}
    if policies is not None:
        for entry in policies.entries:
            info = entry.info
            policy_kinds[(info.group, info.kind)] = info.resource
            # any version: a copy at another version is refused by the proxy with an Event, reads pass
            rules += _rules("policy", f"policy {entry.name}", info.group, info.resource, None, ADAPTER_SHAPES)
            discovery.add((info.group, info.version))
        for name, gvk in policies.pending_kinds:
            # the resource is not known until the manager serves the kind: its group's creations
            # reach the proxy, which refuses those of the pending kind
            rules += _rules("pending", f"pending policy {name}", gvk.group, "*", None, ADAPTER_SHAPES)
            discovery.add((gvk.group, gvk.version))
    integrations = kueue.integrations if kueue is not None else None
    for integration, gvk in NATIVE_ADAPTERS.items():
        if integrations is not None and integration not in integrations:
            continue
        if (gvk.group, gvk.kind) in policy_kinds:
            continue
        shapes = ADAPTER_SHAPES + ((PATCH_SHAPE,) if integration in PATCHING_INTEGRATIONS else ())
        rules += _rules(
            "integration",
            f"integration {integration}",
            gvk.group,
            NATIVE_RESOURCES[gvk],
            frozenset({gvk.version}),
            shapes,
        )
        discovery.add((gvk.group, gvk.version))
    externals = kueue.external_frameworks if kueue is not None else None
    for gvk in externals or ():
        if (gvk.group, gvk.kind) in policy_kinds:
            continue
        resource = guess_resource(gvk.kind)
        rules += _rules(
            "external",
            f"external {gvk.kind}.{gvk.group}",
            gvk.group,
            resource,
            frozenset({gvk.version}),
            ADAPTER_SHAPES,
        )
        discovery.add((gvk.group, gvk.version))
    if kueue is not None and kueue.gate("MultiKueueManagerQuotaAutomation"):
        for resource in ("clusterqueues", "localqueues"):
            rules += _rules("queue", f"quota automation {resource}", "kueue.x-k8s.io", resource, versions, QUEUE_SHAPES)
    for index, rule in enumerate(allow):
        rules += allow_rule(index, rule)
        if rule.group and rule.versions:
            discovery |= {(rule.group, v) for v in rule.versions}
    basis = kueue.describe() if kueue is not None else "Kueue not read: every built-in integration"
    if integrations is None and kueue is not None:
        basis += "; integrations not read: every built-in integration"
    allowed_paths = tuple((p.path, frozenset(p.methods)) for p in paths)
    return Contract(tuple(rules), frozenset(discovery), basis, allowed_paths, policies is None)


#: The kinds each family of shapes applies to (the generated table's first column).
_FAMILIES: tuple[tuple[str, tuple[Shape, ...]], ...] = (
    ("Workloads (`kueue.x-k8s.io`, v1beta2; v1beta1 before Kueue 0.15)", WORKLOAD_SHAPES),
    (
        "each adapter's kind: the enabled integrations' kinds, the external frameworks, the policy kinds",
        ADAPTER_SHAPES,
    ),
    ("the batch/job and Ray integrations' kinds (elastic jobs)", (PATCH_SHAPE,)),
    ("ClusterQueues, LocalQueues (with `MultiKueueManagerQuotaAutomation`)", QUEUE_SHAPES),
)


def _cell(values: Iterable[str], empty: str = "none") -> str:
    items = sorted(values)
    return ", ".join(f"`{v}`" for v in items) if items else empty


def render_markdown() -> str:
    """The wire contract as a Markdown table (docs/architecture.md; ``mkpolicy export wire-contract``)."""
    rows = [
        "| Kinds | Request | Query parameters | Accept | Body | Kueue's code |",
        "|---|---|---|---|---|---|",
    ]
    for family, shapes in _FAMILIES:
        for i, shape in enumerate(shapes):
            kinds = family if i == 0 else ""
            named = shape.subresource is not None or shape.verb in _NAMED
            path = "`.../{name}" + (f"/{shape.subresource}`" if shape.subresource else "`") if named else "`...`"
            accept = "objects" + (", `PartialObjectMetadata`" if shape.accept >= METADATA_MEDIA else "")
            rows.append(
                f"| {kinds} | {METHODS[shape.verb]} {path} ({shape.verb}) | {_cell(shape.query)} | {accept} | "
                f"{_cell(shape.bodies)} | {shape.source} |"
            )
    rows.append(
        "| discovery | GET `/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>` of the kinds above | "
        f"{_cell(DISCOVERY_QUERY)} | `APIGroupDiscoveryList`, JSON | none | {DISCOVERY_SOURCE} |"
    )
    media = ", ".join(f"`{m}`" for m in sorted(OBJECT_MEDIA))
    return (
        "\n".join(rows)
        + f"\n\nObjects are asked for as {media}. A GET or HEAD with a body is answered 400 and its connection "
        "closed; any other request answers a Kubernetes `Status` 403 naming the rule (503 before the first policy "
        "set is active). `wire.allow` and `wire.allowPaths` in the SidecarConfig widen it "
        "([sidecar-config.md](sidecar-config.md)); `mkpolicy sidecar --check` prints the contract in force.\n"
    )


__all__ = [
    "ADAPTER_SHAPES",
    "WORKLOAD_SHAPES",
    "Contract",
    "ContractRefusal",
    "Rule",
    "Shape",
    "build",
    "guess_resource",
    "render_markdown",
]
