"""JSON logs: one object per line, extra fields, secrets masked."""

from __future__ import annotations

import io
import json
import logging

from mkpolicy.sidecar.logs import fields, setup_logging
from mkpolicy.sidecar.metrics import Metrics


def test_json_lines_with_fields_and_redaction() -> None:
    stream = io.StringIO()
    setup_logging("debug", stream)
    log = logging.getLogger("mkpolicy.sidecar.test")
    log.info("hello %s", "world", extra=fields(cluster="worker1", token="s3cret", Authorization="Bearer x"))
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["msg"] == "hello world" and lines[0]["level"] == "info"
    assert lines[0]["cluster"] == "worker1"
    assert lines[0]["token"] == "<redacted>" and lines[0]["Authorization"] == "<redacted>"
    assert "s3cret" not in stream.getvalue()
    assert lines[1]["error"] == "ValueError: boom"
    assert lines[0]["ts"].endswith("Z")


def test_metrics_exposition_names() -> None:
    metrics = Metrics()
    metrics.requests.labels("worker1", "p", "get", "200").inc()
    metrics.transform_seconds.labels("worker1", "p", "sync").observe(0.001)
    text = metrics.exposition().decode()
    assert 'mkpolicy_sidecar_requests_total{cluster="worker1",code="200",policy="p",verb="get"} 1.0' in text
    assert "mkpolicy_sidecar_transform_duration_seconds_bucket" in text
