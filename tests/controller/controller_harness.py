"""The controller against the loopback API server, with the test playing Kueue's scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mkpolicy.check import load_checked
from mkpolicy.controller import Controller, ControllerOptions
from mkpolicy.kube.client import KubeClient
from mkpolicy.kube.kubeconfig import rest_config
from mkpolicy.testing.apiserver import ApiError, ApiServer

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "examples/batchrun/crd.yaml"
POLICY = ROOT / "policies/batchrun.yaml"
NS = "default"
WL = "kueue.x-k8s.io/v1beta2"
MARKER = "kueue.mkpolicy.io/suspended-by-kueue"


@contextlib.contextmanager
def server() -> Iterator[ApiServer]:
    """A loopback API server with Kueue's CRDs and BatchRun's, and the Lease namespace."""
    with ApiServer("manager", bundled=True, crds=[str(CRD)]) as srv:
        srv.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})
        srv.create({
            "apiVersion": WL, "kind": "ResourceFlavor", "metadata": {"name": "spot"},
            "spec": {"nodeLabels": {"cloud.example.com/pool": "spot"},
                     "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]},
        })  # fmt: skip
        yield srv


def client(srv: Any) -> KubeClient:
    """An async client for a loopback server or a real cluster (anything with ``kubeconfig()``)."""
    return KubeClient(rest_config(srv.kubeconfig(), kueue_rules=False))


@contextlib.asynccontextmanager
async def controller(
    srv: Any, *, identity: str = "c1", ops_port: int | None = None, **kwargs: Any
) -> AsyncIterator[Controller]:
    """A started controller for policies/batchrun.yaml (stopped on exit)."""
    adapters = load_checked([str(POLICY)])
    async with client(srv) as kube:
        kwargs.setdefault("options", ControllerOptions())
        ctl = Controller(adapters, kube, identity=identity, retry=0.2, lease_seconds=2, renew_deadline=1.5, **kwargs)
        await ctl.start(ops_port=ops_port)
        try:
            await ctl.synced(10)
            yield ctl
        finally:
            await ctl.stop()


def batchrun(
    name: str = "nightly-etl",
    *,
    marked: bool = True,
    suspend: bool | None = True,
    labels: dict[str, str] | None = None,
    namespace: str = NS,
) -> dict[str, Any]:
    """A BatchRun as the admission policies leave it (suspended and marked by default)."""
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples/batchrun/batchrun.yaml").read_text())
    obj["metadata"] = {
        "name": name,
        "namespace": namespace,
        "labels": {"kueue.x-k8s.io/queue-name": "team-a-queue", **(labels or {})},
    }
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    if marked:
        obj["metadata"]["annotations"] = {MARKER: "true"}
    return obj


async def eventually(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``check`` (run in a thread: the loopback server's calls block) until it returns a truthy value."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while True:
        try:
            last = await asyncio.to_thread(check)
        except Exception as exc:  # not there yet
            last = exc
        if last and not isinstance(last, Exception):
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.05)


@dataclass
class Kueue:
    """Kueue's scheduler and workload controller, played by the test."""

    #: A loopback ``ApiServer`` or a real cluster's admin API (the same calls).
    srv: Any
    namespace: str = NS

    def workloads(self) -> list[dict[str, Any]]:
        return list(self.srv.list(WL, "Workload", self.namespace))

    def workload(self) -> dict[str, Any] | None:
        found = self.workloads()
        return found[0] if len(found) == 1 else None

    def the_workload(self) -> dict[str, Any]:
        found = self.workload()
        assert found is not None, "expected exactly one Workload"
        return found

    def job(self, name: str = "nightly-etl") -> dict[str, Any]:
        return dict(self.srv.get("batch.example.com/v1alpha1", "BatchRun", name, self.namespace))

    def set_status(self, wl: dict[str, Any], **status: Any) -> dict[str, Any]:
        body = copy.deepcopy(wl)
        body.setdefault("status", {}).update(status)
        return dict(self.srv.update(body, subresource="status"))

    def admit(
        self,
        wl: dict[str, Any],
        *,
        flavor: str = "spot",
        count: int | None = None,
        checks: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """QuotaReserved and Admitted, the podSets assigned to ``flavor`` (``SetQuotaReservation``)."""
        now = "2026-11-26T20:00:00Z"
        assignments = [
            {
                "name": ps["name"],
                "flavors": {"cpu": flavor},
                "count": count if count is not None else ps.get("count", 1),
            }
            for ps in wl["spec"]["podSets"]
        ]
        conditions = [
            c
            for c in (wl.get("status") or {}).get("conditions") or []
            if c["type"] not in ("QuotaReserved", "Admitted", "Evicted")
        ]
        conditions += [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue cq",
                "lastTransitionTime": now,
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": now,
            },
        ]
        status: dict[str, Any] = {
            "admission": {"clusterQueue": "cq", "podSetAssignments": assignments},
            "conditions": conditions,
        }
        if checks is not None:
            status["admissionChecks"] = checks
        return self.set_status(wl, **status)

    def evict(
        self,
        wl: dict[str, Any],
        reason: str = "Preempted",
        message: str = "Preempted to accommodate a higher priority Workload",
    ) -> dict[str, Any]:
        conditions = [c for c in wl["status"]["conditions"] if c["type"] != "Evicted"]
        conditions.append(
            {
                "type": "Evicted",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": "2026-11-26T20:05:00Z",
            }
        )
        return self.set_status(wl, conditions=conditions)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def created_once_admission_acts(admin: Any, obj: dict[str, Any], timeout: float = 300.0) -> dict[str, Any]:
    """Create ``obj`` (a new name each attempt) until the exported default-queue and suspension
    MAPs have both acted on it: the stored object.

    Each policy takes effect once kube-apiserver's informers see it, and one whose paramKind is a
    CRD's kind (LocalQueue) only once kube-apiserver's admission REST mapper has seen that CRD:
    it is reset every 30 s (k8s.io/apiserver pkg/server/options/admission.go). Generous for a
    busy machine; the error says what the last attempt got."""
    deadline = time.monotonic() + timeout
    last: object = "nothing yet"
    for attempt in itertools.count():
        body = {**obj, "metadata": {**obj["metadata"], "name": f"{obj['metadata']['name']}-{attempt}"}}
        try:
            stored = dict(admin.create(body))
        except ApiError as exc:  # (also: a new CRD's kind unknown to admission for a while)
            last = f"refused: {exc}"
        else:
            meta = stored["metadata"]
            if (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name") and MARKER in (
                meta.get("annotations") or {}
            ):
                return stored
            last = {"labels": meta.get("labels"), "annotations": meta.get("annotations"),
                    "suspend": stored["spec"].get("suspend")}  # fmt: skip
        if time.monotonic() > deadline:
            raise AssertionError(f"the admission policies did not both act within {timeout:.0f}s "
                                 f"({attempt + 1} creates); the last attempt: {last}")  # fmt: skip
        time.sleep(0.2)
    raise AssertionError("unreachable")  # pragma: no cover


def default_queue_and_suspension_act(admin: Any, namespace: str) -> dict[str, Any]:
    """With the exported admission policies bound to ``namespace``: LocalQueue ``default`` made
    there, an unlabelled BatchRun is created queued to it, suspended and marked (the stored
    object, returned), and one the user creates suspended stays unmarked."""
    admin.create({"apiVersion": WL, "kind": "LocalQueue", "metadata": {"name": "default", "namespace": namespace},
                  "spec": {"clusterQueue": "cq"}})  # fmt: skip
    unlabelled = batchrun("plain", marked=False, suspend=None, namespace=namespace)
    del unlabelled["metadata"]["labels"]
    stored = created_once_admission_acts(admin, unlabelled)
    assert stored["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert stored["spec"]["suspend"] is True
    assert stored["metadata"]["annotations"] == {MARKER: "true"}
    mine = admin.create(batchrun("mine", marked=False, suspend=True, namespace=namespace))
    assert MARKER not in (mine["metadata"].get("annotations") or {})  # the user's suspension stays unmarked
    return stored
