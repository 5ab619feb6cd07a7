"""``mkpolicy sidecar --wire`` as a child process, between a manager and its workers.

The sidecar reads each worker's kubeconfig from its MultiKueueCluster Secret
(``<worker>-secret`` in ``kueue-system``) and points the Secret at its own endpoint.
Ports and the state folder (CA, tokens) are fixed at the first start, so a restart
serves the same endpoints with the same credentials, as a restarted sidecar container
does in production.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from mkpolicy.testing.peers.pki import write_private
from mkpolicy.testing.peers.processes import Process, free_port, wait_until

KUEUE_NAMESPACE = "kueue-system"
#: Generous: the sidecar compiles the policies and reads the Secrets before it is ready.
READY_TIMEOUT = 60.0


class Manager(Protocol):
    """What the sidecar needs of the manager cluster (a loopback ``ApiServer`` or a ``KubeCluster``'s admin)."""

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]: ...


#: How ``/readyz`` lists a policy whose kind the manager does not serve (``mkpolicy.sidecar.server``).
PENDING = "fail pending "


class NotReady(Exception):
    """A readiness endpoint answered other than 200; the message says what it reports failing
    (``failing``: the checks it lists as failed, one line each)."""

    def __init__(self, message: str, failing: list[str]) -> None:
        super().__init__(message)
        self.failing = failing


def http_ok(url: str) -> bool:
    """Whether ``url`` answers 200 (plain HTTP); :class:`NotReady` with the failing checks the answer
    lists otherwise (mkpolicy's ``fail ...`` lines, Kubernetes' ``[-]...`` ones), so that a wait that
    gives up says why (:func:`~mkpolicy.testing.peers.processes.wait_until` quotes the last error)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return bool(resp.status == 200)
    except urllib.error.HTTPError as exc:
        body = exc.read(64 * 1024).decode(errors="replace")
        failing = [line for line in body.splitlines() if line.startswith(("fail ", "[-]"))]
        raise NotReady(f"{exc.code}: " + ("; ".join(failing) or body.strip()[:300]), failing) from None


class SidecarProcess:
    """The sidecar for ``workers``, its files in ``folder``; :meth:`start` waits until the Secrets are wired."""

    def __init__(self, folder: Path, manager: Manager, manager_kubeconfig: Path, workers: Sequence[str],
                 policies: Path, *, kueue_version: str | None = None, request_log: bool = True) -> None:  # fmt: skip
        self.folder = folder
        #: Policies pending when it started (``start(pending_ok=True)``): "name (Kind.version.group): why".
        self.pending: list[str] = []
        self.manager = manager
        self.ports = {w: free_port() for w in workers}
        self.ops_port = free_port()
        config: dict[str, Any] = {
            "apiVersion": "mkpolicy.io/v1alpha1",
            "kind": "SidecarConfig",
            "listen": {"address": "127.0.0.1"},
            "ops": {"address": "127.0.0.1", "port": self.ops_port},
            "manager": {"kubeconfig": str(manager_kubeconfig), "namespace": KUEUE_NAMESPACE},
            "workers": [{"name": w, "port": port, "kubeconfig": {"secret": {"name": f"{w}-secret"}},
                         "wireSecret": f"{w}-secret"} for w, port in self.ports.items()],
            "state": {"dir": str(folder / "state")},
            "reload": {"intervalSeconds": 1},
            "shutdown": {"gracePeriodSeconds": 2},
        }  # fmt: skip
        if request_log:
            config["logging"] = {"requestLog": {"file": str(folder / "requests.jsonl")}}
        #: Every request's shape, across restarts (:mod:`mkpolicy.sidecar.requestlog`).
        self.request_log = folder / "requests.jsonl"
        if kueue_version:
            config["kueue"] = {"version": kueue_version.lstrip("v")}
        self.config_file = write_private(folder / "config.yaml", yaml.safe_dump(config).encode())
        self.process = Process("mkpolicy sidecar", [
            sys.executable, "-m", "mkpolicy", "sidecar", "--policies", str(policies),
            "--config", str(self.config_file), "--wire",
        ], folder / "sidecar.log", env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip

    def endpoint(self, worker: str) -> str:
        """The URL Kueue reaches ``worker`` at."""
        return f"https://127.0.0.1:{self.ports[worker]}"

    def start(self, *, pending_ok: bool = False) -> SidecarProcess:
        """Start it; wait for ``/readyz`` and for every Secret to point at the sidecar.

        ``pending_ok``: a sidecar whose only failing checks are pending policies (their kinds not
        served by the manager) counts as started; those are in :attr:`pending` (a policy author
        trying one policy of a folder whose other kinds the clusters do not serve)."""
        self.process.start()
        wait_until(self.process, lambda: self._ready(pending_ok), "the sidecar's /readyz", READY_TIMEOUT)
        wait_until(self.process, self.wired, "the MultiKueueCluster Secrets wired to the sidecar", READY_TIMEOUT)
        return self

    def _ready(self, pending_ok: bool) -> bool:
        try:
            return http_ok(f"http://127.0.0.1:{self.ops_port}/readyz")
        except NotReady as exc:
            if not (pending_ok and exc.failing and all(line.startswith(PENDING) for line in exc.failing)):
                raise
            self.pending = [line.removeprefix(PENDING) for line in exc.failing]
            return True

    def wired(self) -> bool:
        """Whether every worker's Secret holds the sidecar's endpoint."""
        for worker in self.ports:
            secret = self.manager.get("v1", "Secret", f"{worker}-secret", KUEUE_NAMESPACE)
            kubeconfig = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
            if kubeconfig["clusters"][0]["cluster"]["server"] != self.endpoint(worker):
                return False
        return True

    def metric(self, name: str, **labels: str) -> float:
        """A sample of the sidecar's ``/metrics`` (0 when absent)."""
        import urllib.request

        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(f"http://127.0.0.1:{self.ops_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return 0.0

    def readiness(self) -> list[str]:
        """The checks of ``/readyz?verbose`` (``ok ...``, ``warn ...``), also when not ready (503)."""
        import urllib.error
        import urllib.request

        url = f"http://127.0.0.1:{self.ops_port}/readyz?verbose"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode()
        return list(text.splitlines())

    def restart(self) -> None:
        """Stop and start again (same ports, same state)."""
        self.process.stop()
        self.start()

    def stop(self) -> None:
        """SIGTERM (the sidecar drains), SIGKILL after 10 s."""
        self.process.stop()
