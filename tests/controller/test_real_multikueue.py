"""MultiKueue end to end on real peers (real kube-apiservers, real Kueue v0.19.2 and v0.17.1, the
sidecar in between) with mkpolicy controller on both sides and no Go for BatchRun: the manager's controller
creates the Workload, MultiKueue dispatches the BatchRun through the sidecar, the worker's
controller adopts the prebuilt Workload and starts the copy when the worker's Kueue admits it,
the status comes back, both Workloads finish and the worker copy is removed. The test plays
the BatchRun's own controller on the worker (its status). Skipped without the harness."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mkpolicy.testing.peers.multikueue", reason="the real-peer harness (mkpolicy.testing.peers)")
from controller_harness import CRD, POLICY, Kueue, batchrun, condition, controller, eventually

from mkpolicy.controller import ControllerOptions
from mkpolicy.kube.kueueconfig import KueueConfig
from mkpolicy.testing.apiserver import ApiError
from mkpolicy.testing.peers import build
from mkpolicy.testing.peers.fixtures import require_go
from mkpolicy.testing.peers.multikueue import LOCAL_QUEUE, RealMultiKueue

# (after the skip: the marks are registered where the harness is, with pytest-timeout)
pytestmark = [pytest.mark.real_peers, pytest.mark.timeout(600)]

FRAMEWORK = "BatchRun.v1alpha1.batch.example.com"
BR = ("batch.example.com/v1alpha1", "BatchRun")
TIMEOUT = 120.0


@pytest.fixture(scope="module", params=build.KUEUE_VERSIONS, ids=[f"kueue-{v}" for v in build.KUEUE_VERSIONS])
def multikueue(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealMultiKueue]:
    """A manager and one worker with real Kueue at the parameter's version (BatchRun an external
    framework of both lists), the sidecar running policies/batchrun.yaml between them."""
    require_go()
    tmp = tmp_path_factory.mktemp("batchrun-multikueue")
    (tmp / "policies").mkdir()
    shutil.copy(POLICY, tmp / "policies" / "batchrun.yaml")
    (tmp / "examples" / "batchrun").mkdir(parents=True)
    shutil.copy(CRD, tmp / "examples" / "batchrun" / "crd.yaml")  # the policy's spec.schema
    mk = RealMultiKueue(1, kueue_version=str(request.param), frameworks=[FRAMEWORK], crds=[CRD],
                        policies=tmp / "policies", log=lambda line: print(f"[peers] {line}", flush=True))  # fmt: skip
    with mk:
        yield mk


def test_a_batchrun_through_multikueue_with_the_controller_on_both_sides(multikueue: RealMultiKueue) -> None:
    mk = multikueue
    ns = mk.new_namespace()
    manager, worker = mk.manager, mk.workers["worker1"]
    on_manager, on_worker = Kueue(manager.admin, ns), Kueue(worker.admin, ns)
    job = batchrun("etl", namespace=ns, labels={"kueue.x-k8s.io/queue-name": LOCAL_QUEUE})
    job["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"

    def copy_on_worker() -> dict[str, Any] | None:
        with contextlib.suppress(ApiError):
            return dict(worker.admin.get(*BR, "etl", ns))
        return None

    config = KueueConfig(version=mk.kueue_version)  # the controllers follow the Kueue they run with

    async def scenario() -> None:
        async with controller(manager, identity="manager", lease_name="mkpolicy-manager",
                              options=ControllerOptions.from_kueue(config)), \
                controller(worker, identity="worker", lease_name="mkpolicy-worker",
                           options=ControllerOptions.from_kueue(config)):  # fmt: skip
            await asyncio.to_thread(manager.admin.create, job)
            wl = await eventually(on_manager.workload, timeout=TIMEOUT, what="the manager's Workload")
            name = wl["metadata"]["name"]
            # MultiKueue: the worker's Workload (prebuilt, same name), then the copy through the sidecar.
            copy = await eventually(copy_on_worker, timeout=TIMEOUT, what="the copy on the worker")
            assert copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"]
            assert "managedBy" not in copy["spec"]
            # The worker's controller adopts the prebuilt Workload and starts the copy once admitted.
            remote = await eventually(lambda: (w := on_worker.workload()) and w["metadata"].get("ownerReferences") and w,
                                      timeout=TIMEOUT, what="the prebuilt Workload adopted")  # fmt: skip
            assert remote["metadata"]["name"] == name
            assert remote["metadata"]["ownerReferences"][0]["uid"] == copy["metadata"]["uid"]
            started = await eventually(lambda: (c := copy_on_worker()) and c["spec"].get("suspend") is False and c,
                                       timeout=TIMEOUT, what="the copy started on the worker")  # fmt: skip
            # Kueue 0.18 and later label a worker's pods (getPodSetsInfoFromStatus); 0.17.1 does not.
            worker_label = started["spec"]["template"]["metadata"]["labels"].get(
                "kueue.x-k8s.io/multikueue-worker-workload-pod"
            )
            assert worker_label == ("true" if config.at_least(0, 18) else None)
            await eventually(lambda: condition(on_manager.workload(), "Admitted"), timeout=TIMEOUT,
                             what="the manager's Workload admitted")  # fmt: skip
            # The BatchRun completes on the worker: both Workloads finish, the status comes back.
            done = copy_on_worker()
            assert done is not None
            done["status"] = {
                "succeeded": 3,
                "conditions": [{"type": "Complete", "status": "True", "message": "3 pods"}],
            }
            await asyncio.to_thread(worker.admin.update, done, subresource="status")
            back = await eventually(lambda: (j := on_manager.job("etl")).get("status", {}).get("succeeded") == 3 and j,
                                    timeout=TIMEOUT, what="the status back on the manager")  # fmt: skip
            assert back["status"]["conditions"][0]["type"] == "Complete"
            finished = await eventually(lambda: condition(on_manager.workload(), "Finished"), timeout=TIMEOUT,
                                        what="the manager's Workload finished")  # fmt: skip
            assert finished["reason"] == "Succeeded"
            await eventually(lambda: copy_on_worker() is None, timeout=TIMEOUT, what="the worker copy removed")

    asyncio.run(scenario())
