"""Kubernetes Events on the manager's objects, correlated as client-go's recorder correlates them."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from sidecar_harness import client, clusters, eventually

from mkpolicy.sidecar.events import (
    AGGREGATE_INTERVAL,
    SPAM_BURST,
    Correlator,
    Event,
    EventRecorder,
    ObjectRef,
    escape,
    event_name,
)
from mkpolicy.sidecar.metrics import Metrics

pytestmark = pytest.mark.timeout(60)

RUN = ObjectRef("tekton.dev/v1", "PipelineRun", "team-a", "run-1", "uid-1")


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def event(message: str, reason: str = "CreationFailed", ref: ObjectRef = RUN) -> Event:
    return Event(ref, "Warning", reason, message, "host-1")


def test_the_same_event_again_counts_up() -> None:
    """events_cache.go's eventLogger: the same event updates the first one's count (a PATCH)."""
    clock = Clock()
    correlator = Correlator(clock)
    first, update = correlator.correlate(event("boom"))
    assert first is not None and not update and first.count == 1
    clock.now += 30
    again, update = correlator.correlate(event("boom"))
    assert again is not None and update
    assert (again.name, again.count, again.first, again.last) == (first.name, 2, first.first, clock.now)


def test_many_messages_for_one_reason_are_combined() -> None:
    """EventAggregator: the 10th distinct message within 10 minutes becomes one combined event."""
    clock = Clock()
    correlator = Correlator(clock)
    names = set()
    for i in range(9):
        out, _ = correlator.correlate(event(f"patch #{i} failed"))
        assert out is not None and not out.message.startswith("(combined")
        names.add(out.name)
    combined, update = correlator.correlate(event("patch #9 failed"))
    assert combined is not None and combined.message == "(combined from similar events): patch #9 failed"
    assert not update
    more, update = correlator.correlate(event("patch #10 failed"))
    assert more is not None and update and more.name == combined.name and more.count == 2
    # another reason is another group; after 10 minutes of quiet a group starts over
    other, _ = correlator.correlate(event("x", reason="WorkerRefused"))
    assert other is not None and not other.message.startswith("(combined")
    clock.now += AGGREGATE_INTERVAL + 1
    fresh, _ = correlator.correlate(event("patch #11 failed"))
    assert fresh is not None and not fresh.message.startswith("(combined")


def test_spam_filter_per_object() -> None:
    """A token bucket of 25 per source and object, refilled at one event every 5 minutes."""
    clock = Clock()
    correlator = Correlator(clock)
    kept = [correlator.correlate(event("same"))[0] for _ in range(SPAM_BURST + 5)]
    assert sum(e is not None for e in kept) == SPAM_BURST
    other = ObjectRef("tekton.dev/v1", "PipelineRun", "team-a", "run-2")
    assert correlator.correlate(event("same", ref=other))[0] is not None  # another object has its own bucket
    clock.now += 300
    assert correlator.correlate(event("same"))[0] is not None
    assert correlator.correlate(event("same"))[0] is None


def test_event_names() -> None:
    assert event_name("run-1", 0x1234) == "run-1.1234"
    assert len(event_name("Not_A_Name", 1)) == 36  # a UUID, as client-go's GenerateEventName


@pytest.mark.loopback_only("reads Events the sidecar writes, takes the manager away")
def test_recorder_writes_counts_and_survives_an_unreachable_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with clusters(tmp_path) as env:
        env.manager.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})

        async def scenario() -> None:
            metrics = Metrics()
            async with client(env.manager.kubeconfig()) as manager:
                recorder = EventRecorder(lambda: manager, metrics, host="pod-1", retry_sleep=0.05)
                recorder.start()
                ref = ObjectRef("tekton.dev/v1", "PipelineRun", "team-b", "run-1", "u1")
                recorder.record(ref, "Warning", "CreationFailed", "mkpolicy: patch #1 failed")
                recorder.record(ref, "Warning", "CreationFailed", "mkpolicy: patch #1 failed")
                await recorder.flush()
                [stored] = env.manager.list("v1", "Event", namespace="team-b")
                assert stored["count"] == 2 and stored["reason"] == "CreationFailed"
                assert stored["involvedObject"] == {
                    "apiVersion": "tekton.dev/v1",
                    "kind": "PipelineRun",
                    "name": "run-1",
                    "namespace": "team-b",
                    "uid": "u1",
                }
                assert stored["source"] == {"component": "mkpolicy-sidecar", "host": "pod-1"}
                # the event was deleted meanwhile: the next occurrence creates it again
                env.manager.delete("v1", "Event", stored["metadata"]["name"], "team-b")
                recorder.record(ref, "Warning", "CreationFailed", "mkpolicy: patch #1 failed")
                await recorder.flush()
                assert [e["count"] for e in env.manager.list("v1", "Event", namespace="team-b")] == [3]
                # a refused event is given up (no such namespace), counted
                recorder.record(ObjectRef("v1", "Pod", "nowhere", "p"), "Warning", "CreationFailed", "x")
                await recorder.flush()
                assert metrics.events.labels("CreationFailed", "failed")._value.get() == 1
                assert metrics.events.labels("CreationFailed", "recorded")._value.get() == 3
                # the manager unreachable: the write is retried (logged) until the manager is back
                env.manager.faults.unreachable()
                with caplog.at_level(logging.WARNING, "mkpolicy.sidecar.events"):
                    recorder.record(ref, "Warning", "SyncFailed", "mkpolicy: the status is not written")
                    await eventually(
                        lambda: sum(r.getMessage() == "cannot write event; retrying" for r in caplog.records) >= 2
                    )
                env.manager.faults.reachable()
                await recorder.flush()
                assert metrics.events.labels("SyncFailed", "recorded")._value.get() == 1
                stored = [e for e in env.manager.list("v1", "Event", namespace="team-b") if e["reason"] == "SyncFailed"]
                assert [(e["count"], e["message"]) for e in stored] == [(1, "mkpolicy: the status is not written")]
                await recorder.stop()

        asyncio.run(scenario())


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("plain text", "plain text"),
        ("run\nInjected: line", "run\\nInjected: line"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("rtl \u202e txt", "rtl \\u202e txt"),
    ],
)
def test_event_messages_are_one_readable_line(message: str, expected: str) -> None:
    assert escape(message) == expected
    recorder = EventRecorder(lambda: None, Metrics())
    recorder.record(RUN, "Warning", "Test", message)
    event, _ = recorder._queue.get_nowait()
    assert event.message == expected
