"""The ``mkpolicy demo`` scenario: loopback clusters, the sidecar, Kueue's protocol, checks.

Everything Kueue would do goes over HTTPS: it reads each MultiKueueCluster's Secret
(rewritten by ``--wire``), holds the kubeconfig to Kueue's rules and talks to the
sidecar; the sidecar talks to the workers with their real kubeconfigs, read from the
same Secrets. Each step is compared with what the policy engine computes.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

import yaml

import mkpolicy
import mkpolicy.yamldata as yamldata
from mkpolicy.errors import InputError, Location, MkpolicyError
from mkpolicy.jsonvalues import apply_merge_patch
from mkpolicy.kube.client import KubeClient, ResourceInfo
from mkpolicy.kube.kubeconfig import KUBECONFIG_SECRET_KEY, check_kueue_rules, parse_kubeconfig, rest_config
from mkpolicy.sidecar import Sidecar, config_from_dict, setup_logging, unwire_all
from mkpolicy.testing import ApiServer
from mkpolicy.testing.kueue_driver import GenericAdapter

WORKERS = ("worker1", "worker2")
NAMESPACE = "kueue-system"
CRDS = ["pipelineruns.tekton.dev", "multikueueclusters.kueue.x-k8s.io"]
PR = ("tekton.dev/v1", "PipelineRun")
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


class DemoFailed(MkpolicyError):
    """A check of the demo failed (what was expected and what was found)."""


@dataclass(frozen=True)
class Inputs:
    """The policy and the PipelineRun the demo uses."""

    policy: Path
    pipelinerun: Path


def find_inputs(policy: str | None, pipelinerun: str | None) -> Inputs:
    """The given files, or the repository's Tekton policy and example."""
    repo = Path(mkpolicy.__file__).resolve().parent.parent
    found = Inputs(
        Path(policy) if policy else repo / "policies" / "tekton-pipelinerun.yaml",
        Path(pipelinerun) if pipelinerun else repo / "examples" / "tekton" / "pipelinerun.yaml",
    )
    for path, flag in ((found.policy, "--policy"), (found.pipelinerun, "--pipelinerun")):
        if not path.is_file():
            raise InputError(
                f"{path} not found: run the demo from a clone (pip install -e .) or give {flag} FILE",
                Location(str(path)),
            )
    return found


