"""Real Kueue on one cluster, no MultiKueue: the setting of ``mkpolicy controller`` without a manager.

::

    with ControlPlane(kueue_versions=["v0.19.2"]) as plane:
        cluster = plane.add_cluster("kube")
        with kueue_on(cluster, "v0.19.2", ["Workflow.v1alpha1.argoproj.io"], crds=[argo_crd]) as kueue:
            ...  # Kueue's CRDs and webhooks installed, its manager running and ready

Kueue's CRDs come from its module (``config/components/crd/bases``), its webhook
configurations (``config/components/webhook/manifests.yaml``) point at the process on a
loopback URL (:func:`~.multikueue.url_webhooks`); the kinds named in ``frameworks`` are
Kueue's ``integrations.externalFrameworks``, so Kueue's workload controller accepts Workloads
they own and mkpolicy's controller plays the integration for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import yaml

from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.controlplane import KubeCluster
from mkpolicy.testing.peers.multikueue import KUEUE_NAMESPACE, KueueInstance, ensure_metrics_cert, url_webhooks


@contextmanager
def kueue_on(
    cluster: KubeCluster,
    version: str,
    frameworks: Sequence[str],
    *,
    crds: Iterable[Mapping[str, Any]] = (),
    settings: Mapping[str, Any] | None = None,
    log_level: int = 2,
) -> Iterator[KueueInstance]:
    """Kueue ``version`` (built by the cluster's :class:`~.controlplane.ControlPlane`: pass it in
    ``kueue_versions``) on ``cluster``: its namespace, its CRDs and ``crds``, its webhooks;
    ``frameworks`` as external frameworks, ``settings`` merged into its Configuration; started,
    ready, and stopped on exit."""
    version = build.normalize_kueue_version(version)
    module = build.kueue_module_dir(version)
    bases = module / "config" / "components" / "crd" / "bases"
    kueue_crds = [d for f in sorted(bases.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}})
    cluster.install_crds([*kueue_crds, *crds])
    plane = cluster.plane
    ensure_metrics_cert(plane.pki.serving.cert_pem, plane.pki.serving.key_pem)
    kueue = KueueInstance(cluster, plane.binaries[f"kueue-{version}"], frameworks, manager=False,
                          log_level=log_level, settings=settings)  # fmt: skip
    manifests = module / "config" / "components" / "webhook" / "manifests.yaml"
    for hook in url_webhooks(manifests, kueue.webhook_port, plane.pki.ca.cert_pem):
        cluster.apply(hook)
    kueue.process.start()
    try:
        kueue.wait_ready()
        yield kueue
    finally:
        kueue.process.stop()


__all__ = ["kueue_on"]
