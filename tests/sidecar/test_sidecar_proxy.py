"""The transformed read of a copy (:mod:`mkpolicy.sidecar.proxy`): the manager's object read
while the worker answers, for the copies the worker is known to have."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sidecar_harness import (
    PIPELINERUNS,
    POLICIES,
    client,
    clusters,
    eventually,
    kueue,
    pipelinerun,
    policy_dir,
    running,
)

from mkpolicy.kube.client import ApiError
from mkpolicy.sidecar.proxy import KnownCopies

pytestmark = pytest.mark.timeout(120)

TEKTON = POLICIES / "tekton-pipelinerun.yaml"
KEY = ("tekton-pipelinerun", "team-a", "run-1")


@pytest.mark.parametrize(
    ("answers", "known"),
    [
        ([200], True),
        ([201], True),  # created
        ([409], True),  # Kueue's create met the copy
        ([404], False),
        ([200, 404], False),  # deleted meanwhile
        ([200, 500], True),  # an error says nothing of the copy
        ([200, 403], True),
        ([404, 201], True),
    ],
)
def test_what_the_workers_answers_say_of_a_copy(answers: list[int], known: bool) -> None:
    copies = KnownCopies()
    for status in answers:
        copies.note(KEY, status)
    assert (KEY in copies) is known


def test_the_least_recently_seen_copies_are_forgotten_first() -> None:
    copies = KnownCopies(limit=2)
    a, b, c = (("p", "ns", n) for n in "abc")
    copies.note(a, 200)
    copies.note(b, 200)
    copies.note(a, 200)  # seen again: now the most recent
    copies.note(c, 200)
    assert a in copies and c in copies and b not in copies


def test_a_known_copy_is_read_from_the_manager_while_the_worker_answers(tmp_path: Path) -> None:
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            async with running(env.config(), policy_dir(tmp_path, TEKTON)) as sidecar, kueue(env, sidecar) as driver:
                for name, workload in (("run-1", "wl-1"), ("run-3", "wl-3")):
                    env.manager.create(pipelinerun(name))
                    await driver.sync_job("worker1", "team-a", name, workload)  # 404, then the copy created
                worker, w1 = env.worker("worker1"), client(sidecar.kubeconfig("worker1"))
                reads = env.manager.faults.delay(0, verb="get", resource="pipelineruns", times=None)  # (a counter)
                held = worker.faults.hold(verb="get", resource="pipelineruns")
                read = asyncio.create_task(w1.get(PIPELINERUNS.path("team-a", "run-1")))
                # the worker holds the read until the manager has been read: one round trip, not two
                await eventually(lambda: held.hits == 1 and reads.hits == 1)
                held.release()
                assert (await read)["metadata"]["name"] == "run-1"
                assert reads.hits == 1

                # a copy never seen: the worker's 404 first, and no manager read
                with pytest.raises(ApiError) as missing:
                    await w1.get(PIPELINERUNS.path("team-a", "run-2"))
                assert missing.value.status == 404 and reads.hits == 1

                # a known copy deleted on the worker: one read whose answer is not used (it runs beside the
                # worker's answer, which may come first) ...
                worker.delete("tekton.dev/v1", "PipelineRun", "run-1", namespace="team-a")
                with pytest.raises(ApiError) as gone:
                    await w1.get(PIPELINERUNS.path("team-a", "run-1"))
                assert gone.value.status == 404
                await eventually(lambda: reads.hits == 2)
                # ... then none: the copy is no longer known
                with pytest.raises(ApiError) as gone:
                    await w1.get(PIPELINERUNS.path("team-a", "run-1"))
                assert gone.value.status == 404
                # a copy it knows: its read is awaited before the answer (a stray read started before it is counted)
                assert (await w1.get(PIPELINERUNS.path("team-a", "run-3")))["metadata"]["name"] == "run-3"
                assert reads.hits == 3
                await w1.close()

        asyncio.run(scenario())
