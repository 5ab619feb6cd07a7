"""A local MultiKueue on real peers: a manager and N workers, real Kueue on each, optionally the sidecar.

::

    with RealMultiKueue(workers=2, policies=Path("policies")) as mk:   # ~1 min warm
        ns = mk.new_namespace()                  # on every cluster, with LocalQueue "lq"
        mk.manager.view(ns).create(pipelinerun)  # the direct API (kubectl works too)
        ...

What runs (each its own process, logs in ``run_dir``):

- one etcd and one kube-apiserver per cluster (:class:`~.controlplane.ControlPlane`);
- Kueue's manager (``cmd/kueue``) per cluster, out of cluster: ``--kubeconfig`` and
  ``--config`` with ``internalCertManagement.enable: false``, its own webhook port and
  certDir, leader election off, ``VisibilityOnDemand`` off (in the config only: Kueue
  refuses gates given both ways, ``pkg/config/validation.go``), and a pair at Kueue's fixed
  metrics-cert path ``/etc/kueue/metrics/certs`` (``cmd/kueue/main.go``, read at start
  even with metrics off). Kueue's CRDs and webhook manifests come from the Go module
  cache; the webhooks on ``kueue.x-k8s.io`` are installed in URL form pointing at that
  cluster's Kueue (as envtest rewrites them, ``pkg/envtest/webhook.go``);
- on the manager: ResourceFlavor ``default-flavor``, ClusterQueue ``cq`` with the
  MultiKueue AdmissionCheck ``mk``, MultiKueueConfig ``mk``, a MultiKueueCluster and its
  kubeconfig Secret (``<worker>-secret`` in ``kueue-system``) per worker; on workers the
  same flavor and ClusterQueue; LocalQueue ``lq`` in every namespace made by
  :meth:`RealMultiKueue.new_namespace` (the shapes of Kueue's
  ``test/integration/multikueue/suite_test.go`` and ``external_job_test.go``);
- with ``policies``: ``mkpolicy sidecar --wire`` between the manager's Kueue and the
  workers. It is started before the MultiKueueClusters exist, so Kueue only ever reads
  the wired Secrets: nothing it sends can reach a worker around the sidecar.

Nobody creates the manager's Workload for an external kind (Kueue's external-framework
adapter only dispatches it), and nothing runs the job on a worker: tests play both.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from mkpolicy.testing.apiserver import ApiError
from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.controlplane import READY_TIMEOUT, ControlPlane, KubeCluster
from mkpolicy.testing.peers.pki import write_private
from mkpolicy.testing.peers.processes import PeerStartError, Process, free_port, wait_until
from mkpolicy.testing.peers.sidecar import SidecarProcess, http_ok

TEKTON = "PipelineRun.v1.tekton.dev"
KUEUE_NAMESPACE = "kueue-system"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
CHECK = "mk"
CLUSTER_QUEUE = "cq"
LOCAL_QUEUE = "lq"
FLAVOR = "default-flavor"
#: Kueue reads its metrics serving pair here when internal cert management is off (cmd/kueue/main.go).
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")


def kueue_configuration(*, health_port: int, webhook_port: int, cert_dir: Path, frameworks: Sequence[str],
                        manager: bool, worker_lost_timeout: str = "5m") -> dict[str, Any]:  # fmt: skip
    """Kueue's ``Configuration`` for one instance out of cluster (the manager's with ``multiKueue``)."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": ["batch/job"], "externalFrameworks": list(frameworks)},
        "featureGates": {"VisibilityOnDemand": False},
    }
    if manager:
        config["multiKueue"] = {"gcInterval": "30s", "workerLostTimeout": worker_lost_timeout,
                                "externalFrameworks": [{"name": f} for f in frameworks]}  # fmt: skip
    return config


def url_webhooks(manifests: Path, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations for ``kueue.x-k8s.io`` objects, pointing at ``https://127.0.0.1:<port>``."""
    out = []
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not doc:
            continue
        hooks = []
        for hook in doc.get("webhooks") or []:
            if not any("kueue.x-k8s.io" in (rule.get("apiGroups") or []) for rule in hook.get("rules") or []):
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                    "caBundle": base64.b64encode(ca_pem).decode()}  # fmt: skip
            hooks.append(hook)
        kind = doc["kind"]
        doc["metadata"] = {"name": "kueue-mutating-webhook-configuration" if kind.startswith("Mutating")
                           else "kueue-validating-webhook-configuration"}  # fmt: skip
        doc["webhooks"] = hooks
        out.append(doc)
    return out


