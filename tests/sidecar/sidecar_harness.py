"""End-to-end harness: a manager and two workers on the loopback API server, the sidecar between.

The API servers run in background threads; the sidecar and Kueue's model
(:mod:`mkpolicy.testing.kueue`) run in the test's event loop (``asyncio.run``), talking
to them over TCP and TLS. Two ways to play Kueue:

- ``kueue(env, sidecar)``: :class:`~mkpolicy.testing.kueue.steps.KueueSteps`, the generic
  adapter's steps one at a time (``sync_job``, ``remove``), through the sidecar;
- ``multikueue(env, sidecar)``: the whole model (:class:`~mkpolicy.testing.kueue.Kueue`)
  on the manager, its MultiKueueCluster Secrets wired to the sidecar, with the rest of
  Kueue (``env.core``, ``env.worker_kueue``) for the test to drive.

With ``MKPOLICY_E2E_*`` kubeconfigs (docs/testing.md) the three clusters are real ones
instead, and the test works in a namespace created for it (``env.ns``) rather than
``team-a``; tests that need the loopback server are marked ``loopback_only``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mkpolicy
from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.kube.client import KubeClient, ResourceInfo
from mkpolicy.kube.kubeconfig import rest_config
from mkpolicy.sidecar import Sidecar, SidecarConfig, config_from_dict
from mkpolicy.sidecar.contract import ContractRefusal
from mkpolicy.sidecar.contract import build as build_contract
from mkpolicy.sidecar.http1 import parse_request_head
from mkpolicy.sidecar.paths import target_of
from mkpolicy.testing import ApiServer
from mkpolicy.testing.fixtures import real_cluster_targets, target_config
from mkpolicy.testing.kueue import Kueue
from mkpolicy.testing.kueue.env import MultiKueueEnv, kubeconfig_bytes, loopback_multikueue
from mkpolicy.testing.kueue.goclient import Sent, Wire
from mkpolicy.testing.kueue.steps import KueueSteps
from mkpolicy.testing.targets import ROLES, RealCluster

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
DATA = Path(__file__).parent / "data"
PIPELINERUNS = ResourceInfo("tekton.dev", "v1", "PipelineRun", "pipelineruns", True)
WORKERS = ("worker1", "worker2")
WORKLOAD = ("kueue.x-k8s.io/v1beta2", "Workload")
#: Kueue's remote Workloads (v1beta2: Kueue >= 0.15); a LIST of them is Kueue's GC, a request the
#: wire contract allows (the tests' probe of a worker through the sidecar).
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/workloads"


def probes(*groups: str, verbs: tuple[str, ...] = ("get", "list", "watch")) -> dict[str, Any]:
    """A ``wire`` setting widening the contract to reads of every resource of ``groups`` with any
    parameters (tests that probe workers with requests Kueue does not send)."""
    allow = [
        {
            "reason": "tests probe the worker with requests Kueue does not send",
            "verbs": list(verbs),
            "group": g,
            "resource": "*",
            "subresource": "*",
            "query": ["*"],
            "accept": ["*"],
            "contentTypes": ["*"] if set(verbs) - {"get", "list", "watch"} else [],
        }
        for g in groups
    ]
    return {"allow": allow, "allowPaths": [{"reason": "tests read /version", "path": "/version"}]}


#: Metadata the API server sets on create (not part of what the sidecar sends).
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


@dataclass
class Clusters:
    """A manager and two workers, with kubeconfig files for each; ``ns`` is the namespace to work in."""

    manager: ApiServer | RealCluster
    workers: dict[str, ApiServer | RealCluster]
    tmp: Path
    kubeconfigs: dict[str, Path] = field(default_factory=dict)
    ns: str = "team-a"

    def worker(self, name: str) -> ApiServer | RealCluster:
        return self.workers[name]

    def config(self, **overrides: Any) -> SidecarConfig:
        """A sidecar config for these clusters (ephemeral ports unless overridden)."""
        data: dict[str, Any] = {
            "listen": {"basePort": 0},
            "ops": {"address": "127.0.0.1", "port": 0},
            "manager": {"kubeconfig": str(self.kubeconfigs["manager"])},
            "workers": [{"name": w, "kubeconfig": {"file": str(self.kubeconfigs[w])}} for w in WORKERS],
            "reload": {"intervalSeconds": 0.1},
            "shutdown": {"gracePeriodSeconds": 2},
            "state": {"dir": None},
        }
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return config_from_dict(data)


@contextlib.contextmanager
def clusters(tmp: Path, **server_options: Any) -> Iterator[Clusters]:
    """Start the three API servers (Tekton and Kueue CRDs, :func:`loopback_multikueue` without
    MultiKueue configured), stop them afterwards
    (``server_options``: :class:`ApiServer` knobs, e.g. ``bookmark_interval``).

    On real clusters: the three clusters, with a namespace created for the test (deleted afterwards).
    """
    if target_config() is not None:
        with real_cluster_targets(ROLES) as real:
            env = Clusters(real["manager"], {w: real[w] for w in WORKERS}, tmp, ns=real["manager"].namespace)
            for name, target in real.items():
                env.kubeconfigs[name] = target.write_kubeconfig(tmp / f"{name}.kubeconfig")
            yield env
        return
    with loopback_multikueue(WORKERS, configure=False, **server_options) as mk:
        env = Clusters(mk.manager, dict(mk.workers), tmp)
        for name, srv in [("manager", mk.manager), *mk.workers.items()]:
            env.kubeconfigs[name] = srv.write_kubeconfig(tmp / f"{name}.kubeconfig")
        yield env


def policy_dir(tmp: Path, *files: Path) -> Path:
    """A policy directory holding ``files`` (schemas resolved next to it, as in the repo)."""
    out = tmp / "policies"
    out.mkdir(exist_ok=True)
    for file in files:
        shutil.copy(file, out / file.name)
    if not (tmp / "schemas").exists():
        shutil.copytree(ROOT / "schemas", tmp / "schemas")
    return out


@contextlib.asynccontextmanager
async def running(config: SidecarConfig, policies: Path) -> AsyncIterator[Sidecar]:
    """A started, ready sidecar (stopped on exit)."""
    sidecar = Sidecar(config, str(policies))
    await sidecar.start()
    try:
        await sidecar.wait_ready(15)
        yield sidecar
    finally:
        await sidecar.stop()


def client(kubeconfig: dict[str, Any]) -> KubeClient:
    """An async client for a kubeconfig (held to Kueue's rules)."""
    return KubeClient(rest_config(kubeconfig))


@contextlib.asynccontextmanager
async def kueue(
    env: Clusters, sidecar: Sidecar, identifier: str | None = None, **options: Any
) -> AsyncIterator[KueueSteps]:
    """Kueue's generic adapter, step by step: the manager directly, the workers through the sidecar
    (with the kubeconfigs the sidecar generates, held to Kueue's rules). No client-side rate
    limit unless ``qps`` is given: these tests drive steps, not Kueue's pace."""
    options.setdefault("qps", None)
    steps = KueueSteps(
        env.manager.kubeconfig(),
        {w: sidecar.kubeconfig(w) for w in WORKERS},
        identifier=identifier,  # type: ignore[arg-type]
        **options,
    )
    try:
        yield steps
    finally:
        await steps.close()
    assert_in_contract(sidecar, steps.wire)


def worker_secret_config(env: Clusters, **overrides: Any) -> SidecarConfig:
    """A sidecar config that reads each worker's kubeconfig from its MultiKueueCluster Secret."""
    workers = [{"name": w, "kubeconfig": {"secret": {"name": f"{w}-secret"}}} for w in WORKERS]
    return env.config(manager={"namespace": "kueue-system"}, workers=workers, **overrides)


@contextlib.asynccontextmanager
async def multikueue(
    env: Clusters, policies: Path, *, sidecar_config: dict[str, Any] | None = None, **settings: Any
) -> AsyncIterator[tuple[MultiKueueEnv, Sidecar, Kueue]]:
    """The production setup: MultiKueue configured on the manager with each worker's own
    kubeconfig in its Secret; the sidecar reading them and wiring the Secrets to its
    endpoints (``--wire``); Kueue's model on the manager (``settings``: ``version``,
    ``time_scale``, ... of :class:`~mkpolicy.testing.kueue.Kueue`; ``time_scale`` 0.01 by default)."""
    mk = MultiKueueEnv(env.manager, dict(env.workers), env.ns)  # type: ignore[arg-type]
    mk.configure()
    settings.setdefault("time_scale", 0.01)
    async with running(worker_secret_config(env, **(sidecar_config or {})), policies) as sidecar:
        await sidecar.wire()
        async with mk.kueue(**settings) as model:
            yield mk, sidecar, model
        assert_in_contract(sidecar, model.wire)


def assert_in_contract(sidecar: Sidecar, wire: Wire) -> None:
    """Every request the Kueue model sent a worker is one the wire contract allows, unwidened
    (:mod:`mkpolicy.sidecar.contract`; the SidecarConfig's ``wire`` widening left out)."""
    contract = build_contract(sidecar.kueue, sidecar.policies)
    for sent in wire.sent:
        if sent.target == "manager":
            continue
        head = parse_request_head(sent_head(sent))
        try:
            contract.check(head, target_of(head.method, head.decoded))
        except ContractRefusal as exc:
            raise AssertionError(
                f"the Kueue model sent {sent.line()}, which the wire contract refuses: {exc}"
            ) from None


def sent_head(sent: Sent) -> bytes:
    """A request the Kueue model sent, as the head that went on the wire."""
    fields = dict(sent.headers)
    if sent.body is not None:
        fields["Content-Length"] = str(len(sent.body))
    lines = [f"{sent.method} {sent.url} HTTP/1.1", "Host: worker", *(f"{k}: {v}" for k, v in fields.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def sidecar_kubeconfigs(sidecar: Sidecar) -> dict[str, bytes]:
    """What Kueue reads from wired Secrets: the sidecar's kubeconfig per worker."""
    return {w: kubeconfig_bytes(sidecar.kubeconfig(w)) for w in WORKERS}


def pipelinerun(name: str, namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    """The example PipelineRun (examples/tekton/pipelinerun.yaml) as a user submits it."""
    import yaml

    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "tekton" / "pipelinerun.yaml").read_text())
    obj = json.loads(json.dumps(obj, default=str))
    meta = obj["metadata"]
    for key in (*SERVER_METADATA, "ownerReferences", "finalizers"):
        meta.pop(key, None)
    meta["name"], meta["namespace"] = name, namespace
    obj["spec"].update(spec)
    return obj


def strip_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without what the API server adds on create."""
    out = copy.deepcopy(obj)
    for key in SERVER_METADATA:
        out.get("metadata", {}).pop(key, None)
    out.pop("status", None)
    return out


def adapter_for(path: Path) -> mkpolicy.Adapter:
    """The compiled policy in ``path`` (the engine's view, to compare with the wire)."""
    return mkpolicy.compile(mkpolicy.load(str(path))[0])


class PolicyChecks:
    """What a policy says, to compare the wire with: the kind ``gvk`` (apiVersion, kind) under the
    policy in ``policy``, on MultiKueue ``mk`` driven by Kueue's model ``model``."""

    def __init__(self, mk: MultiKueueEnv, model: Kueue, policy: Path, gvk: tuple[str, str]) -> None:
        self.mk = mk
        self.model = model
        self.adapter = adapter_for(policy)
        self.gvk = gvk
        self.ns = mk.namespace

    def ctx(self, workload: str, cluster: str) -> mkpolicy.Context:
        return mkpolicy.Context(workload, "multikueue", cluster, None, self.model.identifier)

    async def copy_created(self, name: str, workload: str, cluster: str) -> dict[str, Any]:
        """The worker's copy appears and is exactly the policy's ``create`` of the manager's object."""
        worker = self.mk.workers[cluster]
        await self.model.wait_for(lambda: worker.list(*self.gvk, namespace=self.ns), what=f"a copy on {cluster}")
        copy = worker.get(*self.gvk, name, self.ns)
        expected = self.adapter.create(self.mk.manager.get(*self.gvk, name, self.ns), self.ctx(workload, cluster))
        assert strip_server_fields(copy) == expected
        assert "managedBy" not in copy["spec"]
        return copy

    async def synced(self, name: str, remote: dict[str, Any], workload: str, cluster: str, what: str) -> dict[str, Any]:
        """The manager's object ends with the policy's sync of ``remote``; its status."""

        def done() -> bool:
            manager_obj = self.mk.manager.get(*self.gvk, name, self.ns)
            patch = self.adapter.sync(manager_obj, remote, self.ctx(workload, cluster))
            return patch is None or apply_merge_patch(manager_obj, patch) == manager_obj

        await self.model.wait_for(done, what=f"{what} written back from {cluster}")
        status: dict[str, Any] = self.mk.manager.get(*self.gvk, name, self.ns)["status"]
        return status

    async def nothing_left(self, cluster: str, *, gc: bool = False) -> None:
        """No copy and no remote Workload on ``cluster`` (after GC, remote Workloads may wait for
        the worker's Kueue to release their finalizer: Kueue's GC only deletes them)."""
        worker = self.mk.workers[cluster]
        await self.model.wait_for(
            lambda: not worker.list(*self.gvk, namespace=self.ns), what=f"no copy left on {cluster}"
        )
        await self.model.wait_for(
            lambda: all(
                gc and w["metadata"].get("deletionTimestamp") for w in worker.list(*WORKLOAD, namespace=self.ns)
            ),
            what=f"no remote workload left on {cluster}",
        )


def metric(sidecar: Sidecar, name: str, **labels: str) -> float:
    """A sample of the sidecar's metrics (0 when absent)."""
    return sidecar.metrics.registry.get_sample_value(name, labels) or 0.0


def free_ports(count: int) -> list[int]:
    """``count`` TCP ports free on 127.0.0.1 right now (for sidecars restarted on the same ports)."""
    import socket

    sockets, ports = [], []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
        ports.append(sock.getsockname()[1])
    for sock in sockets:
        sock.close()
    return ports


async def eventually(check: Any, timeout: float = 10.0, interval: float = 0.02) -> None:
    """Wait until ``check()`` is true (AssertionError with its last value otherwise)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value: {value!r})")
        await asyncio.sleep(interval)
