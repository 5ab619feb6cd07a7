"""Engine changes made for the Kueue parity policies: the ``now`` variable, and
empty manager annotations being dropped as Kueue's Go clone drops them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import mkpolicy
from mkpolicy.policy import FrameworkPolicy

UTC = dt.UTC


def _policy(spec: dict[str, Any]) -> FrameworkPolicy:
    return FrameworkPolicy.model_validate(
        {"apiVersion": "mkpolicy.io/v1alpha1", "kind": "FrameworkPolicy", "metadata": {"name": "t"}, "spec": spec}
    )


def _job(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "a", "namespace": "ns", **meta},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue"},
    }


STAMP = {
    "type": "JSONPatch",
    "jsonPatch": {"expression": '[JSONPatch{op: "add", path: "/status", value: {"at": now, "text": string(now)}}]'},
}


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (dt.datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC), "2026-03-04T05:06:07Z"),
        (dt.datetime(2026, 3, 4, 7, 6, 7, tzinfo=dt.timezone(dt.timedelta(hours=2))), "2026-03-04T05:06:07Z"),
    ],
    ids=["truncated-to-seconds", "converted-to-utc"],
)
def test_now_is_the_context_time_in_utc_whole_seconds(now: dt.datetime, expected: str) -> None:
    adapter = mkpolicy.compile(_policy({"framework": "Thing.v1.example.com", "sync": {"patches": [STAMP]}}))
    patch = adapter.sync(_job(), {"status": {}}, mkpolicy.Context(workload_name="wl", now=now))
    assert patch == {"status": {"at": expected, "text": expected}}


def test_now_defaults_to_the_wall_clock_once_per_call() -> None:
    adapter = mkpolicy.compile(
        _policy(
            {
                "framework": "Thing.v1.example.com",
                "sync": {
                    "patches": [
                        STAMP,
                        {
                            "type": "JSONPatch",
                            "jsonPatch": {
                                "expression": (
                                    '[JSONPatch{op: "add", path: "/status/same",'
                                    " value: object.status.at == string(now)}]"
                                )
                            },
                        },
                    ]
                },
            }
        )
    )
    before = dt.datetime.now(UTC).replace(microsecond=0)
    patch = adapter.sync(_job(), {}, mkpolicy.Context(workload_name="wl"))
    after = dt.datetime.now(UTC)
    assert patch is not None
    stamped = dt.datetime.fromisoformat(patch["status"]["at"])
    assert before <= stamped <= after
    assert patch["status"]["same"] is True  # every patch of one call sees the same now


def test_now_is_visible_in_creation_patches_and_variables() -> None:
    adapter = mkpolicy.compile(
        _policy(
            {
                "framework": "Thing.v1.example.com",
                "variables": [{"name": "stamp", "expression": "string(now)"}],
                "creation": {
                    "patches": [
                        {
                            "type": "ApplyConfiguration",
                            "applyConfiguration": {
                                "expression": 'Object{metadata: Object.metadata{annotations: {"t": variables.stamp}}}'
                            },
                        }
                    ]
                },
            }
        )
    )
    ctx = mkpolicy.Context(workload_name="wl", now=dt.datetime(2031, 1, 1, tzinfo=UTC))
    assert adapter.create(_job(), ctx)["metadata"]["annotations"] == {
        "t": "2031-01-01T00:00:00Z",
        "kueue.x-k8s.io/prebuilt-workload-name": "wl",
    }


@pytest.mark.parametrize(
    ("now", "error"),
    [
        (dt.datetime(2026, 1, 1), ValueError),
        ("2026-01-01T00:00:00Z", TypeError),
    ],
    ids=["naive", "string"],
)
def test_context_rejects_a_bad_now(now: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"Context\.now"):
        mkpolicy.Context(now=now)


@pytest.mark.parametrize(
    ("identifier", "annotations", "expected"),
    [
        ("label", {}, None),
        ("label", None, None),
        ("label", {"a": "b"}, {"a": "b"}),
        ("annotation", {}, {"kueue.x-k8s.io/prebuilt-workload-name": "wl"}),
    ],
    ids=["label-empty-dropped", "label-absent", "label-kept", "annotation-mode"],
)
def test_empty_manager_annotations_are_dropped_like_kueue(
    identifier: str, annotations: dict[str, str] | None, expected: dict[str, str] | None
) -> None:
    adapter = mkpolicy.compile(_policy({"framework": "Thing.v1.example.com"}))
    meta = {} if annotations is None else {"annotations": annotations}
    worker = adapter.create(_job(**meta), mkpolicy.Context(workload_name="wl", identifier=identifier))  # type: ignore[arg-type]
    assert worker["metadata"].get("annotations") == expected


@pytest.mark.parametrize("phase", ["create", "sync"])
def test_match_conditions_and_patches_read_one_clock(phase: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One instant per call: the clock is read once for match conditions and patches alike."""
    reads: list[int] = []
    clock = mkpolicy.Context.timestamp

    def counted(self: mkpolicy.Context) -> dt.datetime:
        reads.append(1)
        return clock(self)

    monkeypatch.setattr(mkpolicy.Context, "timestamp", counted)
    patch = {"type": "JSONPatch", "jsonPatch": {"expression": '[JSONPatch{op: "add", path: "/metadata/annotations/t", value: string(now)}]'}}  # fmt: skip
    adapter = mkpolicy.compile(
        _policy(
            {
                "framework": "Thing.v1.example.com",
                "matchConditions": [{"name": "recent", "expression": "now > timestamp('2020-01-01T00:00:00Z')"}],
                "creation": {"patches": [patch]},
                "sync": {"patches": [STAMP]},
            }
        )
    )
    ctx = mkpolicy.Context(workload_name="wl")
    if phase == "create":
        adapter.create(_job(), ctx)
    else:
        adapter.sync(_job(), {"status": {}}, ctx)
    assert len(reads) == 1
