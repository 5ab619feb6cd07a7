"""The sidecar's request log (logging.requestLog): request shapes, no values, no secrets, bounded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sidecar_harness import POLICIES, clusters, multikueue, policy_dir

from mkpolicy.sidecar.config import ConfigError
from mkpolicy.sidecar.http1 import parse_request_head
from mkpolicy.sidecar.requestlog import RequestLog, body_shape, open_request_log, read_log, shape

TEKTON = POLICIES / "tekton-pipelinerun.yaml"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": "x"}, {"a": "string", "b": "number"}),
        ([1, 2.5, "x", 3], ["number", "string"]),
        ({"l": [{"n": True}, {"n": False}, {"n": None}]}, {"l": [{"n": "boolean"}, {"n": "null"}]}),
        ([], []),
        ({"status": {}}, {"status": {}}),
    ],
)
def test_shape(value: Any, expected: Any) -> None:
    assert shape(value) == expected


def test_body_shapes() -> None:
    assert body_shape(b'{"spec": {"x": 1}}', "application/json") == {"spec": {"x": "number"}}
    assert body_shape(b'{"a": 1}', "application/merge-patch+json; charset=utf-8") == {"a": "number"}
    assert body_shape(b"k8s\x00...", "application/vnd.kubernetes.protobuf") == "<application/vnd.kubernetes.protobuf>"
    assert body_shape(b"{", "application/json") == "<invalid json>"
    assert body_shape(b"", "application/json") is None


def head(text: str) -> Any:
    return parse_request_head(text.encode())


def test_lines_hold_shapes_never_values_nor_other_headers(tmp_path: Path) -> None:
    log = RequestLog(str(tmp_path / "r.jsonl"), max_entries=2)
    post = head("POST /apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads?fieldManager=x HTTP/1.1\r\nHost: w\r\n"
                "Authorization: Bearer s3cret\r\nAccept: application/json, */*\r\nContent-Type: application/json\r\n"
                "Content-Length: 26\r\n\r\n")  # fmt: skip
    log.write("worker1", post, 201, b'{"metadata":{"name":"n1"}}', 0.0)
    watch = head("GET /apis/tekton.dev/v1/pipelineruns?watch=true&labelSelector=o%3Dm HTTP/1.1\r\nHost: w\r\n\r\n")
    log.write("worker2", watch, None, None, 0.0)
    log.write("worker2", watch, None, None, 0.0)  # one over the bound: a last line says so, then nothing
    log.write("worker2", watch, None, None, 0.0)
    log.close()
    text = (tmp_path / "r.jsonl").read_text()
    assert "s3cret" not in text and "n1" not in text and "Host" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[2:] == [{"truncated": True, "maxEntries": 2}]
    first = {k: v for k, v in lines[0].items() if k != "t"}
    assert first == {"cluster": "worker1", "method": "POST", "path": "/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads",
                     "query": {"fieldManager": ["x"]}, "accept": "application/json, */*",
                     "contentType": "application/json", "body": {"metadata": {"name": "string"}}, "code": 201}  # fmt: skip
    assert lines[1]["query"] == {"watch": ["true"], "labelSelector": ["o=m"]} and lines[1]["code"] is None
    assert [e["cluster"] for e in read_log(str(tmp_path / "r.jsonl"))] == ["worker1", "worker2"]


def test_a_log_that_cannot_be_opened_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        open_request_log(str(tmp_path / "missing" / "r.jsonl"), 10)
    assert exc.value.message.startswith("logging.requestLog.file: expected a file the sidecar can append to; found")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device that is always full)")
def test_a_full_disk_stops_the_log_not_the_requests() -> None:
    log = RequestLog("/dev/full", max_entries=10)
    log.write("worker1", head("GET /api HTTP/1.1\r\nHost: w\r\n\r\n"), 200, None, 0.0)  # no exception
    log.write("worker1", head("GET /api HTTP/1.1\r\nHost: w\r\n\r\n"), 200, None, 0.0)
    assert log.entries == 1


@pytest.mark.loopback_only("runs Kueue's model on loopback clusters")
def test_the_sidecar_logs_what_kueue_sends(tmp_path: Path) -> None:
    """Kueue's model connects and dispatches through the sidecar: its discovery, watches (when they
    start) and creations are in the log, each as the model sent it."""
    log = tmp_path / "requests.jsonl"
    with clusters(tmp_path) as env:

        async def scenario() -> None:
            config = {"logging": {"requestLog": {"file": str(log)}}}
            # (no garbage collection: nothing in flight when Kueue stops)
            async with multikueue(env, policy_dir(tmp_path, TEKTON), sidecar_config=config, gc_interval=1e6) as (
                mk,
                _,
                model,
            ):
                await model.wait_connected("worker1", "worker2")
                wl = mk.core.submit(env.manager.create(mk.job("build")))
                await model.wait_for(lambda: model.outcome_kinds(mk.namespace, wl).count("dispatched") == 2)
            # (read once Kueue and the sidecar have stopped: a request is logged when its answer is complete)
            entries = read_log(str(log))
            sent = [s for w in ("worker1", "worker2") for s in model.requests(w)]
            # every request the model sent a worker is logged once, as it was sent
            assert sorted((e["cluster"], e["method"], e["path"]) for e in entries) == sorted(
                (s.target, s.method, s.path) for s in sent
            )
            watches = [e for e in entries if e["query"].get("watch") == ["true"]]
            assert len(watches) >= 6 and all(e["code"] is None for e in watches)
            posts = [e for e in entries if e["method"] == "POST"]
            assert {e["cluster"] for e in posts} == {"worker1", "worker2"}
            assert all(e["code"] == 201 and e["body"]["metadata"]["name"] == "string" for e in posts)

        asyncio.run(scenario())
