"""A loopback Kubernetes API server for end-to-end tests and the demo (docs/apiserver.md).

No kube-apiserver can be installed where mkpolicy is tested, so this package serves the
part of the Kubernetes REST API the project relies on, over real HTTP/1.1 + TLS on
127.0.0.1, for the real ``kubernetes`` Python client (typed, dynamic, ``watch.Watch``),
kubectl-style clients and the sidecar::

    from mkpolicy.testing import ApiServer

    with ApiServer("worker1", bundled=True) as srv:   # Kueue + Tekton CRDs
        core = kubernetes.client.CoreV1Api(srv.api_client())
        srv.write_kubeconfig("/tmp/worker1.kubeconfig")
        srv.faults.fail(500, verb="create", resource="pipelineruns")

What it implements
------------------
- Transport: HTTP/1.1 on 127.0.0.1 (ephemeral or fixed port), TLS with a CA it
  generates, bearer-token authentication (401 ``Status`` otherwise); ``/healthz``,
  ``/livez``, ``/readyz`` without a token.
- Resources: Namespace, ConfigMap, Secret, core/v1 and events.k8s.io/v1 Events (one
  store, converted), coordination.k8s.io Lease, batch/v1 Job, RBAC roles and bindings,
  apiextensions.k8s.io/v1 CustomResourceDefinition, and every CRD stored (by POST or
  :meth:`ApiServer.register_crd`) whose schemas are structural (:mod:`.structural`):
  served versions, scope, names, per-version ``status`` subresource, schema pruning and
  defaults, ``selectableFields``.
- Discovery: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>``,
  ``/version``; aggregated discovery (``apidiscovery.k8s.io/v2``) at ``/api`` and ``/apis``
  for clients that ask for it.
- Content negotiation (:mod:`.negotiate`): JSON, ``PartialObjectMetadata`` and
  ``PartialObjectMetadataList`` for get, list and watch.
- CRUD: ``uid``, ``creationTimestamp``, ``generation`` (bumped on spec change), one
  global, increasing ``resourceVersion`` (no-op writes keep it); 409 AlreadyExists and
  Conflict (stale ``resourceVersion``, ``uid`` preconditions); the status subresource
  split; merge patch, JSON patch and (built-in kinds) strategic merge patch; DELETE
  with ``propagationPolicy`` (Background, Foreground, Orphan), preconditions,
  finalizers and ``deletionTimestamp``, owner-reference garbage collection, namespace
  termination; ``dryRun=All``; ``fieldValidation`` (Strict/Warn/Ignore, ``Warning``
  headers); ``generateName``; DNS-1123 names, label/annotation/finalizer validation;
  custom resources pruned, defaulted and validated against their version's schema
  (types, ``required``, ``enum``, bounds, patterns, unique ``set``/``map`` list items,
  ``x-kubernetes-validations`` CEL rules with ``oldSelf`` on updates).
- LIST: ``labelSelector`` (equality and set-based), ``fieldSelector``
  (``metadata.name``, ``metadata.namespace``, selectable fields), ``limit`` /
  ``continue`` (consistent snapshots from history), ``resourceVersion`` with
  ``resourceVersionMatch`` (NotOlderThan, Exact), ``remainingItemCount``.
- WATCH: ``?watch=true`` from a ``resourceVersion`` or from now, ADDED / MODIFIED /
  DELETED / BOOKMARK as a chunked JSON stream (bookmarks on kube-apiserver's schedule:
  every minute and before the deadline), selectors applied to both sides of a
  change, ``timeoutSeconds`` (else 1800-3600 s), ``sendInitialEvents``, 410 Expired (an
  ERROR event) for versions older than the kept history, clean close.
- Errors: ``Status`` bodies with kube-apiserver's reasons and wording for 400, 401,
  403, 404, 405, 406, 409, 410, 413 (bodies over 3 MiB), 415, 422 (with causes),
  429, 500, 503, 504.
- Faults (:class:`~.faults.Faults`): fail the next N matching requests with any
  code, add latency, cut a response mid-body, end or cut watches, go unreachable
  (refuse or black-hole) and come back on the same port.

What it does not implement
--------------------------
- Server-side apply (``application/apply-patch+yaml`` is a 415) and ``managedFields``.
- Part of OpenAPI validation of custom resources: rarer string formats (those
  checked: date-time, date, byte, uuid, ipv4, ipv6, cidr) and the per-CRD cost budget
  of CEL rules. Built-in kinds are not pruned beyond ``metadata`` and validated
  only as :mod:`.builtins` says.
- Conversion webhooks: all served versions of a CRD share the same fields; only
  ``apiVersion`` changes (conversion strategy ``None``).
- Admission (webhooks, policies), impersonation, client certificates, audit.
  Authorization is RBAC for tokens added with a user (:mod:`.authz`; the others may do
  anything), with SelfSubjectAccessReview.
- Protobuf and CBOR (JSON only; YAML accepted on create/update), Table output,
  ``/openapi/v2`` and ``/openapi/v3``.
- Other resources and subresources: Pods, ``scale``, ``finalize``, logs,
  exec, proxy; no controllers run (a Job never starts pods or gets a status).
- Controllers' timing: garbage collection and namespace termination happen at once,
  inside the request that triggers them, instead of eventually.
- Persistence, HA, priority and fairness (429 only by fault injection), graceful
  deletion periods (``gracePeriodSeconds`` is accepted and ignored).
- A ``resourceVersion`` newer than the server's is answered with 504 at once (kube
  waits up to 3 s first); compaction is by history size per resource (and
  :meth:`ApiServer.compact`), not by time.
"""

from __future__ import annotations

from mkpolicy.testing.apiserver.crd import BUNDLED, bundled_crd_path, bundled_crds, load_crds
from mkpolicy.testing.apiserver.errors import ApiError, Cause
from mkpolicy.testing.apiserver.faults import Faults, Match, Rule
from mkpolicy.testing.apiserver.resources import ResourceType, Version
from mkpolicy.testing.apiserver.server import DEFAULT_NAMESPACES, ApiServer

__all__ = [
    "BUNDLED",
    "DEFAULT_NAMESPACES",
    "ApiError",
    "ApiServer",
    "Cause",
    "Faults",
    "Match",
    "ResourceType",
    "Rule",
    "Version",
    "bundled_crd_path",
    "bundled_crds",
    "load_crds",
]
