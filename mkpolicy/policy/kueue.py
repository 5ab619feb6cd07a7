"""What stock Kueue's generic MultiKueue adapter can carry (docs/architecture.md, "What runs where").

The generic adapter serves the kinds listed in ``multiKueue.externalFrameworks``. It
decides "managed" by ``.spec.managedBy == kueue.x-k8s.io/multikueue`` alone and writes
status through the ``status`` subresource (for a kind without one, the sidecar writes status
itself: :mod:`mkpolicy.sidecar.mainstatus`); Kueue refuses an external framework for a kind
it adapts natively. Lint's export and the sidecar both ask :func:`generic_adapter_gap`.
"""

from __future__ import annotations

from mkpolicy.policy.model import DEFAULT_MANAGED_BY_PATH, MULTIKUEUE_CONTROLLER, FrameworkPolicy

#: (group, kind) of the job kinds Kueue adapts with its own Go adapters.
NATIVE_KINDS = frozenset(
    {
        ("batch", "Job"),
        ("jobset.x-k8s.io", "JobSet"),
        ("kubeflow.org", "MPIJob"),
        ("kubeflow.org", "PyTorchJob"),
        ("kubeflow.org", "TFJob"),
        ("kubeflow.org", "XGBoostJob"),
        ("kubeflow.org", "PaddleJob"),
        ("kubeflow.org", "JAXJob"),
        ("trainer.kubeflow.org", "TrainJob"),
        ("ray.io", "RayJob"),
        ("ray.io", "RayCluster"),
        ("ray.io", "RayService"),
        ("workload.codeflare.dev", "AppWrapper"),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
        ("apps", "StatefulSet"),
        ("apps", "Deployment"),
        ("", "Pod"),
    }
)


def generic_adapter_gap(policy: FrameworkPolicy) -> str | None:
    """Why stock Kueue's generic adapter cannot carry ``policy`` (None when it can)."""
    gvk = policy.spec.gvk
    if (gvk.group, gvk.kind) in NATIVE_KINDS:
        return f"Kueue adapts {gvk.kind} natively, not through the generic adapter"
    return wire_gap(policy)


def wire_gap(policy: FrameworkPolicy) -> str | None:
    """Why the generic adapter cannot carry ``policy`` whatever Kueue's integrations (None when it can).

    The sidecar asks this, and decides natively adapted kinds by the integrations Kueue
    enables (a kind whose integration is off can be an external framework).
    """
    spec = policy.spec
    if spec.managed_by is None:
        return f"managedBy: null; stock Kueue's generic adapter needs {DEFAULT_MANAGED_BY_PATH}"
    if spec.managed_by.path != DEFAULT_MANAGED_BY_PATH:
        return f"managedBy at {spec.managed_by.path}; stock Kueue's generic adapter checks {DEFAULT_MANAGED_BY_PATH}"
    if spec.managed_by.value != MULTIKUEUE_CONTROLLER:
        return (
            f"managedBy value {spec.managed_by.value!r}; stock Kueue's generic adapter needs {MULTIKUEUE_CONTROLLER!r}"
        )
    # sync.subresource: none is carried: the sidecar hands Kueue worker objects without status (so
    # Kueue never patches a /status the kind does not serve) and writes the sync result itself.
    return None
