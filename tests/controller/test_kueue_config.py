"""mkpolicy controller follows Kueue's configuration as ``ReconcileGenericJob`` does
(``pkg/controller/jobframework/reconciler.go``): ``managedJobsNamespaceSelector``,
``manageJobsWithoutQueueName``, and where v0.17.1 differs from v0.19.2 (the prebuilt-workload
label, the MultiKueue worker pod label, no ``OnHold``). On the loopback API server, the test
playing Kueue's scheduler."""

from __future__ import annotations

import asyncio
from typing import Any

from controller_harness import MARKER, NS, WL, Kueue, batchrun, condition, controller, eventually, server

from mkpolicy.controller import ControllerOptions
from mkpolicy.kube.kueueconfig import KueueConfig

ORIGIN = "kueue.x-k8s.io/multikueue-origin"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def options(**config: Any) -> ControllerOptions:
    return ControllerOptions.from_kueue(KueueConfig(**config))


def namespace(srv: Any, name: str, **labels: str) -> None:
    srv.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


def test_only_namespaces_the_selector_selects_are_managed() -> None:
    """A queued job in a namespace managedJobsNamespaceSelector does not select gets no Workload
    ("Namespace not opted in for Kueue management"); neither does one in kube-system by default."""
    with server() as srv:
        namespace(srv, "opted-in", kueue="on")
        namespace(srv, "opted-out")

        async def scenario() -> None:
            async with controller(
                srv, options=options(managed_jobs_namespace_selector={"matchLabels": {"kueue": "on"}})
            ):
                srv.create(batchrun("left", namespace="opted-out"))
                srv.create(batchrun("queued", namespace="opted-in"))
                await eventually(Kueue(srv, "opted-in").workload, what="the opted-in job's Workload")
                await asyncio.sleep(0.5)
                assert Kueue(srv, "opted-out").workloads() == []
            async with controller(srv, identity="c2"):  # Kueue's default selector
                srv.create(batchrun("system", namespace="kube-system"))
                await eventually(Kueue(srv, "opted-out").workload, what="opted-out is selected by the default")
                await asyncio.sleep(0.5)
                assert Kueue(srv, "kube-system").workloads() == []

        asyncio.run(scenario())


def test_manage_jobs_without_queue_name() -> None:
    """Without manageJobsWithoutQueueName a job with no queue name is not Kueue's; with it, a job in a
    selected namespace is suspended (marked) and gets a Workload with no queue name, which Kueue
    keeps pending; a job in a namespace the selector leaves out still runs untouched."""
    with server() as srv:
        namespace(srv, "managed", kueue="on")
        namespace(srv, "free")

        def unqueued(name: str, ns: str) -> dict[str, Any]:
            obj = batchrun(name, namespace=ns, marked=False, suspend=False)
            del obj["metadata"]["labels"]
            return obj

        async def scenario() -> None:
            async with controller(srv):
                srv.create(unqueued("plain", NS))
                await asyncio.sleep(0.5)
                assert Kueue(srv).workloads() == [] and Kueue(srv).job("plain")["spec"]["suspend"] is False
            chosen = options(manage_jobs_without_queue_name=True,
                             managed_jobs_namespace_selector={"matchLabels": {"kueue": "on"}})  # fmt: skip
            async with controller(srv, identity="c2", options=chosen):
                srv.create(unqueued("run", "managed"))
                srv.create(unqueued("run", "free"))
                kueue = Kueue(srv, "managed")
                wl = await eventually(kueue.workload, what="the unqueued job's Workload")
                assert "queueName" not in wl["spec"]
                job = kueue.job("run")
                assert job["spec"]["suspend"] is True and job["metadata"]["annotations"] == {MARKER: "true"}
                await asyncio.sleep(0.5)
                assert (
                    Kueue(srv, "free").workloads() == [] and Kueue(srv, "free").job("run")["spec"]["suspend"] is False
                )
                kueue.admit(wl)  # once a queue admits it (in Kueue: after the user adds one), it starts
                await eventually(lambda: kueue.job("run")["spec"]["suspend"] is False, what="started")

        asyncio.run(scenario())


def test_kueue_v0_17_prebuilt_workloads_are_named_by_the_label_only() -> None:
    """v0.17.1 ``PrebuiltWorkloadFor`` reads the label (0.19 prefers the annotation), and its
    ``getPodSetsInfoFromStatus`` adds no MultiKueue worker pod label."""
    with server() as srv:
        kueue = Kueue(srv)
        pod_sets = [{"name": "main", "count": 3, "template": batchrun()["spec"]["template"]}]

        def prebuilt(name: str, where: str) -> None:
            srv.create({"apiVersion": WL, "kind": "Workload", "metadata": {"name": name, "namespace": NS,
                        "labels": {ORIGIN: "mk"}}, "spec": {"queueName": "team-a-queue", "podSets": pod_sets}})  # fmt: skip
            job = batchrun(name, labels={ORIGIN: "mk"})
            (job["metadata"]["labels"] if where == "label" else job["metadata"]["annotations"])[PREBUILT] = name
            srv.create(job)

        async def scenario() -> None:
            async with controller(srv, options=options(version="v0.17.1")):
                prebuilt("by-label", "label")
                prebuilt("by-annotation", "annotation")

                def adopted(name: str) -> dict[str, Any] | None:
                    wl = srv.get(WL, "Workload", name, NS)
                    return wl if wl["metadata"].get("ownerReferences") else None

                wl = await eventually(lambda: adopted("by-label"), what="adopted by its label")
                # The annotation means nothing to 0.17: that job gets a Workload of its own.
                own = await eventually(lambda: [w for w in kueue.workloads() if w["metadata"]["name"].startswith(
                    "batchrun-by-annotation-")], what="a Workload of its own")  # fmt: skip
                assert len(own) == 1 and adopted("by-annotation") is None
                kueue.admit(wl)
                started = await eventually(lambda: (j := kueue.job("by-label"))["spec"]["suspend"] is False and j,
                                           what="started")  # fmt: skip
                labels = started["spec"]["template"]["metadata"]["labels"]
                assert labels == {"app": "etl", "kueue.x-k8s.io/podset": "main"}

        asyncio.run(scenario())


def test_kueue_v0_17_a_job_its_user_suspends_loses_its_workload_until_resumed() -> None:
    """0.17 has no OnHold (its scheduler would admit the Workload again): the Workload is deleted,
    the user's suspension kept, and a new Workload made once the user resumes the job."""
    with server() as srv:
        kueue = Kueue(srv)

        async def scenario() -> None:
            async with controller(srv, options=options(version="v0.17.1")) as ctl:
                srv.create(batchrun())
                first = await eventually(kueue.workload, what="the Workload")
                kueue.admit(first)
                await eventually(lambda: kueue.job()["spec"]["suspend"] is False, what="started")
                job = kueue.job()
                job["spec"]["suspend"] = True  # the user pauses it
                srv.update(job)
                await eventually(lambda: kueue.workloads() == [], what="the Workload deleted")
                assert "DeletedWorkload" in [r for _, r, _ in ctl.recorder.recorded]
                await asyncio.sleep(0.5)
                assert kueue.workloads() == [] and kueue.job()["spec"]["suspend"] is True
                job = kueue.job()
                job["spec"]["suspend"] = False  # the user resumes it: stopped by Kueue (marked), queued anew
                srv.update(job)
                second = await eventually(kueue.workload, what="a new Workload")
                assert second["metadata"]["uid"] != first["metadata"]["uid"]
                assert condition(second, "QuotaReserved") is None
                assert kueue.job()["metadata"]["annotations"] == {MARKER: "true"}

        asyncio.run(scenario())