def _tekton_status(done: bool) -> dict[str, Any]:
    """What Tekton writes on the worker: the outcome and much the manager does not need."""
    status: dict[str, Any] = {
        "startTime": "2026-11-21T09:12:05Z",
        "conditions": [
            {"type": "Succeeded", "status": "Unknown", "reason": "Running", "message": "Tasks Completed: 0 (Failed: 0)"}
        ],
        "pipelineSpec": {"tasks": [{"name": "build", "taskRef": {"name": "build"}}, {"name": "test"}]},
        "provenance": {"featureFlags": {"enableAPIFields": "beta", "resultExtractionMethod": "termination-message"}},
        "observedGeneration": 1,
        "childReferences": [{"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "name": "build-and-test-build"}],
    }
    if done:
        status["conditions"] = [
            {"type": "Succeeded", "status": "True", "reason": "Succeeded", "message": "Tasks Completed: 2 (Failed: 0)"}
        ]
        status["completionTime"] = "2026-11-21T09:14:41Z"
    return status


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}/{str(key).replace('~', '~0').replace('/', '~1')}"))
        return out
    return {prefix: value}


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per leaf added, removed or changed from ``before`` to ``after``."""
    old, new = _flatten(before), _flatten(after)
    lines = []
    for path in sorted(old.keys() | new.keys()):
        if path not in new:
            lines.append(f"- {path}")
        elif path not in old:
            lines.append(f"+ {path}: {_short(new[path])}")
        elif old[path] != new[path]:
            lines.append(f"~ {path}: {_short(old[path])} -> {_short(new[path])}")
    return lines


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Scenario:
    """One run of the demo."""

    def __init__(
        self,
        inputs: Inputs,
        *,
        worker: str = "worker1",
        identifier: Literal["annotation", "label"] = "annotation",
        verbose: bool = False,
        out: TextIO | None = None,
    ) -> None:
        self.inputs = inputs
        self.worker = worker
        self.identifier = identifier
        self.verbose = verbose
        self.out = out or sys.stdout
        self.step = 0

    # -- output ----------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.step += 1
        print(f"\n[{self.step}] {text}", file=self.out)

    def show(self, text: str, indent: int = 4) -> None:
        for line in text.rstrip("\n").splitlines():
            print(" " * indent + line, file=self.out)

    def show_yaml(self, value: Any) -> None:
        self.show(yaml.safe_dump(value, sort_keys=False, default_flow_style=False, width=100))

    def check(self, ok: bool, what: str, expected: Any = None, found: Any = None) -> None:
        if not ok:
            detail = f"; expected {_short(expected)}, found {_short(found)}" if expected is not None else ""
            raise DemoFailed(f"check failed: {what}{detail}")
        print(f"    ok: {what}", file=self.out)

    # -- the scenario -----------------------------------------------------------------------
    async def run(self) -> None:
        started = time.monotonic()
        setup_logging("info" if self.verbose else "warning", sys.stderr)
        logging.getLogger("aiohttp").setLevel(logging.ERROR)
        print("mkpolicy demo: Kueue MultiKueue with the mkpolicy sidecar, on loopback API servers", file=self.out)
        with tempfile.TemporaryDirectory(prefix="mkpolicy-demo-") as tmp:
            await self._run(Path(tmp))
        elapsed = time.monotonic() - started
        print(f"\ndone in {elapsed:.1f}s: every step matched what the policy says.", file=self.out)

    def _policy_dir(self, tmp: Path) -> tuple[Path, mkpolicy.Adapter]:
        """The policy in a directory of its own (a schema path made absolute), and its adapter."""
        docs = yamldata.load_file(str(self.inputs.policy))
        for doc in docs:
            schema = (doc.get("spec") or {}).get("schema") if isinstance(doc, dict) else None
            if isinstance(schema, str) and not os.path.isabs(schema):
                doc["spec"]["schema"] = str((self.inputs.policy.parent / schema).resolve())
        directory = tmp / "policies"
        directory.mkdir()
        target = directory / self.inputs.policy.name
        target.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        policies = mkpolicy.load(str(directory))
        if len(policies) != 1 or policies[0].spec.gvk.kind != "PipelineRun":
            raise DemoFailed(f"{self.inputs.policy}: expected one FrameworkPolicy for PipelineRun.v1.tekton.dev")
        return directory, mkpolicy.compile(policies[0])

    def _pipelinerun(self) -> tuple[dict[str, Any], str]:
        """The PipelineRun as a user submits it, and the workload name Kueue gives it."""
        obj = yamldata.load_object(str(self.inputs.pipelinerun))
        meta = obj.setdefault("metadata", {})
        workloads = [r["name"] for r in meta.get("ownerReferences") or [] if r.get("kind") == "Workload"]
        workload = workloads[0] if workloads else f"pipelinerun-{meta.get('name')}"
        for key in (*SERVER_METADATA, "ownerReferences", "finalizers"):
            meta.pop(key, None)
        meta.setdefault("namespace", "default")
        return obj, workload

    async def _run(self, tmp: Path) -> None:
        policies, adapter = self._policy_dir(tmp)
        submitted, workload = self._pipelinerun()
        namespace = submitted["metadata"]["namespace"]

        servers: list[ApiServer] = []
        try:
            manager = ApiServer("manager", bundled=CRDS, namespaces=["default", NAMESPACE, namespace]).start()
            servers.append(manager)
            workers = {}
            for worker in WORKERS:
                workers[worker] = ApiServer(worker, bundled=CRDS[:1], namespaces=["default", namespace]).start()
                servers.append(workers[worker])
            self.say("clusters (loopback API servers, TLS, bearer tokens)")
            for server in servers:
                self.show(f"{server.name:8} {server.url}")
            for worker, server in workers.items():
                kubeconfig = yaml.safe_dump(server.kubeconfig(cluster=worker)).encode()
                manager.create(
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": f"{worker}-secret", "namespace": NAMESPACE},
                        "data": {KUBECONFIG_SECRET_KEY: base64.b64encode(kubeconfig).decode()},
                    }
                )
                manager.create(
                    {
                        "apiVersion": "kueue.x-k8s.io/v1beta2",
                        "kind": "MultiKueueCluster",
                        "metadata": {"name": worker},
                        "spec": {
                            "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{worker}-secret"}}
                        },
                    }
                )
            self.show("manager: MultiKueueClusters worker1, worker2 with their kubeconfig Secrets in kueue-system")

            manager_kubeconfig = manager.write_kubeconfig(tmp / "manager.kubeconfig")
            config = config_from_dict(
                {
                    "listen": {"basePort": 0},
                    "ops": {"address": "127.0.0.1", "port": 0},
                    "manager": {"kubeconfig": str(manager_kubeconfig), "namespace": NAMESPACE},
                    "workers": [{"name": w, "kubeconfig": {"secret": {"name": f"{w}-secret"}}} for w in WORKERS],
                    "reload": {"intervalSeconds": 0},
                    "shutdown": {"gracePeriodSeconds": 2},
                    "state": {"dir": str(tmp / "state")},
                }
            )
            sidecar = Sidecar(config, str(policies))
            await sidecar.start()
            try:
                await sidecar.wait_ready(20)
                self.say(f"mkpolicy sidecar: policy {adapter.name} for {adapter.gvk}")
                for worker in WORKERS:
                    self.show(f"{worker} endpoint {sidecar.endpoint(worker)}")
                wired = await sidecar.wire()
                self.show("--wire: " + ", ".join(f"{NAMESPACE}/{w}-secret {r}" for w, r in wired.items()))
                await self._kueue(manager, workers, adapter, submitted, workload)
                self.say("metrics (mkpolicy_sidecar_*, as Prometheus scrapes them on the ops port)")
                self._metrics(sidecar)
            finally:
                await sidecar.stop()
            restored = await unwire_all(config)
            self.say("--unwire: " + ", ".join(f"{NAMESPACE}/{w}-secret {r}" for w, r in restored.items()))
            for worker in WORKERS:
                secret = manager.get("v1", "Secret", f"{worker}-secret", NAMESPACE)
                raw = base64.b64decode(secret["data"][KUBECONFIG_SECRET_KEY])
                server = parse_kubeconfig(raw)["clusters"][0]["cluster"]["server"]
                self.check(server == workers[worker].url, f"{worker}-secret points at {worker} again")
        finally:
            for server in reversed(servers):
                server.stop()

    async def _kueue(
        self,
        manager: ApiServer,
        workers: dict[str, ApiServer],
        adapter: mkpolicy.Adapter,
        submitted: dict[str, Any],
        workload: str,
    ) -> None:
        """Kueue's side: read the wired Secrets, dispatch, write status back, delete."""
        namespace, name = submitted["metadata"]["namespace"], submitted["metadata"]["name"]
        clients = {}
        for worker in WORKERS:
            secret = manager.get("v1", "Secret", f"{worker}-secret", NAMESPACE)
            kubeconfig = parse_kubeconfig(base64.b64decode(secret["data"]["kubeconfig"]), f"Secret {worker}-secret")
            check_kueue_rules(kubeconfig, f"Secret {worker}-secret")
            clients[worker] = KubeClient(rest_config(kubeconfig))
        self.check(
            all(c.config.server.startswith("https://127.0.0.1:") for c in clients.values()),
            "Kueue's kubeconfigs (from the wired Secrets) pass its rules and point at the sidecar",
        )
        manager_client = KubeClient(rest_config(manager.kubeconfig()))
        info = ResourceInfo("tekton.dev", "v1", "PipelineRun", "pipelineruns", True)
        kueue = GenericAdapter(manager_client, clients, info, identifier=self.identifier)
        cluster = self.worker
        ctx = mkpolicy.Context(workload, "multikueue", cluster, None, self.identifier)
        try:
            self.say(f"a user submits PipelineRun {namespace}/{name} on the manager")
            manager.create(submitted)
            local = manager.get(*PR, name, namespace)
            self.show(
                f"spec.managedBy: {local['spec'].get('managedBy')!r}, spec.status: {local['spec'].get('status')!r}"
            )
            managed, reason = await kueue.is_managed(namespace, name)
            self.check(managed, f"Kueue sees the PipelineRun as managed by MultiKueue {reason}".rstrip())

            self.say(f"Kueue dispatches workload {workload} to {cluster}: POST through the sidecar")
            result = await kueue.sync_job(cluster, namespace, name, workload)
            self.check(result == "created", "the worker copy was created", "created", result)
            copy = workers[cluster].get(*PR, name, namespace)
            for key in SERVER_METADATA:
                copy["metadata"].pop(key, None)
            expected = adapter.create(local, ctx)
            self.check(copy == expected, f"the copy on {cluster} is exactly the policy's create output")
            self.show("the worker copy:")
            self.show_yaml({"metadata": copy["metadata"], "spec": copy["spec"]})
            self.show(f"what the policy changed from Kueue's generic copy ({adapter.name}):")
            self.show("\n".join(changes(kueue.clone(local, workload), copy)) or "(nothing)", indent=6)
            other = WORKERS[1 - WORKERS.index(cluster)]
            self.check(not workers[other].list(*PR, namespace=namespace), f"nothing was created on {other}")

            for done, label in ((False, "is running"), (True, "has succeeded")):
                self.say(f"Tekton on {cluster}: the PipelineRun {label}; Kueue copies the status back")
                workers[cluster].patch(
                    *PR, name, {"status": _tekton_status(done)}, namespace=namespace, subresource="status"
                )
                before = manager.get(*PR, name, namespace)
                remote = workers[cluster].get(*PR, name, namespace)
                result = await kueue.sync_job(cluster, namespace, name, workload)
                self.check(result == "synced", "Kueue wrote the manager's status subresource", "synced", result)
                after = manager.get(*PR, name, namespace)
                patch = adapter.sync(before, remote, ctx)
                want = apply_merge_patch(before, patch).get("status") if patch else before.get("status")
                self.check(after.get("status") == want, "the manager's status is exactly the policy's sync output")
                left = sorted(set(remote["status"]) - set(after["status"]))
                self.show("manager status now:")
                self.show_yaml(after["status"])
                self.show(f"left on the worker: {', '.join(left) or 'nothing'}")
            rv = manager.get(*PR, name, namespace)["metadata"]["resourceVersion"]
            result = await kueue.sync_job(cluster, namespace, name, workload)
            self.check(
                result == "unchanged" and manager.get(*PR, name, namespace)["metadata"]["resourceVersion"] == rv,
                "one more reconcile writes nothing",
            )

            self.say(f"the workload finished: Kueue deletes the copy on {cluster} (propagation Background)")
            self.check(await kueue.delete_remote(cluster, namespace, name), "deleted")
            self.check(not workers[cluster].list(*PR, namespace=namespace), f"{cluster} holds no PipelineRun")
        finally:
            await manager_client.close()
            for client in clients.values():
                await client.close()

    def _metrics(self, sidecar: Sidecar) -> None:
        registry = sidecar.metrics.registry
        for family in registry.collect():
            if family.name not in ("mkpolicy_sidecar_requests", "mkpolicy_sidecar_transforms"):
                continue
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.value:
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                    self.show(f"{sample.name}{{{labels}}} {int(sample.value)}")
