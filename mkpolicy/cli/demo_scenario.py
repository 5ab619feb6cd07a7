"""The ``mkpolicy demo`` scenario: loopback clusters, the sidecar, Kueue's model, checks.

Kueue is :mod:`mkpolicy.testing.kueue`, a model of its MultiKueue controllers read from
Kueue's Go code (v0.19.2 by default): it reads each MultiKueueCluster's Secret (rewritten
by ``--wire``), holds the kubeconfig to Kueue's rules, connects through the sidecar and
sends what Kueue sends (discovery, watches, ownership checks, creations, status
write-back, removals). The sidecar talks to the workers with their real kubeconfigs, read
from the same Secrets. What the rest of Kueue does (quota, admission on a worker,
finishing) is played by the demo. Each step is compared with what the policy engine computes.
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
from mkpolicy.kube.kubeconfig import KUBECONFIG_SECRET_KEY, parse_kubeconfig
from mkpolicy.sidecar import Sidecar, config_from_dict, setup_logging, unwire_all
from mkpolicy.testing.kueue import Kueue, Sent
from mkpolicy.testing.kueue.env import MultiKueueEnv, loopback_multikueue

WORKERS = ("worker1", "worker2")
NAMESPACE = "kueue-system"
WL = ("kueue.x-k8s.io/v1beta2", "Workload")
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
#: Real seconds per Kueue second: Kueue's 1 s event batching takes 10 ms.
TIME_SCALE = 0.01


class DemoFailed(MkpolicyError):
    """A check of the demo failed (what was expected and what was found)."""


@dataclass(frozen=True)
class Inputs:
    """The policy, the object to submit, the kind's CRD (None: Tekton's, bundled) and the
    worker's copy whose status the framework writes (None: Tekton's statuses, or none)."""

    policy: Path
    pipelinerun: Path
    crd: Path | None = None
    worker_object: Path | None = None


def find_inputs(
    policy: str | None, obj: str | None, crd: str | None = None, worker_object: str | None = None
) -> Inputs:
    """The given files, or the repository's Tekton policy and example.

    A policy for another kind needs its object (``--object``) and, unless the kind is
    Tekton's PipelineRun, its CRD (``--crd``).
    """
    repo = Path(mkpolicy.__file__).resolve().parent.parent
    if policy and not obj:
        raise InputError("--policy needs --object FILE: the object to submit on the manager (with spec.managedBy)")
    found = Inputs(
        Path(policy) if policy else repo / "policies" / "tekton-pipelinerun.yaml",
        Path(obj) if obj else repo / "examples" / "tekton" / "pipelinerun.yaml",
        Path(crd) if crd else None,
        Path(worker_object) if worker_object else None,
    )
    named = [(found.policy, "--policy"), (found.pipelinerun, "--object")]
    named += [(p, flag) for p, flag in ((found.crd, "--crd"), (found.worker_object, "--worker-object")) if p]
    for path, flag in named:
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
        identifier: Literal["annotation", "label"] | None = None,
        kueue_version: str = "0.19.2",
        verbose: bool = False,
        out: TextIO | None = None,
    ) -> None:
        self.inputs = inputs
        self.worker = worker
        self.identifier = identifier
        self.kueue_version = kueue_version
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

    def show_wire(self, sent: list[Sent]) -> None:
        """Requests as Kueue sent them: method, path and query, Accept (abridged), answer."""
        for s in sent:
            accept = s.headers.get("Accept", "")
            if "as=PartialObjectMetadata" in accept:
                accept = "PartialObjectMetadata"
            elif "apidiscovery" in accept:
                accept = "aggregated discovery"
            body = ""
            if s.method == "DELETE" and s.body:
                body = " " + json.dumps(
                    {k: v for k, v in json.loads(s.body).items() if k not in ("kind", "apiVersion")}
                )
            answer = s.status if s.status is not None else (s.error or "open")
            self.show(f"{s.method:6} {s.url}{body}  [{accept}] -> {answer}", indent=6)

    async def wait(self, model: Kueue, check: Any, what: str) -> Any:
        try:
            return await model.wait_for(check, 15, what)
        except TimeoutError as exc:
            raise DemoFailed(f"{exc}") from None

    # -- the scenario -----------------------------------------------------------------------
    async def run(self) -> None:
        started = time.monotonic()
        setup_logging("info" if self.verbose else "warning", sys.stderr)
        logging.getLogger("aiohttp").setLevel(logging.ERROR)
        print(
            f"mkpolicy demo: Kueue {self.kueue_version} MultiKueue with the mkpolicy sidecar, on loopback API servers",
            file=self.out,
        )
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
        if len(policies) != 1:
            raise DemoFailed(f"{self.inputs.policy}: expected one FrameworkPolicy; found {len(policies)}")
        gvk = policies[0].spec.gvk
        if self.inputs.crd is None and (gvk.group, gvk.kind) != ("tekton.dev", "PipelineRun"):
            raise InputError(f"policy {policies[0].name} is for {gvk}: give its CRD with --crd FILE")
        return directory, mkpolicy.compile(policies[0])

    def _pipelinerun(self, adapter: mkpolicy.Adapter) -> dict[str, Any]:
        """The object as a user submits it (its status, if any, left out)."""
        obj = yamldata.load_object(str(self.inputs.pipelinerun))
        gvk = adapter.gvk
        if obj.get("apiVersion") != gvk.api_version or obj.get("kind") != gvk.kind:
            raise InputError(
                f"{self.inputs.pipelinerun}: expected a {gvk.kind} of {gvk.api_version} for policy {adapter.name}; "
                f"found {obj.get('kind')!r} of {obj.get('apiVersion')!r}"
            )
        obj.pop("status", None)
        meta = obj.setdefault("metadata", {})
        for key in (*SERVER_METADATA, "ownerReferences", "finalizers"):
            meta.pop(key, None)
        meta.setdefault("namespace", "default")
        if (obj.get("spec") or {}).get("managedBy") != "kueue.x-k8s.io/multikueue":
            raise InputError(
                f"{self.inputs.pipelinerun}: expected spec.managedBy: kueue.x-k8s.io/multikueue (stock Kueue "
                "dispatches only such objects)"
            )
        return obj

    def _statuses(self, adapter: mkpolicy.Adapter) -> list[tuple[str, dict[str, Any]]]:
        """(what happened, the status the framework writes on the worker) for each status step."""
        if self.inputs.worker_object is not None:
            status = yamldata.load_object(str(self.inputs.worker_object)).get("status")
            if not isinstance(status, dict):
                raise InputError(f"{self.inputs.worker_object}: expected an object with a status")
            return [("has written its status", status)]
        if (adapter.gvk.group, adapter.gvk.kind) == ("tekton.dev", "PipelineRun"):
            return [("is running", _tekton_status(False)), ("has succeeded", _tekton_status(True))]
        return []

    async def _run(self, tmp: Path) -> None:
        policies, adapter = self._policy_dir(tmp)
        submitted = self._pipelinerun(adapter)
        namespace = submitted["metadata"]["namespace"]
        crds = [str(self.inputs.crd)] if self.inputs.crd is not None else []
        with loopback_multikueue(WORKERS, namespace=namespace, crds=crds) as env:
            self.say("clusters (loopback API servers, TLS, bearer tokens)")
            for server in (env.manager, *env.workers.values()):
                self.show(f"{server.name:8} {server.url}")
            self.show(
                "manager: MultiKueueClusters worker1, worker2 (their own kubeconfigs in Secrets in kueue-system),"
                " MultiKueueConfig and AdmissionCheck 'multikueue'"
            )
            manager_kubeconfig = env.manager.write_kubeconfig(tmp / "manager.kubeconfig")
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
                await self._kueue(env, sidecar, adapter, submitted)
                self.say("metrics (mkpolicy_sidecar_*, as Prometheus scrapes them on the ops port)")
                self._metrics(sidecar)
            finally:
                await sidecar.stop()
            restored = await unwire_all(config)
            self.say("--unwire: " + ", ".join(f"{NAMESPACE}/{w}-secret {r}" for w, r in restored.items()))
            for worker in WORKERS:
                secret = env.manager.get("v1", "Secret", f"{worker}-secret", NAMESPACE)
                raw = base64.b64decode(secret["data"][KUBECONFIG_SECRET_KEY])
                server = parse_kubeconfig(raw)["clusters"][0]["cluster"]["server"]
                self.check(server == env.workers[worker].url, f"{worker}-secret points at {worker} again")

    async def _kueue(
        self, env: MultiKueueEnv, sidecar: Sidecar, adapter: mkpolicy.Adapter, submitted: dict[str, Any]
    ) -> None:
        """Kueue's side, from its model: connect, dispatch, sync, finish, remove."""
        namespace, name = submitted["metadata"]["namespace"], submitted["metadata"]["name"]
        cluster, other = self.worker, WORKERS[1 - WORKERS.index(self.worker)]
        job = (adapter.gvk.api_version, adapter.gvk.kind)
        active = sidecar.policies
        assert active is not None and active.entries, "the sidecar is ready: its policy resolved"
        plural = active.entries[0].info.resource
        settings: dict[str, Any] = {"version": self.kueue_version, "time_scale": TIME_SCALE, "gc_interval": 1e6}
        if self.identifier is not None:
            settings["identifier"] = self.identifier
        async with env.kueue([str(adapter.gvk)], **settings) as kueue:
            self.say(f"Kueue {kueue.settings.version.name} reads the wired Secrets and connects through the sidecar")
            await self.wait(kueue, lambda: all(kueue.connection(w).active for w in WORKERS), "workers Active")
            servers = {str(r.client.config.server) for r in kueue.remotes.values() if r.client is not None}
            self.check(
                servers == {sidecar.endpoint(w) for w in WORKERS},
                "the kubeconfigs pass Kueue's rules and point at the sidecar; both MultiKueueClusters are Active",
            )
            self.show(f"what Kueue sent {cluster} to connect (discovery, then one watch per kind):")
            self.show_wire(kueue.requests(cluster))
            mark = len(kueue.requests(cluster))

            self.say(f"a user submits {job[1]} {namespace}/{name}; Kueue gives it a Workload and quota")
            local = env.manager.create(submitted)
            workload = env.core.submit(local)
            self.show(f"spec.managedBy: {local['spec'].get('managedBy')!r}; Workload {workload}")
            await self.wait(
                kueue, lambda: kueue.outcome_kinds(namespace, workload).count("dispatched") == 2, "dispatch"
            )
            self.check(True, "MultiKueue copied the Workload to worker1 and worker2 (passed through)")

            self.say(f"Kueue on {cluster} admits the Workload: MultiKueue creates the {job[1]} there")
            env.worker_kueue[cluster].admit(workload, namespace)
            await self.wait(kueue, lambda: env.workers[cluster].list(*job, namespace=namespace), "the copy")
            local = env.manager.get(*job, name, namespace)
            ctx = mkpolicy.Context(workload, kueue.settings.origin, cluster, None, kueue.identifier)
            copy = env.workers[cluster].get(*job, name, namespace)
            for key in SERVER_METADATA:
                copy["metadata"].pop(key, None)
            self.check(
                copy == adapter.create(local, ctx), f"the copy on {cluster} is exactly the policy's create output"
            )
            post = next(s for s in kueue.requests(cluster)[mark:] if s.method == "POST" and f"/{plural}" in s.path)
            kueue_body = post.json()
            kueue_body["metadata"].pop("creationTimestamp", None)
            self.show("the worker copy:")
            self.show_yaml({"metadata": copy["metadata"], "spec": copy["spec"]})
            self.show(f"what the policy changed from the body Kueue sent ({adapter.name}):")
            self.show("\n".join(changes(kueue_body, copy)) or "(nothing)", indent=6)
            await self.wait(kueue, lambda: not env.workers[other].list(*WL, namespace=namespace), f"{other} cleared")
            self.check(not env.workers[other].list(*job, namespace=namespace), f"nothing was created on {other}")
            env.worker_kueue[cluster].adopt(workload, namespace, *job)

            statuses = self._statuses(adapter)
            if not statuses:
                self.say(f"no status to write on {cluster} (--worker-object FILE gives one): write-back not shown")
            for label, written in statuses:
                self.say(f"the framework on {cluster}: the {job[1]} {label}; Kueue copies the status back")
                before = env.manager.get(*job, name, namespace)
                env.workers[cluster].patch(*job, name, {"status": written}, namespace=namespace,
                                           subresource="status")  # fmt: skip
                remote = env.workers[cluster].get(*job, name, namespace)
                patch = adapter.sync(before, remote, ctx)
                want = apply_merge_patch(before, patch).get("status") if patch else before.get("status")
                await self.wait(kueue, lambda w=want: env.manager.get(*job, name, namespace).get("status") == w, "sync")
                after = env.manager.get(*job, name, namespace)
                self.check(True, "the manager's status is exactly the policy's sync output (a merge patch of /status)")
                left = sorted(set(remote["status"]) - set(after["status"]))
                self.show("manager status now:")
                self.show_yaml(after["status"])
                self.show(f"left on the worker: {', '.join(left) or 'nothing'}")
            patches = sum(s.method == "PATCH" and s.path.endswith(f"/{name}/status") for s in kueue.requests("manager"))
            done_before = kueue.workloads_queue.done
            kueue.workloads_queue.add((namespace, workload))
            await self.wait(
                kueue, lambda: kueue.workloads_queue.done > done_before and kueue.workloads_queue.idle, "reconcile"
            )
            again = sum(s.method == "PATCH" and s.path.endswith(f"/{name}/status") for s in kueue.requests("manager"))
            self.check(again == patches, "one more reconcile writes nothing")

            self.say(f"Kueue on {cluster} finishes the Workload: MultiKueue finishes it and removes the copies")
            env.worker_kueue[cluster].finish(workload, namespace)
            await self.wait(kueue, lambda: not env.workers[cluster].list(*job, namespace=namespace), "the copy removed")
            await self.wait(kueue, lambda: not env.workers[cluster].list(*WL, namespace=namespace), "workload removed")
            self.check("finished" in kueue.outcome_kinds(namespace, workload), "the manager's Workload is Finished")
            self.check(True, f"{cluster} holds no {job[1]} and no Workload")

            sent = kueue.requests(cluster)[mark:]
            await self.wait(kueue, lambda: all(s.status is not None or s.error for s in sent), "answers")
            self.say(f"the wire: every request Kueue sent {cluster} through the sidecar after connecting")
            self.show_wire(sent)
            if any(s.status == 409 for s in sent):
                self.show(
                    f"(409: the loopback server's garbage collector is immediate: deleting the {job[1]} changed the"
                    " Workload it owns before Kueue's PUT; Kueue retries)"
                )

    def _metrics(self, sidecar: Sidecar) -> None:
        registry = sidecar.metrics.registry
        for family in registry.collect():
            if family.name not in ("mkpolicy_sidecar_requests", "mkpolicy_sidecar_transforms"):
                continue
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.value:
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                    self.show(f"{sample.name}{{{labels}}} {int(sample.value)}")
