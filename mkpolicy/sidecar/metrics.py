"""Prometheus metrics of the sidecar (one registry per sidecar instance).

Labels: ``cluster`` is the worker's name; ``policy`` the policy's name, empty for
pass-through requests; ``verb`` the Kubernetes verb.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

#: Latency buckets (seconds): sub-millisecond transforms to slow upstream calls.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

CONTENT_TYPE = CONTENT_TYPE_LATEST

#: Reasons of mkpolicy_sidecar_refusals_total (also the reasons of the Events recorded).
REFUSALS = (
    "NotManaged",
    "CreationFailed",
    "SyncFailed",
    "ManagerObjectMissing",
    "VersionMismatch",
    "PolicyPending",
    "PolicyNotActive",
    "BadRequest",
    "WorkerRefused",
    "StatusWriteRefused",
)


class Metrics:
    """Every metric the sidecar exports."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "mkpolicy_sidecar_requests_total",
            "Requests answered on the worker endpoints.",
            ["cluster", "policy", "verb", "code"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "mkpolicy_sidecar_request_duration_seconds",
            "Time to answer a request (to the response headers for watches).",
            ["cluster", "policy", "verb"],
            buckets=BUCKETS,
            registry=r,
        )
        self.transforms = Counter(
            "mkpolicy_sidecar_transforms_total",
            "Transforms by phase (create, sync) and result (ok, unchanged, not_managed, not_ours, no_manager, error).",
            ["cluster", "policy", "phase", "result"],
            registry=r,
        )
        self.transform_seconds = Histogram(
            "mkpolicy_sidecar_transform_duration_seconds",
            "Time spent in the policy engine per object.",
            ["cluster", "policy", "phase"],
            buckets=BUCKETS,
            registry=r,
        )
        self.transform_errors = Counter(
            "mkpolicy_sidecar_transform_errors_total",
            "Transforms refused with an error (failurePolicy Fail), by phase.",
            ["cluster", "policy", "phase"],
            registry=r,
        )
        self.ignored_patches = Counter(
            "mkpolicy_sidecar_ignored_patches_total",
            "Patches skipped after an error under failurePolicy Ignore.",
            ["cluster", "policy", "phase"],
            registry=r,
        )
        self.active_watches = Gauge(
            "mkpolicy_sidecar_active_watches", "Watches open through the sidecar.", ["cluster"], registry=r
        )
        self.inflight = Gauge(
            "mkpolicy_sidecar_inflight_requests", "Requests being answered (watches excluded).", registry=r
        )
        self.upstream_errors = Counter(
            "mkpolicy_sidecar_upstream_errors_total",
            "Requests that could not reach the worker or the manager.",
            ["cluster", "reason"],
            registry=r,
        )
        self.reloads = Counter(
            "mkpolicy_sidecar_policy_reloads_total",
            "Policy (re)loads by result: ok, error.",
            ["result"],
            registry=r,
        )
        self.reload_errors = Counter(
            "mkpolicy_sidecar_policy_reload_errors_total",
            "Rejected policy reloads by reason: load (YAML or fields), compile (CEL), discovery (kind unknown).",
            ["reason"],
            registry=r,
        )
        self.policies = Gauge("mkpolicy_sidecar_policies", "Policies in the active set.", registry=r)
        self.policies_pending = Gauge(
            "mkpolicy_sidecar_policies_pending",
            "Valid policies waiting for the manager cluster to serve their kind (looked up again at each check).",
            registry=r,
        )
        self.policies_skipped = Gauge(
            "mkpolicy_sidecar_policies_skipped",
            "Valid policies not used on the wire: parity policies of Kueue's own adapters, kinds Kueue's "
            "generic adapter cannot carry.",
            registry=r,
        )
        self.last_reload = Gauge(
            "mkpolicy_sidecar_policy_last_reload_timestamp_seconds",
            "When the active policy set was loaded (Unix time).",
            registry=r,
        )
        self.cache_objects = Gauge(
            "mkpolicy_sidecar_manager_cache_objects", "Manager objects in the watch cache.", ["policy"], registry=r
        )
        self.cache_synced = Gauge(
            "mkpolicy_sidecar_manager_cache_synced", "1 when the manager cache is synced.", ["policy"], registry=r
        )
        self.cache_reads = Counter(
            "mkpolicy_sidecar_manager_reads_total",
            "Manager object look-ups by source: cache, direct (cache miss or reads: direct), absent.",
            ["policy", "source"],
            registry=r,
        )
        self.refusals = Counter(
            "mkpolicy_sidecar_refusals_total",
            "Creations (and reads) refused, by who refused and why: sidecar reasons (NotManaged, CreationFailed, "
            "SyncFailed, ManagerObjectMissing, VersionMismatch, PolicyPending, BadRequest) or the worker's "
            "(WorkerRefused). Each one also records a Kubernetes Event on the manager's object.",
            ["cluster", "policy", "reason"],
            registry=r,
        )
        self.status_writes = Counter(
            "mkpolicy_sidecar_status_writes_total",
            "Status written by the sidecar to the manager's main resource (kinds without a status subresource), "
            "by result: written, unchanged, gone, refused (an admission policy or validation; also an Event), "
            "conflict (kept changing), error (manager unreachable: Kueue's read answered 503).",
            ["cluster", "policy", "result"],
            registry=r,
        )
        self.bypassed = Gauge(
            "mkpolicy_sidecar_worker_bypassed",
            "1 when the worker's MultiKueueCluster Secret does not point at the sidecar: Kueue reaches it directly "
            "(copies untransformed; for a kind without a status subresource, Workloads that never finish).",
            ["cluster"],
            registry=r,
        )
        self.crd_pruned = Gauge(
            "mkpolicy_sidecar_crd_prunes_managed_by",
            "1 when the manager's CRD of the policy's kind prunes its managedBy field (Kueue never dispatches it; "
            "mkpolicy export crd-patch).",
            ["policy"],
            registry=r,
        )
        self.events = Counter(
            "mkpolicy_sidecar_events_total",
            "Kubernetes Events by reason and result: recorded, filtered (client-go's spam filter), dropped "
            "(queue full), failed (refused or unreachable).",
            ["reason", "result"],
            registry=r,
        )
        self.worker_up = Gauge(
            "mkpolicy_sidecar_worker_up",
            "1 when the worker's kubeconfig is accepted and the worker answered since the last request that could "
            "not reach it; 0 when the kubeconfig is refused or the worker is unreachable.",
            ["cluster"],
            registry=r,
        )
        self.kubeconfig_reloads = Counter(
            "mkpolicy_sidecar_worker_kubeconfig_reloads_total",
            "Worker kubeconfigs taken up after a change (rotated Secret or file), by result: ok, refused.",
            ["cluster", "result"],
            registry=r,
        )
        self.cache_relists = Counter(
            "mkpolicy_sidecar_manager_cache_relists_total",
            "Full relists of the manager cache (start, 410 Gone, errors).",
            ["policy"],
            registry=r,
        )

    def init_series(self, clusters: list[str], policies: list[str] = []) -> None:  # noqa: B006 (read only)
        """Create the series that would otherwise appear only with their first event, at zero."""
        for result in ("ok", "error"):
            self.reloads.labels(result)
        for reason in ("load", "compile", "discovery"):
            self.reload_errors.labels(reason)
        for cluster in clusters:
            self.worker_up.labels(cluster)
            for result in ("ok", "refused"):
                self.kubeconfig_reloads.labels(cluster, result)
            for reason in ("connect", "timeout", "read"):
                self.upstream_errors.labels(cluster, reason)
            for policy in policies:
                for phase in ("create", "sync"):
                    for result in ("ok", "error"):
                        self.transforms.labels(cluster, policy, phase, result)
                    self.transform_errors.labels(cluster, policy, phase)
                    self.ignored_patches.labels(cluster, policy, phase)
                for reason in REFUSALS:
                    self.refusals.labels(cluster, policy, reason)

    def exposition(self) -> bytes:
        """The metrics in Prometheus text format."""
        return bytes(generate_latest(self.registry))
