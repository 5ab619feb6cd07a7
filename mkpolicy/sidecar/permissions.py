"""What the sidecar itself reads and writes in the manager cluster, from its configuration.

Each permission names the code that needs it. The sidecar runs under Kueue's service
account (it is a container of kueue-controller-manager), so these come on top of what
Kueue needs (:func:`mkpolicy.kube.rbac.kueue_manager`). On the workers the sidecar sends
only Kueue's own requests, with the worker kubeconfig: it needs nothing more there.

Not listed: discovery (``/api``, ``/apis/<group>/<version>``, which every authenticated
user may read through the default ``system:discovery`` ClusterRole), the policies
ConfigMap (mounted as a volume: the kubelet reads it, not the sidecar) and Workloads (an
Event may name one as its object; the sidecar never reads or writes a Workload).
"""

from __future__ import annotations

from collections.abc import Iterable

from mkpolicy.kube.rbac import Kind, Permission
from mkpolicy.sidecar.config import SidecarConfig, Worker

KUEUE_GROUP = "kueue.x-k8s.io"


def sidecar_cluster(kinds: Iterable[Kind], reads: str = "direct") -> list[Permission]:
    """The cluster-wide part of :func:`sidecar_manager` (``reads``: ``manager.reads``)."""
    out: list[Permission] = []
    cache = reads == "cache"
    for kind in kinds:
        # server.py manager_object / cache.py read_object: the manager's object, read live.
        out.append(
            Permission(
                "get",
                kind.group,
                kind.resource,
                why="the sidecar's reads of the manager's object (each transformed request)",
            )
        )
        if cache:  # cache.py: one LIST and WATCH per policy kind
            for verb in ("list", "watch"):
                out.append(
                    Permission(verb, kind.group, kind.resource, why="the sidecar's watch cache (manager.reads: cache)")
                )
    # events.py EventRecorder._write: a create, then patches of the count (client-go's recorder).
    for verb in ("create", "patch"):
        out.append(Permission(verb, "", "events", why="the sidecar's Events on the jobs (refusals)"))
    return out


def sidecar_manager(config: SidecarConfig, kinds: Iterable[Kind]) -> list[Permission]:
    """What ``mkpolicy sidecar`` needs on the manager (without ``--wire``)."""
    out = sidecar_cluster(kinds, config.manager.reads)
    ns = config.manager.namespace
    secrets = tuple(w.kubeconfig.secret.name for w in config.workers if w.kubeconfig.secret is not None)
    if secrets:
        # workers.py WorkerLink.load (GET) and _watch (a WATCH with fieldSelector metadata.name,
        # which kube-apiserver authorizes as a watch of that name).
        for verb in ("get", "watch"):
            out.append(
                Permission(
                    verb,
                    "",
                    "secrets",
                    ns,
                    _unique(secrets),
                    why="the sidecar's reads of the workers' real kubeconfigs",
                )
            )
    # kueueconfig.py read_kueue: without these, Kueue's defaults and kueue.version are assumed.
    out.append(
        Permission(
            "get",
            "",
            "configmaps",
            ns,
            (config.kueue.config_map,),
            why="the sidecar's reads of Kueue's configuration",
            required=False,
        )
    )
    out.append(
        Permission(
            "get",
            "apps",
            "deployments",
            ns,
            (config.kueue.deployment,),
            why="the sidecar's reads of Kueue's version (its image)",
            required=False,
        )
    )
    return out


def wire_secret_name(worker: Worker) -> str | None:
    """The Secret ``--wire`` rewrites for ``worker`` as far as the configuration tells: ``wireSecret``,
    else the Secret the real kubeconfig comes from (usually the MultiKueueCluster's own);
    None when only the MultiKueueCluster can tell (a kubeconfig file and no ``wireSecret``)."""
    if worker.wire_secret:
        return worker.wire_secret
    if worker.kubeconfig.secret is not None:
        return worker.kubeconfig.secret.name
    return None


def sidecar_wiring(config: SidecarConfig, secrets: Iterable[str] | None = None) -> list[Permission]:
    """What ``--wire`` / ``--unwire`` need on the manager in addition.

    ``secrets``: the Secrets wired (default: :func:`wire_secret_name` of each worker).
    """
    ns = config.manager.namespace
    names = _unique(secrets if secrets is not None else (n for w in config.workers if (n := wire_secret_name(w))))
    out: list[Permission] = []
    clusters = _unique(w.name for w in config.workers if not w.wire_secret)
    if clusters:  # wiring.py multikueue_secret: which Secret the MultiKueueCluster names
        out.append(
            Permission(
                "get",
                KUEUE_GROUP,
                "multikueueclusters",
                None,
                clusters,
                why="--wire (which Secret the MultiKueueCluster names)",
            )
        )
    if names:
        # wiring.py wire (get, then a PUT) and unwire (a PUT, or a DELETE of a Secret wiring
        # created); workers.py follow_wired watches the wired Secret.
        for verb in ("get", "watch", "update", "delete"):
            out.append(
                Permission(verb, "", "secrets", ns, names, why="--wire and --unwire (they rewrite these Secrets)")
            )
    if any(w.wire_secret for w in config.workers):
        # wiring.py wire creates a wireSecret that does not exist yet; RBAC cannot limit a
        # create to a name (the name is in the body, not the URL).
        out.append(
            Permission("create", "", "secrets", ns, why="--wire (it creates a wireSecret that does not exist yet)")
        )
    return out


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))
