"""Prometheus metrics of ``mkpolicy controller`` (one registry per controller)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class ControllerMetrics:
    """Reconciles, their outcome and duration, Workloads created, the queue, leadership."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            "mkpolicy_controller_reconciles_total", "Job reconciles by outcome.", ["policy", "outcome"], registry=r
        )
        self.duration = Histogram(
            "mkpolicy_controller_reconcile_seconds", "Time spent reconciling one job.", ["policy"], registry=r
        )
        self.workloads_created = Counter(
            "mkpolicy_controller_workloads_created_total", "Workloads created for jobs.", ["policy"], registry=r
        )
        self.queue_depth = Gauge("mkpolicy_controller_queue_depth", "Jobs waiting to be reconciled.", registry=r)
        self.leader = Gauge("mkpolicy_controller_leader", "1 while this instance holds the lease.", registry=r)

    def exposition(self) -> bytes:
        """The text exposition format."""
        return bytes(generate_latest(self.registry))