def ensure_metrics_cert(cert_pem: bytes, key_pem: bytes) -> None:
    """Write a pair at Kueue's fixed metrics-cert path unless one is there (any valid pair does)."""
    if (METRICS_CERT_DIR / "tls.crt").is_file() and (METRICS_CERT_DIR / "tls.key").is_file():
        return
    try:
        write_private(METRICS_CERT_DIR / "tls.key", key_pem)
        write_private(METRICS_CERT_DIR / "tls.crt", cert_pem)
    except OSError as exc:
        raise PeerStartError(
            f"Kueue reads its metrics certificate from {METRICS_CERT_DIR}/tls.crt and tls.key (a fixed path in "
            f"cmd/kueue/main.go when internal cert management is off) and they cannot be written: "
            f"{exc.strerror or exc}. Create that folder writable for this user, or run as root"
        ) from None


def _condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


class KueueInstance:
    """Kueue's manager process on one cluster."""

    def __init__(self, cluster: KubeCluster, binary: Path, frameworks: Sequence[str], *, manager: bool,
                 log_level: int, worker_lost_timeout: str = "5m",
                 settings: Mapping[str, Any] | None = None) -> None:  # fmt: skip
        self.cluster = cluster
        self.health_port = free_port()
        self.webhook_port = free_port()
        folder = cluster.dir / "kueue"
        self.cert_dir = folder / "certs"
        pki = cluster.plane.pki
        write_private(self.cert_dir / "tls.crt", pki.serving.cert_pem)
        write_private(self.cert_dir / "tls.key", pki.serving.key_pem)
        self.manager = manager
        self.worker_lost_timeout = worker_lost_timeout
        self.settings = dict(settings or {})  # e.g. manageJobsWithoutQueueName, managedJobsNamespaceSelector
        self.config_file = folder / "config.yaml"
        self.config: dict[str, Any] = {}
        self.configure(frameworks)
        kubeconfig = cluster.write_kubeconfig(folder / "kubeconfig")
        self.process = Process(f"kueue {cluster.name}", [
            str(binary), f"--config={self.config_file}", f"--kubeconfig={kubeconfig}", f"--zap-log-level={log_level}",
        ], folder / "kueue.log")  # fmt: skip

    def configure(self, frameworks: Sequence[str]) -> None:
        """(Re)write the configuration file with ``frameworks`` (read at Kueue's next start)."""
        self.config = kueue_configuration(health_port=self.health_port, webhook_port=self.webhook_port,
                                          cert_dir=self.cert_dir, frameworks=frameworks, manager=self.manager,
                                          worker_lost_timeout=self.worker_lost_timeout)  # fmt: skip
        self.config.update(self.settings)
        write_private(self.config_file, yaml.safe_dump(self.config).encode())

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait for ``/readyz`` (the webhook server listening)."""
        wait_until(self.process, lambda: http_ok(f"http://127.0.0.1:{self.health_port}/readyz"),
                   f"Kueue's /readyz on 127.0.0.1:{self.health_port}", timeout)  # fmt: skip


class RealMultiKueue:
    """A manager and ``workers`` worker clusters on real peers with real Kueue (see the module's docstring).

    ``quota``: each worker ClusterQueue's cpu ``nominalQuota`` (default ``"8"``; ``"0"``
    keeps a worker from admitting anything, which makes the choice of worker
    deterministic). ``policies``: a policy folder, to put the sidecar in between.
    ``crds``: more CRD files for every cluster. ``worker_lost_timeout``: the manager Kueue's
    ``multiKueue.workerLostTimeout`` (how long an admitted workload waits for a lost worker
    before MultiKueue dispatches it again). ``kubeconfig_dir``: where to write
    ``manager.kubeconfig``, ``worker1.kubeconfig``...; ``run_dir``: where everything
    else goes (a temporary folder by default, removed at stop). ``request_log``: the sidecar
    logs every request's shape (``logging.requestLog``, which tests read); False runs it
    without, as its configuration does by default (the benches). ``sidecar_workers``: the
    workers the sidecar stands in front of (default: all); the others Kueue reaches directly.
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        kueue_version: str = build.KUEUE_VERSION,
        frameworks: Sequence[str] = (TEKTON,),
        quota: Mapping[str, str] | None = None,
        policies: Path | None = None,
        crds: Iterable[Path] = (),
        kubeconfig_dir: Path | None = None,
        run_dir: Path | None = None,
        kueue_log_level: int = 2,
        worker_lost_timeout: str = "5m",
        request_log: bool = True,
        pending_ok: bool = False,
        sidecar_workers: Sequence[str] | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.kueue_version = build.normalize_kueue_version(kueue_version)
        self.worker_names = [f"worker{i + 1}" for i in range(workers)]
        self.frameworks = list(frameworks)
        self.quota = {w: (quota or {}).get(w, "8") for w in self.worker_names}
        self.policies = policies
        self.crd_files = list(crds)
        self.kueue_log_level = kueue_log_level
        self.worker_lost_timeout = worker_lost_timeout
        #: Whether the sidecar logs request shapes (``logging.requestLog``; off in a default configuration).
        self.request_log = request_log
        #: Whether the sidecar may start with policies pending (:meth:`SidecarProcess.start`).
        self.pending_ok = pending_ok
        self.sidecar_workers = list(self.worker_names if sidecar_workers is None else sidecar_workers)
        if unknown := sorted(set(self.sidecar_workers) - set(self.worker_names)):
            raise ValueError(f"sidecar_workers: expected some of {self.worker_names}, found {unknown}")
        self.log = log
        self.plane = ControlPlane(run_dir, log=log, kueue_versions=[self.kueue_version])
        self.kubeconfig_dir = kubeconfig_dir or self.plane.run_dir / "kubeconfigs"
        self.kubeconfig_files: dict[str, Path] = {}
        self.kueues: dict[str, KueueInstance] = {}
        self.sidecar: SidecarProcess | None = None
        self.timings: dict[str, float] = {}

    # -- what tests use ----------------------------------------------------------------------------------

    @property
    def manager(self) -> KubeCluster:
        """The manager cluster."""
        return self.plane.clusters["manager"]

    @property
    def workers(self) -> dict[str, KubeCluster]:
        """The worker clusters by name."""
        return {w: self.plane.clusters[w] for w in self.worker_names}

    def cluster(self, name: str) -> KubeCluster:
        """``manager``, ``worker1``..."""
        return self.plane.clusters[name]

    @property
    def run_dir(self) -> Path:
        """Where logs, configs and certificates are."""
        return self.plane.run_dir

    def new_namespace(self, name: str | None = None, *, manager_queue: str = CLUSTER_QUEUE) -> str:
        """A namespace on every cluster with LocalQueue ``lq`` in it: to ClusterQueue ``cq`` on the
        workers, to ``manager_queue`` on the manager (``cq``, or a ClusterQueue :meth:`add_route` made)."""
        ns = name or f"mkpolicy-e2e-{secrets.token_hex(4)}"
        for cluster in self.plane.clusters.values():
            cluster.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        self.local_queues(ns, manager_queue=manager_queue)
        return ns

    def local_queues(self, ns: str, *, manager_queue: str = CLUSTER_QUEUE) -> None:
        """LocalQueue ``lq`` in the existing namespace ``ns`` of every cluster: to ClusterQueue ``cq`` on the
        workers, to ``manager_queue`` on the manager."""
        for cluster_name, cluster in self.plane.clusters.items():
            queue = manager_queue if cluster_name == "manager" else CLUSTER_QUEUE
            cluster.admin.create({"apiVersion": KUEUE_API, "kind": "LocalQueue",
                                  "metadata": {"name": LOCAL_QUEUE, "namespace": ns},
                                  "spec": {"clusterQueue": queue}})  # fmt: skip

    def add_route(self, name: str, workers: Sequence[str]) -> None:
        """A ClusterQueue ``name`` on the manager whose MultiKueue AdmissionCheck (``name``, with a
        MultiKueueConfig ``name``) dispatches to ``workers`` only; returns once the check is
        ``Active``. Jobs queued in a namespace made with ``new_namespace(manager_queue=name)``
        go to those workers: one manager Kueue drives jobs to each worker side by side."""
        self._apply_check(name, workers)
        self.manager.apply(self._cluster_queue("1000", check=name, name=name))

        def active() -> bool:
            check = self.manager.admin.get(KUEUE_API, "AdmissionCheck", name)
            return (_condition(check, "Active") or {}).get("status") == "True"

        wait_until(self.kueues["manager"].process, active, f"AdmissionCheck {name} Active", READY_TIMEOUT)

    def delete_namespace(self, ns: str) -> None:
        """Delete ``ns`` everywhere (no controller-manager runs: it stays Terminating; names are unique)."""
        for cluster in self.plane.clusters.values():
            if cluster.process.alive:
                cluster.admin.delete("v1", "Namespace", ns)

    def set_quota(self, worker: str, cpu: str) -> None:
        """Change a worker ClusterQueue's cpu ``nominalQuota``."""
        self.quota[worker] = cpu
        self.workers[worker].apply(self._cluster_queue(cpu, check=None))

    def restart_sidecar(self) -> None:
        """Stop the sidecar and start it again (same ports and state folder)."""
        if self.sidecar is None:
            raise RuntimeError("this MultiKueue runs without the sidecar (no policies given)")
        self.sidecar.restart()

    def wait_active(self, timeout: float = READY_TIMEOUT) -> None:
        """Wait until the AdmissionCheck and every MultiKueueCluster report ``Active=True``."""
        kueue = self.kueues["manager"].process

        def active() -> bool:
            objects = [self.manager.admin.get(KUEUE_API, "AdmissionCheck", CHECK)]
            objects += [self.manager.admin.get(KUEUE_API, "MultiKueueCluster", w) for w in self.worker_names]
            return all((_condition(o, "Active") or {}).get("status") == "True" for o in objects)

        try:
            wait_until(kueue, active, "AdmissionCheck and MultiKueueClusters Active", timeout, interval=0.5)
        except PeerStartError as exc:
            states = {w: _condition(self.manager.admin.get(KUEUE_API, "MultiKueueCluster", w), "Active")
                      for w in self.worker_names}  # fmt: skip
            sidecar = f"\nsidecar log:\n{self.sidecar.process.tail(20)}" if self.sidecar else ""
            conditions = json.dumps(states)
            raise PeerStartError(f"{exc.message}\nMultiKueueCluster conditions: {conditions}{sidecar}") from None

    # -- what a test changes: credentials, Secrets, Kueue's configuration -----------------------------------

    def worker_secret(self, worker: str) -> dict[str, Any]:
        """``worker``'s MultiKueueCluster Secret (``<worker>-secret`` in ``kueue-system``) as stored."""
        return self.manager.admin.get("v1", "Secret", f"{worker}-secret", KUEUE_NAMESPACE)

    def write_worker_secret(self, worker: str, kubeconfig: Mapping[str, Any], *, secret: str | None = None) -> None:
        """Re-apply a MultiKueueCluster Secret's ``kubeconfig`` key with ``kubeconfig`` (what GitOps
        or a credential rotation does: other keys stay); ``secret``: another Secret than ``worker``'s
        (created when missing)."""
        name = secret or f"{worker}-secret"
        data = {"kubeconfig": base64.b64encode(yaml.safe_dump(dict(kubeconfig)).encode()).decode()}
        try:
            self.manager.admin.patch("v1", "Secret", name, {"data": data}, namespace=KUEUE_NAMESPACE)
        except ApiError as exc:
            if exc.code != 404:
                raise
            meta = {"name": name, "namespace": KUEUE_NAMESPACE}
            self.manager.admin.create({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": data})

    def worker_kubeconfig(self, worker: str, *, token: str | None = None) -> dict[str, Any]:
        """``worker``'s own kubeconfig as its Secret held it before wiring (admin client certificate),
        or, with ``token``, the same server and CA with that bearer token."""
        kubeconfig = self.workers[worker].kubeconfig(cluster=worker)
        if token is not None:
            for user in kubeconfig["users"]:
                user["user"] = {"token": token}
        return kubeconfig

    def service_account_token(self, worker: str, account: str) -> str:
        """A token of ServiceAccount ``account`` in ``kueue-system`` on ``worker`` (created with a
        ClusterRoleBinding to ``cluster-admin`` when missing), from the TokenRequest API: the kind of
        credential a MultiKueueCluster Secret holds (Kueue's ``test/util/multikueue.go``)."""
        cluster = self.workers[worker]
        rbac = "rbac.authorization.k8s.io"
        subject = {"kind": "ServiceAccount", "name": account, "namespace": KUEUE_NAMESPACE}
        cluster.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": account, "namespace": KUEUE_NAMESPACE}})  # fmt: skip
        cluster.apply({"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": f"mkpolicy-e2e-{account}"},
                       "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "cluster-admin"},
                       "subjects": [subject]})  # fmt: skip
        path = f"/api/v1/namespaces/{KUEUE_NAMESPACE}/serviceaccounts/{account}/token"
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"expirationSeconds": 3600}}  # fmt: skip
        answer = cluster.connection.http.request("POST", path, body=request)
        return str(answer["status"]["token"])

    def revoke_service_account(self, worker: str, account: str) -> None:
        """Delete ServiceAccount ``account`` (and its binding) on ``worker``: its tokens stop authenticating."""
        cluster = self.workers[worker]
        cluster.admin.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", f"mkpolicy-e2e-{account}")
        cluster.admin.delete("v1", "ServiceAccount", account, KUEUE_NAMESPACE)

    def set_frameworks(self, frameworks: Sequence[str]) -> None:
        """Run the manager's Kueue with ``frameworks`` as its external frameworks: Kueue stopped,
        its configuration and ConfigMap rewritten, the sidecar restarted (it reads that ConfigMap
        at start: its wire contract follows Kueue's adapters), Kueue started again; returns once
        MultiKueue is ``Active``."""
        instance = self.kueues["manager"]
        instance.process.stop()
        self.frameworks = list(frameworks)
        instance.configure(self.frameworks)
        self._write_kueue_config()
        if self.sidecar is not None:
            self.sidecar.restart()
        # The clusters' Active=True is the stopped Kueue's: mark it Unknown, so that waiting for
        # Active waits for this Kueue's connections (a Workload reconciled before any worker is
        # connected is not dispatched until something else requeues it).
        for worker in self.worker_names:
            cluster = self.manager.admin.get(KUEUE_API, "MultiKueueCluster", worker)
            conditions = [c for c in (cluster.get("status") or {}).get("conditions") or [] if c["type"] != "Active"]
            conditions.append({"type": "Active", "status": "Unknown", "reason": "KueueRestarting",
                               "message": "Kueue restarted by the test harness",
                               "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})  # fmt: skip
            self.manager.admin.patch(KUEUE_API, "MultiKueueCluster", worker, {"status": {"conditions": conditions}},
                                     subresource="status")  # fmt: skip
        instance.process.start()
        instance.wait_ready()
        self.wait_active()

    # -- bring-up ----------------------------------------------------------------------------------------

    def start(self) -> RealMultiKueue:
        """Bring everything up (on failure: everything stopped, the failing component's log quoted)."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _step(self, what: str, started: float) -> None:
        self.timings[what] = time.monotonic() - started
        self.log(f"{what}: {self.timings[what]:.1f}s")

    def _start(self) -> None:
        began = time.monotonic()
        self.plane.start()
        module = build.kueue_module_dir(self.kueue_version)
        self._step("etcd", began)
        started = time.monotonic()
        names = ["manager", *self.worker_names]
        clusters = self.plane.add_clusters(names)
        self._step("kube-apiservers", started)
        started = time.monotonic()
        crds = self._crds(module)
        pki = self.plane.pki
        ensure_metrics_cert(pki.serving.cert_pem, pki.serving.key_pem)
        binary = self.plane.binaries[f"kueue-{self.kueue_version}"]
        manifests = module / "config" / "components" / "webhook" / "manifests.yaml"
        for cluster in clusters:
            self.kueues[cluster.name] = KueueInstance(cluster, binary, self.frameworks,
                                                      manager=cluster.name == "manager",
                                                      log_level=self.kueue_log_level,
                                                      worker_lost_timeout=self.worker_lost_timeout)  # fmt: skip

        def install(cluster: KubeCluster) -> None:
            cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}})
            cluster.install_crds(crds)
            for hook in url_webhooks(manifests, self.kueues[cluster.name].webhook_port, pki.ca.cert_pem):
                cluster.apply(hook)

        with concurrent.futures.ThreadPoolExecutor(len(clusters)) as pool:  # (each server works on its own)
            for future in [pool.submit(install, cluster) for cluster in clusters]:
                future.result()
        self._step("CRDs and webhooks", started)
        started = time.monotonic()
        for instance in self.kueues.values():  # (all at once: they start in parallel)
            instance.process.start()
        for instance in self.kueues.values():
            instance.wait_ready()
        self._step(f"Kueue {self.kueue_version} x{len(self.kueues)}", started)
        started = time.monotonic()
        self._configure()
        self.wait_active()
        self._step("MultiKueue active", started)
        self.kubeconfig_dir.mkdir(parents=True, exist_ok=True)
        for cluster in clusters:
            self.kubeconfig_files[cluster.name] = cluster.write_kubeconfig(
                self.kubeconfig_dir / f"{cluster.name}.kubeconfig"
            )
        self._step("bring-up", began)

    def _crds(self, module: Path) -> list[dict[str, Any]]:
        from mkpolicy.testing.apiserver import bundled_crd_path, load_crds

        bases = module / "config" / "components" / "crd" / "bases"
        crds = [doc for f in sorted(bases.glob("*.yaml")) for doc in yaml.safe_load_all(f.read_text()) if doc]
        files = [bundled_crd_path("pipelineruns.tekton.dev")] if TEKTON in self.frameworks else []
        for path in [*files, *self.crd_files]:
            for crd in load_crds(path):
                crd = json.loads(json.dumps(crd))
                crd["spec"].pop("conversion", None)  # (no conversion webhook runs; storage version only)
                crds.append(crd)
        return crds

    def _cluster_queue(self, cpu: str, *, check: str | None, name: str = CLUSTER_QUEUE) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": FLAVOR, "resources": [
                {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "64Gi"}]}]}],
        }  # fmt: skip
        if check is not None:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
        return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}

    def _apply_check(self, name: str, workers: Sequence[str]) -> None:
        """MultiKueueConfig ``name`` of ``workers`` and the AdmissionCheck ``name`` on it."""
        manager = self.manager
        manager.apply({"apiVersion": KUEUE_API, "kind": "MultiKueueConfig", "metadata": {"name": name},
                       "spec": {"clusters": list(workers)}})  # fmt: skip
        manager.apply({"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": name},
                       "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                               "name": name}}})  # fmt: skip

    def _configure(self) -> None:
        flavor = {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}
        for worker, cluster in self.workers.items():
            cluster.apply(flavor)
            cluster.apply(self._cluster_queue(self.quota[worker], check=None))
        manager = self.manager
        for worker, cluster in self.workers.items():
            kubeconfig = yaml.safe_dump(cluster.kubeconfig(cluster=worker)).encode()
            manager.apply({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": f"{worker}-secret", "namespace": KUEUE_NAMESPACE},
                           "data": {"kubeconfig": base64.b64encode(kubeconfig).decode()}})  # fmt: skip
        self._write_kueue_config()
        if self.policies is not None:
            self._start_sidecar()
        for worker in self.worker_names:
            manager.apply({"apiVersion": KUEUE_API, "kind": "MultiKueueCluster", "metadata": {"name": worker},
                           "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                                     "location": f"{worker}-secret"}}}})  # fmt: skip
        self._apply_check(CHECK, self.worker_names)
        manager.apply(flavor)
        manager.apply(self._cluster_queue("1000", check=CHECK))

    def _write_kueue_config(self) -> None:
        """The manager Kueue's Configuration in ConfigMap ``kueue-manager-config`` (where the sidecar reads it)."""
        kueue_config = yaml.safe_dump(self.kueues["manager"].config)
        self.manager.apply({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "kueue-manager-config", "namespace": KUEUE_NAMESPACE},
                            "data": {"controller_manager_config.yaml": kueue_config}})  # fmt: skip

    def _start_sidecar(self) -> None:
        assert self.policies is not None
        folder = self.run_dir / "sidecar"
        kubeconfig = self.manager.write_kubeconfig(folder / "manager.kubeconfig")
        self.sidecar = SidecarProcess(folder, self.manager.admin, kubeconfig, self.sidecar_workers, self.policies,
                                      kueue_version=self.kueue_version,
                                      request_log=self.request_log).start(pending_ok=self.pending_ok)  # fmt: skip

    # -- teardown ----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the sidecar, every Kueue, the API servers and etcd; remove the temporary files."""
        if self.sidecar is not None:
            self.sidecar.stop()
        for instance in self.kueues.values():
            instance.process.stop()
        self.plane.stop()

    def __enter__(self) -> RealMultiKueue:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
