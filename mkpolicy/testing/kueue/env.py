"""Loopback MultiKueue clusters for the model: a manager and workers, configured as Kueue expects.

::

    with loopback_multikueue(tmp_path) as env:            # manager + worker1 + worker2
        async with env.kueue(time_scale=0.01) as kueue:   # Secrets point at the workers
            job = env.manager.create(env.job("run"))
            wl = env.core.submit(job)
            ...

``env.configure(kubeconfigs)`` chooses what the MultiKueueCluster Secrets hold (the
workers' own kubeconfigs by default; a sidecar's endpoints in the sidecar's tests).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from mkpolicy.testing.apiserver import ApiServer
from mkpolicy.testing.kueue.model import Kueue
from mkpolicy.testing.kueue.simulate import ManagerKueue, WorkerKueue

#: The CRDs MultiKueue needs on every cluster, and Tekton's PipelineRun.
CRDS = (
    "pipelineruns.tekton.dev",
    "workloads.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
    "multikueueconfigs.kueue.x-k8s.io",
    "admissionchecks.kueue.x-k8s.io",
)
TEKTON = "PipelineRun.v1.tekton.dev"


def kubeconfig_bytes(config: dict[str, Any]) -> bytes:
    """A kubeconfig as a Secret holds it (YAML)."""
    return yaml.safe_dump(config, sort_keys=False).encode()


@dataclass
class MultiKueueEnv:
    """A manager and its workers (``ApiServer`` s), with Kueue's other controllers to drive."""

    manager: ApiServer
    workers: dict[str, ApiServer]
    namespace: str = "team-a"
    kueue_namespace: str = "kueue-system"
    core: ManagerKueue = field(init=False)
    worker_kueue: dict[str, WorkerKueue] = field(init=False)

    def __post_init__(self) -> None:
        self.core = ManagerKueue(self.manager, namespace=self.kueue_namespace)
        self.worker_kueue = {name: WorkerKueue(srv) for name, srv in self.workers.items()}

    def worker_kubeconfigs(self) -> dict[str, bytes]:
        """Each worker's own kubeconfig (CA data, bearer token)."""
        return {name: kubeconfig_bytes(srv.kubeconfig(cluster=name)) for name, srv in self.workers.items()}

    def configure(self, kubeconfigs: dict[str, bytes] | None = None) -> None:
        """MultiKueue's objects on the manager, the Secrets holding ``kubeconfigs``
        (default: the workers' own)."""
        self.core.configure(kubeconfigs if kubeconfigs is not None else self.worker_kubeconfigs())

    def job(self, name: str, *, managed: bool = True, **spec: Any) -> dict[str, Any]:
        """A PipelineRun as a user submits it on the manager (``managedBy`` MultiKueue)."""
        body: dict[str, Any] = {"pipelineRef": {"name": "build"}, **spec}
        if managed:
            body["managedBy"] = "kueue.x-k8s.io/multikueue"
        return {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
                "metadata": {"name": name, "namespace": self.namespace}, "spec": body}  # fmt: skip

    @contextlib.asynccontextmanager
    async def kueue(self, frameworks: Iterable[str] = (TEKTON,), **settings: Any) -> AsyncIterator[Kueue]:
        """The model on this manager (``settings``: :class:`~.model.Settings` and ``version``)."""
        settings.setdefault("namespace", self.kueue_namespace)
        async with Kueue(self.manager.kubeconfig(), list(frameworks), **settings) as kueue:
            yield kueue


@contextlib.contextmanager
def loopback_multikueue(
    workers: Iterable[str] = ("worker1", "worker2"),
    *,
    namespace: str = "team-a",
    configure: bool = True,
    **server_options: Any,
) -> Iterator[MultiKueueEnv]:
    """Start a manager and workers with MultiKueue's CRDs (stopped on exit); ``configure``:
    the Secrets, MultiKueueClusters, MultiKueueConfig and AdmissionCheck pointing at the
    workers directly."""
    servers: list[ApiServer] = []
    try:
        namespaces = list(dict.fromkeys(["default", "kueue-system", namespace]))  # (the job's may be one of them)
        manager = ApiServer("manager", bundled=CRDS, namespaces=namespaces, **server_options).start()
        servers.append(manager)
        by_name: dict[str, ApiServer] = {}
        for name in workers:
            namespaces = list(dict.fromkeys(["default", namespace]))
            by_name[name] = ApiServer(name, bundled=CRDS, namespaces=namespaces, **server_options).start()
            servers.append(by_name[name])
        env = MultiKueueEnv(manager, by_name, namespace)
        if configure:
            env.configure()
        yield env
    finally:
        for srv in reversed(servers):
            srv.stop()
