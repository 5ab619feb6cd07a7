"""A local control plane of real peers: one etcd, one kube-apiserver per cluster.

::

    with ControlPlane() as plane:                 # builds the binaries on first use
        kube = plane.add_cluster("worker1")       # a real kube-apiserver, ready
        kube.admin.create({...})                  # the loopback server's direct API, as admin
        kube.write_kubeconfig("/tmp/worker1.kubeconfig")

etcd runs with ``--unsafe-no-fsync`` (as envtest: controller-runtime
``pkg/internal/testing/controlplane/etcd.go``) and backs every cluster under its own
``--etcd-prefix``. Each kube-apiserver gets the flags envtest passes
(``controlplane/apiserver.go``: client-CA admin, service-account keys, RBAC, no
ServiceAccount admission), on a free loopback port, and a cluster's own ``extra_args`` after
them (e.g. ``--runtime-config=admissionregistration.k8s.io/v1beta1=true`` for an API off by
default). Stopping a cluster keeps its data in etcd: :meth:`KubeCluster.start` brings it
back with the same address and objects.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.pki import Pki, write_private
from mkpolicy.testing.peers.processes import PeerStartError, Process, free_port, wait_until
from mkpolicy.testing.targets import ClusterSpec, Connection, RealCluster

#: Generous: a cold kube-apiserver on a busy 2-core machine installs its bootstrap objects in ~10 s.
READY_TIMEOUT = 120.0


class AdminCluster(RealCluster):
    """:class:`RealCluster`'s direct API without the test-namespace guard: the harness's own view."""

    def check_write(self, method: str, path: str) -> None:
        """Every write is allowed (the harness configures cluster-scoped objects)."""


class KubeCluster:
    """One kube-apiserver of a :class:`ControlPlane` (its etcd prefix ``/peers/<name>``)."""

    def __init__(self, plane: ControlPlane, name: str, extra_args: Sequence[str] = ()) -> None:
        self.plane = plane
        self.name = name
        self.port = free_port()
        self.dir = plane.run_dir / name
        self.extra_args = list(extra_args)
        self.process = Process(f"kube-apiserver {name}", self._argv(), self.dir / "kube-apiserver.log")
        self._connection: Connection | None = None

    def __repr__(self) -> str:
        return f"KubeCluster({self.name!r}, {self.url})"

    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>``."""
        return f"https://127.0.0.1:{self.port}"

    def _argv(self) -> list[str]:
        pki = self.plane.pki_files
        return [
            str(self.plane.binaries["kube-apiserver"]),
            f"--etcd-servers={self.plane.etcd_url}",
            f"--etcd-prefix=/peers/{self.name}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={pki['tls.crt']}",
            f"--tls-private-key-file={pki['tls.key']}",
            f"--cert-dir={self.dir / 'certs'}",
            f"--client-ca-file={pki['ca']}",
            f"--service-account-issuer=https://127.0.0.1:{self.port}/",
            f"--service-account-key-file={pki['sa.pub']}",
            f"--service-account-signing-key-file={pki['sa.key']}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            *self.extra_args,
        ]

    def kubeconfig(self, *, cluster: str | None = None, namespace: str | None = None) -> dict[str, Any]:
        """An admin kubeconfig (``system:masters``; CA, certificate and key as data)."""
        return self.plane.pki.kubeconfig(cluster or self.name, self.url, namespace)

    def write_kubeconfig(self, path: str | os.PathLike[str], **kwargs: Any) -> Path:
        """Write :meth:`kubeconfig` to ``path`` (YAML, mode 0600)."""
        from mkpolicy.kube.kubeconfig import write_kubeconfig

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_kubeconfig(os.fspath(path), self.kubeconfig(**kwargs))
        return Path(path)

    @property
    def connection(self) -> Connection:
        """mkpolicy's synchronous client for this server (discovery cached)."""
        if self._connection is None:
            config = self.kubeconfig()
            spec = ClusterSpec(self.name, str(self.dir / "admin.kubeconfig"), self.name, self.url, json.dumps(config))
            self._connection = Connection(spec)
        return self._connection

    @property
    def admin(self) -> AdminCluster:
        """The direct object API (``create``, ``get``, ``list``, ``patch``, ``update``, ``delete``) as admin."""
        return AdminCluster(self.connection, "default")

    def view(self, namespace: str) -> RealCluster:
        """The direct object API confined to ``namespace`` (writes elsewhere raise ``UnsafeRequestError``)."""
        return RealCluster(self.connection, namespace)

    def readyz(self) -> bool:
        """Whether ``/readyz`` answers 200."""
        request = urllib.request.Request(f"{self.url}/readyz")
        with urllib.request.urlopen(request, context=self.plane.admin_tls(), timeout=5) as resp:
            return bool(resp.status == 200)

    def start(self, timeout: float = READY_TIMEOUT) -> KubeCluster:
        """Start (or restart) the server on its port and wait for ``/readyz``."""
        self.process.start()
        wait_until(self.process, self.readyz, f"{self.url}/readyz", timeout)
        return self

    def stop(self) -> None:
        """Stop the server (its objects stay in etcd)."""
        if self._connection is not None:
            self._connection.close()
        self.process.stop()

    # -- installing things -------------------------------------------------------------------------------

    def install_crds(self, crds: Iterable[Mapping[str, Any]], timeout: float = READY_TIMEOUT) -> None:
        """Create ``crds`` (an existing one replaced) and wait until each is ``Established``."""
        names = []
        for crd in crds:
            body = json.loads(json.dumps(crd))
            body.get("metadata", {}).pop("annotations", None)  # (controller-gen's; nothing reads them)
            self.apply(body)
            names.append(body["metadata"]["name"])

        def established() -> bool:
            for name in names:
                got = self.admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
                conditions = (got.get("status") or {}).get("conditions") or []
                if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                    return False
            return True

        wait_until(self.process, established, f"CRDs established ({', '.join(names)})", timeout)

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj``, or replace it when it exists (the stored object)."""
        from mkpolicy.testing.apiserver import ApiError

        try:
            return self.admin.create(obj)
        except ApiError as exc:
            if exc.code != 409:
                raise
        meta = obj.get("metadata") or {}
        body = json.loads(json.dumps(obj))
        # Read, then replace at that resourceVersion, again on a conflict: a controller's status write
        # (Kueue's on a ClusterQueue) may land in between (client-go's retry.RetryOnConflict).
        for attempt in range(CONFLICT_RETRIES):
            current = self.admin.get(str(obj["apiVersion"]), str(obj["kind"]), meta["name"], meta.get("namespace"))
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            try:
                return self.admin.update(body)
            except ApiError as exc:
                if exc.code != 409 or attempt == CONFLICT_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")


#: How many times :meth:`KubeCluster.apply` replaces an object whose resourceVersion moved meanwhile.
CONFLICT_RETRIES = 5


class ControlPlane:
    """etcd and kube-apiservers in ``run_dir`` (a new temporary folder by default, removed at stop)."""

    def __init__(self, run_dir: Path | None = None, *, log: Callable[[str], None] = print,
                 kueue_versions: Iterable[str] = ()) -> None:  # fmt: skip
        self.log = log
        self._own_dir = run_dir is None
        self.run_dir = Path(tempfile.mkdtemp(prefix="mkpolicy-peers-")) if run_dir is None else run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.binaries: dict[str, Path] = {}
        self.kueue_versions = [build.normalize_kueue_version(v) for v in kueue_versions]
        self.pki = Pki.create()
        self.pki_files: dict[str, Path] = {}
        self.etcd_port = free_port()
        self.etcd: Process | None = None
        self.clusters: dict[str, KubeCluster] = {}
        self._tls: ssl.SSLContext | None = None

    @property
    def etcd_url(self) -> str:
        """etcd's client URL."""
        return f"http://127.0.0.1:{self.etcd_port}"

    def admin_tls(self) -> ssl.SSLContext:
        """A client TLS context: the CA, the admin certificate."""
        if self._tls is None:
            ctx = ssl.create_default_context(cadata=self.pki.ca.cert_pem.decode())
            cert = write_private(self.run_dir / "pki" / "admin.crt", self.pki.admin.cert_pem)
            key = write_private(self.run_dir / "pki" / "admin.key", self.pki.admin.key_pem)
            ctx.load_cert_chain(cert, key)
            self._tls = ctx
        return self._tls

    def start(self) -> ControlPlane:
        """Build what is missing, write the PKI, start etcd and wait for its ``/health``."""
        peers = [build.etcd(), build.kube_apiserver(), *(build.kueue(v) for v in self.kueue_versions)]
        for peer, path in zip(peers, build.ensure(peers, log=self.log).values(), strict=True):
            self.binaries[peer.name if peer.name != "kueue" else f"kueue-{peer.version}"] = path
        self.pki_files = self.pki.write(self.run_dir / "pki")
        peer_port = free_port()
        data = self.run_dir / "etcd"
        self.etcd = Process("etcd", [
            str(self.binaries["etcd"]), "--name=peers", f"--data-dir={data}",
            f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=peers=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true", "--log-level=warn",
        ], self.run_dir / "etcd.log").start()  # fmt: skip

        def healthy() -> bool:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=5) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")

        wait_until(self.etcd, healthy, f"{self.etcd_url}/health", READY_TIMEOUT)
        return self

    def add_cluster(self, name: str, *, extra_args: Sequence[str] = ()) -> KubeCluster:
        """Start a kube-apiserver for cluster ``name`` (``extra_args`` after the harness's flags) and
        wait until it is ready."""
        return self.add_clusters([name], extra_args=extra_args)[0]

    def add_clusters(self, names: Iterable[str], *, extra_args: Sequence[str] = ()) -> list[KubeCluster]:
        """Start a kube-apiserver per name (all at once: they start in parallel; each with
        ``extra_args`` after the harness's flags), wait until each is ready."""
        started = time.monotonic()
        clusters = []
        for name in names:
            if name in self.clusters:
                raise ValueError(f"cluster {name!r} exists")
            cluster = KubeCluster(self, name, extra_args)
            self.clusters[name] = cluster
            cluster.process.start()
            clusters.append(cluster)
        for cluster in clusters:
            wait_until(cluster.process, cluster.readyz, f"{cluster.url}/readyz", READY_TIMEOUT)
            self.log(f"kube-apiserver {cluster.name} ready at {cluster.url} ({time.monotonic() - started:.1f}s)")
        return clusters

    def stop(self) -> None:
        """Stop every server, then etcd; remove the run folder when it is ours."""
        for cluster in reversed(list(self.clusters.values())):
            cluster.stop()
        if self.etcd is not None:
            self.etcd.stop()
        if self._own_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


__all__ = ["AdminCluster", "ControlPlane", "KubeCluster", "PeerStartError"]
