"""The Tekton policy's integration section under mkpolicy controller (loopback API server):
the cases where it differs from tekton-kueue (docs/integration.md, "Tekton")."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import yaml
from controller_harness import ROOT, WL, condition, eventually, server

from mkpolicy.check import load_checked
from mkpolicy.controller import Controller
from mkpolicy.kube.client import KubeClient
from mkpolicy.kube.kubeconfig import rest_config

PR = "tekton.dev/v1"
NS = "default"


def run(name: str, **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples/tekton/pipelinerun-queued.yaml").read_text())
    obj["metadata"] = {**obj["metadata"], "name": name, "namespace": NS}
    obj["metadata"].pop("uid")
    obj["spec"].update(spec)
    return obj


def test_tekton_runs_queue_start_and_requeue() -> None:
    with server() as srv:

        def workload_of(name: str) -> dict[str, Any] | None:
            found = [w for w in srv.list(WL, "Workload", NS) if w["metadata"]["ownerReferences"][0]["name"] == name]
            return found[0] if found else None

        def get(name: str) -> dict[str, Any]:
            return dict(srv.get(PR, "PipelineRun", name, NS))

        async def scenario() -> None:
            adapters = load_checked([str(ROOT / "policies/tekton-pipelinerun.yaml")])
            async with KubeClient(rest_config(srv.kubeconfig(), kueue_rules=False)) as kube:
                ctl = Controller(adapters, kube, identity="t", leader_election=False)
                await ctl.start()
                try:
                    # Queued by Kueue (pending + marker, as the admission policy leaves it).
                    queued = run("queued", status="PipelineRunPending")
                    queued["metadata"]["annotations"]["kueue.mkpolicy.io/suspended-by-kueue"] = "true"
                    srv.create(queued)
                    # Made pending by its user: never un-pended by Kueue.
                    srv.create(run("mine", status="PipelineRunPending"))
                    wl = await eventually(lambda: workload_of("queued"), what="the Workload")
                    requests = [
                        c["resources"]["requests"] for c in wl["spec"]["podSets"][0]["template"]["spec"]["containers"]
                    ]
                    assert requests == [{"cpu": "4", "memory": "8Gi"}, {"tekton.dev/pipelineruns": "1"}]
                    await asyncio.sleep(0.5)
                    assert workload_of("mine") is None
                    admitted = copy.deepcopy(wl)
                    admitted["status"] = {
                        "admission": {"clusterQueue": "cq", "podSetAssignments": [
                            {"name": "pipelinerun", "flavors": {"cpu": "spot"}, "count": 1}]},
                        "conditions": [
                            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                             "lastTransitionTime": "2026-11-26T20:00:00Z"},
                            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                             "lastTransitionTime": "2026-11-26T20:00:00Z"}]}  # fmt: skip
                    srv.update(admitted, subresource="status")
                    started = await eventually(
                        lambda: "status" not in (r := get("queued"))["spec"] and r, what="started"
                    )
                    pod = started["spec"]["taskRunTemplate"]["podTemplate"]
                    assert pod["nodeSelector"] == {"cloud.example.com/pool": "spot"}
                    assert get("mine")["spec"]["status"] == "PipelineRunPending"
                    # Preempted before it started: pending again (queued again), its pod template restored.
                    wl = workload_of("queued")
                    assert wl is not None
                    wl["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted",
                                                       "message": "preempted", "lastTransitionTime": "2026-11-26T20:01:00Z"})  # fmt: skip
                    srv.update(wl, subresource="status")
                    pending = await eventually(lambda: (r := get("queued"))["spec"].get("status") == "PipelineRunPending" and r,
                                               what="pending again")  # fmt: skip
                    assert pending["metadata"]["annotations"]["kueue.mkpolicy.io/suspended-by-kueue"] == "true"
                    assert pending["spec"]["taskRunTemplate"]["podTemplate"].get("nodeSelector", {}) == {}
                    released = await eventually(lambda: (w := workload_of("queued")) and
                                                condition(w, "QuotaReserved")["status"] == "False" and w,  # type: ignore[index]
                                                what="released")  # fmt: skip
                    assert condition(released, "Requeued")["status"] == "True"  # type: ignore[index]
                finally:
                    await ctl.stop()

        asyncio.run(scenario())
